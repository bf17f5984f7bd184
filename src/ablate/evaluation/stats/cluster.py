"""Clusters of queries as the unit of resampling: when questions share their gold evidence (paraphrases of one
question, sub-questions of one case, questions written from one clause) their scores move together, and an interval
or a test that resamples single questions is too narrow (Cameron & Miller 2015). Here a *cluster* label per query
says which questions go together; the functions below resample *clusters*:

* :func:`cluster_means`: the cluster (pairs) bootstrap of a mean (Field & Welsh 2007): each resample draws G
  clusters with replacement, and its mean is the sum of the drawn clusters' values over the number of drawn
  questions (a ratio estimator: clusters of different sizes weigh as many questions as they hold).
* :func:`cluster_bca_bounds`: BCa endpoints whose acceleration comes from the delete-one-cluster jackknife.
* :func:`cluster_se`: the cluster-robust (CR1) standard error of a mean, ``sqrt(G/(G-1) * sum_g (S_g - n_g *
  mean)^2) / n`` with ``S_g`` the cluster's sum: what statsmodels' ``OLS(d, ones).fit(cov_type="cluster")`` gives.

With every query its own cluster, :func:`cluster_means` and :func:`cluster_bca_bounds` compute exactly what the
per-query bootstrap computes (the same draws from the same seed, the same sums), which ``tests/test_stats_cluster.py``
checks; the public functions (:func:`ablate.evaluation.stats.bootstrap_cis`, the paired tests) take ``groups=`` and
use these only when some cluster holds more than one query.

References
----------
* Cameron, A. C. & Miller, D. L. (2015). A practitioner's guide to cluster-robust inference. *J. Human Resources*
  50(2):317-372.
* Field, C. A. & Welsh, A. H. (2007). Bootstrapping clustered data. *JRSS B* 69(3):369-390.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable

import numpy as np

from ablate.evaluation.stats.checks import StatsInputError
from ablate.evaluation.stats.resampling import bca_endpoints, resample_indices


def cluster_codes(groups: Iterable[Hashable], n: int, where: str) -> np.ndarray:
    """Each query's cluster as an integer ``0 .. G-1``, clusters numbered in order of first appearance (so with every
    query its own cluster the codes are ``0 .. n-1``). ``groups`` holds one label per query, compared by equality."""
    labels = list(groups)
    if len(labels) != n:
        raise StatsInputError(
            where,
            f"got {len(labels)} cluster labels for {n} queries",
            "pass one cluster label per query (groups=), in the order of the values",
        )
    seen: dict[Hashable, int] = {}
    try:
        return np.array([seen.setdefault(g, len(seen)) for g in labels], dtype=np.int64)
    except TypeError as exc:
        raise StatsInputError(
            where, f"a cluster label is not hashable ({exc})", "pass strings or numbers"
        ) from None


def n_clusters(codes: np.ndarray) -> int:
    return int(codes.max()) + 1 if codes.size else 0


def clustered(codes: np.ndarray | None) -> bool:
    """Whether ``codes`` put two or more queries in one cluster (else the per-query statistics apply as they are)."""
    return codes is not None and codes.size > 0 and n_clusters(codes) < codes.size


def cluster_sums(values: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Per cluster, the sum of ``values`` (1-D, one per query; NaN not allowed)."""
    return np.bincount(codes, weights=values, minlength=n_clusters(codes))


def cluster_means(table: np.ndarray, codes: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """``(n_resamples, m)`` cluster-bootstrap means of the columns of ``table`` (``n`` queries x ``m`` metrics).

    Every resample draws G cluster indices uniformly with replacement (the draw of
    :func:`~ablate.evaluation.stats.resampling.resample_indices` over G), shared by all columns. Column ``j`` of a
    resample is the sum of the drawn clusters' defined cells over their number of defined cells (NaN if none)."""
    n, m = table.shape
    g = n_clusters(codes)
    defined = ~np.isnan(table)
    filled = np.where(defined, table, 0.0)
    sums = np.ascontiguousarray([cluster_sums(filled[:, j], codes) for j in range(m)]).reshape(m, g)
    counts = np.ascontiguousarray(
        [cluster_sums(defined[:, j].astype(np.float64), codes) for j in range(m)]
    ).reshape(m, g)
    out = np.empty((n_resamples, m))
    start = 0
    for idx in resample_indices(np.random.default_rng(seed), g, n_resamples):
        stop = start + idx.shape[0]
        for j in range(m):
            with np.errstate(invalid="ignore", divide="ignore"):
                out[start:stop, j] = sums[j][idx].sum(axis=1) / counts[j][idx].sum(axis=1)
        start = stop
    return out


def cluster_bca_bounds(
    boot: np.ndarray, col: np.ndarray, codes: np.ndarray, confidence: float
) -> tuple[float, float]:
    """BCa endpoints (as :func:`ablate.evaluation.stats.bootstrap.bootstrap_columns` computes them) for the mean of
    the defined cells of ``col``, the acceleration from the delete-one-cluster jackknife: ``theta_(g) = (S - S_g) /
    (N - N_g)`` over the clusters holding a defined cell. Fewer than two such clusters: no acceleration."""
    keep = ~np.isnan(col)
    values, vcodes = col[keep], codes[keep]
    sums = np.bincount(vcodes, weights=values, minlength=n_clusters(codes))
    sizes = np.bincount(vcodes, minlength=n_clusters(codes)).astype(np.float64)
    live = sizes > 0
    jack = np.empty(0)
    if np.count_nonzero(live) >= 2:
        jack = (values.sum() - sums[live]) / (values.size - sizes[live])  # leave-one-cluster-out means
    return bca_endpoints(boot, float(values.mean()), jack, confidence)


def cluster_se(values: np.ndarray, codes: np.ndarray) -> float:
    """The cluster-robust (CR1) standard error of ``values``' mean; NaN with fewer than two clusters."""
    g = n_clusters(codes)
    if g < 2:
        return math.nan
    n = values.size
    dev = cluster_sums(values - values.mean(), codes)
    return math.sqrt(g / (g - 1) * float((dev**2).sum())) / n
