"""Held-out discipline: first test run registers, a changed configuration later warns and is tagged; a sweep on test
is refused unless confirmed as the final run; the report marks test-tuned rows."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ablate.runner.heldout import PriorTestRun, config_fingerprint, judge_test_run
from ablate.tracking import Tracker
from conftest import TINY_DOCS, TINY_MANIFEST, TINY_QRELS, TINY_QUERIES, write_corpus


def test_config_fingerprint_ignores_the_split_only():
    comps = {"snapshot": {"fingerprint": "f", "split": "dev", "qrels": "h1"}, "bm25": {"k1": 0.9}}
    same = {"snapshot": {"fingerprint": "f", "split": "test", "qrels": "h2"}, "bm25": {"k1": 0.9}}
    other = {"snapshot": {"fingerprint": "f", "split": "test", "qrels": "h2"}, "bm25": {"k1": 1.2}}
    ev = {"ks": [10]}
    assert config_fingerprint(comps, ev) == config_fingerprint(same, ev)
    assert config_fingerprint(comps, ev) != config_fingerprint(other, ev)
    assert config_fingerprint(comps, ev) != config_fingerprint(comps, {"ks": [5]})


def test_verdicts():
    assert judge_test_run([], "c1", None).status == "first"
    sweep = [PriorTestRun("r1", "cA", "s1", 1), PriorTestRun("r2", "cB", "s1", 2)]
    # the rest of the first sweep is the same session
    assert judge_test_run(sweep[:1], "cB", "s1").status == "same-session"
    # later: a registered configuration is a repeat, a new one is reuse
    assert judge_test_run(sweep, "cB", None).status == "repeat"
    v = judge_test_run(sweep, "cC", "s2")
    assert v.status == "reuse" and v.previous == ["r1", "r2"] and "second dev set" in v.message
    assert v.tags()["ablate.test_reuse"] == "true"
    # a single first run registers only its own configuration
    single = [PriorTestRun("r1", "cA", None, 1)]
    assert judge_test_run(single, "cA", None).status == "repeat"
    assert judge_test_run(single, "cB", None).status == "reuse"


# ----------------------------------------------------------------------------------------------------------------
# a sweep on the held-out split: refused unless confirmed (library rule, then through the real entry point)


def test_check_test_sweep_rule():
    from ablate.runner.heldout import HeldOutSweepRefused, check_test_sweep, confirmed_tags

    check_test_sweep(["test"], [False], multirun=False)  # one run on test: the "run once" case
    check_test_sweep(["test"], [False], multirun=True)  # a one-cell -m is still one run
    check_test_sweep(["test", "test"], [False, False], multirun=False)  # not a sweep
    check_test_sweep(["dev", "dev", "train"], [False] * 3, multirun=True)  # tuning on dev: unaffected
    check_test_sweep(["test", "test"], [True, True], multirun=True)  # confirmed as the final run
    with pytest.raises(HeldOutSweepRefused) as e:
        check_test_sweep(["test"] * 4, [False] * 4, multirun=True)
    msg = str(e.value)
    assert "would run 4 cells on the held-out split 'test'" in msg and "\n" not in msg
    assert "read high" in msg and "corpus.split=dev" in msg and "--confirm-test" in msg
    assert "heldout.confirm_test=true" in msg and "one final run of settings chosen on dev" in msg
    with pytest.raises(HeldOutSweepRefused, match="1 of its 2 cells"):
        check_test_sweep(["dev", "test"], [True, False], multirun=True)
    with pytest.raises(HeldOutSweepRefused):  # every held-out cell must be confirmed
        check_test_sweep(["test", "test"], [True, False], multirun=True)
    assert confirmed_tags("test", True) == {"ablate.test_confirmed": "true"}
    assert confirmed_tags("test", False) == {} and confirmed_tags("dev", True) == {}


def test_a_corpus_with_one_labels_file_is_a_pilot_that_sweeps(tmp_path):
    """One labels file (any name) and no split file: no held-out split, so a sweep is not refused; a test split beside
    a dev or train split keeps the guard."""
    from ablate.data.corpus import pilot_split
    from ablate.runner.heldout import HeldOutSweepRefused, check_test_sweep, pilot_corpus
    from ablate.runner.settings import CorpusSpec

    check_test_sweep(["test"] * 3, [False] * 3, multirun=True, exploratory=[True] * 3)
    with pytest.raises(HeldOutSweepRefused):
        check_test_sweep(["test"] * 3, [False] * 3, multirun=True, exploratory=[False] * 3)
    root = write_corpus(
        tmp_path / "one", TINY_DOCS, TINY_QUERIES, {"labels": TINY_QRELS["dev"]}, TINY_MANIFEST
    )
    assert pilot_split(root) is None  # its questions still declare dev and train splits
    queries = [{k: v for k, v in q.items() if k != "split"} for q in TINY_QUERIES]
    root = write_corpus(tmp_path / "two", TINY_DOCS, queries, {"labels": TINY_QRELS["dev"]}, TINY_MANIFEST)
    assert pilot_split(root) == "labels"
    spec, note = pilot_corpus(CorpusSpec(path=str(root), split="test"))
    assert spec.split == "labels" and spec.exploratory and note and "qrels/labels.tsv" in note
    spec, note = pilot_corpus(CorpusSpec(path=str(root), split="test", split_file=str(root / "split.tsv")))
    assert spec.split == "test" and not spec.exploratory and note is None  # a split file: the guard as before
    assert pilot_split(_split_corpus(tmp_path / "three")) is None  # dev, train and test


def _split_corpus(root: Path) -> Path:
    """The tiny corpus plus a held-out test split (two questions of its own)."""
    queries = [
        *TINY_QUERIES,
        {"_id": "q6", "text": "What is the amount of invoice INV-102?", "split": "test"},
        {"_id": "q7", "text": "Shanghai city transport limit per trip", "split": "test"},
    ]
    qrels = {**TINY_QRELS, "test": [("q6", "INV-102#p0", 2), ("q7", "POL-1#4.2-a", 2)]}
    return write_corpus(root, TINY_DOCS, queries, qrels, TINY_MANIFEST)


@pytest.fixture(scope="module")
def split_corpus(tmp_path_factory) -> Path:
    return _split_corpus(tmp_path_factory.mktemp("heldout") / "tiny")


def _args(corpus: Path, uri: str, exp: str, split: str = "test") -> list[str]:
    return [
        "corpus=beir",
        f"corpus.path={corpus}",
        f"corpus.split={split}",
        "corpus.identity=employee",
        f"tracking.uri={uri}",
        f"tracking.experiment={exp}",
        "progress=false",
        "stats.bootstrap=100",
        "variant=A",  # BM25 only: fast
    ]


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``python -m ablate *args`` in ``cwd``, run in this process (tests/inprocess.py), on the session's cache."""
    from inprocess import run_module

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    return run_module("ablate", args, cwd=cwd, env=env)


def _experiment_runs(uri: str, exp: str):
    t = Tracker(uri)
    exp_id = t.experiment_id(exp, create=False)
    return t, exp_id, (t.find_runs([exp_id]) if exp_id else [])


def test_a_sweep_on_test_is_refused_before_anything_runs(split_corpus, mlflow_uri, tmp_path):
    p = _cli(["-m", *_args(split_corpus, mlflow_uri, "ho-refused"), "bm25.k1=0.9,1.2,1.5"], tmp_path)
    assert p.returncode == 2, p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in p.stderr, p.stderr
    assert "would run 3 cells on the held-out split 'test'" in errors[0] and "--confirm-test" in errors[0]
    # nothing created: no experiment, no run, no output folder
    _, exp_id, runs = _experiment_runs(mlflow_uri, "ho-refused")
    assert exp_id is None and runs == []
    assert not (tmp_path / "multirun").exists() and not (tmp_path / "outputs").exists()


@pytest.mark.parametrize("confirm", ["--confirm-test", "heldout.confirm_test=true"])
def test_a_confirmed_sweep_on_test_runs_and_is_tagged(split_corpus, mlflow_uri, tmp_path, confirm):
    exp = f"ho-confirmed-{confirm.strip('-').split('.')[0]}"
    p = _cli(["-m", *_args(split_corpus, mlflow_uri, exp), "bm25.k1=0.9,1.2", confirm], tmp_path)
    assert p.returncode == 0, p.stderr
    _, _, runs = _experiment_runs(mlflow_uri, exp)
    children = [r for r in runs if r.parent]
    parent = [r for r in runs if not r.parent]
    assert len(children) == 2 and len(parent) == 1 and all(r.status == "FINISHED" for r in runs)
    assert all(r.tags["ablate.test_confirmed"] == "true" for r in [*children, *parent])
    assert {r.tags["ablate.heldout"] for r in children} == {"first", "same-session"}
    # the confirmation is a recorded setting like any other (the flag becomes the override)
    assert all("heldout.confirm_test=true" in r.tags["ablate.overrides"].lower() for r in children)


def test_a_dev_sweep_needs_no_confirmation(split_corpus, mlflow_uri, tmp_path):
    p = _cli(["-m", *_args(split_corpus, mlflow_uri, "ho-dev", split="dev"), "bm25.k1=0.9,1.2"], tmp_path)
    assert p.returncode == 0, p.stderr
    _, _, runs = _experiment_runs(mlflow_uri, "ho-dev")
    children = [r for r in runs if r.parent]
    assert len(children) == 2 and all(r.status == "FINISHED" for r in children)
    assert not any("ablate.test_confirmed" in r.tags or "ablate.heldout" in r.tags for r in runs)


def test_test_run_once_then_a_changed_setting_is_test_tuned_in_the_report(split_corpus, mlflow_uri, tmp_path):
    """The whole discipline: a confirmed final sweep on test (dev-tuned rows), then a single test run of a changed
    setting (allowed without confirmation, tagged reuse): the report marks it test-tuned and warns above the table."""
    from ablate.app import report as report_cli

    exp = "ho-e2e"
    p = _cli(["-m", *_args(split_corpus, mlflow_uri, exp), "bm25.k1=0.9,1.2", "--confirm-test"], tmp_path)
    assert p.returncode == 0, p.stderr
    p = _cli([*_args(split_corpus, mlflow_uri, exp), "bm25.k1=1.5"], tmp_path)  # a single test run: allowed
    assert p.returncode == 0, p.stderr
    assert "second dev set" in p.stderr  # the reuse warning
    t, exp_id, runs = _experiment_runs(mlflow_uri, exp)
    single = next(r for r in runs if r.params.get("bm25.k1") == "1.5")
    assert single.tags["ablate.test_reuse"] == "true" and "ablate.test_confirmed" not in single.tags

    out = tmp_path / "report"
    assert report_cli.main(["--experiment", exp, "--tracking-uri", mlflow_uri, "--out", str(out)]) == 0
    md = (out / "ablation.md").read_text(encoding="utf-8")
    warning = next(line for line in md.splitlines() if line.startswith("HELD-OUT MIX"))
    assert "dev-tuned and test-tuned settings" in warning and "k1=1.5" in warning
    assert md.index("HELD-OUT MIX") < md.index("| run ")  # above the table
    rows = {line.split("|")[1].strip(): line for line in md.splitlines() if line.startswith("| A ")}
    assert "A k1=1.5 †" in rows and "A k1=0.9 (baseline)" in rows and "A k1=1.2" in rows
    csv = (out / "ablation.csv").read_text(encoding="utf-8")
    assert "test-tuned" in csv and "dev-tuned" in csv


def test_a_split_typed_on_the_command_line_that_a_pilot_does_not_have_is_refused(tmp_path):
    """Issue 37: ``corpus.split=dev`` typed for a corpus whose one labels file is qrels/test.tsv ran the test
    questions (exit 0, a note). Typed, it is refused naming the one split and how to make a dev split; the config's
    default still runs the pilot with the note; a typed split the file has runs."""
    from ablate.app.config import job_from_config
    from ablate.app.precheck import compose_cell, hydra_config_dir
    from ablate.errors import ConfigError
    from ablate.runner.heldout import pilot_corpus
    from ablate.runner.settings import CorpusSpec

    queries = [{k: v for k, v in q.items() if k != "split"} for q in TINY_QUERIES]
    root = write_corpus(tmp_path / "own", TINY_DOCS, queries, {"test": TINY_QRELS["dev"]}, TINY_MANIFEST)
    with pytest.raises(ConfigError) as e:
        pilot_corpus(CorpusSpec(path=str(root), split="dev"), split_named=True)
    msg = str(e.value)
    assert msg.startswith("corpus.split='dev' is not valid; the corpus ") and "qrels/test.tsv" in msg
    assert "its only split is 'test'" in msg and f"python -m ablate.split {root}" in msg
    assert "corpus.split_file=<its split.tsv> corpus.split=dev" in msg
    spec, note = pilot_corpus(CorpusSpec(path=str(root), split="test"), split_named=True)
    assert spec.split == "test" and spec.exploratory and note is None
    spec, note = pilot_corpus(CorpusSpec(path=str(root), split="dev"))  # the config's default: the pilot
    assert spec.split == "test" and spec.exploratory and note and "qrels/test.tsv" in note

    base = ["corpus=beir", f"corpus.path={root}", "variant=A"]
    with hydra_config_dir():  # whether the split was typed is read from the composed config's overrides
        with pytest.raises(ConfigError, match="its only split is 'test'"):
            job_from_config(compose_cell([*base, "corpus.split=dev"]))
        notes: list[str] = []
        job = job_from_config(compose_cell(base), notes=notes)  # corpus=beir's default split (test) matches
        assert job.corpus.split == "test" and job.corpus.exploratory and notes == []
