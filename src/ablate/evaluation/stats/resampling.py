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
