"""RRF's values and settings at their edges (``ablate.stages.fusion.rrf``): every value below is hand-computed from
RRF(d) = sum_j 1 / (k + rank_j(d)), ranks from 1 (Cormack et al. 2009)."""

from __future__ import annotations

import pytest

from ablate.data.types import Hit, Run
from ablate.errors import ConfigError
from ablate.stages.fusion.rrf import RRF, rrf, rrf_scores

BM25 = ["4.2", "6.1", "3.5"]
DENSE = ["5.3", "6.1", "4.2"]


def _run(name: str, ids: list[str]) -> Run:
    return Run(name, {"q": [Hit(c, "D-" + c, 100.0 - i, version="v" + c) for i, c in enumerate(ids)]})


def test_default_k_is_60():
    s = rrf_scores([BM25, DENSE])
    assert s == {"4.2": 1 / 61 + 1 / 63, "6.1": 2 / 62, "3.5": 1 / 63, "5.3": 1 / 61}
    fused = rrf([_run("a", BM25), _run("b", DENSE)])
    assert {h.chunk_id: h.score for h in fused.get("q")} == s


def test_k_zero_and_fractional_k_are_valid():
    # k >= 0 is the documented range: k=0 gives plain reciprocal ranks
    assert rrf_scores([["a", "b", "c"]], k=0) == {"a": 1.0, "b": 0.5, "c": 1 / 3}
    assert rrf_scores([["a", "b"]], k=0.5) == {"a": 1 / 1.5, "b": 1 / 2.5}


def test_an_id_named_twice_in_one_list_counts_once_at_its_best_rank_and_takes_no_rank():
    # "a" at ranks 1 and 2 counts once at rank 1; the repeat does not push "b" and "c" down
    assert rrf_scores([["a", "a", "b", "c"]], k=0) == {"a": 1.0, "b": 0.5, "c": 1 / 3}
    assert rrf_scores([["a", "b", "a"], ["b"]], k=0) == {"a": 1.0, "b": 0.5 + 1.0}


def test_rrf_passes_k_to_the_scores():
    fused = rrf([_run("a", ["x", "y"]), _run("b", ["y", "z"])], k=0)
    assert [(h.chunk_id, h.score) for h in fused.get("q")] == [("y", 1.5), ("x", 1.0), ("z", 0.5)]


def test_default_window_is_100_and_window_1_is_valid():
    ids = [f"c{i:03d}" for i in range(101)]
    fused = rrf([_run("a", ids)])
    got = [h.chunk_id for h in fused.get("q")]
    assert got == ids[:100]  # the 101st result never enters fusion
    assert fused.get("q")[-1].score == 1 / 160
    one = rrf([_run("a", ["x", "y"]), _run("b", ["z", "x"])], k=0, window=1)
    assert [(h.chunk_id, h.score) for h in one.get("q")] == [("x", 1.0), ("z", 1.0)]
    assert one.meta["window"] == 1


def test_fused_hits_keep_their_document_and_version():
    fused = rrf([_run("a", ["x", "y"]), _run("b", ["y"])], k=0)
    assert [(h.chunk_id, h.doc_id, h.version) for h in fused.get("q")] == [
        ("y", "D-y", "vy"),
        ("x", "D-x", "vx"),
    ]


def test_fused_run_name_and_meta_record_the_fusion():
    fused = rrf([_run("bm25", ["x"]), _run("dense", ["y"])], k=10, window=5)
    assert fused.name == "rrf"
    assert fused.meta == {"fusion": "rrf", "rrf.k": 10.0, "window": 5, "inputs": ["bm25", "dense"]}
    assert rrf([_run("a", ["x"])], name="hybrid").name == "hybrid"


def test_bad_params_name_the_key_and_the_usual_default():
    with pytest.raises(ConfigError) as e:
        rrf_scores([["a"]], k=-0.5)
    assert e.value.key == "rrf.k" and e.value.value == -0.5
    assert (
        str(e.value) == "rrf.k=-0.5 is not valid; it must be a finite number >= 0 (60 is the usual default)"
    )
    with pytest.raises(ConfigError) as e:
        rrf([_run("a", ["x"])], window=0)
    assert e.value.key == "retrieval.window" and e.value.value == 0
    with pytest.raises(ConfigError) as e:
        RRF(k=-1)
    assert str(e.value) == "rrf.k=-1 is not valid; it must be a finite number >= 0 (60 is the usual default)"
    with pytest.raises(ConfigError) as e:
        RRF(name="hyb", k=-1)
    assert e.value.key == "hyb.k"
    with pytest.raises(ConfigError) as e:
        RRF(window=0)
    assert e.value.key == "retrieval.window" and e.value.value == 0


def test_stage_defaults_params_and_counters():
    st = RRF()
    assert (st.name, st.k, st.window) == ("rrf", 60.0, 100)
    assert st.params() == {"k": 60.0, "window": 100}
    assert st.stats == {}
    edge = RRF(k=0, window=1)  # the lower ends of both ranges are valid
    assert edge.params() == {"k": 0.0, "window": 1}


def test_stage_fuse_uses_its_own_k_window_and_name():
    a, b = _run("a", ["x", "y", "w"]), _run("b", ["y", "z", "w"])
    out = RRF(name="hyb", k=0, window=2).fuse([a, b], depth=10)
    assert out.name == "hyb"
    assert [(h.chunk_id, h.score) for h in out.get("q")] == [("y", 1.5), ("x", 1.0), ("z", 0.5)]
    assert out.meta == {"fusion": "rrf", "rrf.k": 0.0, "window": 2, "inputs": ["a", "b"]}


@pytest.mark.parametrize("k", [-1, float("nan"), float("inf"), "60", True])
def test_rrf_k_is_refused_alike_by_the_stage_the_function_and_the_scores(k):
    """One check of RRF's k: the stage, ``rrf()`` and ``rrf_scores()`` refuse a bad k with the same line."""
    want = f"rrf.k={k!r} is not valid; it must be a finite number >= 0 (60 is the usual default)"
    calls = (lambda: RRF(k=k), lambda: rrf([], k=k), lambda: rrf_scores([["a"]], k=k))
    for call in calls:
        with pytest.raises(ConfigError) as e:
            call()
        assert str(e.value) == want
    with pytest.raises(ConfigError) as e:
        RRF(name="hyb", k=k)
    assert str(e.value) == want.replace("rrf.k", "hyb.k", 1)
