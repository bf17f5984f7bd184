"""One scoring path: `python -m ablate.evaluate --from-run` gives back every metric a run logged, because the run and
the re-score call the same function (ablate.evaluation.scoring.score_run) on the same inputs.

The case is the demo as a user would run it (each question as its own persona, on its own date, multi-condition
questions, answers from a real generator), with one sub-question's evidence also naming the clause its 2026 version
replaced: BM25 ranks the superseded 2025 clause, which must not cover the sub-question on the question's date."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.tracking import Tracker

#: a demo run answering with SmolLM2, then three re-scores of it, each a CLI process (~90 s): make test-slow. The
#: default suite keeps the re-score of a run's own figures (test_reliability.py::test_evaluate_reproduces_a_runs_own_figures_from_its_run_file).
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
SMOLLM2 = "smollm2-135m-instruct"


def _cli(module: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``python -m <module>`` on the session's cache (tests/conftest.py): nothing here is about what it holds."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )


def _demo_with_superseded_evidence(root: Path) -> Path:
    """The demo, with q027's "limit" sub-question also naming POL-TRAVEL-2025#4.3 (out of force on 2026-04-15)."""
    shutil.copytree(REPO / "corpora" / "demo", root)
    path = root / "queries.jsonl"
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        if q["_id"] == "q027":
            (limit,) = [s for s in q["subquestions"] if s["id"] == "limit"]
            limit["evidence"] = ["POL-TRAVEL-2026#4.3", "POL-TRAVEL-2025#4.3"]
        lines.append(json.dumps(q, ensure_ascii=False))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def tracked(tmp_path_factory) -> tuple[Path, str, Path]:
    tmp = tmp_path_factory.mktemp("rescore")
    corpus = _demo_with_superseded_evidence(tmp / "demo")
    store = tmp / "m.db"
    p = _cli(
        "ablate",
        [
            "corpus=demo",
            f"corpus.path={corpus}",
            "variant=A",
            "generator=llama_cpp",
            f"generator.model={SMOLLM2}",
            "generator.n_threads=1",
            "generator.max_tokens=16",
            "stats.bootstrap=200",
            f"tracking.uri=sqlite:///{store}",
            "tracking.experiment=rescore",
            "progress=false",
        ],
        tmp,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    t = Tracker(f"sqlite:///{store}")
    (run,) = t.find_runs([t.experiment_id("rescore", create=False)])
    return store, run.run_id, tmp


def _rescore(store: Path, run_id: str, cwd: Path, *extra: str) -> subprocess.CompletedProcess:
    return _cli(
        "ablate.evaluate",
        ["--from-run", run_id, "--tracking-uri", f"sqlite:///{store}", *extra],
        cwd,
    )


def test_the_case_exercises_dates_identities_sub_questions_and_answers(tracked):
    store, run_id, _ = tracked
    run = Tracker(f"sqlite:///{store}").get_run(run_id)
    assert run is not None
    m = run.metrics
    assert run.params["corpus.identity"] == "per_query" and run.params["corpus.as_of"] == "per_query"
    assert m["queries_with_subquestions"] == 5 and m["queries_in_conflict"] > 0
    assert m["answer_scored"] > 0 and m["answer_no_answer_questions"] > 0
    assert m["slice_persona:finance/n"] == 2
    # BM25 ranks the superseded 2025 clause for q027 and not the 2026 one: on the question's date the sub-question
    # is uncovered (the undated rule would count the 2025 clause and give 1.0 / 1.0, as the re-score on main did)
    assert m["subq_coverage_at_10"] == pytest.approx(0.9) and m["subq_all_at_10"] == pytest.approx(0.8)


def test_from_run_gives_back_every_metric_the_run_logged(tracked):
    store, run_id, tmp = tracked
    p = _rescore(store, run_id, tmp, "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout)
    check = out["check"]
    assert check["different"] == []
    logged = Tracker(f"sqlite:///{store}").get_run(run_id).metrics  # type: ignore[union-attr]
    rederived = {k for k in logged if not any(k in names for names in check["not_rederived"].values())}
    assert check["equal"] == len(rederived) and check["equal"] > 300
    for key in ("ndcg_at_10", "subq_coverage_at_10", "superseded_first_at_10", "answer_in_context_at_10"):
        assert key in rederived
    for key in ("answer_correct", "answer_f1", "answer_correct_ci_low", "answer_latency_p50_s"):
        assert key in rederived, key  # the answer metrics, from answers.csv (nothing generated)
    not_rederived = {k for names in check["not_rederived"].values() for k in names}
    scores = (
        "ndcg",
        "recall",
        "mrr",
        "hit",
        "subq",
        "answer_",
        "slice_",
        "queries_",
        "abstain_",
        "permission_",
    )
    assert not_rederived and not [k for k in not_rederived if k.startswith(scores)], not_rederived
    assert {k for k in not_rederived if k.startswith("time_")} and {
        k for k in not_rederived if "funnel/" in k
    }
    # and the human output says so
    p = _rescore(store, run_id, tmp)
    assert p.returncode == 0 and f"{check['equal']} metrics re-scored equal the logged ones" in p.stdout


def test_a_record_edited_after_the_run_is_caught(tracked, tmp_path):
    store, run_id, tmp = tracked
    copy = tmp_path / "m.db"
    shutil.copy(store, copy)
    from mlflow.tracking import MlflowClient

    MlflowClient(f"sqlite:///{copy}").log_metric(run_id, "ndcg_at_10", 0.999)
    p = _rescore(copy, run_id, tmp)
    assert p.returncode == 1
    (line,) = [x for x in p.stderr.splitlines() if x.startswith("error:")]
    assert "ndcg_at_10: logged 0.999" in line and "Fix:" in line
    assert "Traceback" not in p.stderr
