"""The gate's decision (ablate.study.gate): its interval against statsmodels' cluster-robust OLS interval and scipy's
paired t, its outcome rules at and around their boundaries, Holm's step-down over several metrics against statsmodels'
multipletests and its cluster-robust t tests, and the refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.multitest import multipletests

from ablate.evaluation.stats.holm import holm
from ablate.study.gate import (
    INCONCLUSIVE,
    PASS,
    REGRESSION,
    GateError,
    decide,
    decide_metrics,
    holm_levels,
    icc_of,
    overall,
)


def _statsmodels(d: np.ndarray, g: list[str], alpha: float) -> tuple[float, float]:
    codes = np.unique(np.asarray(g), return_inverse=True)[1]
    fit = sm.OLS(d, np.ones(len(d))).fit(cov_type="cluster", cov_kwds={"groups": codes}, use_t=True)
    low, high = fit.conf_int(alpha=2 * alpha)[0]
    return float(low), float(high)


@pytest.mark.parametrize("seed", range(12))
def test_the_interval_is_statsmodels_cluster_robust_interval(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(6, 80))
    n_groups = int(rng.integers(2, n + 1))
    codes = rng.integers(0, n_groups, n)
    if len(set(codes.tolist())) < 2:
        codes[0], codes[1] = 0, 1
    g = [f"c{int(x)}" for x in codes]
    base = rng.random(n)
    shared = rng.normal(0, 0.1, n_groups)  # questions of one cluster move together
    cand = np.clip(base + shared[codes] + rng.normal(0, 0.2, n), 0, 1)
    alpha = float(rng.choice([0.01, 0.05, 0.1, 0.2]))
    qids = [f"q{i:03d}" for i in range(n)]
    res = decide(
        dict(zip(qids, base, strict=True)),
        dict(zip(qids, cand, strict=True)),
        margin=0.02,
        alpha=alpha,
        groups=dict(zip(qids, g, strict=True)),
    )
    low, high = _statsmodels(cand - base, g, alpha)
    assert math.isclose(res.low, low, abs_tol=1e-9) and math.isclose(res.high, high, abs_tol=1e-9)
    assert math.isclose(res.delta, float(np.mean(cand - base)), abs_tol=1e-12)
    assert res.n_questions == n and res.n_clusters == len(set(g))


def test_without_groups_it_is_the_paired_t_interval():
    rng = np.random.default_rng(7)
    base, cand = rng.random(40), rng.random(40)
    qids = [f"q{i}" for i in range(40)]
    res = decide(
        dict(zip(qids, base, strict=True)), dict(zip(qids, cand, strict=True)), margin=0.05, alpha=0.05
    )
    ci = stats.ttest_rel(cand, base).confidence_interval(0.90)
    assert math.isclose(res.low, ci.low, abs_tol=1e-9) and math.isclose(res.high, ci.high, abs_tol=1e-9)
    assert res.n_clusters == 40
    low, high = _statsmodels(cand - base, qids, 0.05)
    assert math.isclose(res.low, low, abs_tol=1e-9) and math.isclose(res.high, high, abs_tol=1e-9)


def _shifted(shift: float, spread: float = 0.05, n: int = 30) -> tuple[dict[str, float], dict[str, float]]:
    qids = [f"q{i}" for i in range(n)]
    noise = np.linspace(-spread, spread, n)
    return {q: 0.5 for q in qids}, {q: 0.5 + shift + e for q, e in zip(qids, noise, strict=True)}


def test_the_three_outcomes_and_their_exit_codes():
    better = decide(*_shifted(0.05), margin=0.02)
    assert (better.outcome, better.exit_code, better.better) == (PASS, 0, True) and better.low > 0
    same = decide(*_shifted(0.0), margin=0.02)
    assert (same.outcome, same.exit_code, same.better) == (PASS, 0, False) and -0.02 < same.low <= 0
    worse = decide(*_shifted(-0.08), margin=0.02)
    assert (worse.outcome, worse.exit_code) == (REGRESSION, 1) and worse.low <= -0.02 and worse.high < 0
    wide = decide(*_shifted(-0.005, spread=0.3), margin=0.02)
    assert (wide.outcome, wide.exit_code) == (INCONCLUSIVE, 3) and wide.low <= -0.02 and wide.high >= 0
    assert wide.questions_needed is not None and wide.questions_needed > 30 and wide.mde > 0
    assert better.questions_needed is None


def test_the_rules_hold_at_their_boundaries():
    """low exactly at -margin is not a pass; high exactly at 0 is not a regression."""
    b, c = _shifted(-0.01, spread=0.1)
    first = decide(b, c, margin=0.0)
    at_low = decide(b, c, margin=-first.low)  # the margin the interval's low touches exactly
    assert at_low.low == -at_low.margin and at_low.outcome != PASS
    # a shift that puts high exactly at 0: the same spread, moved by -high
    moved = {q: v - first.high for q, v in c.items()}
    at_high = decide(b, moved, margin=0.0)
    assert math.isclose(at_high.high, 0.0, abs_tol=1e-15)
    assert at_high.outcome == (REGRESSION if at_high.high < 0 else INCONCLUSIVE)
    for margin in (0.0, 0.01, 0.05, 0.2):
        for shift in (-0.2, -0.05, -0.01, 0.0, 0.01, 0.1):
            r = decide(*_shifted(shift, spread=0.1), margin=margin)
            want = PASS if r.low > -margin else (REGRESSION if r.high < 0 else INCONCLUSIVE)
            assert r.outcome == want


def test_clusters_widen_the_interval_when_questions_move_together():
    rng = np.random.default_rng(3)
    qids = [f"q{i}" for i in range(50)]
    groups = {q: f"doc{i // 5}" for i, q in enumerate(qids)}
    effect = rng.normal(0, 0.1, 10)
    base = {q: 0.5 for q in qids}
    cand = {q: 0.5 + effect[i // 5] + rng.normal(0, 0.02) for i, q in enumerate(qids)}
    naive = decide(base, cand, margin=0.02)
    clustered = decide(base, cand, margin=0.02, groups=groups)
    assert clustered.high - clustered.low > 2 * (naive.high - naive.low)
    assert clustered.icc > 0.5 and naive.icc == 0.0
    assert clustered.warnings == ()  # 10 clusters: not few


def test_icc_matches_the_anova_estimator_on_a_balanced_design():
    d = [1.0, 1.2, 0.8, 3.0, 3.1, 2.9, 2.0, 2.2, 1.8]
    g = ["a"] * 3 + ["b"] * 3 + ["c"] * 3
    means = [1.0, 3.0, 2.0]
    msb = 3 * sum((m - 2.0) ** 2 for m in means) / 2
    msw = (0.04 * 2 + 0.01 * 2 + 0.04 * 2) / 6
    assert math.isclose(icc_of(d, g), (msb - msw) / (msb + 2 * msw), rel_tol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"margin": -0.1}, "--margin -0.1 is not valid"),
        ({"margin": 0.02, "alpha": 0.5}, "--alpha 0.5 is not valid"),
        (
            {"margin": 0.02, "groups": {"q0": "x", "q1": "x", "q2": "x"}},
            "an interval needs at least 2 clusters",
        ),
    ],
)
def test_bad_settings_are_refused(kwargs, needle):
    b = {"q0": 0.1, "q1": 0.2, "q2": 0.3}
    with pytest.raises(GateError, match=needle.replace("(", r"\(")):
        decide(b, {q: v + 0.1 for q, v in b.items()}, **kwargs)


def test_different_questions_on_the_two_sides_are_refused_naming_them():
    with pytest.raises(
        GateError, match=r"1 only in the baseline \(e.g. q2\); 1 only in the candidate \(e.g. q9\)"
    ):
        decide({"q1": 0.1, "q2": 0.2}, {"q1": 0.1, "q9": 0.2}, margin=0.02)
    with pytest.raises(GateError, match="no finite value"):
        decide({"q1": 0.1, "q2": float("nan")}, {"q1": 0.1, "q2": 0.2}, margin=0.02)


# -- Holm over the metrics ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(40))
def test_holm_levels_stand_exactly_where_statsmodels_rejects(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 8))
    p = rng.uniform(0, 0.12, m) ** float(rng.choice([1.0, 2.0]))
    if seed % 4 == 0:
        p[: m // 2] = p[0]  # ties
    alpha = float(rng.choice([0.05, 0.1]))
    levels, stood = holm_levels(list(p), alpha)
    reject, corrected, _, _ = multipletests(p, alpha=alpha, method="holm")
    assert stood == [bool(r) for r in reject]
    assert np.allclose(holm(p), corrected, rtol=0, atol=1e-15)
    order = np.argsort(p, kind="stable")
    # the k-th smallest is held to alpha/(m - k) while every smaller one stood, then to the level it stopped at
    k_stop = next((k for k, i in enumerate(order) if not stood[i]), m)
    for k, i in enumerate(order):
        assert math.isclose(levels[i], alpha / (m - min(k, k_stop)), rel_tol=1e-15)
    assert [
        bool(c < alpha) for c in corrected
    ] == stood  # a claim stands iff Holm's adjusted p is below alpha


def _metrics(seed: int, m: int) -> dict[str, tuple[dict[str, float], dict[str, float]]]:
    rng = np.random.default_rng(seed)
    n = 40
    qids = [f"q{i}" for i in range(n)]
    out = {}
    for j in range(m):
        base = rng.random(n)
        cand = base + rng.normal(float(rng.choice([-0.08, -0.02, 0.0, 0.03])), 0.08, n)
        out[f"m{j}@10"] = (dict(zip(qids, base, strict=True)), dict(zip(qids, cand, strict=True)))
    return out


@pytest.mark.parametrize("seed", range(10))
def test_several_metrics_are_decided_by_holm_over_statsmodels_p_values(seed):
    """Each metric's two one-sided p-values are statsmodels' cluster-robust t test of the mean difference (against
    −margin and 0, df G − 1); the claims that stand are those statsmodels' Holm rejects; the bounds sit at the levels
    Holm used, and the outcome follows from the claims that stand."""
    m, alpha, margin = 1 + seed % 4, 0.05, 0.02
    pairs = _metrics(seed, m)
    groups = {f"q{i}": f"c{i % 9}" for i in range(40)}
    got = decide_metrics(pairs, margin=margin, alpha=alpha, groups=groups)
    p_ni, p_reg = [], []
    for b, c in pairs.values():
        d = np.array([c[q] - b[q] for q in sorted(b)])
        g = [groups[q] for q in sorted(b)]
        codes = np.unique(np.asarray(g), return_inverse=True)[1]
        for shift, store, side in ((margin, p_ni, "larger"), (0.0, p_reg, "smaller")):
            fit = sm.OLS(d + shift, np.ones(len(d))).fit(
                cov_type="cluster", cov_kwds={"groups": codes}, use_t=True
            )
            t, two = float(fit.tvalues[0]), float(fit.pvalues[0])
            assert fit.df_resid_inference == len(set(g)) - 1
            store.append(two / 2 if (t > 0) == (side == "larger") else 1 - two / 2)
    ni, adj_ni, _, _ = multipletests(p_ni, alpha=alpha, method="holm")
    reg, adj_reg, _, _ = multipletests(p_reg, alpha=alpha, method="holm")
    for i, r in enumerate(got):
        assert r.metric == list(pairs)[i]
        assert math.isclose(r.p_noninferior, p_ni[i], abs_tol=1e-12)
        assert math.isclose(r.p_regression, p_reg[i], abs_tol=1e-12)
        assert math.isclose(r.p_noninferior_holm, adj_ni[i], abs_tol=1e-12)
        assert math.isclose(r.p_regression_holm, adj_reg[i], abs_tol=1e-12)
        assert (r.low > -margin) == bool(ni[i]) and (r.high < 0) == bool(reg[i])
        want = PASS if ni[i] else (REGRESSION if reg[i] else INCONCLUSIVE)
        assert r.outcome == want and r.alpha == alpha
        # the bounds are the one-sided statsmodels bounds at the levels Holm used
        b, c = pairs[r.metric]
        d = np.array([c[q] - b[q] for q in sorted(b)])
        g = [groups[q] for q in sorted(b)]
        low, _ = _statsmodels(d, g, r.level_noninferior)
        _, high = _statsmodels(d, g, r.level_regression)
        assert math.isclose(r.low, low, abs_tol=1e-9) and math.isclose(r.high, high, abs_tol=1e-9)
    if m > 1:
        assert sorted(r.level_noninferior for r in got)[0] == alpha / m


def test_one_metric_through_holm_is_todays_three_rules_at_their_boundaries():
    """With one metric both tests are at alpha and the interval is the 1 − 2·alpha one: the outcome is low > −margin
    pass, else high < 0 regression, else inconclusive, at the boundaries too (low exactly at −margin is no pass)."""
    b, c = _shifted(-0.01, spread=0.1)
    first = decide_metrics({"x": (b, c)}, margin=0.0)[0]
    low, high = _statsmodels(np.array([c[q] - b[q] for q in sorted(b)]), sorted(b), 0.05)
    assert math.isclose(first.low, low, abs_tol=1e-12) and math.isclose(first.high, high, abs_tol=1e-12)
    assert first.level_noninferior == first.level_regression == 0.05
    at_low = decide_metrics({"x": (b, c)}, margin=-first.low)[0]
    assert at_low.low == -at_low.margin and at_low.outcome != PASS
    assert at_low.p_noninferior == pytest.approx(
        0.05, abs=1e-12
    )  # exactly at the level: the claim does not stand
    for margin in (0.0, 0.01, 0.05, 0.2):
        for shift in (-0.2, -0.05, -0.01, 0.0, 0.01, 0.1):
            for alpha in (0.01, 0.05, 0.2):
                pair = _shifted(shift, spread=0.1)
                (r,) = decide_metrics({"x": pair}, margin=margin, alpha=alpha)
                one = decide(*pair, margin=margin, alpha=alpha)
                want = PASS if r.low > -margin else (REGRESSION if r.high < 0 else INCONCLUSIVE)
                assert r.outcome == want == one.outcome and (r.low, r.high) == (one.low, one.high)
                assert (r.outcome == PASS) == (r.p_noninferior < alpha)


def test_a_metric_after_holm_stops_is_held_to_the_level_it_stopped_at():
    qids = [f"q{i}" for i in range(30)]
    noise = np.linspace(-0.05, 0.05, 30)
    clear = ({q: 0.5 for q in qids}, {q: 0.6 + e for q, e in zip(qids, noise, strict=True)})
    unclear = ({q: 0.5 for q in qids}, {q: 0.5 + 4 * e for q, e in zip(qids, noise, strict=True)})
    worse = ({q: 0.5 for q in qids}, {q: 0.49 + 4 * e for q, e in zip(qids, noise, strict=True)})
    got = {r.metric: r for r in decide_metrics({"a": clear, "b": unclear, "c": worse}, margin=0.02)}
    assert got["a"].outcome == PASS and got["a"].level_noninferior == pytest.approx(0.05 / 3)
    assert got["b"].outcome != PASS and got["b"].level_noninferior == pytest.approx(0.05 / 2)
    assert got["c"].outcome != PASS and got["c"].level_noninferior == pytest.approx(
        0.05 / 2
    )  # held, not 0.05
    assert overall(list(got.values())) in (INCONCLUSIVE, REGRESSION)
