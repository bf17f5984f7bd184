"""MLflow tracking against a real sqlite store."""

import pytest

from ablate.tracking import Tracker, flatten, metric_key, resolve_tracking_uri


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

    return Path(mlflow_uri[len("sqlite:///"):]).parent, Tracker(mlflow_uri)


def test_run_contents_and_failed_status(store):
    tmp_path, t = store
    with t.run("exp", "C", tags={"ablate.variant": "C"}) as rid:
        t.log_params(rid, {"rrf.k": 60, "eval.ks": [1, 10], "rerank.model": None})
        t.log_metrics(rid, {"ndcg@10": 0.5, "recall@10": float("nan")})
        t.log_files(rid, {"per_query.csv": "qid,ndcg@10\nq1,0.5\n", "sub/x.json": "{}"})
    r = t.client.get_run(rid)
    assert r.info.status == "FINISHED"
    assert r.data.params == {"rrf.k": "60", "eval.ks": "[1, 10]", "rerank.model": "null"}
    assert r.data.metrics == {"ndcg_at_10": 0.5}  # NaN is not logged
    names = {a.path for a in t.client.list_artifacts(rid)}
    assert names == {"per_query.csv", "sub"}
    # artifacts live beside the database, not in the working directory
    assert r.info.artifact_uri.startswith((tmp_path / "mlartifacts").as_uri())

    with pytest.raises(RuntimeError):
        with t.run("exp", "D") as rid2:
            raise RuntimeError("reranker exploded")
    r2 = t.client.get_run(rid2)
    assert r2.info.status == "FAILED"
    assert r2.data.tags["ablate.failure"] == "RuntimeError: reranker exploded"


def test_parent_child(store):
    _, t = store
    parent = t.start("exp2", "sweep")
    with t.run("exp2", "A", parent_run_id=parent) as child:
        pass
    runs = t.search([t.experiment_id("exp2")], f"tags.mlflow.parentRunId = '{parent}'")
    assert [r.info.run_id for r in runs] == [child]
