"""``ablate.evaluation.stats`` against naive references, and its edges and messages.

The paired tests are checked against naive reference implementations written here from the docstrings (one resample
at a time, two-pass variances, itertools enumeration of sign vectors) that draw the same documented random stream
(``numpy.random.default_rng(seed)``: ``integers(0, n, (B, n))`` for the bootstrap, ``integers(0, 2, (B, n))`` for the
sign flips), so the p-values must agree exactly, not just within Monte-Carlo error.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from ablate.evaluation import stats as S
from ablate.evaluation.stats.bootstrap import percentile_bounds

TIE = 1e-12


# ----------------------------------------------------------------------------------------------------------------
# references


def _ref_paired_bootstrap(a, b, n_resamples: int, seed: int, confidence: float = 0.95):
    """Shifted-null studentized bootstrap test (E&T 1993 §16.4, Hall & Wilson 1991), one resample at a time."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    n = d.size
    delta = d.mean()
    t_obs = delta / (d.std(ddof=1) / math.sqrt(n))
    w = d - delta
    idx = np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))
    count = 0
    means = []
    for row in idx:
        s = w[row]
        if np.all(s == s[0]):  # every drawn value equal: t* = 0 if they are 0, else infinite
            t = 0.0 if s[0] == 0.0 else math.inf
        else:
            t = s.mean() / (s.std(ddof=1) / math.sqrt(n))
        count += abs(t) >= abs(t_obs) * (1 - TIE)
        means.append(d[row].mean())
    alpha = 1 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return (count + 1) / (n_resamples + 1), low, high


def _ref_exact_sign_flip(d) -> float:
    """p = #{s in {-1,+1}^n : |mean(s d)| >= |mean(d)|} / 2^n, by itertools enumeration."""
    d = np.asarray(d, dtype=float)
    signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
    stat = np.abs(signs @ d) / d.size
    obs = abs(d.mean())
    return float(np.count_nonzero(stat >= obs * (1 - TIE))) / len(signs)


def _ref_mc_sign_flip(d, n_resamples: int, seed: int) -> float:
    """Monte-Carlo sign flips drawn in one go; p = (1 + #{|T_b| >= |T|}) / (B + 1) (Phipson & Smyth 2010)."""
    d = np.asarray(d, dtype=float)
    signs = np.random.default_rng(seed).integers(0, 2, size=(n_resamples, d.size)) * 2.0 - 1.0
    stat = np.abs(signs @ d / d.size)
    obs = abs(d.mean())
    return (np.count_nonzero(stat >= obs * (1 - TIE)) + 1) / (n_resamples + 1)


def _pair(n: int, seed: int):
    rng = np.random.default_rng(seed)
    b = rng.random(n)
    return np.clip(b + rng.normal(0.05, 0.2, n), 0, 1), b


# ----------------------------------------------------------------------------------------------------------------
# paired bootstrap test


# d = a - b with an entry equal to the mean (so some resamples are all-zero after the shift), small n (so many
# resamples draw one value n times), |t| < 1 and |t| > 1.
BOOT_CASES = {
    "t_below_1": ([-1.5, 1.5, 0.75, 2.25], [0.5, 0.5, 0.5, 0.5]),  # d = -2, 1, .25, 1.75; delta .25
    "t_above_1": ([0.0, 1.0, 2.0], [0.0, 0.0, 0.0]),  # d = 0, 1, 2; delta 1, t = sqrt(3)
    "generic": _pair(25, 1),
}


@pytest.mark.parametrize("case", list(BOOT_CASES))
def test_paired_bootstrap_matches_the_reference_p_and_interval(case):
    a, b = BOOT_CASES[case]
    res = S.paired_bootstrap_test(a, b, n_resamples=3000, seed=7)
    p, low, high = _ref_paired_bootstrap(a, b, 3000, 7)
    assert res.p_value == p
    assert res.ci_low == pytest.approx(low, abs=1e-12) and res.ci_high == pytest.approx(high, abs=1e-12)
    d = np.asarray(a) - np.asarray(b)
    assert res.n == len(d) and res.delta == pytest.approx(d.mean(), abs=1e-15)
    assert (res.mean_a, res.mean_b) == (pytest.approx(np.mean(a)), pytest.approx(np.mean(b)))


def test_paired_bootstrap_observed_t_zero_gives_p_one():
    # delta = 0 with non-constant differences: every resample is at least as extreme as t = 0
    res = S.paired_bootstrap_test([1.0, 0.0, 0.5], [0.0, 1.0, 0.5], n_resamples=500, seed=1)
    assert res.delta == 0.0 and res.p_value == 1.0


@pytest.mark.parametrize("scale", [2.0**-40, 2.0**40])
def test_paired_bootstrap_p_is_scale_invariant(scale):
    # the statistic is studentized, so multiplying every value by a power of two (exact in floating point) must
    # give the bit-identical p-value: the "all drawn values equal" tolerances are relative, not absolute
    for a, b in BOOT_CASES.values():
        a, b = np.asarray(a), np.asarray(b)
        base = S.paired_bootstrap_test(a, b, n_resamples=2000, seed=3)
        scaled = S.paired_bootstrap_test(a * scale, b * scale, n_resamples=2000, seed=3)
        assert scaled.p_value == base.p_value
        assert scaled.ci_low == base.ci_low * scale and scaled.ci_high == base.ci_high * scale


def test_paired_bootstrap_emits_no_numpy_warnings_on_flat_resamples():
    a, b = BOOT_CASES["t_below_1"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        S.paired_bootstrap_test(a, b, n_resamples=2000, seed=0)
        S.paired_bootstrap_test([1.0, 0.0, 0.5], [0.0, 1.0, 0.5], n_resamples=500, seed=1)


def test_paired_bootstrap_defaults_are_10000_resamples_and_seed_0():
    a, b = _pair(30, 2)
    assert S.paired_bootstrap_test(a, b) == S.paired_bootstrap_test(a, b, n_resamples=10000, seed=0)
    assert S.paired_bootstrap_test(a, b) != S.paired_bootstrap_test(a, b, n_resamples=10000, seed=1)
    # constant shift over n >= 2 queries: p = 1 / (B + 1) with the default B
    two = S.paired_bootstrap_test([0.75, 1.0], [0.25, 0.5])
    assert two == S.PairedResult(0.875, 0.375, 0.5, 0.5, 0.5, 1 / 10001, 2)


def test_paired_bootstrap_single_pair():
    # one nonzero pair: no test is possible (p = nan); one zero pair: no difference (p = 1)
    one = S.paired_bootstrap_test([0.75], [0.25])
    assert (one.mean_a, one.mean_b, one.delta, one.ci_low, one.ci_high, one.n) == (
        0.75,
        0.25,
        0.5,
        0.5,
        0.5,
        1,
    )
    assert math.isnan(one.p_value)
    zero = S.paired_bootstrap_test([0.5], [0.5])
    assert zero == S.PairedResult(0.5, 0.5, 0.0, 0.0, 0.0, 1.0, 1)


# ----------------------------------------------------------------------------------------------------------------
# paired randomization test


def test_randomization_exact_when_2_to_the_n_equals_the_budget():
    a, b = _pair(4, 3)
    res = S.paired_randomization_test(a, b, n_resamples=16)  # 2^4 == 16: exact enumeration
    assert res.p_value == _ref_exact_sign_flip(a - b)
    assert res.p_value * 16 == round(res.p_value * 16)  # a multiple of 1/16, not (count + 1) / 17


def test_randomization_default_budget_enumerates_n_13_exactly():
    a, b = _pair(13, 4)  # 2^13 = 8192 <= 10000 (the default): exact
    res = S.paired_randomization_test(a, b)
    assert res.p_value == _ref_exact_sign_flip(a - b)
    assert res == S.paired_randomization_test(a, b, n_resamples=10000, seed=0)


def test_randomization_exact_enumeration_across_chunks():
    # 2^18 sign vectors do not fit one chunk of 2^22 elements: the chunks must add up to the full enumeration
    a, b = _pair(18, 5)
    res = S.paired_randomization_test(a, b, n_resamples=1 << 18)
    assert res.p_value == _ref_exact_sign_flip(a - b)


def test_randomization_monte_carlo_matches_the_reference_draw():
    a, b = _pair(20, 6)  # 2^20 > 3000: Monte Carlo
    res = S.paired_randomization_test(a, b, n_resamples=3000, seed=11)
    assert res.p_value == _ref_mc_sign_flip(a - b, 3000, 11)
    # default budget and seed
    assert S.paired_randomization_test(a, b).p_value == _ref_mc_sign_flip(a - b, 10000, 0)


def test_randomization_monte_carlo_across_chunks():
    # n = 100: one chunk holds 41943 sign vectors, so 100000 draws take three chunks (the last one partial)
    a, b = _pair(100, 7)
    res = S.paired_randomization_test(a, b, n_resamples=100_000, seed=2)
    assert res.p_value == _ref_mc_sign_flip(a - b, 100_000, 2)


def test_randomization_one_pair_and_one_draw():
    # n = 1: |T_s| == |T| for both signs, so every draw counts: p = (1 + 1) / (1 + 1)
    assert S.paired_randomization_test([0.75], [0.25], n_resamples=1).p_value == 1.0
    assert S.paired_randomization_test([0.75], [0.25], n_resamples=3).p_value == 1.0


def test_randomization_constant_shift_of_one_is_tested_not_skipped():
    # d = (1, 1, 1): only the identity and the all-flip pattern reach |T| = 1 -> p = 2 / 8
    res = S.paired_randomization_test([1.0, 2.0, 3.0], [0.0, 1.0, 2.0])
    assert res.p_value == 0.25 and res.delta == 1.0


def test_randomization_identical_inputs_report_every_field():
    res = S.paired_randomization_test([0.25, 0.5, 1.0], [0.25, 0.5, 1.0])
    assert res == S.PairedResult(0.5833333333333334, 0.5833333333333334, 0.0, 0.0, 0.0, 1.0, 3)
    a, b = _pair(20, 8)
    res = S.paired_randomization_test(a, b, n_resamples=500, seed=1)
    assert (res.mean_a, res.mean_b, res.n) == (pytest.approx(a.mean()), pytest.approx(b.mean()), 20)


@pytest.mark.parametrize(
    "test, name",
    [
        (S.paired_bootstrap_test, "paired_bootstrap_test"),
        (S.paired_randomization_test, "paired_randomization_test"),
    ],
)
def test_paired_errors_name_the_function(test, name):
    with pytest.raises(S.StatsInputError) as e:
        test([0.1, 0.2, 0.3], [0.1, 0.2])
    assert e.value.where == name
    with pytest.raises(S.StatsInputError) as e:
        test([0.1, np.nan], [0.1, 0.2])
    assert e.value.where == name


# ----------------------------------------------------------------------------------------------------------------
# bootstrap_cis and the percentile bounds


def test_percentile_bounds_of_no_defined_resample_are_nan():
    low, high = percentile_bounds(np.array([np.nan, np.nan]), 0.95)
    assert math.isnan(low) and math.isnan(high)
    assert percentile_bounds(np.array([np.nan, 0.25]), 0.95) == (0.25, 0.25)
    assert percentile_bounds(np.array([0.25]), 0.5) == (0.25, 0.25)


def test_bootstrap_cis_when_every_resample_draws_only_undefined_queries():
    # 30 undefined queries and 2 defined ones; seed 14's single resample draws only undefined rows
    table = pd.DataFrame({"m": [np.nan] * 30 + [0.0, 1.0]})
    mean, low, high = S.bootstrap_cis(table, n_resamples=1, seed=14, nan_policy="omit")["m"]
    assert mean == 0.5 and math.isnan(low) and math.isnan(high)


def test_bootstrap_cis_accepts_one_column_name_as_a_string():
    table = pd.DataFrame({"ndcg@10": [0.1, 0.5, 0.9, 0.3], "mrr@10": [1.0, 0.5, 0.0, 1.0]})
    out = S.bootstrap_cis(table, columns="ndcg@10", n_resamples=200, seed=1)
    assert list(out) == ["ndcg@10"]
    assert out["ndcg@10"] == S.bootstrap_ci(table["ndcg@10"], n_resamples=200, seed=1)


def test_bootstrap_cis_default_is_1000_resamples():
    table = pd.DataFrame({"m": np.random.default_rng(9).random(20)})
    assert S.bootstrap_cis(table)["m"] == S.bootstrap_ci(table["m"], n_resamples=1000, seed=0)
    assert S.bootstrap_cis(table)["m"] != S.bootstrap_ci(table["m"], n_resamples=1001, seed=0)


def test_bootstrap_cis_reads_nullable_columns_with_missing_values_as_undefined():
    plain = pd.DataFrame({"m": [0.1, np.nan, 0.9, 0.3]})
    nullable = pd.DataFrame({"m": pd.array([0.1, None, 0.9, 0.3], dtype="Float64")})
    assert nullable["m"].isna().sum() == 1
    got = S.bootstrap_cis(nullable, n_resamples=300, seed=2, nan_policy="omit")
    assert got == S.bootstrap_cis(plain, n_resamples=300, seed=2, nan_policy="omit")
    with pytest.raises(S.StatsInputError, match="NaN"):
        S.bootstrap_cis(nullable)


def test_bootstrap_cis_errors_name_the_setting_and_the_table():
    table = pd.DataFrame({"m": [0.1, 0.2]}, index=["q1", "q2"])
    with pytest.raises(S.StatsConfigError) as e:
        S.bootstrap_cis(table, method="basic")
    assert e.value.key == "method"
    with pytest.raises(S.StatsConfigError) as e:
        S.bootstrap_cis(table, nan_policy="drop")
    assert e.value.key == "nan_policy"
    with pytest.raises(S.StatsInputError) as e:
        S.bootstrap_cis([[0.1], [0.2]])
    assert (e.value.where, e.value.problem) == (
        "bootstrap_cis(table)",
        "expected a pandas DataFrame, got list",
    )
    assert e.value.fix == "pass one row per query and one column per metric"
    with pytest.raises(S.StatsInputError) as e:
        S.bootstrap_cis(table, columns=["zz"])
    assert (e.value.where, e.value.problem) == ("bootstrap_cis(table)", "no column(s) ['zz']")
    with pytest.raises(S.StatsInputError) as e:
        S.bootstrap_cis(pd.DataFrame({"m": ["a", "b"]}), columns=["m"])
    assert e.value.where == "bootstrap_cis(table)"
    assert e.value.fix == "pass metric columns only (one number per query)"
    with pytest.raises(S.StatsInputError) as e:
        S.bootstrap_cis(pd.DataFrame({"m": [0.1, np.nan]}, index=["q1", "q2"]))
    assert e.value.where == "bootstrap_cis(table)['m']" and "['q2']" in e.value.problem
    with pytest.raises(S.StatsInputError) as e:
        S.bootstrap_cis(pd.DataFrame({"m": [np.inf, 0.2]}))
    assert e.value.where == "bootstrap_cis(table)"


def test_bootstrap_cis_lists_at_most_five_repeated_query_ids():
    ids = [f"q{i}" for i in range(6)]
    table = pd.DataFrame({"m": np.linspace(0, 1, 12)}, index=ids + ids)
    with pytest.raises(S.StatsInputError) as e:
        S.bootstrap_cis(table)
    assert e.value.where == "bootstrap_cis(table)"
    assert e.value.problem == (
        "query id(s) ['q0', 'q1', 'q2', 'q3', 'q4'] appear more than once (repeated generations are not new queries)"
    )
    assert e.value.fix == "average the repeats per query first, e.g. table.groupby(level=0).mean()"


# ----------------------------------------------------------------------------------------------------------------
# Wilson and Holm


def test_wilson_errors_name_the_call_and_the_fix():
    with pytest.raises(S.StatsInputError) as e:
        S.wilson_interval("x", 3)
    assert (e.value.where, e.value.problem, e.value.fix) == (
        "wilson_interval(successes='x', n=3)",
        "counts are not numbers",
        "pass integer counts",
    )
    with pytest.raises(S.StatsInputError) as e:
        S.wilson_interval(4, 3)
    assert (e.value.where, e.value.problem, e.value.fix) == (
        "wilson_interval(successes=4, n=3)",
        "counts must be integers with 0 <= successes <= n",
        "pass integer counts",
    )


def test_holm_keeps_the_input_shape():
    p = np.array([[0.01, 0.04], [0.03, np.nan]])
    out = S.holm(p)
    assert out.shape == (2, 2)
    # m = 3 defined: sorted 0.01, 0.03, 0.04 -> 3*0.01, max(0.03, 2*0.03), max(0.06, 1*0.04)
    np.testing.assert_allclose(out[0], [0.03, 0.06])
    assert out[1, 0] == pytest.approx(0.06) and math.isnan(out[1, 1])


def test_holm_error_lists_exactly_the_out_of_range_values():
    with pytest.raises(S.StatsInputError) as e:
        S.holm([0.0, 0.5, 1.0, -0.1, 1.2])
    assert e.value.where == "holm(pvalues)"
    assert e.value.problem == f"p-values outside [0, 1]: {np.array([-0.1, 1.2])}"
    assert e.value.fix == "pass raw p-values"
    bad = [-0.1, -0.2, -0.3, 1.1, 1.2, 1.3]
    with pytest.raises(S.StatsInputError) as e:
        S.holm(bad)
    assert e.value.problem == f"p-values outside [0, 1]: {np.array(bad[:5])}"
    with pytest.raises(S.StatsInputError) as e:
        S.holm([0.5, float("inf")])
    assert e.value.where == "holm(pvalues)"
