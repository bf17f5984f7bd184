"""Which questions move together (ablate.study.clusters) and what the report and the plan make of it, on synthetic
runs: the report's intervals and paired tests are ablate.stats' with the clusters as groups, its MDE the paired t's
times sqrt(1 + (m - 1)·ICC), its table says G beside n; the plan's MDE grows by exactly sqrt(deff) at every n and its
questions needed by deff (statsmodels' TTestPower on the differences, the ICC by a one-way ANOVA written here); with
--cluster none, or every question alone, nothing changes."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.power import TTestPower

from ablate.errors import ConfigError
from ablate.evaluation import stats
from ablate.study import report
from ablate.study.clusters import (
    clustering,
    design_effect,
    few_clusters,
    join,
    labels_for,
    recorded,
    with_clusters,
)
from ablate.study.power_plan import plan_rows
from test_report import QIDS, ablation_runs, col

#: 30 answerable questions in 6 clusters of 5 (q00-q04, q05-q09, ...); the 3 no-answer questions alone
CLUSTER_OF = {q: f"q{(i // 5) * 5:02d}" for i, q in enumerate(QIDS)}


def clustered_runs(shared: float = 0.25) -> list[report.RunRecord]:
    """The report tests' four runs with 6 recorded clusters of 5, each run's scores moved by a per-cluster shift
    (so the differences between runs correlate within a cluster)."""
    out = []
    for k, r in enumerate(ablation_runs()):
        pq = r.per_query.copy()
        shift = np.random.default_rng(100 + k).normal(0, shared, 6)
        for i, q in enumerate(QIDS):
            for c in ("ndcg@10", "rr@10"):
                pq.loc[q, c] = float(np.clip(pq.loc[q, c] + shift[i // 5], 0, 1))
        pq["cluster"] = [CLUSTER_OF.get(q, q) for q in pq.index]
        pq["group"] = ["" for _ in pq.index]
        metrics = {"ndcg_at_10": float(pq.loc[QIDS, "ndcg@10"].mean())}
        out.append(report.RunRecord(**{**r.__dict__, "per_query": pq, "metrics": metrics}))
    return out


def _anova_icc(d: np.ndarray, labels: list[str]) -> float:
    """The one-way ANOVA intraclass correlation (balanced clusters), written independently of ablate's."""
    df = pd.DataFrame({"d": d, "g": labels})
    k, n = df["g"].nunique(), len(df)
    m = n / k
    msb = (df.groupby("g")["d"].mean().sub(df["d"].mean()) ** 2).sum() * m / (k - 1)
    msw = ((df["d"] - df.groupby("g")["d"].transform("mean")) ** 2).sum() / (n - k)
    return max(0.0, (msb - msw) / (msb + (m - 1) * msw))


# --- the clusters ---------------------------------------------------------------------------------------------


def test_the_recorded_clusters_and_the_three_choices():
    pq = pd.DataFrame(
        {"cluster": ["q1", "q1", "q3", "q4"], "group": ["g", "", "g", np.nan]}, index=["q1", "q2", "q3", "q4"]
    )
    got = recorded(pq)
    assert got == (
        {"q1": "q1", "q2": "q1", "q3": "q3", "q4": "q4"},
        {"q1": "g", "q2": "", "q3": "g", "q4": ""},
    )
    assert recorded(pq.drop(columns=["cluster"])) is None
    ev = labels_for(["q1", "q2", "q3", "q5"], "evidence", got)
    assert ev["q1"] == ev["q2"] != ev["q3"] and ev["q5"] == "question:q5"
    grp = labels_for(["q1", "q2", "q3", "q4"], "group", got)
    assert grp["q1"] == grp["q3"] and len({grp["q2"], grp["q4"], grp["q1"]}) == 3
    with pytest.raises(ConfigError, match="--cluster"):
        clustering([], "documents")


def test_clusters_of_several_runs_are_joined():
    assert join([{"a": "1", "b": "1", "c": "2"}, {"b": "x", "c": "x", "d": "y"}]) == {
        "a": "a",
        "b": "a",
        "c": "a",
        "d": "d",
    }
    runs = clustered_runs()
    c = clustering(runs, "evidence")
    assert c.count(QIDS) == 6 and c.of(QIDS) is not None and c.warnings == []
    assert clustering(runs, "none").of(QIDS) is None
    assert clustering(runs, "group").of(QIDS) is None  # no declared group: every question alone


def test_runs_without_recorded_clusters_are_recomputed_or_said_to_be_independent():
    runs = [
        report.RunRecord(**{**r.__dict__, "per_query": r.per_query.drop(columns=["cluster", "group"])})
        for r in clustered_runs()
    ]
    c = clustering(runs, "evidence")
    assert c.of(QIDS) is None and len(c.warnings) == 1 and "questions treated as independent" in c.warnings[0]
    asked = []

    def again(run, qids):
        asked.append(run.name)
        return {q: CLUSTER_OF.get(q, q) for q in qids}, dict.fromkeys(qids, "")

    back = with_clusters(runs, again)
    assert sorted(asked) == ["A", "B", "C", "D"] and clustering(back, "evidence").count(QIDS) == 6
    assert with_clusters(runs, lambda run, qids: None)[0].per_query.equals(runs[0].per_query)


def test_the_design_effect_is_one_plus_m_minus_one_times_the_icc():
    rng = np.random.default_rng(4)
    labels = [f"c{i // 4}" for i in range(40)]
    d = rng.normal(0, 0.6, 10)[np.arange(40) // 4] + rng.normal(0, 0.4, 40)
    de = design_effect(d.tolist(), labels)
    assert (de.n, de.g, de.m) == (40, 10, 4.0)
    assert de.icc == pytest.approx(_anova_icc(d, labels), abs=1e-12)
    assert de.deff == pytest.approx(1 + 3 * de.icc) and de.inflation == pytest.approx(math.sqrt(de.deff))
    assert design_effect(d.tolist(), None).deff == 1.0
    assert math.isnan(design_effect(d.tolist(), ["one"] * 40).deff)
    assert few_clusters(10) is None and "cannot give p below 0.0625" in (few_clusters(5) or "")


# --- the report -----------------------------------------------------------------------------------------------


def test_the_report_resamples_clusters_and_says_g_beside_n():
    runs = clustered_runs()
    rep = report.build_report(runs, report.ReportOptions(plots=False, n_resamples=2000))
    by = {r.variant: r for r in runs}
    labels = [CLUSTER_OF[q] for q in QIDS]
    t = rep.table.set_index("variant")
    assert list(t["clusters"]) == [6, 6, 6, 6] and list(t["n"]) == [30, 30, 30, 30]
    for v in "ABCD":
        cis = stats.bootstrap_cis(
            by[v].per_query.loc[QIDS], ["ndcg@10"], n_resamples=1000, seed=0, groups=labels
        )
        assert (t.loc[v, "ndcg@10"], t.loc[v, "ndcg@10_ci_low"], t.loc[v, "ndcg@10_ci_high"]) == cis[
            "ndcg@10"
        ]
    for v in "BCD":
        a, b = col(by[v], "ndcg@10"), col(by["A"], "ndcg@10")
        direct = stats.paired_randomization_test(a, b, n_resamples=2000, seed=0, groups=labels)
        assert (t.loc[v, "ndcg@10_p"], t.loc[v, "ndcg@10_delta_ci_low"]) == (direct.p_value, direct.ci_low)
        diffs = (a - b).to_numpy()
        es = TTestPower().solve_power(effect_size=None, nobs=30, alpha=0.05, power=0.8)
        deff = 1 + 4 * _anova_icc(diffs, labels)
        assert t.loc[v, "ndcg@10_mde"] == pytest.approx(
            es * np.std(diffs, ddof=1) * math.sqrt(deff), rel=1e-9
        )
    header = rep.console.splitlines()[0]
    assert header.split("|")[6:8] == [" n  ", " G "], header
    assert "clusters: 30 questions in 6 clusters (--cluster evidence" in rep.console
    assert "only 6 clusters of questions" in rep.console
    assert "clusters: the baseline's 30 questions in 6 clusters" in rep.markdown


def test_with_cluster_none_or_every_question_alone_the_report_is_unchanged():
    runs = clustered_runs()
    none = report.build_report(runs, report.ReportOptions(plots=False, cluster="none"))
    alone = [
        report.RunRecord(**{**r.__dict__, "per_query": r.per_query.assign(cluster=r.per_query.index)})
        for r in runs
    ]
    evidence = report.build_report(alone, report.ReportOptions(plots=False))
    pd.testing.assert_frame_equal(none.table, evidence.table)
    assert (
        none.console == evidence.console
        and "clusters" not in none.table.columns
        and "| G " not in none.console
    )


def test_the_answer_section_resamples_clusters_too():
    from test_report_answers import with_answers

    runs = [with_answers(r, i) for i, r in enumerate(clustered_runs())]
    rep = report.build_report(runs, report.ReportOptions(plots=False, n_resamples=500))
    assert rep.answers is not None
    t = rep.answers.table.set_index("variant")
    a = next(r for r in runs if r.variant == "A").per_query
    qs = [
        q for q in a.index if a.loc[q, "category"] == "answerable" and not pd.isna(a.loc[q, "answer_correct"])
    ]
    labels = [CLUSTER_OF.get(q, q) for q in qs]
    ci = stats.bootstrap_cis(
        a.loc[qs, ["answer_correct"]].astype(float), n_resamples=1000, seed=0, groups=labels
    )
    assert (t.loc["A", "correct_ci_low"], t.loc["A", "correct_ci_high"]) == ci["answer_correct"][1:]
    assert t.loc["A", "clusters"] == len(set(labels)) and "| G " in rep.answers.markdown


# --- the plan -------------------------------------------------------------------------------------------------


def test_the_plans_mde_grows_by_sqrt_deff_and_its_questions_needed_by_deff():
    runs = clustered_runs()
    labels = [CLUSTER_OF[q] for q in QIDS]
    c = clustering(runs, "evidence")
    naive = {r.run: r for r in plan_rows(runs, "ndcg@10", n_sims=200)}
    clustered = {r.run: r for r in plan_rows(runs, "ndcg@10", n_sims=200, clusters=c)}
    needed = {r.run: r for r in plan_rows(runs, "ndcg@10", delta=0.05, n_sims=200, clusters=c)}
    by = {r.variant: r for r in runs}
    for v in "BCD":
        diffs = (col(by[v], "ndcg@10") - col(by["A"], "ndcg@10")).to_numpy()
        deff = 1 + 4 * _anova_icc(diffs, labels)
        row = clustered[v]
        assert (row.clusters, row.cluster_size) == (6, 5.0) and row.deff == pytest.approx(deff, rel=1e-9)
        for n, mde in row.mde_at.items():  # exactly: the same t quantiles, the variance times deff
            assert mde == pytest.approx(naive[v].mde_at[n] * math.sqrt(deff), rel=1e-12)
        es = 0.05 / np.std(diffs, ddof=1)
        want = TTestPower().solve_power(effect_size=es, nobs=None, alpha=0.05 / 3, power=0.8) * deff
        assert needed[v].n_needed == math.ceil(want)
    none = plan_rows(runs, "ndcg@10", n_sims=200, clusters=clustering(runs, "none"))
    assert [r.mde_at for r in none] == [naive[v].mde_at for v in "BCD"] and all(not r.clustered for r in none)


def test_the_clustered_simulation_checks_the_design_effect_plan():
    """Many clusters: studies of whole clusters drawn from the pilot reach the power the design effect plans for;
    drawing single questions would claim far more."""
    rng = np.random.default_rng(1)
    labels = np.repeat(np.arange(60), 4)
    d = rng.normal(0, math.sqrt(0.3), 60)[labels] + rng.normal(0, math.sqrt(0.7), 240)
    de = design_effect(d.tolist(), [str(x) for x in labels])
    n = int(stats.n_needed(d, 0.25, deff=de.deff))
    assert stats.t_power(d, 0.25, n, deff=de.deff) == pytest.approx(0.8, abs=0.01)
    sim, se = stats.simulated_power(d, 0.25, n, n_sims=4000, seed=0, groups=labels)
    assert abs(sim - 0.8) <= 4 * se + 0.01
    assert stats.simulated_power(d, 0.25, n, n_sims=4000, seed=0)[0] > 0.9
