"""MLflow tracking against a real sqlite store."""

import json
import uuid
from pathlib import Path

import pytest

from ablate.record import flatten, metric_key
from ablate.tracking import Tracker, resolve_tracking_uri
from conftest import serving


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


def test_batches_respect_mlflow_limits_and_keep_every_item_once():
    from ablate.tracking import MAX_ENTITIES, MAX_METRICS, MAX_PARAMS_TAGS, batches

    for n_p, n_m, n_t in [
        (0, 0, 0),
        (30, 200, 20),
        (100, 900, 0),
        (150, 1200, 120),
        (0, 2500, 0),
        (99, 0, 301),
    ]:
        p, m, t = [f"p{i}" for i in range(n_p)], [f"m{i}" for i in range(n_m)], [f"t{i}" for i in range(n_t)]
        got = list(batches(p, m, t))
        assert [x for b in got for x in b[0]] == p
        assert [x for b in got for x in b[1]] == m
        assert [x for b in got for x in b[2]] == t
        for bp, bm, bt in got:
            assert 0 < len(bp) + len(bm) + len(bt) <= MAX_ENTITIES
            assert len(bp) <= MAX_PARAMS_TAGS and len(bt) <= MAX_PARAMS_TAGS and len(bm) <= MAX_METRICS
        if n_p <= 100 and n_t <= 100 and n_p + n_m + n_t <= 1000:
            assert len(got) == (1 if n_p + n_m + n_t else 0)  # a usual run: one call


def test_log_run_records_what_separate_calls_record(store):
    """One batched log_run against the three separate calls: the same params, metrics and tags, over MLflow's
    per-call limits (150 params, 1200 metrics, 120 tags)."""
    _, t = store
    params = {f"stage.p{i}": [i, "x"] if i % 3 == 0 else i * 0.5 for i in range(150)}
    metrics = {f"m@{i}": i / 7 for i in range(1200)}
    tags = {f"ablate.t{i}": f"v{i}" for i in range(120)}
    with t.run("exp", "batched") as one:
        t.log_run(one, params=params, metrics=metrics, tags=tags)
    with t.run("exp", "separate") as sep:
        t.log_params(sep, params)
        t.log_metrics(sep, metrics)
        t.set_tags(sep, tags)
    a, b = t.get_run(one), t.get_run(sep)
    assert a is not None and b is not None
    assert (
        a.params
        == b.params
        == {  # a whole float is logged as the integer (56.0 -> "56"), others as str
            k: (json.dumps(v) if isinstance(v, list) else str(int(v)) if v == int(v) else str(v))
            for k, v in params.items()
        }
    )
    assert a.metrics == b.metrics == {k.replace("@", "_at_"): v for k, v in metrics.items()}
    assert {k: v for k, v in a.tags.items() if k.startswith("ablate.t")} == tags
    with t.run("exp", "nan") as bad:
        with pytest.raises(ValueError, match="m@1"):
            t.log_run(bad, params={"x": 1}, metrics={"m@1": float("nan")})
    r = t.get_run(bad)
    assert r is not None and r.params == {}  # refused before anything was logged


def test_local_artifacts_are_read_as_mlflow_downloads_them(store):
    from mlflow.tracking import MlflowClient

    tmp_path, t = store
    with t.run("exp", "files") as rid:
        t.log_files(rid, {"per_query.csv": "qid,x\nq1,1\n", "report/a.md": "# a", "report/b.png": b"\x89PNG"})
    assert t.local_artifact_root(rid) is not None
    ref = Path(MlflowClient(t.uri).download_artifacts(rid, "report", str(tmp_path / "ref")))
    got = t.download_artifact(rid, "report", tmp_path / "got")
    assert got is not None and sorted(p.name for p in got.iterdir()) == sorted(p.name for p in ref.iterdir())
    for name in ("a.md", "b.png"):
        assert (got / name).read_bytes() == (ref / name).read_bytes()
    one = t.download_artifact(rid, "per_query.csv", tmp_path / "one")
    assert one is not None and one.read_text() == "qid,x\nq1,1\n"
    assert t.download_artifact(rid, "report/missing.md", tmp_path / "none") is None


def test_held_reads_query_once_and_forget_what_a_write_changes(store):
    """Inside held_reads the children are read from the store once; a write to one of them (or a new run) makes
    the next read go to the store again, and a write elsewhere does not. Outside, every read queries."""
    _, t = store
    parent = t.start("held", "parent")
    kids = [t.start("held", f"c{i}", parent_run_id=parent) for i in range(3)]
    other = t.start("held", "other")
    calls = []
    real = t.client.search_runs

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    t.client.search_runs = counting
    try:
        with t.held_reads():
            assert {r.run_id for r in t.children(parent)} == set(kids)
            assert {r.run_id for r in t.children(parent)} == set(kids)
            assert len(calls) == 1
            t.log_run(other, params={"x": 1})  # not a child: what was read still holds
            t.children(parent)
            assert len(calls) == 1
            t.end(kids[0], "FAILED", "lost")  # a child changed: read again, and see it
            assert {r.run_id: r.status for r in t.children(parent)}[kids[0]] == "FAILED"
            assert len(calls) == 2
            new = t.start("held", "c3", parent_run_id=parent)  # a new run may match any search
            assert new in {r.run_id for r in t.children(parent)}
            assert len(calls) == 3
        t.children(parent)
        t.children(parent)
        assert len(calls) == 5
    finally:
        t.client.search_runs = real


def test_copied_artifacts_are_links_and_writing_a_run_file_never_changes_the_other_run(store):
    import os
    import stat

    _, t = store
    with t.run("exp-links", "src") as src:
        t.log_files(src, {"run.trec": "q1 Q0 c1 1 1.0 x\n", "sub/a.json": "{}", "config.yaml": "a: 1\n"})
    with t.run("exp-links", "dst") as dst:
        t.copy_artifacts(src, dst)
        t.log_files(dst, {"config.yaml": "a: 2\n"})  # over a hard-linked file
    a, b = t.local_artifact_root(src), t.local_artifact_root(dst)
    assert a is not None and b is not None
    assert (a / "run.trec").stat().st_ino == (b / "run.trec").stat().st_ino
    assert (b / "sub" / "a.json").read_text() == "{}"
    assert (a / "config.yaml").read_text() == "a: 1\n" and (b / "config.yaml").read_text() == "a: 2\n"
    umask = os.umask(0)
    os.umask(umask)
    assert (
        stat.S_IMODE((b / "config.yaml").stat().st_mode) == 0o666 & ~umask
    )  # an ordinary file, not mkstemp's 0600
    assert not [p for p in b.rglob(".*")]  # no temp file left behind
    with t.run("exp-links", "skip") as dst2:
        t.copy_artifacts(src, dst2, skip=["config.yaml"])
    c = t.local_artifact_root(dst2)
    assert c is not None and not (c / "config.yaml").exists() and (c / "run.trec").exists()


# -- failures that are not "not found" (real HTTP servers on 127.0.0.1) ---------------------------------------------


@pytest.fixture
def logins(monkeypatch):
    """A real HTTP server on 127.0.0.1 answering MLflow's read of a run as a tracking server behind a login does:
    run ``0...0`` does not exist (MLflow's RESOURCE_DOES_NOT_EXIST), ``b...b`` is a bad request (HTTP 400), any other
    needs credentials (HTTP 401)."""
    from werkzeug.wrappers import Request, Response

    @Request.application
    def app(request: Request) -> Response:
        run_id = request.args.get("run_id", "")
        if request.path.endswith("/runs/get") and run_id == "0" * 32:
            body = {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": f"Run '{run_id}' not found"}
            return Response(json.dumps(body), status=404, mimetype="application/json")
        if request.path.endswith("/runs/get") and run_id == "b" * 32:
            body = {"error_code": "INVALID_PARAMETER_VALUE", "message": "the backend store is read-only"}
            return Response(json.dumps(body), status=400, mimetype="application/json")
        return Response("Unauthorized", status=401)

    for name, value in (
        ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0"),
        ("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "0"),
        ("MLFLOW_HTTP_REQUEST_TIMEOUT", "5"),
    ):
        monkeypatch.setenv(name, value)
    with serving(app) as url:
        yield url


def test_only_a_missing_run_is_not_found_a_refused_login_is_loud(logins):
    from ablate.tracking import StoreError

    t = Tracker(logins)
    assert t.get_run("0" * 32) is None  # the store says there is no such run
    assert t.local_artifact_root("0" * 32) is None
    with pytest.raises(StoreError, match=r"refused the credentials reading run a{32} \(HTTP 401\)") as e:
        t.get_run("a" * 32)
    assert logins in str(e.value) and "Fix: set MLFLOW_TRACKING_USERNAME" in str(e.value)
    with pytest.raises(StoreError, match="HTTP 401"):
        t.local_artifact_root("a" * 32)
    with pytest.raises(StoreError, match="read-only.*this is not a missing run or artifact. Fix: check"):
        t.get_run("b" * 32)


def test_an_artifact_store_that_refuses_reads_is_not_a_missing_artifact(store, served_artifacts, monkeypatch):
    from ablate.tracking import StoreError
    from conftest import served_experiment

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    tmp_path, t = store
    root, files, locked = served_artifacts
    with t.run(served_experiment(t, root), "r") as rid:
        t.log_files(rid, {"report/ablation.md": "# first"})
    assert t.local_artifact_root(rid) is None and any(k.endswith("report/ablation.md") for k in files)
    assert t.has_artifact(rid, "report/ablation.md") and not t.has_artifact(rid, "report-2/ablation.md")
    got = t.download_artifact(rid, "report/ablation.md", tmp_path / "served")
    assert got is not None and got.read_text() == "# first"
    assert t.download_artifact(rid, "report-2/ablation.md", tmp_path / "served") is None  # truly not there
    locked.add(rid)
    with pytest.raises(StoreError, match=r"refused the credentials .*artifact.* \(HTTP 403\)"):
        t.download_artifact(rid, "report/ablation.md", tmp_path / "refused")
    with pytest.raises(StoreError, match=r"HTTP 403"):
        t.has_artifact(rid, "report/ablation.md")


# -- values too long for MLflow ---------------------------------------------------------------------------------------


def test_a_value_too_long_for_mlflow_says_so_once_and_is_kept_whole(store, capsys):
    from ablate.record import cut_artifact, full_value_artifact
    from ablate.tracking.limits import PARAM_LIMIT, TAG_LIMIT

    _, t = store
    tag, param = f"ablate.note_{uuid.uuid4().hex[:6]}", f"stage.blob_{uuid.uuid4().hex[:6]}"
    long_tag = "variant=A,B " + "x" * 6000 + " rrf.k=10,60"
    long_param = "y" * 7000
    ids = []
    for i in range(2):
        with t.run("exp-long", f"r{i}", tags={tag: long_tag}) as rid:
            t.log_run(rid, params={param: long_param, "short": 1}, tags={"ablate.ok": "fine"})
        ids.append(rid)
    err = capsys.readouterr().err.splitlines()
    said = [line for line in err if line.startswith("warning:")]
    assert len(said) == 2, err  # once per key, not once per run
    assert f"the tag {tag} is 6,024 characters, more than MLflow keeps (4,900)" in said[0]
    assert (
        f"the param {param} is 7,000 characters" in said[1]
        and full_value_artifact("params", param) in said[1]
    )
    for rid in ids:
        r = t.get_run(rid)
        assert r is not None and r.params["short"] == "1" and r.tags["ablate.ok"] == "fine"
        assert len(r.tags[tag]) <= TAG_LIMIT and len(r.params[param]) <= PARAM_LIMIT
        assert cut_artifact(r.tags[tag]) == full_value_artifact("tags", tag)
        assert r.tags[tag].startswith("variant=A,B xxx")
        whole = t.whole(r)
        assert whole.tags[tag] == long_tag and whole.params[param] == long_param
        assert whole.params["short"] == "1" and whole.run_id == rid
    a, b = t.get_run(ids[0]), t.get_run(ids[1])
    assert a is not None and b is not None and a.params[param] == b.params[param]
    # two values that differ only after the cut stay different
    with t.run("exp-long", "other") as other:
        t.log_params(other, {param: long_param[:-1] + "z"})
    c = t.get_run(other)
    assert c is not None and c.params[param] != a.params[param]
