"""Power of a paired comparison over questions (MDE, questions needed, a bootstrap check) and the corrections:
checked against statsmodels and against an independent noncentral-t computation with scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from ablate.evaluation import stats


def nct_power(es: float, n: int, alpha: float) -> float:
    """Two-sided one-sample t power from the noncentral t directly (independent of statsmodels)."""
    df = n - 1
    crit = sps.t.ppf(1 - alpha / 2, df)
    nc = es * math.sqrt(n)
    return float(sps.nct.sf(crit, df, nc) + sps.nct.sf(crit, df, -nc))  # P(T < -c; nc) = P(T > c; -nc)


@pytest.fixture
def pilot() -> np.ndarray:
    return np.random.default_rng(7).normal(0.01, 0.12, size=60)


def test_mde_equals_statsmodels_and_the_noncentral_t(pilot):
    sd = np.std(pilot, ddof=1)
    for n, alpha, power in ((60, 0.05, 0.8), (240, 0.01, 0.9), (10, 0.05, 0.5)):
        got = stats.mde(pilot, n=n, alpha=alpha, power=power)
        es = TTestPower().solve_power(effect_size=None, nobs=n, alpha=alpha, power=power)
        assert got == pytest.approx(es * sd, abs=1e-6)
        indep = optimize.brentq(
            lambda e, n=n, a=alpha, p=power: nct_power(e, n, a) - p, 1e-6, 10 / math.sqrt(n), xtol=1e-12
        )
        assert got == pytest.approx(indep * sd, abs=1e-6)
    assert stats.mde(pilot) == pytest.approx(stats.mde(pilot, n=60), abs=0)


def test_n_needed_equals_statsmodels_and_reaches_the_power(pilot):
    sd = np.std(pilot, ddof=1)
    for delta in (0.02, 0.05, 0.1):
        got = stats.n_needed(pilot, delta, alpha=0.05, power=0.8)
        raw = TTestPower().solve_power(effect_size=delta / sd, nobs=None, alpha=0.05, power=0.8)
        assert got == math.ceil(raw)
        # the independent computation: power reaches 0.8 at n, not at n - 1
        assert nct_power(delta / sd, int(got), 0.05) >= 0.8
        assert nct_power(delta / sd, int(got) - 1, 0.05) < 0.8
        root = optimize.brentq(
            lambda n, d=delta: nct_power(d / sd, n, 0.05) - 0.8, 2.0, (10 * sd / delta) ** 2, xtol=1e-10
        )
        assert raw == pytest.approx(root, abs=1e-6)


def test_undetermined_pilots_give_nan_and_say_why():
    same = np.full(20, 0.1)
    assert math.isnan(stats.mde(same)) and math.isnan(stats.n_needed(same, 0.03))
    assert "spread 0" in (stats.undetermined(same) or "")
    assert math.isnan(stats.mde([0.1]))
    assert "at least 2" in (stats.undetermined([0.1]) or "")
    assert math.isnan(stats.mde(np.arange(5.0), n=1))
    assert all(math.isnan(x) for x in stats.simulated_power(same, 0.03, 30))
    with pytest.raises(stats.StatsConfigError):
        stats.n_needed(np.arange(5.0), 0.0)
    with pytest.raises(stats.StatsConfigError):
        stats.mde(np.arange(5.0), power=1.0)


def test_simulated_power_within_its_monte_carlo_error_of_the_analytic(pilot):
    n = 80
    delta = stats.mde(pilot, n=n)  # analytic power 0.8 at this delta
    share, se = stats.simulated_power(pilot, delta, n, n_sims=4000, seed=3)
    assert se == pytest.approx(math.sqrt(share * (1 - share) / 4000))
    assert abs(share - stats.t_power(pilot, delta, n)) <= 3 * se
    assert stats.simulated_power(pilot, delta, n, n_sims=4000, seed=3) == (share, se)  # seeded


def test_planned_n_reaches_the_nominal_power_on_fresh_normal_studies():
    """A known effect: the n planned from a large pilot of N(delta, sd) reaches 80% power over 4,000 fresh
    studies of that size (each a paired t test), within 3 points."""
    rng = np.random.default_rng(11)
    delta, sd = 0.03, 0.15
    pilot = rng.normal(0.0, sd, size=5000)
    pilot = (pilot - pilot.mean()) / pilot.std(ddof=1) * sd  # the pilot's spread is exactly sd
    n = int(stats.n_needed(pilot, delta, alpha=0.05, power=0.8))
    assert n == math.ceil(TTestPower().solve_power(effect_size=delta / sd, alpha=0.05, power=0.8))
    studies = rng.normal(delta, sd, size=(4000, n))
    rejected = sps.ttest_1samp(studies, 0.0, axis=1).pvalue <= 0.05
    assert abs(rejected.mean() - 0.8) <= 0.03


def test_wilson_24_of_30_is_about_63_to_90_percent():
    p, low, high = stats.wilson_interval(24, 30)
    assert (round(low, 2), round(high, 2)) == (0.63, 0.90)
    assert stats.wilson_width(0.8, 30) == pytest.approx(high - low)
    assert stats.wilson_width(0.8, 120) < stats.wilson_width(0.8, 30) / 1.8  # about 1/sqrt(4)


def test_benjamini_hochberg_equals_statsmodels_and_keeps_nan():
    rng = np.random.default_rng(5)
    p = np.concatenate([rng.uniform(0, 0.05, 6), rng.uniform(0, 1, 14)])
    assert np.allclose(stats.benjamini_hochberg(p), multipletests(p, method="fdr_bh")[1], atol=1e-12)
    assert np.allclose(stats.adjust(p, "holm"), multipletests(p, method="holm")[1], atol=1e-12)
    with_nan = np.array([[0.01, np.nan], [0.04, 0.03]])
    got = stats.adjust(with_nan, "bh")
    assert np.isnan(got[0, 1])
    assert np.allclose(got[~np.isnan(got)], multipletests([0.01, 0.04, 0.03], method="fdr_bh")[1])
    assert np.array_equal(stats.adjust(with_nan, "none"), with_nan, equal_nan=True)
    with pytest.raises(stats.StatsConfigError):
        stats.adjust(p, "bonferroni")
