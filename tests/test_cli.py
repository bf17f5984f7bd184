"""End to end through the real entry point: Hydra composition, the pipeline, a real MLflow sqlite store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.tracking import Tracker

REPO = Path(__file__).resolve().parents[1]


def ablate(args: list[str], cwd: Path, env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **env_extra}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [sys.executable, "-m", "ablate", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, mlflow_uri):
    """A folder to run in, no environment of its own (the session's cache, tests/conftest.py), the store."""
    d = tmp_path_factory.mktemp("cli")
    return d, {}, mlflow_uri


def _runs(uri: str, experiment: str):
    t = Tracker(uri)
    exp = t.experiment_id(experiment, create=False)
    return t, t.find_runs([exp]) if exp else []


def _base(tiny_corpus, uri, exp):
    return [
        "corpus=beir",
        f"corpus.path={tiny_corpus}",
        "corpus.split=dev",
        "corpus.identity=employee",
        f"tracking.uri={uri}",
        f"tracking.experiment={exp}",
        "progress=false",
        "stats.bootstrap=200",
    ]


def test_single_run_logs_params_metrics_artifacts_and_warm_rerun_encodes_nothing(tiny_corpus, workdir):
    cwd, _, uri = workdir
    env = {"ABLATE_CACHE_DIR": str(cwd / "cache")}  # its own: the first run must encode the corpus (cold)
    base = _base(tiny_corpus, uri, "cli-single")
    p = ablate([*base, "variant=C", "rrf.k=60"], cwd, env)
    assert p.returncode == 0, p.stderr
    assert "| C " in p.stdout and "ndcg@10" in p.stdout
    p2 = ablate([*base, "variant=C", "rrf.k=60", "tracking.reuse=false"], cwd, env)  # runs again, warm
    assert p2.returncode == 0, p2.stderr
    t, runs = _runs(uri, "cli-single")
    assert [r.status for r in runs] == ["FINISHED", "FINISHED"]
    first, second = runs
    p = first.params
    assert p["variant"] == "C" and float(p["rrf.k"]) == 60 and p["rrf.window"] == "100"
    assert p["pipeline.retrievers"] == '["bm25", "dense"]' and p["pipeline.fuser"] == "rrf"
    assert (
        p["pipeline.reranker"] == "none" and p["bm25.k1"] == "0.9" and p["dense.model"] == "all-MiniLM-L6-v2"
    )
    assert not any(k.startswith(("rerank.", "oracle.", "tracking.", "cache.", "hydra")) for k in p)
    assert first.tags["ablate.param_sources"] == '{"retrieval.window": "rrf.window"}'
    for m in (
        "ndcg_at_10",
        "recall_at_10",
        "hit_at_10",
        "mrr_at_10",
        "ndcg_at_10_ci_low",
        "queries_answerable",
    ):
        assert m in first.metrics, m
    # dev: q1, q2 answerable; q3 no-answer; q4's only positive is finance-only -> unanswerable for `employee`
    assert first.metrics["queries_answerable"] == 2
    assert first.metrics["permission_queries_made_unanswerable"] == 1
    assert first.metrics["dense_passages_encoded"] == 5
    assert second.metrics["dense_passages_encoded"] == 0
    assert second.metrics["candidate_cache_hits"] == 2
    assert second.metrics["ndcg_at_10"] == first.metrics["ndcg_at_10"]
    tags = first.tags
    assert len(tags["ablate.snapshot"]) == 64 and len(tags["ablate.qrels_hash"]) == 64
    assert tags["ablate.label_version"] == "tiny-v1" and "ablate.git_commit" in tags
    assert set(first.fingerprints) == {"bm25", "dense", "rrf", "snapshot", "identity", "eval", "abstain"}
    for name in ("config.yaml", "per_query.csv", "corpus_manifest.json", "unjudged.csv", "components.json"):
        assert t.download_artifact(first.run_id, name, cwd / "dl") is not None, name
    components = json.loads((cwd / "dl" / "components.json").read_text())
    assert components["bm25"]["class"] == "ablate.stages.retrievers.bm25.BM25Retriever"
    assert components["bm25"]["libraries"]["bm25s"] and components["bm25"]["code_version"]
    trec = Path(t.download_artifact(first.run_id, "run.trec", cwd / "dl")).read_text().splitlines()
    qid, q0, cid, rank, score, tag = trec[0].split()
    assert (q0, rank, tag) == ("Q0", "1", "C")
    # the finance-only chunk never leaves retrieval for `employee`
    assert not any(" FIN-1#p0 " in line for line in trec)
    manifest = json.loads((cwd / "dl" / "corpus_manifest.json").read_text())
    assert manifest["fingerprint"] == tags["ablate.snapshot"] and manifest["n_chunks"] == 5


def test_multirun_makes_children_of_one_parent_and_prints_table(tiny_corpus, workdir):
    cwd, env, uri = workdir
    p = ablate(
        [
            "-m",
            *_base(tiny_corpus, uri, "cli-multi"),
            "variant=A,D,oracle",
            "rerank.depth=5",
            "rerank.model=trained",
            "rerank.train.epochs=1",
            "rerank.train.min_steps=2",
        ],
        cwd,
        env,
    )
    assert p.returncode == 0, p.stderr
    assert "| oracle" in p.stdout and "full report" in p.stdout and "[3/3] oracle  " in p.stdout
    _, runs = _runs(uri, "cli-multi")
    parents = [r for r in runs if r.tags.get("ablate.role") == "sweep-parent"]
    children = [r for r in runs if r.parent]
    assert len(parents) == 1 and len(children) == 3
    assert {r.parent for r in children} == {parents[0].run_id}
    assert {r.params["variant"] for r in children} == {"A", "D", "oracle"}
    assert all(r.status == "FINISHED" for r in runs)
    by = {r.variant: r for r in children}
    assert by["oracle"].metrics["ndcg_at_10"] == 1.0
    # what ran, and only that: A logs no fusion, dense or rerank params; D logs its reranker (trained: with train.*)
    assert not any(k.startswith(("rrf.", "dense.", "rerank.")) for k in by["A"].params)
    assert by["A"].params["pipeline.fuser"] == "none" and by["A"].params["bm25.k1"] == "0.9"
    assert by["D"].params["rerank.depth"] == "5" and by["D"].params["rerank.train.min_steps"] == "2"
    assert by["D"].metrics["rerank_pairs_scored"] > 0


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
    t, runs = _runs(uri, "cli-bad")
    assert runs == [] and t.experiment_id("cli-bad", create=False) is None  # refused before any run started


def test_a_job_failing_during_work_does_not_stop_the_sweep_but_the_exit_code_says_so(tiny_corpus, workdir):
    cwd, env, uri = workdir
    # the train split has no positive label: D's reranker cannot be trained, which only shows once D works
    (tiny_corpus / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq5\tPOL-1#4.2-a\t0\n")
    p = ablate(
        ["-m", *_base(tiny_corpus, uri, "cli-sweep-fail"), "variant=D,A", "rerank.model=trained"], cwd, env
    )
    assert p.returncode == 1, p.stderr
    assert "no 'train' query has a judged-relevant" in p.stderr and "Traceback" not in p.stderr
    assert "1 of 2 jobs failed" in p.stderr and "ablate.failure" in p.stderr
    _, runs = _runs(uri, "cli-sweep-fail")
    status = {r.name: r.status for r in runs if r.parent}
    assert status == {"D": "FAILED", "A": "FINISHED"}
    failed = next(r for r in runs if r.name == "D")
    assert "train.tsv" in failed.failure


def test_a_config_mistake_refuses_the_whole_sweep_and_leaves_nothing(tiny_corpus, workdir):
    cwd, env, uri = workdir
    # the hub cross-encoder is not available offline: refused before any run, experiment or folder exists
    p = ablate(["-m", *_base(tiny_corpus, uri, "cli-refused"), "variant=D,A"], cwd, env)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "rerank.model=trained" in p.stderr and "Traceback" not in p.stderr
    t, runs = _runs(uri, "cli-refused")
    assert runs == [] and t.experiment_id("cli-refused", create=False) is None
