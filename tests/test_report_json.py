"""``python -m ablate.report --json``: the report's rows as JSON on stdout, nothing else there. On a real demo sweep
(variant=A,B,C through the real entry point, a real MLflow sqlite store) each figure equals the table the same
command writes (ablation.csv) and, independently, the runs' logged per_query.csv: means, paired differences, the
paired randomization test's p (over the clusters of questions the runs record) and statsmodels' Holm /
Benjamini-Hochberg adjustment. Answer correctness and the
prediction-powered figures a caller hands in, on built runs."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

from ablate.evaluation import stats
from ablate.evaluation.stats import PPIResult
from ablate.study import report
from ablate.study.report.as_json import ANSWER_METRIC, DELTA, report_json, report_rows
from ablate.tracking import Tracker
from labels_loop import cli, demo_sweep, refused
from test_report import ablation_runs
from test_report_answers import with_answers

EXP = "report-json"
METRICS = ["ndcg@10", "recall@10", "mrr@10", "hit@10"]
RUN_KEYS = {"kind", "run", "run_id", "metric", "value", "low", "high", "ppi"}
COMPARISON_KEYS = {"kind", "baseline", "run", "run_id", "metric", "delta", "low", "high", "p", "p_raw", "ppi"}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("report-json")
    uri, parent, runs = demo_sweep(cwd, EXP)
    t = Tracker(uri)
    per_query = {}
    for name, rid in runs.items():
        got = t.download_artifact(rid, "per_query.csv", cwd / "dl" / name)
        assert got is not None
        pq = pd.read_csv(got, dtype={"qid": str}).set_index("qid")
        scored = pq[
            pq["category"] == "answerable"
        ]  # the report's questions: answerable, every metric defined
        per_query[name] = scored.dropna(subset=["ndcg@10", "recall@10", "rr@10", "hit@10"])
    return cwd, uri, parent, runs, per_query


def _report(sweep, *extra: str) -> tuple[list[dict], pd.DataFrame, str]:
    cwd, uri, parent, _, _ = sweep
    out = cwd / f"out{len(list(cwd.glob('out*')))}"
    args = ["--parent", parent, "--tracking-uri", uri, "--out", str(out), "--resamples", "500", "--no-log"]
    p = cli("ablate.report", [*args, "--json", *extra], cwd)
    assert p.returncode == 0, p.stderr[-3000:]
    rows = json.loads(p.stdout)  # the whole of stdout is the JSON
    table = pd.read_csv(out / "ablation.csv", dtype={"run_id": str})
    return rows, table.set_index("run_id"), p.stderr


def _close(a: float | None, b: float) -> bool:
    return (a is None and math.isnan(b)) or (a is not None and math.isclose(a, b, rel_tol=0, abs_tol=1e-12))


def test_json_rows_are_the_tables_numbers_and_the_per_query_values(sweep):
    _, _, _, runs, pq = sweep
    rows, table, stderr = _report(sweep)
    assert "full report" in stderr and "| run" in stderr  # the table and notes: on stderr
    by_id = {v: k for k, v in runs.items()}
    run_rows = [r for r in rows if r["kind"] == "run"]
    comparisons = [r for r in rows if r["kind"] == "comparison"]
    assert len(run_rows) == 3 * len(METRICS) and len(comparisons) == 2 * len(METRICS)
    assert all(RUN_KEYS <= set(r) and r["ppi"] is None for r in run_rows)
    assert all(COMPARISON_KEYS <= set(r) and r["ppi"] is None for r in comparisons)
    for r in run_rows:
        row = table.loc[r["run_id"]]
        m = r["metric"]
        assert r["run"] == row["run"] == by_id[r["run_id"]]
        assert _close(r["value"], row[m]) and _close(r["low"], row[f"{m}_ci_low"])
        assert _close(r["high"], row[f"{m}_ci_high"])
        col = "rr@10" if m == "mrr@10" else m
        assert math.isclose(r["value"], pq[r["run"]][col].mean(), abs_tol=1e-12)
        assert r["low"] <= r["value"] <= r["high"]
    raw = []
    for r in comparisons:
        row, m = table.loc[r["run_id"]], r["metric"]
        assert (r["baseline"], r["baseline_id"]) == ("A", runs["A"]) and r["run"] in ("B", "C")
        for key, column in (
            ("delta", f"{m}_delta"),
            ("low", f"{m}_delta_ci_low"),
            ("high", f"{m}_delta_ci_high"),
            ("p", f"{m}_p_holm"),
            ("p_raw", f"{m}_p"),
            ("mde", f"{m}_mde"),
        ):
            assert _close(r[key], row[column]), (r["run"], m, key)
        col = "rr@10" if m == "mrr@10" else m
        a, b = pq["A"][col], pq[r["run"]][col].loc[pq["A"].index]
        clusters = pq["A"]["cluster"].astype(str).tolist()  # the questions' clusters, as the runs record them
        direct = stats.paired_randomization_test(
            b.to_numpy(), a.to_numpy(), n_resamples=500, seed=0, groups=clusters
        )
        assert r["n"] == len(a) >= 15 and math.isclose(r["delta"], (b - a).mean(), abs_tol=1e-12)
        assert r["clusters"] == len(set(clusters)) < r["n"]
        assert r["p_raw"] == direct.p_value and r["correction"] == "holm"
        raw.append(r["p_raw"])
    np.testing.assert_allclose(
        [r["p"] for r in comparisons], multipletests(raw, method="holm")[1], rtol=0, atol=1e-12
    )


def test_json_follows_the_correction_and_the_metrics_asked_for(sweep):
    rows, table, _ = _report(
        sweep, "--correction", "bh", "--metrics", "ndcg@10,hit@10", "--test", "bootstrap"
    )
    comparisons = [r for r in rows if r["kind"] == "comparison"]
    assert {r["metric"] for r in rows} == {"ndcg@10", "hit@10"} and len(comparisons) == 4
    for r in comparisons:
        assert r["correction"] == "bh" and _close(r["p"], table.loc[r["run_id"], f"{r['metric']}_p_bh"])
    np.testing.assert_allclose(
        [r["p"] for r in comparisons],
        multipletests([r["p_raw"] for r in comparisons], method="fdr_bh")[1],
        rtol=0,
        atol=1e-12,
    )


def test_a_refused_report_prints_no_json(sweep, tmp_path):
    cwd, uri, parent, _, _ = sweep
    p = refused("ablate.report", ["--parent", parent, "--tracking-uri", uri, "--json", "--test", "nope"], cwd)
    assert p.returncode == 2 and p.stdout == ""
    assert (
        p.stderr.startswith("error: --test='nope' is not valid") and len(p.stderr.strip().splitlines()) == 1
    )


def test_answer_correctness_rows_and_the_ppi_figures_a_caller_hands_in():
    runs = [with_answers(r, i) for i, r in enumerate(ablation_runs())]
    rep = report.build_report(runs, report.ReportOptions(plots=False, metrics=["ndcg@10"]))
    assert rep.answers is not None
    by = {r.variant: r.run_id for r in runs}
    fig = PPIResult(0.61, 0.55, 0.67, 12, 18)
    diff = PPIResult(-0.02, -0.08, 0.04, 12, 18)
    ppi = {(by["B"], "ndcg@10"): fig, (by["C"], "ndcg@10", DELTA): diff, (by["D"], ANSWER_METRIC): fig}
    rows = json.loads(report_json(rep, ppi))
    assert rows == report_rows(rep, ppi)  # strict JSON: NaN became null
    answers = rep.answers.table.set_index("run_id")
    got = {(r["kind"], r["run_id"], r["metric"]): r for r in rows}
    for rid, row in answers.iterrows():
        r = got[("run", rid, ANSWER_METRIC)]
        assert (r["value"], r["low"], r["high"]) == (
            row["correct"],
            row["correct_ci_low"],
            row["correct_ci_high"],
        )
        assert r["judge"] == "rule"
        if rid == by["A"]:
            assert ("comparison", rid, ANSWER_METRIC) not in got
            continue
        c = got[("comparison", rid, ANSWER_METRIC)]
        assert (c["delta"], c["low"], c["high"], c["p"], c["p_raw"], c["n"]) == (
            row["correct_delta"],
            row["correct_delta_ci_low"],
            row["correct_delta_ci_high"],
            row["correct_p_holm"],
            row["correct_p"],
            row["paired_n"],
        )
    with_ppi = {k: r["ppi"] for k, r in got.items() if r["ppi"] is not None}
    assert with_ppi == {
        ("run", by["B"], "ndcg@10"): fig.as_dict(),
        ("comparison", by["C"], "ndcg@10"): diff.as_dict(),
        ("run", by["D"], ANSWER_METRIC): fig.as_dict(),
    }


def test_undefined_figures_are_null_and_the_baseline_has_no_comparison():
    rep = report.build_report(ablation_runs()[:2], report.ReportOptions(plots=False, metrics=["ndcg@10"]))
    rows = json.loads(report_json(rep))
    assert [r["kind"] for r in rows] == ["run", "run", "comparison"]
    rep.table.loc[rep.table["run_id"] != rep.baseline, "ndcg@10_ci_low"] = math.nan
    low = [r["low"] for r in report_rows(rep) if r["kind"] == "run"]
    assert low[0] is not None and low[1] is None
    assert type(rows[0]["value"]) is float and type(rows[2]["n"]) is int and rows[2]["n"] == 30
