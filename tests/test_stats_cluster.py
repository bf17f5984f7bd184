"""Cluster-aware statistics (ablate.evaluation.stats with ``groups=``): with every question its own cluster they are
today's per-question statistics exactly; the cluster randomisation test is scipy's permutation test on the clusters'
sums; the cluster-robust standard error is statsmodels'; the cluster bootstrap's spread is that SE; and on simulated
nothing-changed pairs of clustered questions the clustered tests alarm at alpha where the per-question ones do not.

Every reference is computed independently here (scipy, statsmodels, a hand-written simulation)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import scipy.stats as st
import statsmodels.api as sm

from ablate.evaluation import stats as S
from ablate.evaluation.stats import StatsInputError
from ablate.evaluation.stats.bootstrap import _bca_bounds, _bootstrap_means
from ablate.evaluation.stats.cluster import cluster_bca_bounds, cluster_means, cluster_se
from ablate.evaluation.stats.cluster_paired import cluster_bootstrap, cluster_randomization

TESTS = {"randomization": S.paired_randomization_tests, "bootstrap": S.paired_bootstrap_tests}


def _clustered_pair(
    g: int, m: int, icc: float, seed: int, shift: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Differences of ``g`` clusters of ``m`` questions with within-cluster correlation ``icc`` (unit variance)."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(g), m)
    d = rng.normal(0, math.sqrt(icc), g)[labels] + rng.normal(0, math.sqrt(1 - icc), g * m) + shift
    return d, labels


# --- every question its own cluster: today's numbers, exactly ---------------------------------------------------


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_singleton_clusters_give_the_per_question_intervals_exactly(method):
    rng = np.random.default_rng(1)
    table = pd.DataFrame(rng.random((27, 3)), columns=["a", "b", "c"], index=[f"q{i}" for i in range(27)])
    table.iloc[[2, 9], 1] = np.nan
    own = [f"cluster-{i}" for i in range(27)]
    plain = S.bootstrap_cis(table, n_resamples=700, seed=3, method=method, nan_policy="omit")
    assert (
        S.bootstrap_cis(table, n_resamples=700, seed=3, method=method, nan_policy="omit", groups=own) == plain
    )
    series = pd.Series(own[::-1], index=table.index[::-1])  # read by query id
    assert (
        S.bootstrap_cis(table, n_resamples=700, seed=3, method=method, nan_policy="omit", groups=series)
        == plain
    )
    x = table["a"].to_numpy()
    assert S.bootstrap_ci(x, 500, seed=2, method=method, groups=own) == S.bootstrap_ci(
        x, 500, seed=2, method=method
    )


def test_the_cluster_kernels_on_singleton_clusters_compute_the_per_question_draws():
    """The cluster bootstrap itself (not only the public functions' dispatch) reduces to the per-question bootstrap:
    the same resampled means bit for bit, the same BCa endpoints."""
    rng = np.random.default_rng(2)
    table = rng.random((19, 2))
    table[4, 0] = np.nan
    codes = np.arange(19)
    boot = _bootstrap_means(table, 900, 5)
    assert np.array_equal(cluster_means(table, codes, 900, 5), boot, equal_nan=True)
    for j in range(2):
        col = table[:, j]
        assert cluster_bca_bounds(boot[:, j], col, codes, 0.9) == _bca_bounds(
            boot[:, j], col[~np.isnan(col)], 0.9
        )


@pytest.mark.parametrize("n", [9, 40])  # randomization: exact (2^9 <= 10000) and Monte Carlo
def test_the_cluster_tests_on_singleton_clusters_are_the_per_question_tests(n):
    rng = np.random.default_rng(n)
    d = rng.normal(0.1, 1, n)
    codes = np.arange(n)
    for kernel, test in (
        (cluster_randomization, S.paired_randomization_test),
        (cluster_bootstrap, S.paired_bootstrap_test),
    ):
        ref = test(d, np.zeros(n), n_resamples=3000, seed=4)
        low, high, p = kernel([d], codes, 3000, 4, 0.95)[0]
        assert (low, high) == (ref.ci_low, ref.ci_high) and p == pytest.approx(ref.p_value, abs=0)


@pytest.mark.parametrize("name", list(TESTS))
def test_paired_tests_with_singleton_clusters_equal_those_without(name):
    rng = np.random.default_rng(8)
    pairs = [(rng.random(15), rng.random(15)) for _ in range(3)] + [(rng.random(22), rng.random(22))]
    groups = [[f"g{i}" for i in range(a.size)] for a, _ in pairs]
    assert TESTS[name](pairs, n_resamples=800, seed=1, groups=groups) == TESTS[name](
        pairs, n_resamples=800, seed=1
    )


# --- independent references ---------------------------------------------------------------------------------------


def _paired_mean(x, y, axis=-1):
    return np.mean(x - y, axis=axis)


@pytest.mark.parametrize(("g", "resamples"), [(8, 10000), (14, 20000)])  # exact (2^8 <= 10000), Monte Carlo
def test_cluster_randomization_is_scipys_permutation_test_on_the_cluster_sums(g, resamples):
    """Balanced clusters: flipping a cluster's signs together is swapping the two systems' cluster sums."""
    rng = np.random.default_rng(g)
    m = 4
    labels = np.repeat(np.arange(g), m)
    b = rng.random(g * m)
    a = np.clip(b + rng.normal(0.05, 0.1, g)[labels] + rng.normal(0, 0.1, g * m), 0, 1)
    ours = S.paired_randomization_test(a, b, n_resamples=resamples, seed=2, groups=labels).p_value
    sums_a, sums_b = (np.bincount(labels, weights=x) for x in (a, b))
    ref = st.permutation_test(
        (sums_a, sums_b),
        _paired_mean,
        permutation_type="samples",
        n_resamples=resamples,
        vectorized=True,
        rng=3,
    ).pvalue
    if (1 << g) <= resamples:
        assert ours == pytest.approx(ref, abs=1e-12)
    else:
        assert 0.01 < ref < 0.99 and ours == pytest.approx(
            ref, abs=5 * math.sqrt(2 * ref * (1 - ref) / resamples)
        )
    per_question = S.paired_randomization_test(a, b, n_resamples=resamples, seed=2).p_value
    assert per_question != ours


@pytest.mark.parametrize("seed", range(5))
def test_the_cluster_robust_se_is_statsmodels_and_the_cluster_bootstrap_spreads_by_it(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(30, 60))
    labels = rng.integers(0, int(rng.integers(6, 12)), n)
    d = rng.normal(0, 0.5, labels.max() + 1)[labels] + rng.normal(0, 0.5, n)
    codes = np.unique(labels, return_inverse=True)[1]
    fit = sm.OLS(d, np.ones(n)).fit(cov_type="cluster", cov_kwds={"groups": codes})
    assert cluster_se(d, codes) == pytest.approx(float(fit.bse[0]), rel=1e-10)
    # the bootstrap of G clusters has variance (G-1)/G of CR1's (no small-sample factor), up to the ratio's bias
    g = codes.max() + 1
    boot = cluster_means(d[:, None], codes, 4000, seed)[:, 0]
    assert float(boot.std(ddof=1)) == pytest.approx(cluster_se(d, codes) * math.sqrt((g - 1) / g), rel=0.12)


def test_cluster_intervals_are_wider_by_about_the_design_effect():
    """Clusters of 6 at ICC 0.5 (design effect 3.5): the cluster bootstrap interval is about sqrt(3.5) = 1.9 times
    the per-question one; with questions independent, about as wide."""
    d, labels = _clustered_pair(30, 6, 0.5, 11)
    table = pd.DataFrame({"d": d})
    naive = S.bootstrap_cis(table, n_resamples=4000, seed=0)["d"]
    clustered = S.bootstrap_cis(table, n_resamples=4000, seed=0, groups=labels)["d"]
    ratio = (clustered[2] - clustered[1]) / (naive[2] - naive[1])
    assert ratio == pytest.approx(math.sqrt(1 + 5 * 0.5), rel=0.25)
    assert clustered[0] == naive[0] == pytest.approx(d.mean())


# --- calibration ------------------------------------------------------------------------------------------------


def test_on_nothing_changed_clustered_pairs_the_clustered_tests_alarm_at_alpha():
    """1,000 simulated nothing-changed pairs of 10 clusters of 5 questions (ICC 0.3): the per-question tests reject
    at 0.05 in far more than 5% of them, the clustered tests in at most 7%."""
    reps = 1000
    sims = [_clustered_pair(10, 5, 0.3, 1000 + r) for r in range(reps)]
    pairs = [(d, np.zeros(d.size)) for d, _ in sims]
    labels = [lab for _, lab in sims]
    for name, test in TESTS.items():
        naive = np.mean([r.p_value <= 0.05 for r in test(pairs, n_resamples=1024, seed=0)])
        clustered = np.mean([r.p_value <= 0.05 for r in test(pairs, n_resamples=1024, seed=0, groups=labels)])
        assert naive > 0.12 and clustered <= 0.07, (name, naive, clustered)


def test_a_real_difference_is_still_found_over_clusters():
    d, labels = _clustered_pair(20, 4, 0.3, 5, shift=0.8)
    for test in TESTS.values():
        (res,) = test([(d, np.zeros(d.size))], n_resamples=2000, seed=0, groups=[labels])
        assert res.p_value < 0.05 and res.ci_low > 0 and res.delta == pytest.approx(d.mean())


# --- edges and input errors ----------------------------------------------------------------------------------------


def test_one_cluster_has_no_interval_and_no_bootstrap_test():
    d = np.array([0.1, 0.3, -0.2, 0.4])
    one = ["x"] * 4
    mean, low, high = S.bootstrap_ci(d, 200, groups=one)
    assert mean == pytest.approx(d.mean()) and math.isnan(low) and math.isnan(high)
    res = S.paired_bootstrap_test(d, np.zeros(4), n_resamples=200, groups=one)
    assert math.isnan(res.p_value) and res.delta == pytest.approx(d.mean())
    assert S.paired_randomization_test(d, np.zeros(4), n_resamples=200, groups=one).p_value == 1.0


def test_nan_omit_drops_the_question_and_its_label():
    a = pd.Series([0.9, np.nan, 0.5, 0.7, 0.2, 0.8], index=list("abcdef"))
    b = pd.Series([0.1, 0.3, 0.4, 0.2, 0.3, 0.1], index=list("abcdef"))
    groups = pd.Series(["x", "x", "y", "y", "z", "z"], index=list("fedcba"))  # by query id
    got = S.paired_randomization_test(a, b, nan_policy="omit", groups=groups)
    keep = ~a.isna()
    ref = S.paired_randomization_test(
        a[keep].to_numpy(), b[keep].to_numpy(), groups=groups.reindex(a.index)[keep].tolist()
    )
    assert got == ref and got.n == 5


def test_bad_groups_are_one_clear_error():
    d = np.arange(5.0)
    with pytest.raises(StatsInputError, match=r"got 4 cluster labels for 5 queries"):
        S.bootstrap_ci(d, 100, groups=["a", "a", "b", "b"])
    with pytest.raises(StatsInputError, match=r"got 1 entries of cluster labels for 2 pairs"):
        S.paired_randomization_tests([(d, d), (d, d)], groups=[["a"] * 5])
    table = pd.DataFrame({"m": d}, index=list("abcde"))
    with pytest.raises(StatsInputError, match=r"no cluster label for query id\(s\) \['e'\]"):
        S.bootstrap_cis(table, groups=pd.Series(["x"] * 4, index=list("abcd")))


def test_kept_intervals_are_keyed_by_their_clusters_too(tmp_path, monkeypatch):
    from ablate.cache import Cache
    from ablate.evaluation.stats import kept

    d, labels = _clustered_pair(8, 4, 0.4, 2)
    table = pd.DataFrame({"m": d}, index=[f"q{i}" for i in range(d.size)])
    cache = Cache(tmp_path / "cache")
    naive = S.bootstrap_cis_kept(table, ["m"], 300, 0, cache, "ci_test")
    clustered = S.bootstrap_cis_kept(table, ["m"], 300, 0, cache, "ci_test", groups=labels.tolist())
    assert clustered != naive  # not served the per-question entry
    monkeypatch.setattr(kept, "bootstrap_cis", lambda *a, **k: pytest.fail("resampled although kept"))
    assert S.bootstrap_cis_kept(table, ["m"], 300, 0, cache, "ci_test", groups=labels.tolist()) == clustered
