"""The content-addressed cache: atomic writes, no pickles, corrupt entries are misses."""

import numpy as np

from ablate.cache import Cache, default_cache_dir, key_of


def test_roundtrip_and_stats(tmp_path):
    c = Cache(tmp_path)
    k = key_of("emb", {"model": "m", "n": 3})
    assert c.load_array("emb", k) is None
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    p = c.save_array("emb", k, arr)
    assert p.suffix == ".npy" and p.exists()
    np.testing.assert_array_equal(c.load_array("emb", k), arr)
    c.save_json("runs", k, {"a": [1, 2]})
    assert c.load_json("runs", k) == {"a": [1, 2]}
    assert (c.stats.hits, c.stats.misses) == (2, 1)
    assert c.stats.by_kind["emb"] == {"hits": 1, "misses": 1}
    # nothing but the entries is left behind (temp files renamed into place)
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == sorted([f"{k}.npy", f"{k}.json"])


def test_keys_are_stable_and_order_independent():
    assert key_of({"a": 1, "b": 2}) == key_of({"b": 2, "a": 1})
    assert key_of({"a": 1}) != key_of({"a": 2})


def test_corrupt_or_object_arrays_are_misses(tmp_path):
    c = Cache(tmp_path)
    k = key_of("x")
    p = c.save_array("emb", k, np.ones(3))
    p.write_bytes(b"not a numpy file")
    assert c.load_array("emb", k) is None
    j = c.save_json("runs", k, {"a": 1})
    j.write_text("{half")
    assert c.load_json("runs", k) is None
    # an object array would need pickle: saving refuses it
    try:
        c.save_array("emb", key_of("obj"), np.array([{"a": 1}], dtype=object))
        raised = False
    except ValueError:
        raised = True
    assert raised
    assert not list(tmp_path.rglob("*.tmp"))


def test_disabled_cache_never_hits(tmp_path):
    c = Cache(tmp_path, enabled=False)
    k = key_of("x")
    c.save_array("emb", k, np.ones(2))
    assert c.load_array("emb", k) is None and not list(tmp_path.rglob("*.npy"))


def test_default_dir_env(monkeypatch, tmp_path):
    monkeypatch.setenv("ABLATE_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_dir() == (tmp_path / "c").resolve()
    monkeypatch.delenv("ABLATE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert default_cache_dir() == (tmp_path / "x" / "ablate").resolve()


def test_orphan_temp_files_older_than_an_hour_are_swept(tmp_path):
    import os
    import time

    c = Cache(tmp_path)
    kept = c.save_json("runs", key_of("a"), {"a": 1})
    shard = kept.parent
    old, young = shard / f".{kept.name}.abc.tmp", shard / f".{kept.name}.def.tmp"
    old.write_text("half"), young.write_text("half")
    (shard / ".model.xyz.tmp").mkdir()
    past = time.time() - 7200
    os.utime(old, (past, past))
    os.utime(shard / ".model.xyz.tmp", (past, past))
    assert c.sweep_orphans() == 2
    assert not old.exists() and young.exists() and kept.exists() and not (shard / ".model.xyz.tmp").exists()


def test_a_cache_folder_that_is_a_file_is_refused(tmp_path):
    import pytest

    from ablate.errors import ConfigError

    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ConfigError, match="it is a file"):
        Cache(f).check()
    Cache(tmp_path / "new").check()  # created and writable
