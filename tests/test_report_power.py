"""The report's power and correction: each comparison's minimum detectable effect (equal to statsmodels' TTestPower on
the paired per-query differences), the chosen correction (Holm, Benjamini-Hochberg, none) named beside its p-values,
and both logged through MLflow (``mde_<metric>`` on each compared run, the correction on the parent)."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from ablate.app import report as report_cli
from ablate.errors import ConfigError
from ablate.study import report
from ablate.study.options import CORRECTIONS
from test_report import QIDS, ablation_runs, col, log_child, record


def test_correction_names_agree_everywhere():
    from ablate.evaluation import stats
    from ablate.runner.settings import CORRECTIONS as SETTINGS_CORRECTIONS

    assert CORRECTIONS == stats.CORRECTIONS == SETTINGS_CORRECTIONS


def test_each_comparison_carries_its_mde_from_the_paired_differences():
    runs = ablation_runs()
    rep = report.build_report(runs, report.ReportOptions(plots=False, metrics=["ndcg@10", "mrr@10"]))
    by = {r.variant: r for r in runs}
    t = rep.table.set_index("variant")
    for v in "BCD":
        for m, c in (("ndcg@10", "ndcg@10"), ("mrr@10", "rr@10")):
            diffs = (col(by[v], c) - col(by["A"], c)).to_numpy()
            es = TTestPower().solve_power(effect_size=None, nobs=len(QIDS), alpha=0.05, power=0.8)
            assert t.loc[v, f"{m}_mde"] == pytest.approx(es * np.std(diffs, ddof=1), abs=1e-9)
    assert np.isnan(t.loc["A", "ndcg@10_mde"])
    assert "MDE ndcg@10" in rep.markdown and "80% power at α = 0.05" in rep.markdown
    assert "| MDE " in rep.console and f"{t.loc['B', 'ndcg@10_mde']:.3f}" in rep.console


def test_the_chosen_correction_adjusts_the_family_and_is_named():
    runs = ablation_runs()
    holm = report.build_report(runs, report.ReportOptions(plots=False)).table.set_index("variant")
    bh = report.build_report(runs, report.ReportOptions(plots=False, correction="bh"))
    t = bh.table.set_index("variant")
    ms = report.DEFAULT_METRICS
    raw = t.loc[["B", "C", "D"], [f"{m}_p" for m in ms]].to_numpy().ravel()
    got = t.loc[["B", "C", "D"], [f"{m}_p_bh" for m in ms]].to_numpy().ravel()
    np.testing.assert_allclose(got, multipletests(raw, method="fdr_bh")[1], rtol=0, atol=1e-12)
    assert "ndcg@10_p_holm" not in t.columns and "ndcg@10_p_holm" in holm.columns
    assert "Benjamini-Hochberg-adjusted (false discovery rate" in bh.markdown and "p (BH)" in bh.console
    none = report.build_report(runs, report.ReportOptions(plots=False, correction="none"))
    assert "are not adjusted" in none.markdown and "| p " in none.console and "(Holm)" not in none.console
    with pytest.raises(ConfigError, match="options: holm, bh, none"):
        report.build_report(runs, report.ReportOptions(correction="bonferroni"))


def test_report_logs_mde_on_each_compared_run_and_the_correction(mlflow_uri, tmp_path, capsys):
    from ablate.tracking import Tracker

    t = Tracker(mlflow_uri)
    exp = f"power-{uuid.uuid4().hex[:8]}"
    parent = t.start(exp, "sweep p", tags={"ablate.role": "sweep-parent", "ablate.overrides": "variant=A,B"})
    ids = [log_child(t, exp, parent, record(v, s)) for v, s in (("A", 1), ("B", 2))]
    argv = ["--parent", parent, "--tracking-uri", mlflow_uri, "--resamples", "200", "--correction", "bh"]
    assert report_cli.main([*argv, "--out", str(tmp_path / "o")]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "p (BH)" in out and "MDE" in out
    b = t.get_run(ids[1])
    table = (tmp_path / "o" / "ablation.csv").read_text(encoding="utf-8")
    assert b.metrics["mde_ndcg_at_10"] == pytest.approx(
        float(
            report.build_report([record("A", 1), record("B", 2)], report.ReportOptions(plots=False))
            .table.set_index("variant")
            .loc["B", "ndcg@10_mde"]
        )
    )
    assert "ndcg@10_mde" in table and b.tags["ablate.mde_baseline"] == ids[0]
    assert not any(k.startswith("mde_") for k in t.get_run(ids[0]).metrics)  # the baseline: nothing
    assert t.get_run(parent).tags["ablate.report_correction"] == "bh"
    # a bad correction: one line, exit 2, nothing written
    assert report_cli.main([*argv[:-1], "bonferroni", "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "--correction" in err and err.count("\n") == 1
    assert not (tmp_path / "bad").exists()


def test_the_answer_section_follows_the_correction_and_carries_the_mde():
    from test_report_answers import with_answers

    runs = [with_answers(r, i) for i, r in enumerate(ablation_runs())]
    rep = report.build_report(runs, report.ReportOptions(plots=False, correction="bh", n_resamples=500))
    assert rep.answers is not None
    t = rep.answers.table.set_index("variant")
    raw = t.loc[["B", "C", "D"], "correct_p"].to_numpy(float)
    got = t.loc[["B", "C", "D"], "correct_p_bh"].to_numpy(float)
    np.testing.assert_allclose(got, multipletests(raw, method="fdr_bh")[1], rtol=0, atol=1e-12)
    a = runs[1].per_query  # A (ablation_runs: C, A, D, B)
    b = next(r for r in runs if r.variant == "B").per_query
    qs = a.index[(a["category"] == "answerable") & (b["category"] == "answerable")]
    diffs = (b.loc[qs, "answer_correct"] - a.loc[qs, "answer_correct"]).to_numpy(float)
    es = TTestPower().solve_power(effect_size=None, nobs=diffs.size, alpha=0.05, power=0.8)
    assert t.loc["B", "correct_mde"] == pytest.approx(es * np.std(diffs, ddof=1), abs=1e-9)
    assert "Benjamini-Hochberg over the runs" in rep.answers.markdown and "p (BH)" in rep.answers.console
