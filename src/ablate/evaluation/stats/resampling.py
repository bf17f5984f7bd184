"""The resampling draw every resampling statistic shares: query indices drawn with replacement from
``numpy.random.default_rng(seed)``, in chunks that bound memory without changing any result."""

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
