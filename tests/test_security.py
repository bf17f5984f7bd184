"""Security: a path built from data stays inside its folder, and a config builds only registered stage classes (and
Hydra only ablate's callbacks), each resolved and checked before anything is constructed.

Each test here fails on the code before these checks: the traversal wrote outside, the re-exported classes were
constructed (a file appeared) before the "not a stage" refusal."""

from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from ablate.app.paths import CONF_DIR, register_resolvers
from ablate.errors import ConfigError, InputError
from conftest import TINY_DOCS, TINY_MANIFEST, TINY_QRELS, TINY_QUERIES, write_corpus
from inprocess import run_module  # python -m MODULE in this process: these commands refuse before any run

register_resolvers()


def _env(cache: Path | None = None) -> dict[str, str]:
    """The command's environment: the session's cache (tests/conftest.py), or ``cache`` for a test that lists it."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    if cache is not None:
        env["ABLATE_CACHE_DIR"] = str(cache)
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


# -- paths built from data ------------------------------------------------------------------------------------------


def test_a_corpus_name_that_walks_out_writes_nothing_outside(tmp_path):
    """``name: ../../../../<tmp>/escaped`` in corpus.yaml once became ``python -m ablate.split``'s output folder,
    four levels up from ``./outputs/splits``; now the corpus is refused when it is loaded, naming corpus.yaml:line."""
    escaped = tmp_path / "escaped"
    manifest = TINY_MANIFEST.replace("name: tiny", f"name: ../../../..{escaped}")
    corpus = write_corpus(tmp_path / "corpus", TINY_DOCS, TINY_QUERIES, TINY_QRELS, manifest)
    work = tmp_path / "w" / "a" / "b"
    work.mkdir(parents=True)
    before = _files(tmp_path)
    # a cache of its own, inside the folder whose every file is listed: nothing may be written into it either
    p = run_module("ablate.split", [str(corpus), "--no-embed"], cwd=work, env=_env(tmp_path / "cache"))
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stderr.count("error:") == 1 and "Traceback" not in p.stderr
    assert f"{corpus / 'corpus.yaml'}:1: name '../../../..{escaped}' is not a plain name" in p.stderr
    assert "it contains a path separator" in p.stderr and "e.g. name: escaped" in p.stderr
    assert _files(tmp_path) - before <= {"cache"}  # the filesystem, not just the exit code: nothing written
    assert not escaped.exists() and not (work / "outputs" / "splits").exists()


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("../x", "path separator"),
        ("a\\b", "path separator"),
        ("..", "'..'"),
        ("a..b", "'..'"),
        (".hidden", "starts with '.'"),
        ("tab\there", "U+0009"),
        ("rtl\u202eexe", "U+202E"),
        (" padded", "white space"),
        ("", "empty"),
        ("x" * 101, "101 characters"),
    ],
)
def test_name_problem_names_the_problem(name, problem):
    from ablate.safenames import name_problem

    assert problem in (name_problem(name) or "")


@pytest.mark.parametrize("name", ["demo", "demo_zh", "rgb-zh v2", "差旅制度", "scifact.test+1"])
def test_plain_names_pass(name):
    from ablate.safenames import name_problem

    assert name_problem(name) is None


def test_inside_keeps_a_path_in_its_folder(tmp_path):
    from ablate.safenames import inside

    assert inside(tmp_path, "a", "b.txt") == tmp_path / "a" / "b.txt"
    for parts in (("..", "x"), ("a/../../x",), ("/etc/passwd",), ("",), (".",)):
        with pytest.raises(ValueError, match="leads outside"):
            inside(tmp_path, *parts)


def test_the_split_default_folder_is_confined_even_past_the_load_check(tmp_path, monkeypatch):
    """Defence in depth: a name that reached ``_default_out`` without the corpus check (a library caller's snapshot)
    still names no folder outside ``./outputs/splits``."""
    from ablate.app.split import _default_out

    monkeypatch.chdir(tmp_path)
    assert (
        _default_out("tiny", ("test",), 0.5, 0)
        == tmp_path / "outputs" / "splits" / "tiny-from-test-dev0.5-seed0"
    )
    for name in ("../../x", "..", "a/b"):
        with pytest.raises(ConfigError, match="one plain folder inside ./outputs/splits"):
            _default_out(name, (), 0.5, 0)
    with pytest.raises(ConfigError, match="--out"):
        _default_out("tiny", ("../../x",), 0.5, 0)


def test_a_query_split_and_extra_qrels_from_data_stay_inside_the_corpus(tmp_path):
    from ablate.data.corpus import load_corpus

    outside = tmp_path / "secret.tsv"
    outside.write_text("query-id\tcorpus-id\tscore\nq1\tINV-102#p0\t2\n")
    root = write_corpus(
        tmp_path / "c", TINY_DOCS, TINY_QUERIES, TINY_QRELS, TINY_MANIFEST + "extra_qrels: [../secret.tsv]\n"
    )
    with pytest.raises(InputError, match="leads outside the corpus folder"):
        load_corpus(root)
    bad = [*TINY_QUERIES[:-1], {**TINY_QUERIES[-1], "split": "../../qrels/x"}]
    root2 = write_corpus(tmp_path / "c2", TINY_DOCS, bad, TINY_QRELS, TINY_MANIFEST)
    with pytest.raises(InputError) as e:
        load_corpus(root2)
    assert e.value.where == f"{root2 / 'queries.jsonl'}:5" and "is not a plain name" in str(e.value)


def test_the_corpus_name_setting_is_a_plain_name_too(tiny_corpus):
    from ablate.data.corpus import load_corpus
    from ablate.runner.settings import CorpusSpec

    with pytest.raises(ConfigError, match=r"corpus.name='\.\./x' is not valid; it contains a path separator"):
        CorpusSpec(path=str(tiny_corpus), name="../x")
    with pytest.raises(ConfigError, match="corpus.name"):
        load_corpus(tiny_corpus, name="a/b")
    assert load_corpus(tiny_corpus, name="mine").name == "mine"


def test_a_report_goes_to_a_sweep_folder_only_when_the_folder_names_its_parent(tmp_path, monkeypatch):
    """The parent run's ``ablate.sweep`` tag is data read back from the store: a tag pointing at any other folder
    (an edited or shared store) does not decide where the report is written."""
    from ablate.record import SWEEP_PARENT_FILE
    from ablate.study.fetch import Source
    from ablate.study.report import default_out as _default_out

    monkeypatch.chdir(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    src = Source("abc123", "exp", "exp / sweep", None, str(elsewhere), [])
    assert _default_out(src) == tmp_path / "reports" / "abc123"
    (elsewhere / SWEEP_PARENT_FILE).write_text("another-run")
    assert _default_out(src) == tmp_path / "reports" / "abc123"
    (elsewhere / SWEEP_PARENT_FILE).write_text("abc123\n")
    assert _default_out(src) == elsewhere / "report"
    assert _default_out(Source(None, "..", "..", None, None, [])) == tmp_path / "reports" / "_"


def test_cache_entries_are_named_by_a_digest_only(tmp_path):
    from ablate.cache import Cache, key_of

    c = Cache(tmp_path)
    c.save_json("runs", key_of("x"), {"a": 1})
    for kind, key in (("runs", "../../x"), ("../runs", key_of("x")), ("runs", "ab/cd" * 8)):
        with pytest.raises(ValueError, match="hex digest"):
            c.save_json(kind, key, {})
    with pytest.raises(ValueError):
        c.dir_for("reranker-trained", "../" + key_of("y"))


# -- what a config may build ----------------------------------------------------------------------------------------


def _compose(overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=overrides, return_hydra_config=True)


class _Sneaky:
    """Not a stage, and its constructor has a side effect: it creates the file it is given."""

    def __init__(self, **kwargs: object) -> None:
        Path(str(kwargs["path"])).write_text("built")


@pytest.mark.parametrize(
    ("target", "needle"),
    [
        (
            "ablate.runner.job.subprocess.Popen",
            "resolves to class subprocess.Popen, which is not defined in ablate",
        ),
        ("ablate.evaluation.conflicts.pd.HDFStore", "resolves to class pandas.HDFStore"),
        ("ablate.runner.job.git_commit", "it is a function ablate.runner.job.git_commit, not a stage class"),
        ("ablate.stages.base.Fingerprint", "Fingerprint is not a stage"),
        ("ablate.runner.job.Sneaky", "resolves to class test_security._Sneaky"),
        ("os.system", "only classes under ablate."),
    ],
)
def test_a_target_is_resolved_and_must_be_a_stage_before_anything_is_built(
    tmp_path, monkeypatch, target, needle
):
    """A name an ablate module re-exports (``Sneaky`` here, put in ``ablate.runner.job`` as an import would) resolves
    to a class of another module: refused before it is constructed, so the file its constructor writes never
    appears."""
    import ablate.runner.job
    from ablate.app.config import job_from_config

    monkeypatch.setattr(ablate.runner.job, "Sneaky", _Sneaky, raising=False)
    made = tmp_path / "made-by-the-constructor"
    cfg = _compose(["variant=C", "retrievers=[bm25,oracle]", f"rrf._target_={target}", f"++rrf.path={made}"])
    with pytest.raises(ConfigError) as e:
        job_from_config(cfg)
    assert str(e.value).startswith(f"rrf._target_='{target}' is not valid; ") and needle in str(e.value)
    assert "\n" not in str(e.value)
    assert not made.exists()


def test_a_nested_target_through_the_real_entry_point_is_refused_before_it_is_built(tmp_path, tiny_corpus):
    """``ablate.app.cli.logging.FileHandler`` nested in a stage's parameters: Hydra would build it (creating the file)
    before the stage; now it is refused with one line and the file never appears."""
    made = tmp_path / "made-by-filehandler.log"
    p = run_module(
        "ablate",
        [
            "corpus=beir",
            f"corpus.path={tiny_corpus}",
            "corpus.split=dev",
            f"tracking.uri=sqlite:///{tmp_path}/m.db",
            "variant=D",
            "rerank.model=trained",
            "~rerank.train",
            f"+rerank.train={{_target_:ablate.app.cli.logging.FileHandler,filename:{made}}}",
        ],
        cwd=tmp_path,
        env=_env(),
    )
    assert p.returncode == 2, (p.stdout, p.stderr)
    errors = [x for x in p.stderr.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in p.stderr
    assert "rerank.train._target_='ablate.app.cli.logging.FileHandler' is not valid" in errors[0]
    assert "resolves to class logging.FileHandler, which is not defined in ablate" in errors[0]
    assert not made.exists() and not (tmp_path / "m.db").exists() and not (tmp_path / "outputs").exists()


def test_a_callback_must_be_one_of_ablates_own_and_is_never_built_otherwise(tmp_path):
    """``hydra.callbacks.x._target_=ablate.app.cli.logging.FileHandler`` passed the old string-prefix check and Hydra
    built it at start (creating ``ablate.pwned`` in the working folder), then ran the job."""
    p = run_module(
        "ablate",
        [
            "variant=A",
            f"tracking.uri=sqlite:///{tmp_path}/m.db",
            "+hydra.callbacks.x._target_=ablate.app.cli.logging.FileHandler",
            "+hydra.callbacks.x.filename=ablate.pwned",
        ],
        cwd=tmp_path,
        env=_env(),
    )
    assert p.returncode == 2, (p.stdout, p.stderr)
    errors = [x for x in p.stderr.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and "callbacks may only be ablate. classes" in errors[0], p.stderr
    assert "resolves to class logging.FileHandler" in errors[0]
    assert not (tmp_path / "ablate.pwned").exists() and not (tmp_path / "outputs").exists()
    assert not (tmp_path / "m.db").exists()


def test_callbacks_in_the_composed_config_are_checked_however_they_got_there():
    from ablate.app.precheck import check_callbacks

    check_callbacks(_compose([]))  # ablate's own SweepCallback
    for overrides, needle in (
        (["+hydra.callbacks.x._target_=ablate.stages.fusion.rrf.RRF"], "not an ablate Hydra callback"),
        (
            ["+hydra.callbacks.x={_target_:ablate.runner.job.subprocess.Popen}"],
            "resolves to class subprocess",
        ),
        (
            [
                "+hydra.callbacks.x._target_=ablate.app.callbacks.SweepCallback",
                "+hydra.callbacks.x.inner._target_=ablate.app.callbacks.SweepCallback",
            ],
            "nothing nested in it may be built",
        ),
    ):
        with pytest.raises(ConfigError, match="callbacks may only be ablate. classes") as e:
            check_callbacks(_compose(overrides))
        assert needle in str(e.value)


@pytest.mark.parametrize("part", ["sweeper", "launcher"])
def test_nothing_nested_in_hydras_sweeper_or_launcher_is_built(tmp_path, part):
    """Hydra checks that ``hydra.sweeper._target_`` is a registered plugin but builds a ``_target_`` nested in its
    config first: ``+hydra.sweeper.foo._target_=ablate.app.cli.logging.FileHandler`` created its file (and left a
    store and a multirun folder behind) before Hydra failed."""
    p = run_module(
        "ablate",
        [
            "-m",
            "variant=A",
            f"tracking.uri=sqlite:///{tmp_path}/m.db",
            f"+hydra.{part}.foo._target_=ablate.app.cli.logging.FileHandler",
            f"+hydra.{part}.foo.filename=pwned-{part}",
        ],
        cwd=tmp_path,
        env=_env(),
    )
    assert p.returncode == 2, (p.stdout, p.stderr)
    errors = [x for x in p.stderr.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and f"error: hydra.{part}.foo=" in errors[0] and "nothing nested" in errors[0]
    assert not (tmp_path / f"pwned-{part}").exists() and not (tmp_path / "m.db").exists()
    assert not (tmp_path / "multirun").exists()


class PluginStage:
    """A stage another package registers (entry point ``ablate.stages``), defined outside ablate."""

    kind = "fuser"

    def __init__(self, name: str = "plug") -> None:
        self.name = name


def test_a_registered_plugin_class_is_allowed_and_its_entry_point_decides(monkeypatch):
    from ablate.app import targets

    eps = {
        "test_security.PluginStage": metadata.EntryPoint(
            "plug", "test_security:PluginStage", "ablate.stages"
        ),
        "test_security._Sneaky": metadata.EntryPoint("sneaky", "test_security:_Sneaky", "ablate.stages"),
    }
    monkeypatch.setattr(targets, "plugin_entry_points", lambda: eps)
    assert targets.stage_class("plug", "test_security.PluginStage") is PluginStage
    with pytest.raises(ConfigError, match="_Sneaky is not a stage"):
        targets.stage_class("plug", "test_security._Sneaky")  # registered, but not a stage class
    with pytest.raises(ConfigError, match="only classes under ablate."):
        targets.stage_class("plug", "test_security.PluginStage.__init__")  # not what the entry point names


def test_a_run_id_read_back_from_an_edited_store_names_no_folder_outside(tmp_path, mlflow_uri):
    """The report downloads each run's per_query.csv into ``<temp>/<run id>``; a store edited to hold the run id
    ``../../<folder>`` once sent the copy there. Now the run is refused and nothing is written outside."""
    import sqlite3

    from ablate import record as R
    from ablate.study.fetch import fetch_runs
    from ablate.tracking import Tracker

    t = Tracker(mlflow_uri)
    run_id = t.start("edited-store", "A", {R.T_VARIANT: "A"})
    t.log_files(run_id, {R.A_PER_QUERY: "qid,ndcg@10\nq1,1.0\n"})
    t.end(run_id)
    target = tmp_path / "landed"
    bad = f"../../../../../../..{target}"
    db = sqlite3.connect(mlflow_uri[len("sqlite:///") :])
    db.execute("PRAGMA foreign_keys = OFF")
    for table in ("runs", "tags", "params", "metrics", "latest_metrics", "inputs"):
        column = "source_id" if table == "inputs" else "run_uuid"
        db.execute(f"UPDATE {table} SET {column} = ? WHERE {column} = ?", (bad, run_id))
    db.commit()
    db.close()
    with pytest.raises(InputError, match="would name a folder outside the temp folder"):
        fetch_runs(Tracker(mlflow_uri), experiment="edited-store")
    assert not target.exists()
