"""Paired tests over clusters of queries (:mod:`.cluster`): the kernels :func:`ablate.evaluation.stats.paired_bootstrap_tests`
and :func:`~ablate.evaluation.stats.paired_randomization_tests` use when ``groups`` put two or more queries in one
cluster. Both take the per-query differences ``d_i = a_i - b_i`` of one or more pairs sharing one clustering
(``codes``: each query's cluster ``0 .. G-1``) and return ``(ci_low, ci_high, p)`` per pair; the resamples are drawn
once per call and applied to every pair, as the per-query tests do.

* Cluster randomisation (:func:`cluster_randomization`): under H0 the labels "variant" and "baseline" are
  exchangeable *per cluster*, so all differences of a cluster flip their sign together: ``T_s = sum_g s_g D_g / n``
  over sign vectors ``s`` in ``{-1, +1}^G`` (``D_g`` the cluster's sum), statistic ``T = mean(d)``. Exact (all
  ``2^G`` patterns, ``p = #{|T_s| >= |T|} / 2^G``) when ``2^G <= n_resamples``, else Monte Carlo with the ``+1``
  form. The interval is the cluster bootstrap's (:func:`ablate.evaluation.stats.bootstrap.bootstrap_columns`).
* Cluster paired bootstrap (:func:`cluster_bootstrap`): the shifted null of the per-query test with clusters drawn
  instead of queries and the statistic studentised by the cluster-robust standard error: ``t = mean(d) / se_CR(d)``;
  each resample of G clusters of the shifted ``w = d - mean(d)`` gives ``t* = mean(w*) / se_CR(w*)`` (the drawn
  clusters' sums over the drawn questions; ``se_CR`` with the drawn clusters as clusters), ``p = (1 + #{|t*| >=
  |t|}) / (B + 1)``; the interval is the percentile interval of ``mean(w*) + mean(d)``. One cluster: no test (NaN).
"""

from __future__ import annotations

import math

import numpy as np

from ablate.evaluation.stats.bootstrap import bootstrap_columns, percentile_bounds
from ablate.evaluation.stats.cluster import cluster_sums, n_clusters
from ablate.evaluation.stats.resampling import (
    FLAT_VARIANCE,
    ZERO_MEAN,
    resample_indices,
    sign_flip_pvalues,
    ties_or_beyond,
)

Outcome = tuple[float, float, float]


def cluster_randomization(
    diffs: list[np.ndarray], codes: np.ndarray, n_resamples: int, seed: int, confidence: float
) -> list[Outcome]:
    """``(ci_low, ci_high, p)`` of the two-sided cluster sign-flip test for each of ``diffs`` (all over the queries
    ``codes`` cluster). All differences 0: ``p = 1``."""
    n = codes.size
    table = np.column_stack(diffs)
    intervals = bootstrap_columns(table, n_resamples, confidence, seed, "percentile", codes)
    sums = [cluster_sums(d, codes) for d in diffs]
    deltas = [float(d.mean()) for d in diffs]
    pvalues = sign_flip_pvalues(sums, deltas, n, n_resamples, seed)
    return [(intervals[j][1], intervals[j][2], pvalues[j]) for j in range(len(diffs))]


def cluster_bootstrap(
    diffs: list[np.ndarray], codes: np.ndarray, n_resamples: int, seed: int, confidence: float
) -> list[Outcome]:
    """``(ci_low, ci_high, p)`` of the two-sided cluster paired bootstrap test (shifted null, cluster-robust
    studentisation) for each of ``diffs``, none of them constant; with one cluster all NaN."""
    g = n_clusters(codes)
    if g < 2:
        return [(math.nan, math.nan, math.nan)] * len(diffs)
    sizes = np.bincount(codes, minlength=g).astype(np.float64)
    factor = g / (g - 1)
    shifted, t_obs, scales, deltas = [], [], [], []
    for d in diffs:
        delta = float(d.mean())
        w = cluster_sums(d - delta, codes)  # each cluster's sum of the shifted differences
        shifted.append(w)
        deltas.append(delta)
        se = math.sqrt(factor * float((w**2).sum())) / d.size
        t_obs.append(delta / se if se > 0 else math.copysign(math.inf, delta) if delta else 0.0)
        scales.append(float((w**2).max()))
    counts = [0] * len(diffs)
    means = np.empty((len(diffs), n_resamples))
    start = 0
    for idx in resample_indices(np.random.default_rng(seed), g, n_resamples):
        stop = start + idx.shape[0]
        drawn_n = sizes[idx]
        total_n = drawn_n.sum(axis=1)
        for j, w in enumerate(shifted):
            drawn = w[idx]
            mean_w = drawn.sum(axis=1) / total_n
            dev = drawn - drawn_n * mean_w[:, None]
            ss = (dev * dev).sum(axis=1)
            flat = ss <= FLAT_VARIANCE * scales[j] * g  # every drawn cluster at the resample's mean
            with np.errstate(divide="ignore", invalid="ignore"):
                t_star = np.where(
                    flat,
                    np.where(np.abs(mean_w) * total_n <= ZERO_MEAN * math.sqrt(scales[j]) * g, 0.0, np.inf),
                    mean_w / (np.sqrt(factor * ss) / total_n),
                )
            counts[j] += ties_or_beyond(t_star, t_obs[j])
            means[j, start:stop] = mean_w + deltas[j]
        start = stop
    out: list[Outcome] = []
    for j in range(len(diffs)):
        low, high = percentile_bounds(means[j], confidence)
        out.append((low, high, (counts[j] + 1) / (n_resamples + 1)))
    return out
