"""The batched paired tests (one draw of resamples for many comparisons) give exactly what one test per pair gives.

The references below are written here, one pair at a time, straight from the definitions in
:mod:`ablate.evaluation.stats` (``numpy.random.default_rng(seed)``: for the interval ``integers(0, n, (rows, n))``
query indices per chunk, for the sign flips ``integers(0, 2, (rows, n))``); they share no code with the batched
functions beyond the chunk size they read.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ablate.evaluation import stats as S
from ablate.evaluation.stats import resampling

ALPHA = 1.0 - 0.95  # the quantile levels the library computes from confidence=0.95 (not exactly 0.05)


def _chunks(n: int, total: int) -> list[int]:
    rows = max(1, resampling._CHUNK_ELEMENTS // n)
    return [min(rows, total - s) for s in range(0, total, rows)]


def _ref_percentile_ci(d: np.ndarray, b: int, seed: int) -> tuple[float, float]:
    if np.all(d == d[0]):
        return float(d[0]), float(d[0])
    rng = np.random.default_rng(seed)
    means = np.concatenate(
        [d[rng.integers(0, d.size, size=(r, d.size))].sum(axis=1) / d.size for r in _chunks(d.size, b)]
    )
    lo, hi = np.quantile(means, [ALPHA / 2.0, 1.0 - ALPHA / 2.0])
    return float(lo), float(hi)


def _ref_randomization(a: np.ndarray, b: np.ndarray, n_resamples: int, seed: int) -> tuple[float, ...]:
    d = a - b
    n = d.size
    lo, hi = _ref_percentile_ci(d, n_resamples, seed)
    delta = float(d.mean())
    if np.all(d == 0):
        return float(a.mean()), float(b.mean()), delta, lo, hi, 1.0
    obs = abs(delta)
    rng = np.random.default_rng(seed)
    count = 0
    for r in _chunks(n, n_resamples):
        signs = rng.integers(0, 2, size=(r, n)).astype(np.float64) * 2.0 - 1.0
        t = np.abs(signs @ d / n)
        count += int(np.count_nonzero(t >= obs - 1e-12 * obs))
    return float(a.mean()), float(b.mean()), delta, lo, hi, (count + 1) / (n_resamples + 1)


def _ref_bootstrap(a: np.ndarray, b: np.ndarray, n_resamples: int, seed: int) -> tuple[float, ...]:
    d = a - b
    n = d.size
    delta = float(d.mean())
    w = d - delta
    t_obs = delta / (d.std(ddof=1) / math.sqrt(n))
    scale2 = float((w**2).max())
    rng = np.random.default_rng(seed)
    count, means = 0, []
    for r in _chunks(n, n_resamples):
        drawn = w[rng.integers(0, n, size=(r, n))]
        mean_w = drawn.sum(axis=1) / n
        var_w = np.maximum((drawn * drawn).sum(axis=1) / n - mean_w**2, 0.0) * n / (n - 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(
                var_w <= 1e-12 * scale2,
                np.where(np.abs(mean_w) <= 1e-9 * math.sqrt(scale2), 0.0, np.inf),
                mean_w / np.sqrt(var_w / n),
            )
        count += int(np.count_nonzero(np.abs(t) >= abs(t_obs) - 1e-12 * abs(t_obs)))
        means.append(mean_w + delta)
    lo, hi = np.quantile(np.concatenate(means), [ALPHA / 2.0, 1.0 - ALPHA / 2.0])
    return float(a.mean()), float(b.mean()), delta, float(lo), float(hi), (count + 1) / (n_resamples + 1)


def _pairs(seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """A baseline and variants on 300 queries (graded and 0/1 metrics, one identical run), plus a pair on 40."""
    rng = np.random.default_rng(seed)
    base = rng.random(300)
    hits = (rng.random(300) < 0.6).astype(float)
    out = [
        (np.clip(base + rng.normal(0.02, 0.1, 300), 0, 1), base),
        (np.clip(base + rng.normal(-0.01, 0.1, 300), 0, 1), base),
        (base.copy(), base),  # identical: p = 1
        ((rng.random(300) < 0.62).astype(float), hits),
        (rng.random(40), rng.random(40)),  # another query count: its own draw
    ]
    return out


@pytest.mark.parametrize("seed", [0, 3])
def test_batched_randomization_equals_one_test_per_pair(seed):
    pairs = _pairs(seed)
    got = S.paired_randomization_tests(pairs, n_resamples=7000, seed=seed)
    for (a, b), res in zip(pairs, got, strict=True):
        want = _ref_randomization(a, b, 7000, seed)
        assert (res.mean_a, res.mean_b, res.delta, res.ci_low, res.ci_high, res.p_value) == want
        assert res == S.paired_randomization_test(a, b, n_resamples=7000, seed=seed)
    assert got[2].p_value == 1.0 and got[0].n == 300 and got[4].n == 40


def test_batched_randomization_chunks_do_not_change_results(monkeypatch):
    pairs = _pairs(1)
    whole = S.paired_randomization_tests(pairs, n_resamples=3000, seed=2)
    monkeypatch.setattr(resampling, "_CHUNK_ELEMENTS", 300 * 7)  # 7 rows per chunk
    assert S.paired_randomization_tests(pairs, n_resamples=3000, seed=2) == whole


def test_batched_randomization_exact_enumeration_is_shared():
    rng = np.random.default_rng(5)
    pairs = [(rng.random(9), rng.random(9)) for _ in range(3)]  # 2^9 = 512 <= 10000: exact
    got = S.paired_randomization_tests(pairs)
    for (a, b), res in zip(pairs, got, strict=True):
        d = a - b
        signs = 1 - 2 * ((np.arange(512)[:, None] >> np.arange(9)) & 1)
        t = np.abs(signs @ d / 9)
        obs = abs(d.mean())
        assert res.p_value == np.count_nonzero(t >= obs - 1e-12 * obs) / 512


@pytest.mark.parametrize("seed", [0, 4])
def test_batched_bootstrap_test_equals_one_test_per_pair(seed):
    pairs = _pairs(seed)
    got = S.paired_bootstrap_tests(pairs, n_resamples=4000, seed=seed)
    for i, ((a, b), res) in enumerate(zip(pairs, got, strict=True)):
        if i == 2:  # identical runs: the documented edge case
            assert (res.delta, res.ci_low, res.ci_high, res.p_value) == (0.0, 0.0, 0.0, 1.0)
            continue
        assert (res.mean_a, res.mean_b, res.delta, res.ci_low, res.ci_high, res.p_value) == _ref_bootstrap(
            a, b, 4000, seed
        )
        assert res == S.paired_bootstrap_test(a, b, n_resamples=4000, seed=seed)


def test_batched_tests_keep_empty_and_nan_rules():
    a = np.array([0.1, np.nan, 0.5, 0.7])
    b = np.array([0.2, 0.3, np.nan, 0.1])
    got = S.paired_randomization_tests([(a, b), (np.array([]), np.array([]))], nan_policy="omit")
    assert got[0] == S.paired_randomization_test(a, b, nan_policy="omit") and got[0].n == 2
    assert got[1].n == 0 and math.isnan(got[1].p_value)
    with pytest.raises(S.StatsInputError, match="NaN"):
        S.paired_randomization_tests([(a, b)])
