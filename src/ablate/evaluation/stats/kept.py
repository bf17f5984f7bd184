"""Statistics kept in a cache by content: the same inputs, settings and statistics code give the same numbers, so
intervals and tests over unchanged per-query scores are never resampled again."""

from __future__ import annotations

import functools
from collections.abc import Hashable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ablate.cache import Cache, arrays_digest, key_of, sha256_text, source_digest
from ablate.evaluation.stats.bootstrap import bootstrap_cis


@functools.cache
def code_digest() -> str:
    """sha256 over the source of every module of this package (name and content, in name order): the code part of
    the key of a statistic kept in a cache, so an entry computed by other statistics code is never served."""
    modules = sorted(Path(__file__).parent.glob("*.py"))
    return sha256_text("\n".join(f"{p.name} {source_digest(str(p))}" for p in modules))


def bootstrap_cis_kept(
    table: pd.DataFrame,
    columns: Sequence[str],
    n_resamples: int,
    seed: int,
    cache: Cache | None,
    kind: str,
    groups: Sequence[Hashable] | None = None,
) -> dict[str, tuple[float, float, float]]:
    """:func:`bootstrap_cis` of ``table``'s ``columns`` (missing values omitted) as plain floats, over clusters of
    queries when ``groups`` (one label per row) says so. With a ``cache``, kept there by content under ``kind``: the
    same query ids, values, clusters, resamples, seed and statistics code give the same intervals, so intervals over
    unchanged per-query scores are never resampled again (and per-query intervals never stand for clustered ones)."""
    cols = list(columns)
    labels = None if groups is None else [str(g) for g in groups]

    def compute() -> dict[str, list[float]]:
        got = bootstrap_cis(table, cols, n_resamples=n_resamples, seed=seed, nan_policy="omit", groups=labels)
        return {str(c): [float(x) for x in v] for c, v in got.items()}

    if cache is None:
        raw = compute()
    else:
        matrix = table[cols].to_numpy(dtype=np.float64, na_value=np.nan)
        key = key_of(
            kind,
            code_digest(),
            n_resamples,
            seed,
            cols,
            table.index.tolist(),
            arrays_digest(matrix),
            labels,
        )
        raw = cache.memo_json(kind, key, compute)
    return {c: (v[0], v[1], v[2]) for c, v in raw.items()}
