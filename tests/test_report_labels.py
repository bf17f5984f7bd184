"""python -m ablate.report --parent ID --labels NAME: every run of a demo sweep re-scored from its logged run.trec on a
committed label version, logged as new runs under a new sweep parent, the old runs untouched, both versions side by
side. Each re-scored metric is checked against pytrec_eval on the same run.trec and the new qrels (linear gain)."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import pytrec_eval

from ablate.tracking import Tracker
from labels_loop import SWEEP, cli, demo_sweep, refused, unjudged_pairs, write_journal

EXP = "relabel"


def _artifacts(t: Tracker, run_id: str) -> dict[str, bytes]:
    with t.artifact_files(run_id) as files:
        return {k: v.read_bytes() for k, v in files.items()}


@pytest.fixture(scope="module")
def relabelled(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("relabel")
    uri, parent, runs = demo_sweep(cwd, EXP)
    t = Tracker(uri)
    pairs = unjudged_pairs(uri, runs["C"], cwd / "dl") + unjudged_pairs(uri, runs["A"], cwd / "dl")
    pairs = list(dict.fromkeys(pairs))
    write_journal(
        cwd / "labels" / "demo" / "journal.jsonl",
        [(q, u, i % 3, "human:alice") for i, (q, u) in enumerate(pairs[:60])],
    )
    p = cli("ablate.label", ["commit", "--version", "v3"], cwd)
    assert p.returncode == 0, p.stderr
    before = {rid: t.get_run(rid) for rid in runs.values()}
    files_before = {rid: _artifacts(t, rid) for rid in runs.values()}
    out = cwd / "out"
    args = [
        "--parent",
        parent,
        "--labels",
        "v3",
        "--tracking-uri",
        uri,
        "--out",
        str(out),
        "--resamples",
        "200",
    ]
    p = cli("ablate.report", args, cwd)
    assert p.returncode == 0, p.stderr[-3000:]
    new_parent = [
        r
        for r in t.find_runs([t.experiment_id(EXP, create=False)])
        if r.tags.get("ablate.rescored_from") == parent
    ]
    assert len(new_parent) == 1
    return {
        "cwd": cwd,
        "uri": uri,
        "parent": parent,
        "runs": runs,
        "before": before,
        "files_before": files_before,
        "new_parent": new_parent[0],
        "new": {r.name: r for r in t.children(new_parent[0].run_id)},
        "out": out,
        "stdout": p.stdout,
        "stderr": p.stderr,
        "args": args,
        "qrels": cwd / "labels" / "demo" / "versions" / "v3" / "dev.tsv",
    }


def _ranking(path: Path) -> dict[str, dict[str, float]]:
    """run.trec as ablate reads it (score descending, ties by id ascending), given distinct decreasing scores."""
    rows = [line.split() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    by_q: dict[str, list[tuple[float, str]]] = {}
    for q, _, doc, _, score, _ in rows:
        by_q.setdefault(q, []).append((float(score), doc))
    out = {}
    for q, hits in by_q.items():
        ordered = sorted(hits, key=lambda h: (-h[0], h[1]))
        out[q] = {doc: float(len(ordered) - i) for i, (_, doc) in enumerate(ordered)}
    return out


def _cut(run: dict[str, dict[str, float]], k: int) -> dict[str, dict[str, float]]:
    return {q: dict(sorted(d.items(), key=lambda x: -x[1])[:k]) for q, d in run.items()}


def test_each_rescored_metric_equals_pytrec_eval_on_the_new_qrels(relabelled, tmp_path):
    t = Tracker(relabelled["uri"])
    qrels = pd.read_csv(relabelled["qrels"], sep="\t", dtype={"query-id": str, "corpus-id": str})
    judgements: dict[str, dict[str, int]] = {}
    for q, u, g in zip(qrels["query-id"], qrels["corpus-id"], qrels["score"], strict=True):
        judgements.setdefault(q, {})[u] = int(g)
    changed = 0
    for name, new in relabelled["new"].items():
        run = _ranking(Path(t.download_artifact(new.run_id, "run.trec", tmp_path / name)))
        pq = pd.read_csv(
            t.download_artifact(new.run_id, "per_query.csv", tmp_path / name), dtype={"qid": str}
        )
        pq = pq.set_index("qid")
        qj = {q: judgements[q] for q in pq.index if q in judgements}
        ref = pytrec_eval.RelevanceEvaluator(qj, {"ndcg_cut.10", "recall.10"}).evaluate(
            {q: d for q, d in run.items() if q in qj}
        )
        rr = pytrec_eval.RelevanceEvaluator(qj, {"recip_rank"}).evaluate(
            _cut({q: d for q, d in run.items() if q in qj}, 10)
        )
        answerable = pq.index[pq["category"] == "answerable"]
        assert len(answerable) >= 17
        for q in answerable:
            assert pq.loc[q, "ndcg@10"] == pytest.approx(ref.get(q, {}).get("ndcg_cut_10", 0.0), abs=1e-9), (
                name,
                q,
            )
            assert pq.loc[q, "recall@10"] == pytest.approx(ref.get(q, {}).get("recall_10", 0.0), abs=1e-9)
            assert pq.loc[q, "rr@10"] == pytest.approx(rr.get(q, {}).get("recip_rank", 0.0), abs=1e-9)
        # the logged means are the means of those over the answerable questions
        for metric, key, src in (
            ("ndcg_at_10", "ndcg_cut_10", ref),
            ("recall_at_10", "recall_10", ref),
            ("mrr_at_10", "recip_rank", rr),
        ):
            expected = sum(src.get(q, {}).get(key, 0.0) for q in answerable) / len(answerable)
            assert new.metrics[metric] == pytest.approx(expected, abs=1e-9), (name, metric)
        old = relabelled["before"][relabelled["runs"][name]]
        changed += not math.isclose(old.metrics["ndcg_at_10"], new.metrics["ndcg_at_10"], abs_tol=1e-12)
    assert changed >= 2  # the new labels changed the scores


def test_the_old_runs_are_untouched(relabelled):
    t = Tracker(relabelled["uri"])
    for rid, before in relabelled["before"].items():
        now = t.get_run(rid)
        assert now is not None
        assert dict(now.metrics) == dict(before.metrics)
        assert dict(now.params) == dict(before.params) and dict(now.tags) == dict(before.tags)
        assert _artifacts(t, rid) == relabelled["files_before"][rid]


def test_the_new_runs_carry_the_label_version_and_where_they_came_from(relabelled):
    t = Tracker(relabelled["uri"])
    parent = relabelled["new_parent"]
    old_parent = t.get_run(relabelled["parent"])
    assert parent.name == f"{old_parent.name} @ labels v3" and parent.status == "FINISHED"
    assert parent.tags["ablate.role"] == "sweep-parent" and parent.tags["ablate.label_version"] == "v3"
    assert parent.experiment_id == old_parent.experiment_id
    assert sorted(relabelled["new"]) == ["A", "B", "C"]
    for name, new in relabelled["new"].items():
        old = relabelled["before"][relabelled["runs"][name]]
        assert new.status == "FINISHED" and new.experiment_id == old.experiment_id
        assert new.tags["ablate.rescored_from"] == old.run_id
        assert (
            new.tags["ablate.label_version"] == "v3" and old.tags["ablate.label_version"] == "demo-labels-v2"
        )
        assert new.tags["ablate.qrels_hash"] != old.tags["ablate.qrels_hash"]
        for same in (
            "ablate.variant",
            "ablate.sweep_index",
            "ablate.split",
            "ablate.fp.eval",
            "ablate.index_snapshot",
        ):
            assert new.tags[same] == old.tags[same], same
        assert "ablate.cell" not in new.tags and "ablate.original" not in new.tags  # never reused as a run
        assert new.params["labels.parent"] == "demo-labels-v2" and new.params["labels.llm_made"] == "0"
        assert {k: v for k, v in new.params.items() if not k.startswith("labels.")} == dict(old.params)
        assert not [k for k in new.metrics if k.startswith(("time_", "funnel/"))]
        new_files = _artifacts(t, new.run_id)
        assert new_files["run.trec"] == relabelled["files_before"][old.run_id]["run.trec"]
        assert {"per_query.csv", "unjudged.csv", "config.yaml", "corpus_manifest.json"} <= set(new_files)
    # no retrieval re-run and no note that the corpus changed (only the labels did)
    assert "changed since the run" not in relabelled["stderr"]


def test_the_new_runs_give_their_metrics_back_from_their_record(relabelled):
    new = relabelled["new"]["C"]
    p = cli(
        "ablate.evaluate",
        ["--from-run", new.run_id, "--tracking-uri", relabelled["uri"], "--json"],
        relabelled["cwd"],
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads(p.stdout)["check"]["different"] == []


def test_the_report_shows_both_versions_side_by_side(relabelled, tmp_path):
    t = Tracker(relabelled["uri"])
    out: Path = relabelled["out"]
    md = (out / "labels_compare.md").read_text(encoding="utf-8")
    assert "labels: demo-labels-v2 -> v3" in md and "Kendall's tau-b" in md
    assert "order by ndcg@10: " in md
    table = pd.read_csv(out / "labels_compare.csv")
    assert list(table["run"]) == ["A", "B", "C"]
    for _, row in table.iterrows():
        old = relabelled["before"][relabelled["runs"][row["run"]]]
        new = relabelled["new"][row["run"]]
        assert row["ndcg@10 old"] == pytest.approx(old.metrics["ndcg_at_10"])
        assert row["ndcg@10 new"] == pytest.approx(new.metrics["ndcg_at_10"])
        assert row["judged@10 old"] == pytest.approx(old.metrics["judged_at_10"])
        assert row["judged@10 new"] == pytest.approx(new.metrics["judged_at_10"])
    c = table[table["run"] == "C"].iloc[0]
    assert c["judged@10 new"] > c["judged@10 old"]  # the journal judged C's unjudged results
    # logged to the new parent, beside the ablation report of the new runs
    pid = relabelled["new_parent"].run_id
    assert t.download_artifact(pid, "report/labels_compare.md", tmp_path) is not None
    assert t.download_artifact(pid, "report/ablation.md", tmp_path) is not None
    assert "order by ndcg@10" in relabelled["stdout"]
    # people's labels only (no LLM assessor): no prediction-powered figure, and no line about one
    assert "PPI" not in relabelled["stdout"] + relabelled["stderr"] and "## PPI" not in md
    assert "## PPI" not in (out / "ablation.md").read_text(encoding="utf-8")
    # the new sweep parent reports like any sweep
    p = cli(
        "ablate.report",
        ["--parent", pid, "--tracking-uri", relabelled["uri"], "--no-log", "--out", str(tmp_path / "r")],
        relabelled["cwd"],
    )
    assert p.returncode == 0, p.stderr
    assert "| C " in p.stdout


def test_running_it_again_reuses_the_rescored_runs(relabelled):
    t = Tracker(relabelled["uri"])
    exp = t.experiment_id(EXP, create=False)
    n = len(t.find_runs([exp]))
    p = cli(
        "ablate.report",
        [*relabelled["args"][:-4], "--no-log", "--out", str(relabelled["cwd"] / "again")],
        relabelled["cwd"],
    )
    assert p.returncode == 0, p.stderr
    assert "0 re-scored, 3 already re-scored (reused)" in p.stdout
    assert len(t.find_runs([exp])) == n


def test_an_unknown_label_version_is_refused_before_anything_is_logged(relabelled):
    t = Tracker(relabelled["uri"])
    exp = t.experiment_id(EXP, create=False)
    n = len(t.find_runs([exp]))
    args = ["--parent", relabelled["parent"], "--labels", "nope", "--tracking-uri", relabelled["uri"]]
    p = refused("ablate.report", args, relabelled["cwd"])
    assert p.returncode == 2 and p.stderr.count("error:") == 1 and "Traceback" not in p.stderr
    assert "--labels='nope' is not valid" in p.stderr and "versions of demo: v3" in p.stderr
    assert len(t.find_runs([exp])) == n


def test_a_rescore_of_a_test_run_is_not_a_new_test_run(relabelled):
    """The held-out guard judges runs that ran on test; a re-score on new labels keeps its run's verdict and
    configuration fingerprint, so it is neither tagged a test reuse nor warned about."""
    cwd, uri = relabelled["cwd"], relabelled["uri"]
    exp = "relabel-test"
    p = cli(
        "ablate",
        ["-m", "variant=A", "corpus.split=test", *SWEEP, f"tracking.uri={uri}", f"tracking.experiment={exp}"],
        cwd,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    t = Tracker(uri)
    (parent,) = [r for r in t.find_runs([t.experiment_id(exp, create=False)]) if r.tags.get("ablate.role")]
    (old,) = t.children(parent.run_id)
    assert old.tags["ablate.heldout"] == "first" and old.tags["ablate.split"] == "test"
    p = cli(
        "ablate.report",
        [
            "--parent",
            parent.run_id,
            "--labels",
            "v3",
            "--tracking-uri",
            uri,
            "--no-log",
            "--out",
            str(cwd / "t"),
        ],
        cwd,
    )
    assert p.returncode == 0, p.stderr
    assert "held-out test split was already run" not in p.stderr
    (new,) = [
        r
        for r in t.find_runs([t.experiment_id(exp, create=False)])
        if r.tags.get("ablate.rescored_from") == old.run_id
    ]
    assert new.tags["ablate.heldout"] == "first" and "ablate.test_reuse" not in new.tags
    assert new.tags["ablate.config_fp"] == old.tags["ablate.config_fp"]


# -- edited files are never scored, nor an earlier result reused for them (issue 37) -------------------------------
def _one_error(p) -> str:
    errors = [line for line in p.stderr.splitlines() if line.startswith("error:")]
    assert p.returncode == 2 and len(errors) == 1 and "Traceback" not in p.stderr, p.stderr[-3000:]
    return errors[0]


def _count(t: Tracker, exp: str) -> int:
    return len(t.find_runs([t.experiment_id(exp, create=False)]))


def test_the_rescored_runs_are_sealed_and_bound_to_the_files_they_read(relabelled):
    from ablate import record_digest

    t = Tracker(relabelled["uri"])
    for new in relabelled["new"].values():
        assert record_digest.check(t, new).problem is None
        key = new.tags["ablate.rescored_inputs"]
        assert len(key) == 64 and key not in {
            n.tags["ablate.rescored_inputs"] for n in relabelled["new"].values() if n is not new
        }


def test_an_edited_run_trec_is_refused_and_the_earlier_rescore_not_reused(relabelled):
    """The sweep was re-scored on v3 already (the fixture): after run.trec of run A is edited, a second call must
    neither reuse that re-score nor score the edited file: one line naming the file and both digests, exit 2, nothing
    logged. Restored byte for byte, the re-scores are reused again."""
    t, uri = Tracker(relabelled["uri"]), relabelled["uri"]
    a = relabelled["runs"]["A"]
    trec = t.local_artifact_root(a) / "run.trec"
    was = trec.read_bytes()
    expected = hashlib.sha256(was).hexdigest()
    n = _count(t, EXP)
    args = [*relabelled["args"][:-4], "--no-log", "--out", str(relabelled["cwd"] / "edited")]
    try:
        lines = was.decode().splitlines(keepends=True)
        trec.write_bytes("".join([lines[1], lines[0], *lines[2:]]).encode())  # two results swapped
        edited = hashlib.sha256(trec.read_bytes()).hexdigest()
        line = _one_error(refused("ablate.report", args, relabelled["cwd"]))
        assert f"run A ({a}): its artifact run.trec was changed after the run finished" in line, line
        assert f"sha256 {edited}, expected {expected}" in line and "Fix: restore the file" in line, line
        assert "re-run the cell" in line
        assert _count(t, EXP) == n
        # evaluate --from-run reads it the same way
        line = _one_error(
            refused("ablate.evaluate", ["--from-run", a, "--tracking-uri", uri], relabelled["cwd"])
        )
        assert "its artifact run.trec was changed after the run finished" in line, line
    finally:
        trec.write_bytes(was)
    p = cli("ablate.report", args, relabelled["cwd"])
    assert p.returncode == 0 and "0 re-scored, 3 already re-scored (reused)" in p.stdout, p.stderr[-2000:]


def test_a_copy_of_another_runs_files_is_not_that_run(relabelled, tmp_path):
    """Run A's run.trec copied over run B's is B's file changed; A's whole record (record_digest.json and its tag)
    copied onto B is refused as the record of another run."""
    from ablate import record as R
    from ablate.record_digest import ArtifactMismatch, RunFiles

    t = Tracker(relabelled["uri"])
    a, b = relabelled["runs"]["A"], relabelled["runs"]["B"]
    ra, rb = t.local_artifact_root(a), t.local_artifact_root(b)
    run_b = t.get_run(b)
    saved = {name: (rb / name).read_bytes() for name in ("run.trec", R.A_RECORD_DIGEST)}
    try:
        (rb / "run.trec").write_bytes((ra / "run.trec").read_bytes())
        with pytest.raises(ArtifactMismatch, match=f"run B \\({b}\\): its artifact run.trec was changed"):
            RunFiles(t, run_b, tmp_path / "1").get("run.trec")
        (rb / R.A_RECORD_DIGEST).write_bytes((ra / R.A_RECORD_DIGEST).read_bytes())
        forged = replace(run_b, tags={**run_b.tags, R.T_RECORD_DIGEST: t.get_run(a).tags[R.T_RECORD_DIGEST]})
        with pytest.raises(ArtifactMismatch, match=f"is the record of run {a}, not of this run"):
            RunFiles(t, forged, tmp_path / "2").get("run.trec")
    finally:
        for name, data in saved.items():
            (rb / name).write_bytes(data)
    assert RunFiles(t, run_b, tmp_path / "3").get("run.trec") is not None


def test_an_edited_label_version_file_is_refused_everywhere_it_is_read(relabelled):
    """v3/dev.tsv edited after commit: report --labels v3 and a run with corpus.labels=v3 each stop with one line
    naming the file, the sha256 version.json recorded and the one found; nothing is scored or logged."""
    t, uri, cwd = Tracker(relabelled["uri"]), relabelled["uri"], relabelled["cwd"]
    tsv = relabelled["qrels"]
    was = tsv.read_bytes()
    expected = json.loads((tsv.parent / "version.json").read_text())["files"]["dev.tsv"]
    n = _count(t, EXP)
    try:
        tsv.write_bytes(was.replace(b"\t0\n", b"\t2\n", 1))
        found = hashlib.sha256(tsv.read_bytes()).hexdigest()
        line = _one_error(
            refused("ablate.report", [*relabelled["args"][:-4], "--no-log", "--out", str(cwd / "e")], cwd)
        )
        assert (
            f"{tsv}: was changed after the label version was committed (sha256 {found}, expected {expected}"
            in line
        )
        assert "Fix: restore it as it was committed" in line, line
        assert _count(t, EXP) == n
        p = refused(
            "ablate",
            [
                "variant=A",
                "corpus.labels=v3",
                *SWEEP,
                f"tracking.uri={uri}",
                "tracking.experiment=edited-labels",
            ],
            cwd,
        )
        line = _one_error(p)
        assert f"{tsv}: was changed after the label version was committed" in line, line
        assert t.experiment_id("edited-labels", create=False) is None
    finally:
        tsv.write_bytes(was)


def test_a_report_and_a_pool_refuse_an_edited_artifact_of_a_run(relabelled):
    """per_query.csv edited after the run: the sweep's report stops with one line instead of reporting it; run.trec
    edited: label pool refuses to pool it. Nothing is written."""
    t, uri, cwd = Tracker(relabelled["uri"]), relabelled["uri"], relabelled["cwd"]
    b = relabelled["runs"]["B"]
    root = t.local_artifact_root(b)
    saved = {n: (root / n).read_bytes() for n in ("per_query.csv", "run.trec")}
    try:
        (root / "per_query.csv").write_bytes(saved["per_query.csv"].replace(b",0.", b",1.", 1))
        out = cwd / "edited-report"
        args = ["--parent", relabelled["parent"], "--tracking-uri", uri, "--no-log", "--out", str(out)]
        line = _one_error(refused("ablate.report", args, cwd))
        assert f"run B ({b}): its artifact per_query.csv was changed after the run finished" in line, line
        assert not out.exists()
        (root / "per_query.csv").write_bytes(saved["per_query.csv"])
        (root / "run.trec").write_bytes(saved["run.trec"] + b"q1 Q0 X 999 0.0 edited\n")
        pools = cwd / "labels" / "demo" / "pools"
        before = sorted(pools.rglob("*")) if pools.exists() else []
        p = refused("ablate.label", ["pool", "--parent", relabelled["parent"], "--tracking-uri", uri], cwd)
        line = _one_error(p)
        assert f"run B ({b}): its artifact run.trec was changed after the run finished" in line, line
        assert (sorted(pools.rglob("*")) if pools.exists() else []) == before
    finally:
        for n, data in saved.items():
            (root / n).write_bytes(data)


def test_the_rescored_runs_clusters_follow_the_new_labels(relabelled, tmp_path):
    """A re-score writes the per-question table a run writes, clusters included: two questions the new labels give a
    gold clause of one document (grade >= 1) sit in one cluster."""
    t = Tracker(relabelled["uri"])
    qrels = pd.read_csv(relabelled["qrels"], sep="\t", dtype={"query-id": str, "corpus-id": str})
    gold = qrels[qrels["score"] >= 1]
    for name, new in relabelled["new"].items():
        pq = pd.read_csv(
            t.download_artifact(new.run_id, "per_query.csv", tmp_path / name),
            dtype={"qid": str, "cluster": str},
        ).set_index("qid")
        by_doc = gold.assign(doc=gold["corpus-id"].str.split("#").str[0]).groupby("doc")["query-id"]
        for doc, qids in by_doc:
            qids = [q for q in qids if q in pq.index]
            assert len(set(pq.loc[qids, "cluster"])) <= 1, (name, doc, pq.loc[qids, "cluster"].to_dict())
        assert pq["cluster"].nunique() < len(pq)
