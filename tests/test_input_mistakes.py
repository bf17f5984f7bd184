"""Small input mistakes that once passed without a word: a split that could not be checked for leakage, dates in
their basic ISO form, a date (or identity) under which no question keeps evidence, and integral numbers logged as
floats. (Duplicate and empty run files: tests/test_evaluation_io.py; every case is also in tests/test_catalogue.py.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.errors import ConfigError, InputError
from conftest import REPO, TINY_DOCS, TINY_MANIFEST, TINY_QRELS, TINY_QUERIES, write_corpus
from inprocess import run_module


def _ablate(
    args: list[str], cwd: Path, module: str = "ablate", run: bool = False
) -> subprocess.CompletedProcess:
    """``python -m module *args``: a refusal before any run in this process (tests/inprocess.py), a ``run`` in a
    process of its own; on the session's cache (tests/conftest.py)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    if not run:
        return run_module(module, args, cwd=cwd, env=env)
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


# -- python -m ablate.split on questions without labels -------------------------------------------------------------


def test_a_split_of_questions_without_labels_is_refused_not_called_leak_free(tmp_path):
    """Without gold evidence questions cannot be grouped by it, so "no leakage found" would claim a check that never
    ran: refused (exit 2), and nothing is written."""
    from ablate.data.corpus import load_corpus
    from ablate.data.splitting import SplitParams, build_split

    root = write_corpus(tmp_path / "c", TINY_DOCS, TINY_QUERIES, {}, TINY_MANIFEST)
    shutil.rmtree(root / "qrels")
    with pytest.raises(InputError) as e:
        build_split(load_corpus(root), SplitParams(threshold=None))
    assert e.value.where == str(root / "qrels")
    assert "none of the 5 questions to split has a gold label" in str(e.value)
    assert "leakage cannot be checked" in str(e.value)
    p = _ablate([str(root), "--no-embed"], tmp_path, module="ablate.split")
    assert p.returncode == 2 and "no leakage found" not in p.stdout, (p.stdout, p.stderr)
    assert p.stderr.startswith("error: ") and p.stderr.count("\n") == 1
    assert not (tmp_path / "outputs" / "splits").exists()
    # labels present but all below --relevance-level: the fix names the level
    labelled = write_corpus(tmp_path / "d", TINY_DOCS, TINY_QUERIES, TINY_QRELS, TINY_MANIFEST)
    with pytest.raises(InputError, match="all below it.*lower --relevance-level"):
        build_split(load_corpus(labelled), SplitParams(threshold=None, relevance_level=3))


# -- dates: one form in every record ---------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["20260415", 20260415, "2026-04-15", " 2026-04-15 "])
def test_a_basic_iso_date_is_normalised(value):
    from ablate.data.versions import check_config_date
    from ablate.runner.settings import CorpusSpec

    assert check_config_date("corpus.as_of", value) == "2026-04-15"
    assert CorpusSpec(path="x", as_of=str(value)).as_of == "2026-04-15"


@pytest.mark.parametrize("value", ["2026-W16-3", "2026-0415", "15/04/2026", "2026-4-15", "20261345"])
def test_other_date_forms_are_refused_on_every_python(value):
    """``date.fromisoformat`` accepts week dates and more from Python 3.11 on; ablate's dates are the same on 3.10."""
    from ablate.data.versions import check_config_date, parse_date

    with pytest.raises(ConfigError, match="YYYY-MM-DD"):
        check_config_date("corpus.as_of", value)
    with pytest.raises(InputError, match="write it as YYYY-MM-DD"):
        parse_date(value, "queries.jsonl (query q1)")


def test_as_of_and_an_integral_param_record_as_written_and_keep_one_identity(tmp_path, tiny_corpus):
    """``corpus.as_of=20260415`` and ``=2026-04-15`` are one setting, ``rrf.k=60`` and ``=60.0`` one parameter: the
    second run is the first one reused (same cell key), both record ``2026-04-15`` and ``60``, and the MLflow filter
    ``params.`rrf.k` = '60'`` finds them."""
    from mlflow.tracking import MlflowClient

    from ablate.tracking import Tracker

    uri = f"sqlite:///{tmp_path}/m.db"
    base = [
        "corpus=beir",
        f"corpus.path={tiny_corpus}",
        "corpus.split=dev",
        "corpus.identity=employee",
        f"tracking.uri={uri}",
        "tracking.experiment=as-written",
        "progress=false",
        "stats.bootstrap=50",
        "variant=C",
        "retrievers=[bm25,oracle]",
    ]
    first = _ablate([*base, "rrf.k=60", "corpus.as_of=20260415"], tmp_path, run=True)
    assert first.returncode == 0, first.stderr
    second = _ablate([*base, "rrf.k=60.0", "corpus.as_of=2026-04-15"], tmp_path, run=True)
    assert second.returncode == 0, second.stderr
    t = Tracker(uri)
    runs = t.find_runs([t.experiment_id("as-written", create=False)])
    assert len(runs) == 2
    a, b = runs
    assert b.tags.get("ablate.reused_from") == a.run_id, "the same cell: the second run stands on the first"
    assert (
        a.tags["ablate.cell"] == b.tags["ablate.cell"] and a.tags["ablate.fp.rrf"] == b.tags["ablate.fp.rrf"]
    )
    for r in runs:
        assert r.params["rrf.k"] == "60" and r.params["corpus.as_of"] == "2026-04-15"
        assert r.params["bm25.k1"] == "0.9"  # a float that is not integral is logged as before
    found = MlflowClient(uri).search_runs(
        [a.experiment_id], filter_string="params.`rrf.k` = '60' and params.`corpus.as_of` = '2026-04-15'"
    )
    assert {r.info.run_id for r in found} == {a.run_id, b.run_id}


def test_param_values_keep_their_meaning():
    import numpy as np

    from ablate.record import param_value
    from ablate.study.compare import norm_value

    assert [param_value(v) for v in (60.0, 60, np.float32(2.0), -0.0, 0.9, 1e20, [60.0], True)] == [
        "60",
        "60",
        "2",
        "0",
        "0.9",
        "1e+20",
        "[60.0]",
        "True",
    ]
    assert norm_value(param_value(60.0)) == norm_value("60.0")  # runs recorded before compare equal


def test_an_integral_abstain_threshold_is_one_setting():
    from ablate.runner.settings import RunSettings

    assert (
        RunSettings(abstain_threshold=1).abstain_threshold
        == RunSettings(abstain_threshold=1.0).abstain_threshold
    )
    assert isinstance(RunSettings(abstain_threshold=1).abstain_threshold, float)


# -- no question keeps evidence ---------------------------------------------------------------------------------------


def test_a_date_before_every_version_is_refused_before_anything_runs_on_the_demo(tmp_path):
    """``variant=A corpus.as_of=1900-01-01`` once logged every metric empty, answerable=0, FINISHED, exit 0."""
    p = _ablate(
        ["variant=A", "corpus.as_of=1900-01-01", f"tracking.uri=sqlite:///{tmp_path}/m.db", "progress=false"],
        tmp_path,
    )
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stderr.startswith("error: corpus.as_of='1900-01-01' is not valid; no question of split 'dev'")
    assert "before every document's effective date (earliest 2024-01-01)" in p.stderr
    assert "give a date on or after 2024-01-01" in p.stderr and p.stderr.count("\n") == 1
    assert not (tmp_path / "m.db").exists() and not (tmp_path / "outputs").exists()


def _dated(tmp_path: Path) -> Path:
    docs = [{**d, "effective_date": "2025-01-01"} for d in TINY_DOCS]
    return write_corpus(tmp_path / "dated", docs, TINY_QUERIES, TINY_QRELS, TINY_MANIFEST)


def test_no_answerable_question_names_the_setting_that_empties_the_split(tmp_path):
    from ablate.data.corpus import load_corpus
    from ablate.runner.access import Access, check_answerable

    snap = load_corpus(_dated(tmp_path))
    check_answerable(snap, Access("employee", "2025-01-01"), "dev")  # in force: answerable
    check_answerable(snap, Access(None, None), "dev")
    with pytest.raises(ConfigError, match=r"corpus.as_of='2024-12-31'.*earliest 2025-01-01"):
        check_answerable(snap, Access(None, "2024-12-31"), "dev")
    # an identity whose groups see no document: every question is no-answer for it
    docs = [{**d, "acl": d.get("acl") or ["staff"]} for d in TINY_DOCS]
    manifest = TINY_MANIFEST + "  nobody: [visitors]\n"
    locked = load_corpus(write_corpus(tmp_path / "locked", docs, TINY_QUERIES, TINY_QRELS, manifest))
    check_answerable(locked, Access("employee"), "dev")
    with pytest.raises(
        ConfigError, match=r"corpus.identity='nobody'.*choose an identity that sees the evidence"
    ):
        check_answerable(locked, Access("nobody"), "dev")


def test_the_demo_s_own_dates_and_identities_keep_their_questions():
    """The check never refuses what the demo runs (per_query identity and dates)."""
    from ablate.data.corpus import load_corpus
    from ablate.runner.access import Access, check_answerable

    snap = load_corpus(REPO / "corpora" / "demo")
    for split in ("dev", "test"):
        check_answerable(snap, Access("per_query", "per_query"), split)
        check_answerable(snap, Access("employee", "2026-04-15", "in_force"), split)
