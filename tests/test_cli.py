"""End to end through the real entry point: Hydra composition, the pipeline, a real MLflow sqlite store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

REPO = Path(__file__).resolve().parents[1]


def ablate(args: list[str], cwd: Path, env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **env_extra}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run([sys.executable, "-m", "ablate", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, mlflow_uri):
    d = tmp_path_factory.mktemp("cli")
    return d, {"ABLATE_CACHE_DIR": str(d / "cache")}, mlflow_uri


def _runs(uri: str, experiment: str):
    c = MlflowClient(uri)
    exp = c.get_experiment_by_name(experiment)
    return c, c.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"]) if exp else []


def _base(tiny_corpus, uri, exp):
    return ["corpus=beir", f"corpus.path={tiny_corpus}", "corpus.split=dev", "corpus.identity=employee",
            f"tracking.uri={uri}", f"tracking.experiment={exp}", "progress=false", "stats.bootstrap=200"]


def test_single_run_logs_params_metrics_artifacts_and_warm_rerun_encodes_nothing(tiny_corpus, workdir):
    cwd, env, uri = workdir
    base = _base(tiny_corpus, uri, "cli-single")
    p = ablate([*base, "variant=C", "rrf.k=60"], cwd, env)
    assert p.returncode == 0, p.stderr
    assert "| C " in p.stdout and "ndcg@10" in p.stdout
    p2 = ablate([*base, "variant=C", "rrf.k=60"], cwd, env)
    assert p2.returncode == 0, p2.stderr
    c, runs = _runs(uri, "cli-single")
    assert [r.info.status for r in runs] == ["FINISHED", "FINISHED"]
    first, second = runs
    assert first.data.params["rrf.k"] == "60" and first.data.params["variant"] == "C"
    for m in ("ndcg_at_10", "recall_at_10", "hit_at_10", "mrr_at_10", "ndcg_at_10_ci_low", "queries_answerable"):
        assert m in first.data.metrics, m
    # dev: q1, q2 answerable; q3 no-answer; q4's only positive is finance-only -> unanswerable for `employee`
    assert first.data.metrics["queries_answerable"] == 2
    assert first.data.metrics["permission_queries_made_unanswerable"] == 1
    assert first.data.metrics["dense_passages_encoded"] == 5
    assert second.data.metrics["dense_passages_encoded"] == 0
    assert second.data.metrics["candidate_cache_hits"] == 2
    assert second.data.metrics["ndcg_at_10"] == first.data.metrics["ndcg_at_10"]
    tags = first.data.tags
    assert len(tags["ablate.snapshot"]) == 64 and len(tags["ablate.qrels_hash"]) == 64
    assert tags["ablate.label_version"] == "tiny-v1" and "ablate.git_commit" in tags
    arts = {a.path for a in c.list_artifacts(first.info.run_id)}
    assert {"config.yaml", "per_query.csv", "run.trec", "corpus_manifest.json", "unjudged.csv"} <= arts
    trec = Path(c.download_artifacts(first.info.run_id, "run.trec", str(cwd / "dl"))).read_text().splitlines()
    qid, q0, cid, rank, score, tag = trec[0].split()
    assert (q0, rank, tag) == ("Q0", "1", "C")
    # the finance-only chunk never leaves retrieval for `employee`
    assert not any(" FIN-1#p0 " in line for line in trec)
    manifest = json.loads(Path(c.download_artifacts(first.info.run_id, "corpus_manifest.json", str(cwd / "dl"))).read_text())
    assert manifest["fingerprint"] == tags["ablate.snapshot"] and manifest["n_chunks"] == 5


def test_multirun_makes_children_of_one_parent_and_prints_table(tiny_corpus, workdir):
    cwd, env, uri = workdir
    p = ablate(["-m", *_base(tiny_corpus, uri, "cli-multi"), "variant=A,D,oracle", "rerank.depth=5",
                "rerank.model=trained", "rerank.train.epochs=1", "rerank.train.min_steps=2"], cwd, env)
    assert p.returncode == 0, p.stderr
    assert "| oracle" in p.stdout and "report:" in p.stdout
    c, runs = _runs(uri, "cli-multi")
    parents = [r for r in runs if r.data.tags.get("ablate.role") == "sweep-parent"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(parents) == 1 and len(children) == 3
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parents[0].info.run_id}
    assert {r.data.params["variant"] for r in children} == {"A", "D", "oracle"}
    assert all(r.info.status == "FINISHED" for r in runs)
    oracle = next(r for r in children if r.data.params["variant"] == "oracle")
    assert oracle.data.metrics["ndcg_at_10"] == 1.0


def test_bad_inputs_fail_in_one_line_and_mark_the_run_failed(tiny_corpus, workdir):
    cwd, env, uri = workdir
    p = ablate(["variant=E"], cwd, env)
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0
    assert "variant='E' is not valid" in p.stderr and "A, B, C, D, oracle" in p.stderr
    (tiny_corpus / "corpus.jsonl").write_text('{"_id": "a", "text": "x"}\n{"_id": "b", "text": \n')
    p = ablate([*_base(tiny_corpus, uri, "cli-bad"), "variant=A"], cwd, env)
    assert p.returncode == 2, p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "corpus.jsonl:2" in errors[0] and "invalid JSON" in errors[0]
    assert "Traceback" not in p.stderr
    _, runs = _runs(uri, "cli-bad")
    assert [r.info.status for r in runs] == ["FAILED"]
    assert "corpus.jsonl:2" in runs[0].data.tags["ablate.failure"]


def test_a_failing_job_does_not_stop_the_sweep(tiny_corpus, workdir):
    cwd, env, uri = workdir
    # the standard hub cross-encoder is not available offline: D fails fast, A still runs
    p = ablate(["-m", *_base(tiny_corpus, uri, "cli-sweep-fail"), "variant=D,A"], cwd, env)
    assert p.returncode == 0, p.stderr
    assert "rerank.model=trained" in p.stderr and "Traceback" not in p.stderr
    _, runs = _runs(uri, "cli-sweep-fail")
    status = {r.data.params.get("variant", r.info.run_name): r.info.status for r in runs}
    assert status["D"] == "FAILED" and status["A"] == "FINISHED"
