"""Every question side by side: each run's per-question table logged with MLflow's log_table under one name (a reused
run too), its funnel per question, and the report's Per question section (fixed and broken questions against the
baseline, where each broken one lost its evidence). Real sweeps of the demo through the real entry points, a real
MLflow sqlite store."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ablate import record as R
from ablate.record_digest import check
from ablate.study import per_question as PQ
from ablate.study.options import ReportOptions
from ablate.study.report import build_report
from ablate.tracking import Tracker
from demo_cli import run_module
from test_report import record

REPO = Path(__file__).resolve().parents[1]
#: D's reranker fine-tuned briefly and over 20 candidates (tests/test_access.py trains the same one): a cold cache
#: stays cheap, and D still reorders what C retrieved
FAST_D = ["rerank.train.min_steps=10", "rerank.train.epochs=1", "rerank.depth=20"]


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_module(args, cwd)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """Three sweeps of the demo on one store: A and D (rrf + rerank) answering with the small shipped llama.cpp
    model; A and C (rrf) without a generator, then the same again (every cell reused)."""
    d = tmp_path_factory.mktemp("perq")
    (d / "corpora").symlink_to(REPO / "corpora", target_is_directory=True)
    uri = f"sqlite:///{d}/mlflow.db"
    base = ["ablate", f"tracking.uri={uri}", "progress=false", "stats.bootstrap=100"]
    sweeps = {
        "gen": [
            "-m",
            "variant=A,D",
            "generator=llama_cpp",
            "generator.model=smollm2-135m-instruct",  # the small shipped model: a cold cache stays cheap
            "generator.max_tokens=32",  # short answers: correctness is scored on them all the same
            "generator.context_k=3",
            *FAST_D,
            "tracking.experiment=perq-gen",
        ],
        "ret": ["-m", "variant=A,C", "tracking.experiment=perq-ret"],
        "again": ["-m", "variant=A,C", "tracking.experiment=perq-ret"],
    }
    t = Tracker(uri)
    parents = {}
    for name, args in sweeps.items():
        p = _run([*base, *args], d)
        assert p.returncode == 0, p.stderr
        found = t.find_runs(
            None, f"tags.`{R.T_ROLE}` = '{R.ROLE_SWEEP_PARENT}'", max_results=1, newest_first=True
        )
        parents[name] = found[0].run_id
    return d, uri, t, parents


def _artifact(t: Tracker, run_id: str, name: str, dst: Path) -> Path:
    got = t.download_artifact(run_id, name, dst / run_id)
    assert got is not None, f"run {run_id} has no {name}"
    return got


def _per_query(t: Tracker, run_id: str, dst: Path) -> pd.DataFrame:
    path = _artifact(t, run_id, R.A_PER_QUERY, dst)
    return pd.read_csv(path, dtype={"qid": str, "tags": str, "persona": str}).set_index("qid")


@pytest.mark.slow  # three demo sweeps on one store, one answering with SmolLM2 through D's fine-tuned reranker (~170 s): make test-slow
def test_every_child_logs_its_per_question_table_under_one_name_and_it_equals_per_query_csv(
    demo, tmp_path, monkeypatch
):
    _, uri, t, parents = demo
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)  # MLflow's load_table searches the fluent API's store
    children = [c for p in parents.values() for c in t.children(p)]
    assert len(children) == 6
    reused = [c for c in children if R.T_REUSED_FROM in c.tags]
    assert len(reused) == 2  # the third sweep ran nothing
    for c in children:
        listed = json.loads(c.tags["mlflow.loggedArtifacts"])  # what MLflow's artifact compare view reads
        assert {"path": R.A_PER_QUERY_TABLE, "type": "table"} in listed, c.name
        table = t.client.load_table(
            c.experiment_id, R.A_PER_QUERY_TABLE, run_ids=[c.run_id]
        )  # MLflow's reader
        raw = json.loads(_artifact(t, c.run_id, R.A_PER_QUERY_TABLE, tmp_path).read_text())
        assert raw["columns"] == list(table.columns)
        pq = _per_query(t, c.run_id, tmp_path)
        assert table["qid"].astype(str).tolist() == pq.index.tolist()
        expected = [
            "qid",
            "category",
            "persona",
            "tags",
            "ndcg@10",
            "recall@10",
            "hit@10",
            "rr@10",
            "judged@10",
        ]
        if c.params[R.P_GENERATOR] != R.NONE:
            expected += list(R.PER_QUERY_TABLE_ANSWERS)
        assert list(table.columns) == expected
        for col in expected[1:]:
            got, want = table[col].tolist(), pq[col].tolist()
            for g, w in zip(got, want, strict=True):
                if isinstance(w, float) and math.isnan(w):
                    assert g is None or (isinstance(g, float) and math.isnan(g)), (c.name, col, g)
                elif isinstance(w, (float, int)) and not isinstance(w, bool):
                    assert g == pytest.approx(w, abs=1e-9), (c.name, col)  # JSON numbers: 10 decimals
                else:
                    assert str(g) == str(w) or (w == "" and g in (None, "")), (c.name, col, g, w)
    for c in reused:  # the copy carries the table and its record still stands
        source = t.get_run(c.tags[R.T_REUSED_FROM])
        assert source is not None and check(t, source).problem is None and check(t, c).problem is None
        assert t.has_artifact(c.run_id, R.A_PER_QUERY_TABLE) and t.has_artifact(
            c.run_id, R.A_FUNNEL_PER_QUERY
        )


def test_a_table_logged_again_is_not_appended_to(mlflow_uri, tmp_path):
    """A retried log_table (the store was locked after MLflow wrote the file) must not append the rows again."""
    t = Tracker(mlflow_uri)
    frame = pd.DataFrame({"qid": ["q1", "q2"], "hit@10": [1.0, 0.0]})
    with t.run("perq-table-twice", "twice") as run_id:
        t.log_table(run_id, frame, R.A_PER_QUERY_TABLE)
        t.log_table(run_id, frame, R.A_PER_QUERY_TABLE)
    raw = json.loads(_artifact(t, run_id, R.A_PER_QUERY_TABLE, tmp_path).read_text())
    assert raw == {"columns": ["qid", "hit@10"], "data": [["q1", 1.0], ["q2", 0.0]]}
    run = t.get_run(run_id)
    assert run is not None
    assert json.loads(run.tags["mlflow.loggedArtifacts"]) == [{"path": R.A_PER_QUERY_TABLE, "type": "table"}]


@pytest.mark.slow  # three demo sweeps on one store, one answering with SmolLM2 through D's fine-tuned reranker (~170 s): make test-slow
def test_the_per_question_funnel_averages_to_the_logged_funnel(demo, tmp_path):
    _, _, t, parents = demo
    for c in t.children(parents["gen"]):
        f = pd.read_csv(_artifact(t, c.run_id, R.A_FUNNEL_PER_QUERY, tmp_path), dtype={"qid": str})
        assert list(f.columns) == list(R.FUNNEL_PER_QUERY_COLUMNS)
        logged = R.parse_funnel(c.metrics)
        heads = R.parse_funnel_head(c.metrics)
        stages = f.drop_duplicates("position").sort_values("position")["stage"].tolist()
        assert stages == [s for s, _, _ in logged]
        assert stages[-2:] == ["final", "context"]
        pq = _per_query(t, c.run_id, tmp_path)
        answerable = sorted(pq.index[pq["category"] == "answerable"])
        for (stage, recall, depth), (_, head, topk) in zip(logged, heads, strict=True):
            rows = f[f["stage"] == stage]
            assert sorted(rows["qid"]) == answerable
            assert np.nanmean(rows["recall"].to_numpy(float)) == pytest.approx(recall, abs=1e-12)
            assert np.nanmean(rows["topk_recall"].to_numpy(float)) == pytest.approx(head, abs=1e-12)
            assert rows["depth"].max() == depth and (rows["topk"] == topk).all()
            held = rows["found"] > 0
            assert (held == rows["first_rank"].notna()).all()  # a rank exactly where the list holds evidence


def _holds(funnel: pd.DataFrame, qid: str, stage: str, cutoff: int) -> bool:
    row = funnel[(funnel["qid"] == qid) & (funnel["stage"] == stage)]
    return bool(len(row)) and float(row["first_rank"].iloc[0]) <= cutoff


@pytest.mark.slow  # three demo sweeps on one store, one answering with SmolLM2 through D's fine-tuned reranker (~170 s): make test-slow
def test_the_reports_fixed_and_broken_questions_are_an_independent_count(demo, tmp_path):
    d, uri, t, parents = demo
    out = tmp_path / "report"
    p = _run(
        ["ablate.report", "--parent", parents["gen"], "--tracking-uri", uri, "--out", str(out), "--no-log"], d
    )
    assert p.returncode == 0, p.stderr
    md = (out / "ablation.md").read_text()
    assert "## Per question" in md and "*Fixed*: the baseline misses it and the run hits it" in md
    rows = pd.read_csv(out / "per_question.csv", dtype={"qid": str})
    children = {c.name: c for c in t.children(parents["gen"])}
    base = children["A"]  # the ablation's baseline: variant A
    bpq = _per_query(t, base.run_id, tmp_path)
    changed = 0
    for name in ("D",):
        run = children[name]
        rpq = _per_query(t, run.run_id, tmp_path)
        funnel = pd.read_csv(_artifact(t, run.run_id, R.A_FUNNEL_PER_QUERY, tmp_path), dtype={"qid": str})
        for judged, col, good in (("hit@10", "hit@10", 1.0), ("answer correct", "answer_correct", 0.5)):
            b, r = bpq[bpq["category"] == "answerable"][col], rpq[rpq["category"] == "answerable"][col]
            both = [q for q in r.index if q in b.index and pd.notna(b[q]) and pd.notna(r[q])]
            fixed = [q for q in both if r[q] >= good > b[q]]
            broken = [q for q in both if b[q] >= good > r[q]]
            mine = rows[(rows["run_id"] == run.run_id) & (rows["judged_by"] == judged)]
            assert mine[mine["change"] == "fixed"]["qid"].tolist() == fixed, (name, judged)
            assert mine[mine["change"] == "broken"]["qid"].tolist() == broken, (name, judged)
            assert f"{judged} (of {len(both)}): fixed {len(fixed)}" in md
            changed += len(fixed) + len(broken)
            for q, where in mine[mine["change"] == "broken"][["qid", "lost_at"]].itertuples(index=False):
                # the stage named no longer holds the evidence in the cutoff; the context holds it when it is said to
                cutoff = 10 if judged == "hit@10" else int(funnel["topk"].iloc[0])
                if where == PQ.IN_CONTEXT:
                    assert _holds(funnel, q, "context", cutoff)
                elif where == PQ.NOT_RETRIEVED:
                    stages = R.json_list(run.params[R.P_RETRIEVERS])
                    assert not funnel[(funnel["qid"] == q) & funnel["stage"].isin(stages)]["found"].any()
                else:
                    assert where in ("rrf", "rerank", "final", "context") or where.startswith(
                        "candidates below"
                    )
                    if not where.startswith("candidates"):
                        assert not _holds(funnel, q, where, cutoff), (name, q, where)
    assert changed > 0  # the demo's D changes some questions


def _funnel(ranks: dict[str, list[float]]) -> pd.DataFrame:
    """Rows of a per-question funnel: question -> first ranks at bm25, dense, rrf, rerank, final."""
    stages = ["bm25", "dense", "rrf", "rerank", "final"]
    rows = []
    for qid, rs in ranks.items():
        for pos, (stage, rank) in enumerate(zip(stages, rs, strict=True), 1):
            found = 0 if math.isnan(rank) else 1
            rows.append(
                (qid, pos, stage, 100, 1, found, float(found), rank, 10, int(rank <= 10), float(rank <= 10))
            )
    return pd.DataFrame(rows, columns=list(R.FUNNEL_PER_QUERY_COLUMNS))


NAN = float("nan")


def test_lost_at_names_the_stage_after_the_last_list_holding_the_evidence():
    f = _funnel(
        {
            "q0": [NAN, NAN, NAN, NAN, NAN],  # no retriever found it
            "q1": [30, NAN, 25, 40, 40],  # retrieved, never in the first 10
            "q2": [3, 50, 12, 15, 15],  # bm25 had it at 3, fusion pushed it to 12
            "q3": [30, 20, 8, 14, 14],  # fusion brought it in, the reranker pushed it out
        }
    )
    rows = {q: g for q, g in f.groupby("qid")}
    where = {q: PQ.lost_at(rows[q], ["bm25", "dense"], 10, False) for q in rows}
    assert where == {"q0": PQ.NOT_RETRIEVED, "q1": "candidates below 10", "q2": "rrf", "q3": "rerank"}


def test_a_run_without_the_per_question_funnel_is_reported_with_the_stage_unknown():
    runs = [record("A", 1), record("C", 3)]  # old runs: no funnel_per_query.csv
    rep = build_report(runs, ReportOptions(plots=False, bootstrap=50, n_resamples=200))
    assert rep.per_question is not None
    a, c = (r.per_query[r.per_query["category"] == "answerable"]["hit@10"] for r in runs)
    broken = [q for q in c.index if a[q] > 0 and not c[q] > 0]
    fixed = [q for q in c.index if c[q] > 0 and not a[q] > 0]
    got = rep.per_question
    assert got[got["change"] == "broken"]["qid"].tolist() == broken and broken
    assert got[got["change"] == "fixed"]["qid"].tolist() == fixed and fixed
    assert (got[got["change"] == "broken"]["lost_at"] == PQ.NO_FUNNEL).all()
    assert f"{broken[0]} [unknown (no funnel_per_query.csv)]" in rep.markdown
    assert "C has no funnel_per_query.csv" in rep.markdown
    assert "per_question.csv" in rep.files()
