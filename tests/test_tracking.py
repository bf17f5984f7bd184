"""MLflow tracking against a real sqlite store."""

import pytest

from ablate.record import flatten, metric_key
from ablate.tracking import Tracker, resolve_tracking_uri


def test_metric_keys_are_mlflow_safe():
    assert metric_key("ndcg@10") == "ndcg_at_10"
    assert metric_key("recall@100_ci_low") == "recall_at_100_ci_low"
    assert metric_key("weird key!#") == "weird key__"


def test_resolve_uri(monkeypatch, tmp_path):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert resolve_tracking_uri(None, tmp_path) == f"sqlite:///{tmp_path.resolve()}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////x/y.db")
    assert resolve_tracking_uri(None, tmp_path) == "sqlite:////x/y.db"
    assert resolve_tracking_uri("file:///z", tmp_path) == "file:///z"


def test_flatten():
    assert flatten({"a": {"b": 1, "c": {"d": [1, 2]}}, "e": None}) == {"a.b": 1, "a.c.d": [1, 2], "e": None}


@pytest.fixture(scope="module")
def store(mlflow_uri):
    from pathlib import Path

    return Path(mlflow_uri[len("sqlite:///") :]).parent, Tracker(mlflow_uri)


def test_run_contents_and_failed_status(store):
    tmp_path, t = store
    with t.run("exp", "C", tags={"ablate.variant": "C"}) as rid:
        t.log_params(rid, {"rrf.k": 60, "eval.ks": [1, 10], "rerank.model": None})
        t.log_metrics(rid, {"ndcg@10": 0.5})
        with pytest.raises(ValueError, match="recall@10"):  # a NaN never reaches MLflow
            t.log_metrics(rid, {"recall@10": float("nan")})
        t.log_files(rid, {"per_query.csv": "qid,ndcg@10\nq1,0.5\n", "sub/x.json": "{}"})
    r = t.get_run(rid)
    assert r.status == "FINISHED" and r.tags["ablate.variant"] == "C" and r.variant == "C"
    assert r.params == {"rrf.k": "60", "eval.ks": "[1, 10]", "rerank.model": "null"}
    assert r.metrics == {"ndcg_at_10": 0.5}
    assert r.metric("ndcg@10") == 0.5
    dl = t.download_artifact(rid, "per_query.csv", tmp_path / "dl")
    assert dl is not None and dl.read_text().startswith("qid,ndcg@10")
    assert t.download_artifact(rid, "nope.csv", tmp_path / "dl") is None
    # artifacts live beside the database, not in the working directory
    assert t.artifact_uri(rid).startswith((tmp_path / "mlartifacts").as_uri())

    with pytest.raises(RuntimeError):
        with t.run("exp", "D") as rid2:
            raise RuntimeError("reranker exploded")
    r2 = t.get_run(rid2)
    assert r2.status == "FAILED" and r2.failure == "RuntimeError: reranker exploded"
    assert t.get_run("0" * 32) is None


def test_parent_child(store):
    _, t = store
    parent = t.start("exp2", "sweep")
    with t.run("exp2", "A", parent_run_id=parent) as child:
        pass
    assert [r.run_id for r in t.children(parent)] == [child]
    assert t.get_run(child).parent == parent
    t.end(parent, "FINISHED")
    assert t.get_run(parent).status == "FINISHED"
