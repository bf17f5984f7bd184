"""Tests for ablate.stats: differential against statsmodels / scipy, exact enumeration, and calibration checks.

Every reference value is computed independently here (statsmodels, scipy, or a brute-force enumeration written in
the test), never copied from ablate's own output.
"""

from __future__ import annotations

import gc
import itertools
import math

import numpy as np
import pandas as pd
import pytest
import scipy.stats as st
from hypothesis import given, settings
from hypothesis import strategies as hs
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

from ablate.errors import AblateError
from ablate.evaluation import stats as S
from ablate.evaluation.stats import resampling


def _paired_mean(x, y, axis=-1):
    return np.mean(x - y, axis=axis)


def _exact_sign_flip_p(d: np.ndarray) -> float:
    """Two-sided exact p of the sign-flip test, by brute-force enumeration of all 2^n sign vectors."""
    d = np.asarray(d, dtype=float)
    observed = abs(d.sum())
    hits = 0
    total = 0
    for signs in itertools.product((1.0, -1.0), repeat=d.size):
        total += 1
        if abs(float(np.dot(signs, d))) >= observed - 1e-9:
            hits += 1
    return hits / total


# ----------------------------------------------------------------------------------------------------------------
# Wilson


@pytest.mark.parametrize(
    ("k", "n"),
    [(0, 1), (1, 1), (0, 30), (30, 30), (24, 30), (1, 30), (7, 13), (120, 200), (1, 1000), (999, 1000)],
)
@pytest.mark.parametrize("confidence", [0.95, 0.9, 0.99])
def test_wilson_matches_statsmodels(k, n, confidence):
    p, low, high = S.wilson_interval(k, n, confidence=confidence)
    ref_low, ref_high = proportion_confint(k, n, alpha=1 - confidence, method="wilson")
    assert p == pytest.approx(k / n, abs=0, rel=1e-15)
    assert low == pytest.approx(ref_low, abs=1e-12)
    assert high == pytest.approx(ref_high, abs=1e-12)
    assert 0.0 <= low <= p <= high <= 1.0


def test_wilson_spec_example_24_of_30():
    # The spec: 30 questions with 24 correct give a 95% interval of roughly 63%-90%.
    p, low, high = S.wilson_interval(24, 30)
    assert p == 0.8
    assert round(low, 2) == 0.63
    assert round(high, 2) == 0.90


def test_wilson_extremes_are_not_degenerate():
    assert S.wilson_interval(0, 30)[1] == 0.0 and S.wilson_interval(0, 30)[2] > 0.05
    assert S.wilson_interval(30, 30)[2] == 1.0 and S.wilson_interval(30, 30)[1] < 0.95


def test_wilson_no_trials_is_nan():
    assert all(math.isnan(v) for v in S.wilson_interval(0, 0))


@pytest.mark.parametrize(("k", "n"), [(-1, 10), (11, 10), (2.5, 10), (1, -3), ("a", 3)])
def test_wilson_rejects_bad_counts(k, n):
    with pytest.raises(S.StatsInputError) as err:
        S.wilson_interval(k, n)
    assert isinstance(err.value, ValueError) and isinstance(err.value, AblateError)


# ----------------------------------------------------------------------------------------------------------------
# Holm


HOLM_CASES = [
    [0.01, 0.04, 0.03, 0.005],
    [0.01, 0.01, 0.03, 0.03, 0.2],  # ties
    [0.5, 0.6, 0.9],  # capped at 1
    [0.04],
    [0.02, 0.02, 0.02, 0.02],  # all tied
    [0.001, 0.2, 0.0, 1.0, 0.04, 0.041, 0.3],
    [0.03, 0.01, 0.02],  # the largest raw p would get 1 * 0.03 but inherits 2 * 0.02 = 0.04 (monotonicity)
]


@pytest.fixture
def no_gc(monkeypatch):
    """statsmodels' multipletests calls gc.collect() after computing (~0.3 s a call here); it does not affect
    the result, so the differential tests skip it."""
    monkeypatch.setattr(gc, "collect", lambda *args: 0)


@pytest.mark.usefixtures("no_gc")
@pytest.mark.parametrize("pvals", HOLM_CASES)
def test_holm_matches_statsmodels(pvals):
    ours = S.holm(pvals)
    ref = multipletests(pvals, method="holm")[1]
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-15)


def test_holm_known_values():
    # Hand computation: sorted 0.005, 0.01, 0.03, 0.04 -> 4*0.005, 3*0.01, max(0.03, 2*0.03), max(0.06, 0.04).
    np.testing.assert_allclose(S.holm([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02])


@pytest.mark.usefixtures("no_gc")
def test_holm_nan_stay_nan_and_leave_the_family():
    pvals = np.array([0.01, np.nan, 0.04, 0.03, np.nan])
    before = pvals.copy()
    out = S.holm(pvals)
    assert np.isnan(out[[1, 4]]).all()
    ref = multipletests(pvals[~np.isnan(pvals)], method="holm")[1]
    np.testing.assert_allclose(out[~np.isnan(pvals)], ref)
    np.testing.assert_array_equal(pvals, before)  # input untouched (NaN-aware equality)


def test_holm_edge_inputs():
    assert S.holm([]).shape == (0,)
    assert np.isnan(S.holm([np.nan, np.nan])).all()
    with pytest.raises(S.StatsInputError):
        S.holm([0.2, 1.5])
    with pytest.raises(ValueError):
        S.holm([-0.1])


def _holm_by_definition(p: np.ndarray) -> np.ndarray:
    """p~_(i) = min(1, max_{j <= i} (m - j + 1) p_(j)), written as plain loops."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out = np.empty(m)
    for rank, i in enumerate(order, start=1):
        out[i] = min(1.0, max((m - r + 1) * p[order[r - 1]] for r in range(1, rank + 1)))
    return out


@settings(max_examples=60, deadline=None)
@given(
    hs.lists(
        hs.one_of(hs.sampled_from([0.0, 0.01, 0.05, 0.5, 1.0]), hs.floats(0.0, 1.0)),
        min_size=1,
        max_size=25,
    )
)
def test_holm_properties(pvals):
    # (statsmodels' multipletests runs gc.collect() per call, too slow here; the reference is the definition.)
    p = np.array(pvals)
    adj = S.holm(p)
    np.testing.assert_allclose(adj, _holm_by_definition(p), atol=1e-15)
    assert (adj >= p - 1e-15).all() and (adj <= 1.0).all()
    order = np.argsort(p, kind="stable")
    assert (np.diff(adj[order]) >= -1e-15).all()  # monotone in the raw p-values


# ----------------------------------------------------------------------------------------------------------------
# Bootstrap CIs


def test_bootstrap_ci_constant_is_degenerate():
    assert S.bootstrap_ci(np.full(25, 0.1)) == (0.1, 0.1, 0.1)
    assert S.bootstrap_ci([0.7]) == (0.7, 0.7, 0.7)
    assert S.bootstrap_ci([0.0, 0.0], method="bca") == (0.0, 0.0, 0.0)


def test_bootstrap_ci_empty_is_nan():
    assert all(math.isnan(v) for v in S.bootstrap_ci([]))
    assert all(math.isnan(v) for v in S.bootstrap_ci([np.nan, np.nan], nan_policy="omit"))


def test_bootstrap_ci_is_deterministic_for_a_seed():
    x = np.random.default_rng(3).random(60)
    assert S.bootstrap_ci(x, seed=11) == S.bootstrap_ci(x, seed=11)
    assert S.bootstrap_ci(x, seed=11) != S.bootstrap_ci(x, seed=12)
    mean, low, high = S.bootstrap_ci(x)
    assert mean == pytest.approx(x.mean()) and low < mean < high


def test_bootstrap_does_not_depend_on_chunk_size(monkeypatch):
    x = np.random.default_rng(4).random(37)
    a = np.random.default_rng(5).random(37)
    before = (S.bootstrap_ci(x, method="bca"), S.paired_bootstrap_test(x, a, n_resamples=3000))
    monkeypatch.setattr(resampling, "_CHUNK_ELEMENTS", 100)  # two resamples per chunk
    after = (S.bootstrap_ci(x, method="bca"), S.paired_bootstrap_test(x, a, n_resamples=3000))
    assert before == after


@pytest.mark.parametrize(("ours", "theirs"), [("percentile", "percentile"), ("bca", "BCa")])
def test_bootstrap_ci_matches_scipy_within_monte_carlo_error(ours, theirs):
    x = np.random.default_rng(7).exponential(size=40)  # skewed, like RR or nDCG on few queries
    _, low, high = S.bootstrap_ci(x, n_resamples=20000, method=ours, seed=1)
    ref = st.bootstrap((x,), np.mean, n_resamples=20000, method=theirs, rng=2).confidence_interval
    se = x.std(ddof=1) / math.sqrt(x.size)
    assert low == pytest.approx(ref.low, abs=0.15 * se)
    assert high == pytest.approx(ref.high, abs=0.15 * se)


def test_percentile_and_bca_match_a_hand_computation_on_the_documented_draw():
    # Documented contract: resample b uses row b of default_rng(seed).integers(0, n, (B, n)).
    x = np.random.default_rng(21).lognormal(sigma=1.2, size=12)  # small and very skewed: acceleration matters
    n, b, seed = x.size, 4000, 3
    boot = x[np.random.default_rng(seed).integers(0, n, (b, n))].mean(axis=1)
    theta = x.mean()
    assert S.bootstrap_ci(x, n_resamples=b, seed=seed)[1:] == pytest.approx(
        tuple(np.quantile(boot, [0.025, 0.975])), rel=1e-12
    )
    # BCa, Efron & Tibshirani (1993) eqs. 14.10-14.15, ties counted half.
    z0 = st.norm.ppf((np.sum(boot < theta) + 0.5 * np.sum(boot == theta)) / b)
    jack = np.array([np.delete(x, i).mean() for i in range(n)])
    dev = jack.mean() - jack
    accel = np.sum(dev**3) / (6 * np.sum(dev**2) ** 1.5)
    assert accel > 0.05
    levels = [st.norm.cdf(z0 + (z0 + z) / (1 - accel * (z0 + z))) for z in st.norm.ppf([0.025, 0.975])]
    expected = tuple(np.quantile(boot, levels))
    assert S.bootstrap_ci(x, n_resamples=b, seed=seed, method="bca")[1:] == pytest.approx(expected, rel=1e-9)


def test_bca_shifts_the_interval_right_on_right_skewed_data():
    x = np.random.default_rng(8).exponential(size=30)
    _, plow, phigh = S.bootstrap_ci(x, n_resamples=5000)
    _, blow, bhigh = S.bootstrap_ci(x, n_resamples=5000, method="bca")
    assert blow > plow and bhigh > phigh


def test_percentile_ci_of_a_bernoulli_sample_is_close_to_wilson():
    x = np.r_[np.ones(120), np.zeros(80)]
    _, low, high = S.bootstrap_ci(x, n_resamples=4000)
    _, wlow, whigh = S.wilson_interval(120, 200)
    assert low == pytest.approx(wlow, abs=0.015)
    assert high == pytest.approx(whigh, abs=0.015)


def test_percentile_ci_coverage_is_near_nominal():
    rng = np.random.default_rng(9)
    true_mean = 0.5 / (0.5 + 2.0)
    hits = 0
    trials = 300
    for i in range(trials):
        x = rng.beta(0.5, 2.0, size=40)  # skewed per-query scores in [0, 1]
        _, low, high = S.bootstrap_ci(x, n_resamples=500, seed=i)
        hits += low <= true_mean <= high
    assert 0.88 <= hits / trials <= 0.98


@settings(max_examples=40, deadline=None)
@given(hs.lists(hs.floats(0.0, 1.0), min_size=1, max_size=30), hs.sampled_from(["percentile", "bca"]))
def test_bootstrap_ci_stays_within_the_data(values, method):
    mean, low, high = S.bootstrap_ci(values, n_resamples=200, method=method)
    assert min(values) - 1e-12 <= low <= high <= max(values) + 1e-12
    assert mean == pytest.approx(float(np.mean(values)))


def test_bootstrap_ci_nan_policy():
    x = [0.1, np.nan, 0.5, 0.9]
    with pytest.raises(S.StatsInputError, match="nan_policy='omit'"):
        S.bootstrap_ci(x)
    mean, low, high = S.bootstrap_ci(x, nan_policy="omit")
    assert mean == pytest.approx(0.5) and 0.1 <= low < high <= 0.9


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"method": "bc"}, "method"),
        ({"confidence": 95}, "confidence"),
        ({"confidence": 0.0}, "confidence"),
        ({"n_resamples": 0}, "n_resamples"),
        ({"n_resamples": 10.5}, "n_resamples"),
        ({"seed": -1}, "seed"),
        ({"nan_policy": "drop"}, "nan_policy"),
    ],
)
def test_bootstrap_ci_rejects_bad_settings(kwargs, key):
    with pytest.raises(S.StatsConfigError) as err:
        S.bootstrap_ci([0.1, 0.2], **kwargs)
    assert err.value.key == key and isinstance(err.value, ValueError)


def test_bootstrap_ci_method_error_lists_the_registry():
    with pytest.raises(S.StatsConfigError, match="percentile, bca"):
        S.bootstrap_ci([0.1, 0.2], method="studentized")


def test_bootstrap_ci_rejects_bad_shapes():
    with pytest.raises(S.StatsInputError):
        S.bootstrap_ci([[0.1, 0.2], [0.3, 0.4]])
    with pytest.raises(S.StatsInputError):
        S.bootstrap_ci(["a", "b"])
    with pytest.raises(S.StatsInputError):
        S.bootstrap_ci([0.1, np.inf])


def _metric_table(n: int = 50) -> pd.DataFrame:
    rng = np.random.default_rng(10)
    ndcg = rng.beta(2, 2, n)
    return pd.DataFrame(
        {
            "ndcg@10": ndcg,
            "double": 2 * ndcg,
            "hit@10": (rng.random(n) < 0.7).astype(float),
            "rr@10": rng.beta(0.7, 1.5, n),
        },
        index=[f"q{i}" for i in range(n)],
    )


def test_bootstrap_cis_equal_per_column_bootstrap_ci():
    table = _metric_table()
    out = S.bootstrap_cis(table, ["ndcg@10", "hit@10", "rr@10"], n_resamples=500, seed=5, method="bca")
    assert list(out) == ["ndcg@10", "hit@10", "rr@10"]
    for col, interval in out.items():
        assert interval == S.bootstrap_ci(table[col].to_numpy(), n_resamples=500, seed=5, method="bca")


def test_bootstrap_cis_share_one_set_of_resampled_queries():
    # With shared query indices, every resample mean of `double` is exactly twice that of `ndcg@10`, so the
    # percentile bounds scale exactly; independent draws per column would break this.
    out = S.bootstrap_cis(_metric_table(), ["ndcg@10", "double"], n_resamples=999)
    m, lo, hi = out["ndcg@10"]
    assert out["double"] == pytest.approx((2 * m, 2 * lo, 2 * hi), rel=1e-12)


def test_bootstrap_cis_default_columns_and_errors():
    table = _metric_table().assign(system="bm25")
    assert list(S.bootstrap_cis(table, n_resamples=50)) == ["ndcg@10", "double", "hit@10", "rr@10"]
    with pytest.raises(S.StatsInputError, match="choose from"):
        S.bootstrap_cis(table, ["map"])
    with pytest.raises(S.StatsInputError, match="not all numeric"):
        S.bootstrap_cis(table, ["system"])
    with pytest.raises(S.StatsInputError):
        S.bootstrap_cis(table["ndcg@10"], ["ndcg@10"])


def test_bootstrap_cis_refuses_repeated_generations():
    # 3 generations per question are still 3 questions, not 9 samples.
    table = pd.DataFrame({"correct": [1, 0, 1, 1, 1, 1, 0, 0, 1]}, index=["q1", "q2", "q3"] * 3)
    with pytest.raises(S.StatsInputError, match="groupby"):
        S.bootstrap_cis(table, ["correct"])
    per_query = table.groupby(level=0).mean()
    assert S.bootstrap_cis(per_query, ["correct"])["correct"][0] == pytest.approx(6 / 9)


def test_bootstrap_cis_nan_policy_keeps_the_draw_shared():
    table = _metric_table()
    table.loc[["q3", "q7"], "ndcg@10"] = np.nan
    with pytest.raises(S.StatsInputError, match="q3"):
        S.bootstrap_cis(table, ["ndcg@10"])
    out = S.bootstrap_cis(table, ["ndcg@10", "hit@10"], nan_policy="omit", n_resamples=300)
    assert out["ndcg@10"][0] == pytest.approx(table["ndcg@10"].mean())  # pandas skips NaN too
    assert out["hit@10"] == S.bootstrap_ci(table["hit@10"], n_resamples=300)


def test_bootstrap_does_not_mutate_inputs():
    table = _metric_table()
    snapshot = table.copy()
    S.bootstrap_cis(table, n_resamples=20)
    pd.testing.assert_frame_equal(table, snapshot)


# ----------------------------------------------------------------------------------------------------------------
# Paired randomization test


def _small_pair(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Graded-metric-like values (multiples of 1/4) so that the null distribution has exact ties."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 5, n) / 4
    b = np.clip(a - rng.integers(-1, 3, n) / 4, 0, 1)
    return a, b


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_randomization_exact_enumeration_n10(seed):
    a, b = _small_pair(10, seed)
    res = S.paired_randomization_test(a, b)  # 2^10 = 1024 <= 10000 -> exact
    assert res.p_value == _exact_sign_flip_p(a - b)
    assert res.n == 10 and res.delta == pytest.approx(np.mean(a - b))


def test_randomization_exact_matches_scipy_exact():
    rng = np.random.default_rng(12)
    a, b = rng.random(10), rng.random(10)
    ref = st.permutation_test(
        (a, b), _paired_mean, permutation_type="samples", n_resamples=2000, vectorized=True
    )
    assert S.paired_randomization_test(a, b).p_value == pytest.approx(ref.pvalue, abs=1e-12)


def test_randomization_monte_carlo_close_to_exact():
    a, b = _small_pair(14, 4)  # 2^14 = 16384 > 5000 -> Monte Carlo
    exact = _exact_sign_flip_p(a - b)
    assert 0.1 < exact < 0.3  # a moderate p, where sampling error is largest
    res = S.paired_randomization_test(a, b, n_resamples=5000)
    assert res.p_value != exact  # it really was sampled
    assert res.p_value == pytest.approx(exact, abs=4 * math.sqrt(exact * (1 - exact) / 5000) + 1e-3)


def test_randomization_monte_carlo_close_to_scipy():
    rng = np.random.default_rng(13)
    a = rng.beta(2, 2, 30)
    b = np.clip(a - 0.04 + rng.normal(0, 0.12, 30), 0, 1)
    ours = S.paired_randomization_test(a, b, n_resamples=20000, seed=4).p_value
    ref = st.permutation_test(
        (a, b), _paired_mean, permutation_type="samples", n_resamples=20000, vectorized=True, rng=5
    ).pvalue
    assert 0.01 < ref < 0.99
    assert ours == pytest.approx(ref, abs=5 * math.sqrt(2 * ref * (1 - ref) / 20000))


def test_randomization_identical_and_shifted():
    a, _ = _small_pair(25, 6)
    same = S.paired_randomization_test(a, a.copy())
    assert same.delta == 0.0 and same.p_value == 1.0
    shifted = S.paired_randomization_test(a + 0.3, a, n_resamples=4999)
    assert shifted.p_value == pytest.approx(1 / 5000)
    assert shifted.ci_low == pytest.approx(0.3) and shifted.ci_high == pytest.approx(0.3)


def test_randomization_is_deterministic_and_seeded():
    a, b = _small_pair(40, 7)
    assert S.paired_randomization_test(a, b, seed=1) == S.paired_randomization_test(a, b, seed=1)
    assert (
        S.paired_randomization_test(a, b, seed=1).p_value != S.paired_randomization_test(a, b, seed=2).p_value
    )


def test_randomization_ci_is_the_bootstrap_ci_of_the_differences():
    a, b = _small_pair(40, 8)
    res = S.paired_randomization_test(a, b, n_resamples=3000, seed=9, confidence=0.9)
    _, low, high = S.bootstrap_ci(a - b, n_resamples=3000, seed=9, confidence=0.9)
    assert (res.ci_low, res.ci_high) == (low, high)


# ----------------------------------------------------------------------------------------------------------------
# Paired bootstrap test


def test_paired_bootstrap_is_deterministic_for_a_seed():
    a, b = _small_pair(40, 10)
    assert S.paired_bootstrap_test(a, b, seed=3) == S.paired_bootstrap_test(a, b, seed=3)
    assert S.paired_bootstrap_test(a, b, seed=3).p_value != S.paired_bootstrap_test(a, b, seed=4).p_value


def test_paired_bootstrap_identical_arrays_give_p_one():
    a = np.random.default_rng(11).random(30)
    res = S.paired_bootstrap_test(a, a.copy())
    assert res.delta == 0.0 and res.p_value == 1.0 and (res.ci_low, res.ci_high) == (0.0, 0.0)


def test_paired_bootstrap_clear_shift_gives_small_p():
    rng = np.random.default_rng(12)
    b = rng.beta(2, 3, 40)
    a = np.clip(b + 0.15 + rng.normal(0, 0.05, 40), 0, 1)
    res = S.paired_bootstrap_test(a, b, n_resamples=5000)
    assert res.p_value < 0.001
    assert 0 < res.ci_low < res.delta < res.ci_high
    assert res.delta == pytest.approx(a.mean() - b.mean())
    assert (res.mean_a, res.mean_b) == (pytest.approx(a.mean()), pytest.approx(b.mean()))


def test_paired_bootstrap_constant_shift():
    a = np.arange(12) / 8  # dyadic: a + 0.25 - a is exactly 0.25
    res = S.paired_bootstrap_test(a + 0.25, a, n_resamples=999)
    assert res.p_value == pytest.approx(1 / 1000)
    assert res.ci_low == pytest.approx(0.25) and res.ci_high == pytest.approx(0.25)


def test_paired_bootstrap_agrees_with_t_test_on_normal_data():
    # Smucker et al. (2007): bootstrap, randomization and t-test p-values agree closely on IR-sized samples.
    rng = np.random.default_rng(14)
    b = rng.normal(0.5, 0.2, 50)
    a = b + rng.normal(0.03, 0.1, 50)
    boot = S.paired_bootstrap_test(a, b, n_resamples=20000)
    rand = S.paired_randomization_test(a, b, n_resamples=20000)
    t = st.ttest_rel(a, b)
    ci = t.confidence_interval(0.95)
    assert 0.01 < t.pvalue < 0.5
    assert boot.p_value == pytest.approx(t.pvalue, abs=0.02)
    assert rand.p_value == pytest.approx(t.pvalue, abs=0.02)
    assert boot.ci_low == pytest.approx(ci.low, abs=0.005) and boot.ci_high == pytest.approx(
        ci.high, abs=0.005
    )


@pytest.mark.parametrize("test", [S.paired_bootstrap_test, S.paired_randomization_test])
def test_paired_tests_are_calibrated_under_the_null(test):
    rng = np.random.default_rng(15)
    pvals = []
    for i in range(200):
        base = rng.beta(2, 2, 30)
        a = np.clip(base + rng.normal(0, 0.1, 30), 0, 1)
        b = np.clip(base + rng.normal(0, 0.1, 30), 0, 1)
        pvals.append(test(a, b, n_resamples=500, seed=i).p_value)
    pvals = np.array(pvals)
    assert 0.015 <= (pvals < 0.05).mean() <= 0.1
    assert 0.4 <= np.median(pvals) <= 0.6


@pytest.mark.parametrize("test", [S.paired_bootstrap_test, S.paired_randomization_test])
def test_paired_tests_reject_misaligned_input(test):
    with pytest.raises(ValueError, match="a has 3 values and b has 2"):
        test([0.1, 0.2, 0.3], [0.1, 0.2])
    with pytest.raises(S.StatsInputError, match="different queries"):
        test(pd.Series([0.1, 0.2], index=["q1", "q2"]), pd.Series([0.1, 0.2], index=["q1", "q3"]))
    with pytest.raises(S.StatsInputError, match="NaN"):
        test([0.1, np.nan, 0.3], [0.1, 0.2, 0.3])


@pytest.mark.parametrize("test", [S.paired_bootstrap_test, S.paired_randomization_test])
def test_paired_tests_align_series_by_query_id(test):
    a, b = _small_pair(20, 16)
    ids = [f"q{i}" for i in range(20)]
    sa = pd.Series(a, index=ids)
    sb = pd.Series(b, index=ids).sample(frac=1.0, random_state=0)  # same queries, shuffled order
    assert test(sa, sb) == test(a, b)


@pytest.mark.parametrize("test", [S.paired_bootstrap_test, S.paired_randomization_test])
def test_paired_tests_nan_omit_drops_the_pair(test):
    a, b = _small_pair(20, 17)
    a2, b2 = a.copy(), b.copy()
    a2[3], b2[11] = np.nan, np.nan
    keep = np.ones(20, bool)
    keep[[3, 11]] = False
    assert test(a2, b2, nan_policy="omit") == test(a[keep], b[keep])


@pytest.mark.parametrize("test", [S.paired_bootstrap_test, S.paired_randomization_test])
def test_paired_tests_empty_input(test):
    res = test([], [])
    assert res.n == 0 and math.isnan(res.p_value) and math.isnan(res.delta)


# ----------------------------------------------------------------------------------------------------------------
# Kept in the cache by content


def test_kept_intervals_are_keyed_by_the_code_of_every_statistics_module(tmp_path, monkeypatch):
    """The cache key of kept intervals (and of the report's kept tests, ``stats.code_digest``) covers the source of
    every module of the package, so an entry computed by other resampling or test code is never served."""
    from pathlib import Path

    from ablate.cache import Cache
    from ablate.evaluation.stats import kept

    read: list[str] = []
    real = kept.source_digest
    monkeypatch.setattr(kept, "source_digest", lambda path: read.append(Path(path).name) or real(path))
    kept.code_digest.cache_clear()
    try:
        digest = S.code_digest()
    finally:
        kept.code_digest.cache_clear()
    package = sorted(p.name for p in Path(kept.__file__).parent.glob("*.py"))
    assert sorted(read) == package and {"bootstrap.py", "paired.py", "resampling.py"} <= set(package)

    table = pd.DataFrame({"m": np.random.default_rng(3).random(30)}, index=[f"q{i}" for i in range(30)])
    cache = Cache(tmp_path / "cache")
    first = S.bootstrap_cis_kept(table, ["m"], 200, 0, cache, "ci_test")
    monkeypatch.setattr(kept, "bootstrap_cis", lambda *a, **k: pytest.fail("resampled although kept"))
    assert S.bootstrap_cis_kept(table, ["m"], 200, 0, cache, "ci_test") == first
    monkeypatch.setattr(kept, "code_digest", lambda: "other statistics code" + digest)
    with pytest.raises(pytest.fail.Exception, match="resampled although kept"):
        S.bootstrap_cis_kept(table, ["m"], 200, 0, cache, "ci_test")
