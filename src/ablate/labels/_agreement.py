"""Stand-in for :mod:`ablate.evaluation.stats.agreement` (branch i26-stats) until it lands: the four functions
``validate`` needs, with its signatures. Delete once that module is merged and import from it instead."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence

import numpy as np


def _codes(
    a: Sequence[int], b: Sequence[int], labels: Sequence[int] | None
) -> tuple[np.ndarray, np.ndarray, int]:
    legend = sorted(set(labels) if labels is not None else set(a) | set(b))
    pos = {g: i for i, g in enumerate(legend)}
    return (
        np.array([pos[x] for x in a], dtype=np.int64),
        np.array([pos[x] for x in b], dtype=np.int64),
        len(legend),
    )


def _kappa(table: np.ndarray) -> float:
    n = table.sum()
    if n == 0:
        return math.nan
    po = np.trace(table) / n
    pe = float((table.sum(1) * table.sum(0)).sum()) / (n * n)
    return math.nan if pe >= 1 else float((po - pe) / (1 - pe))


def _table(ia: np.ndarray, ib: np.ndarray, k: int) -> np.ndarray:
    return np.bincount(ia * k + ib, minlength=k * k).reshape(k, k)


def cohen_kappa(a: Sequence[int], b: Sequence[int], labels: Sequence[int] | None = None) -> float:
    ia, ib, k = _codes(a, b, labels)
    return _kappa(_table(ia, ib, k))


def kappa_interval(
    a: Sequence[int],
    b: Sequence[int],
    groups: Sequence[Hashable] | None = None,
    labels: Sequence[int] | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    ia, ib, k = _codes(a, b, labels)
    est = _kappa(_table(ia, ib, k))
    if math.isnan(est):
        return (math.nan, math.nan, math.nan)
    gs = list(groups) if groups is not None else list(range(len(ia)))
    index: dict[Hashable, int] = {}
    gidx = np.array([index.setdefault(g, len(index)) for g in gs], dtype=np.int64)
    per_group = np.bincount(gidx * k * k + ia * k + ib, minlength=len(index) * k * k).reshape(
        len(index), k * k
    )
    rng = np.random.default_rng(seed)
    boot = []
    for _ in range(n_resamples):
        draw = rng.integers(0, len(index), len(index))
        v = _kappa(per_group[draw].sum(0).reshape(k, k))
        if not math.isnan(v):
            boot.append(v)
    if not boot:
        return (est, math.nan, math.nan)
    alpha = 1 - confidence
    return est, float(np.quantile(boot, alpha / 2)), float(np.quantile(boot, 1 - alpha / 2))


def confusion(a: Sequence[int], b: Sequence[int], labels: Sequence[int] | None = None) -> list[list[int]]:
    ia, ib, k = _codes(a, b, labels)
    return [[int(v) for v in row] for row in _table(ia, ib, k)]


def kendall_tau(scores_a: Mapping[str, float], scores_b: Mapping[str, float]) -> float:
    keys = list(scores_a)
    x = np.array([scores_a[k] for k in keys], dtype=np.float64)
    y = np.array([scores_b[k] for k in keys], dtype=np.float64)
    n = x.size
    if n < 2:
        return math.nan
    iu = np.triu_indices(n, k=1)
    sx = np.sign(x[:, None] - x[None, :])[iu]
    sy = np.sign(y[:, None] - y[None, :])[iu]
    n0 = n * (n - 1) // 2
    den = (n0 - int(np.count_nonzero(sx == 0))) * (n0 - int(np.count_nonzero(sy == 0)))
    return math.nan if den == 0 else float(np.sum(sx * sy)) / math.sqrt(den)
