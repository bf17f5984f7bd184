"""The gate's decision (ablate.study.gate): its interval against statsmodels' cluster-robust OLS interval and scipy's
paired t, its outcome rules at and around their boundaries, and the refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats

from ablate.study.gate import INCONCLUSIVE, PASS, REGRESSION, GateError, decide, icc_of


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
