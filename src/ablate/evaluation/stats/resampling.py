"""The resampling draw every resampling statistic shares: query indices drawn with replacement from
``numpy.random.default_rng(seed)``, in chunks that bound memory without changing any result; the enumerated sign
vectors of an exact sign-flip test; and the tie rule every resampling p-value counts with."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

# At most this many resampled query indices (or sign flips) are held in memory at once.
_CHUNK_ELEMENTS = 1 << 22


def chunk_rows(n: int) -> int:
    """How many resamples (or sign vectors) of ``n`` queries one chunk holds: at least one."""
    return max(1, _CHUNK_ELEMENTS // n)


def resample_indices(rng: np.random.Generator, n: int, n_resamples: int) -> Iterator[np.ndarray]:
    """Yield ``(rows, n)`` matrices of query indices, one resample per row, ``n_resamples`` rows in all.

    Each resample draws ``n`` query indices uniformly with replacement (``rng.integers(0, n, (rows, n))``). Chunks
    hold at most ``_CHUNK_ELEMENTS`` indices (:func:`chunk_rows`); chunks consume the generator's stream in order,
    and every reduction over a resample is per row (numpy's pairwise sum along a row, no BLAS), so results do not
    depend on the chunk size.
    """
    rows = chunk_rows(n)
    done = 0
    while done < n_resamples:
        r = min(rows, n_resamples - done)
        yield rng.integers(0, n, size=(r, n))
        done += r


# Two test statistics closer than this (relative) are a tie: exact enumeration yields ties (a sign-flip pattern
# and its mirror) that floating-point summation in a different order would otherwise split.
TIE_RTOL = 1e-12
#: A resample's variance at or below this share of the largest squared value is zero: all drawn values are equal, up
#: to the rounding of summing them (the studentized statistic is then 0 or infinite, never a division by noise).
FLAT_VARIANCE = 1e-12
#: A flat resample's mean at or below this share of the largest absolute value is zero: no difference at all.
ZERO_MEAN = 1e-9
#: Up to this many pairs (or clusters) the sign-flip test may enumerate all 2^n patterns (1 << n stays within int64)
#: when they are no more than the resamples asked for.
EXACT_MAX_PAIRS = 62


def ties_or_beyond(stat: np.ndarray, observed: float) -> int:
    """How many ``|stat|`` are at least ``|observed|`` (relative tolerance :data:`TIE_RTOL` for ties)."""
    obs = abs(observed)
    return int(np.count_nonzero(np.abs(stat) >= obs - TIE_RTOL * obs))


def sign_matrix(n: int, codes: np.ndarray) -> np.ndarray:
    """The ``(len(codes), n)`` matrix of signs (+1, or -1 where bit ``i`` of the code is set: flip unit ``i``)."""
    bits = (codes[:, None] >> np.arange(n, dtype=np.int64)) & 1
    return (1 - 2 * bits).astype(np.float64)


def sign_flip_pvalues(
    sums: list[np.ndarray], deltas: list[float], n: int, n_resamples: int, seed: int
) -> list[float]:
    """Two-sided sign-flip p-values of the means ``deltas`` of ``n`` values, one per entry of ``sums`` (the values
    themselves, or their sums per cluster: a whole cluster flips together). With ``g`` units per entry, all ``2^g``
    sign patterns when ``g <`` :data:`EXACT_MAX_PAIRS` and ``2^g <= n_resamples`` (``p = count / 2^g``), else
    ``n_resamples`` random patterns from ``seed`` (``p = (count + 1) / (n_resamples + 1)``). An entry whose values
    are all 0 has ``p = 1``."""
    g = sums[0].size if sums else 0
    live = [j for j, s in enumerate(sums) if not np.all(s == 0.0)]
    counts = dict.fromkeys(live, 0)
    rows = chunk_rows(g)
    exact = g < EXACT_MAX_PAIRS and (1 << g) <= n_resamples
    if live and exact:
        total = 1 << g
        for start in range(0, total, rows):
            signs = sign_matrix(g, np.arange(start, min(start + rows, total), dtype=np.int64))
            for j in live:
                counts[j] += ties_or_beyond((signs @ sums[j]) / n, deltas[j])
    elif live:
        rng = np.random.default_rng(seed)
        done = 0
        while done < n_resamples:
            r = min(rows, n_resamples - done)
            signs = rng.integers(0, 2, size=(r, g)).astype(np.float64) * 2.0 - 1.0
            for j in live:
                counts[j] += ties_or_beyond(signs @ sums[j] / n, deltas[j])
            done += r
    return [
        1.0
        if j not in counts
        else float(counts[j] / (1 << g) if exact else (counts[j] + 1) / (n_resamples + 1))
        for j in range(len(sums))
    ]


def bca_endpoints(boot: np.ndarray, theta: float, jack: np.ndarray, confidence: float) -> tuple[float, float]:
    """BCa endpoints (Efron 1987; Efron & Tibshirani 1993, §14.3) from the bootstrap estimates ``boot`` (NaN left
    out), the estimate ``theta`` and the jackknife estimates ``jack`` (leave one query, or one cluster, out; fewer
    than two: no acceleration).

    ``z0 = Phi^-1((#{theta* < theta} + #{theta* = theta} / 2) / B)`` (ties counted half: discrete metrics put many
    resample means exactly on the estimate), clipped to keep it finite; ``a = sum d^3 / (6 (sum d^2)^(3/2))`` with
    ``d = mean(jack) - jack``; the endpoints are the ``Phi(z0 + (z0 + z) / (1 - a (z0 + z)))`` quantiles of
    ``boot`` for ``z = Phi^-1(alpha/2)`` and ``Phi^-1(1 - alpha/2)``."""
    from scipy import special

    boot = boot[~np.isnan(boot)]
    b = boot.size
    if b == 0:
        return float("nan"), float("nan")
    prop = float(np.count_nonzero(boot < theta) + 0.5 * np.count_nonzero(boot == theta)) / b
    prop = min(max(prop, 0.5 / b), 1.0 - 0.5 / b)
    z0 = float(special.ndtri(prop))
    accel = 0.0
    if jack.size >= 2:
        dev = jack.mean() - jack
        denom = 6.0 * float((dev**2).sum()) ** 1.5
        accel = float((dev**3).sum()) / denom if denom > 0 else 0.0
    alpha = 1.0 - confidence
    levels = [
        float(special.ndtr(z0 + (z0 + z) / (1.0 - accel * (z0 + z))))
        for z in (special.ndtri(alpha / 2.0), special.ndtri(1.0 - alpha / 2.0))
    ]
    low, high = np.quantile(boot, levels)
    return float(low), float(high)
