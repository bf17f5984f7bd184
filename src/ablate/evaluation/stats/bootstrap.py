"""Bootstrap confidence intervals over queries (Efron & Tibshirani 1993): the mean of per-query values with a
percentile or BCa interval, for one column or for several columns on ONE shared set of resampled queries; with
``groups`` (one cluster label per query) over resampled *clusters* of queries (:mod:`.cluster`)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from ablate.evaluation.stats.checks import (
    BOOTSTRAP_METHODS,
    NAN3,
    NAN_POLICIES,
    Interval,
    StatsInputError,
    as_float,
    check_choice,
    check_confidence,
    check_resamples,
    check_seed,
    nan_problem,
)
from ablate.evaluation.stats.cluster import cluster_bca_bounds, cluster_codes, cluster_means, clustered
from ablate.evaluation.stats.resampling import bca_endpoints, resample_indices


def _bootstrap_means(table: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """``(n_resamples, m)`` bootstrap means of the columns of ``table`` (``n`` queries x ``m`` metrics).

    Every column is evaluated on the same resampled query indices. Column ``j`` of resample ``b`` is the mean of
    the drawn queries' values, skipping NaN cells (``sum x / #defined``; NaN if none of the drawn cells is defined).
    """
    n, m = table.shape
    defined = ~np.isnan(table)
    filled = np.ascontiguousarray(np.where(defined, table, 0.0).T)  # (m, n): one contiguous row per metric
    weights = np.ascontiguousarray(defined.T.astype(np.float64))
    complete = defined.all(axis=0)
    out = np.empty((n_resamples, m))
    start = 0
    for idx in resample_indices(np.random.default_rng(seed), n, n_resamples):
        stop = start + idx.shape[0]
        for j in range(m):
            sums = filled[j][idx].sum(axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                out[start:stop, j] = sums / (n if complete[j] else weights[j][idx].sum(axis=1))
        start = stop
    return out


def percentile_bounds(boot: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = 1.0 - confidence
    boot = boot[~np.isnan(boot)]
    if boot.size == 0:
        return math.nan, math.nan
    low, high = np.quantile(boot, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(low), float(high)


def _bca_bounds(boot: np.ndarray, values: np.ndarray, confidence: float) -> tuple[float, float]:
    """BCa endpoints for the mean of ``values``, the acceleration from the leave-one-out means
    (:func:`ablate.evaluation.stats.resampling.bca_endpoints`)."""
    jack = (values.sum() - values) / (values.size - 1)  # leave-one-out means
    return bca_endpoints(boot, float(values.mean()), jack, confidence)


def bootstrap_columns(
    table: np.ndarray,
    n_resamples: int,
    confidence: float,
    seed: int,
    method: str,
    codes: np.ndarray | None = None,
) -> list[Interval]:
    """(mean, low, high) per column, all columns resampled with one shared set of query indices; with ``codes`` (each
    query's cluster, :func:`~ablate.evaluation.stats.cluster.cluster_codes`) that put two or more queries in one
    cluster, with one shared set of resampled clusters (a column whose defined cells lie in one cluster has no
    interval: NaN bounds)."""
    n, m = table.shape
    if n == 0:
        return [NAN3] * m
    by_cluster = codes is not None and clustered(codes)
    boot = (
        cluster_means(table, codes, n_resamples, seed)
        if by_cluster and codes is not None
        else _bootstrap_means(table, n_resamples, seed)
    )
    out: list[Interval] = []
    for j in range(m):
        col = table[:, j]
        values = col[~np.isnan(col)]
        if values.size == 0:
            out.append(NAN3)
            continue
        if np.all(values == values[0]):  # one query, or a constant metric: every resample mean is that value
            v = float(values[0])
            out.append((v, v, v))
            continue
        mean = float(values.mean())
        if by_cluster and codes is not None:
            if (
                np.unique(codes[~np.isnan(col)]).size < 2
            ):  # one cluster: every resample draws the same questions
                out.append((mean, math.nan, math.nan))
                continue
            if method == "bca":
                low, high = cluster_bca_bounds(boot[:, j], col, codes, confidence)
            else:
                low, high = percentile_bounds(boot[:, j], confidence)
        elif method == "bca":
            low, high = _bca_bounds(boot[:, j], values, confidence)
        else:
            low, high = percentile_bounds(boot[:, j], confidence)
        out.append((mean, low, high))
    return out


def bootstrap_ci(
    values: ArrayLike,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    method: str = "percentile",
    nan_policy: str = "raise",
    groups: Iterable[Hashable] | None = None,
) -> Interval:
    """Mean of per-query ``values`` with a nonparametric bootstrap confidence interval, resampling **queries**.

    Each of the ``B = n_resamples`` resamples draws ``n`` query indices uniformly with replacement and takes the mean
    ``theta*_b`` of the drawn values (Efron & Tibshirani 1993). Returns ``(theta, low, high)`` where ``theta`` is the
    plain sample mean and, for ``confidence = 1 - alpha``:

    * ``method="percentile"`` (the default; E&T ch. 13): ``low, high`` = the ``alpha/2`` and ``1 - alpha/2``
      quantiles of ``theta*`` (``numpy.quantile``, linear interpolation).
    * ``method="bca"`` (Efron 1987; E&T §14.3): bias-corrected and accelerated quantiles, see :func:`_bca_bounds`.
      Better coverage for skewed metrics (RR, nDCG on few queries); needs a larger ``n_resamples`` (>= 2000).

    Degenerate inputs: no value -> ``(nan, nan, nan)``; one value or a constant ``v`` -> ``(v, v, v)``.
    ``nan_policy="omit"`` keeps undefined queries in the draw but leaves them out of each resample's mean (the
    same rule as :func:`bootstrap_cis`, so both give identical intervals for the same column and seed).
    ``groups``: one cluster label per value; when a cluster holds two or more queries, clusters are resampled
    instead (:func:`bootstrap_columns`); with every query its own cluster the result is the same as without.
    """
    method = check_choice("method", method, BOOTSTRAP_METHODS)
    nan_policy = check_choice("nan_policy", nan_policy, NAN_POLICIES)
    confidence = check_confidence(confidence)
    n_resamples, seed = check_resamples(n_resamples), check_seed(seed)
    x = as_float(values, "bootstrap_ci(values)", ndim=1)
    nan = np.isnan(x)
    if nan_policy == "raise" and nan.any():
        raise nan_problem("bootstrap_ci(values)", nan)
    codes = None if groups is None else cluster_codes(groups, x.size, "bootstrap_ci(groups)")
    return bootstrap_columns(x[:, None], n_resamples, confidence, seed, method, codes)[0]


def bootstrap_cis(
    table: pd.DataFrame,
    columns: Sequence[Hashable] | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    method: str = "percentile",
    nan_policy: str = "raise",
    groups: Iterable[Hashable] | pd.Series | None = None,
) -> dict[Hashable, Interval]:
    """:func:`bootstrap_ci` for several metric columns at once, with ONE shared set of resampled queries.

    ``table`` has one row per query (index = query id, which must be unique) and one column per metric. Every
    resample draws one multiset of rows and computes every column's mean on it, so the intervals of different
    metrics (and of differences derived from them) describe the same hypothetical query sets and are coherent.
    ``columns=None`` takes every numeric or boolean column. Returns ``{column: (mean, low, high)}`` in column order;
    for a given seed, each entry equals ``bootstrap_ci(table[column], ...)``. ``groups``: each row's cluster label
    (in row order, or a Series indexed by query id): clusters are resampled when one holds two or more queries.
    """
    method = check_choice("method", method, BOOTSTRAP_METHODS)
    nan_policy = check_choice("nan_policy", nan_policy, NAN_POLICIES)
    confidence = check_confidence(confidence)
    n_resamples, seed = check_resamples(n_resamples), check_seed(seed)
    where = "bootstrap_cis(table)"
    if not isinstance(table, pd.DataFrame):
        raise StatsInputError(
            where,
            f"expected a pandas DataFrame, got {type(table).__name__}",
            "pass one row per query and one column per metric",
        )
    if columns is None:
        cols = list(table.select_dtypes(include=["number", "bool"]).columns)
    else:
        cols = [columns] if isinstance(columns, str) else list(columns)
        missing = [c for c in cols if c not in table.columns]
        if missing:
            raise StatsInputError(
                where, f"no column(s) {missing}", f"choose from {list(map(str, table.columns))}"
            )
    if table.index.has_duplicates:
        dup = table.index[table.index.duplicated()].unique()[:5].tolist()
        raise StatsInputError(
            where,
            f"query id(s) {dup} appear more than once (repeated generations are not new queries)",
            "average the repeats per query first, e.g. table.groupby(level=0).mean()",
        )
    try:
        raw = table[cols].to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError) as exc:
        raise StatsInputError(
            where,
            f"column(s) {cols} are not all numeric ({exc})",
            "pass metric columns only (one number per query)",
        ) from None
    matrix = as_float(raw.reshape(len(table), len(cols)), where, ndim=2)
    if nan_policy == "raise":
        for j, c in enumerate(cols):
            if np.isnan(matrix[:, j]).any():
                raise nan_problem(f"{where}[{c!r}]", np.isnan(matrix[:, j]), table.index.tolist())
    codes = (
        None if groups is None else cluster_codes(_row_labels(table, groups), len(table), f"{where}(groups)")
    )
    intervals = bootstrap_columns(matrix, n_resamples, confidence, seed, method, codes)
    return dict(zip(cols, intervals, strict=True))


def _row_labels(table: pd.DataFrame, groups: Iterable[Hashable] | pd.Series) -> list[Hashable]:
    """``groups`` in ``table``'s row order: a Series is read by query id (every row needs a label)."""
    if not isinstance(groups, pd.Series):
        return list(groups)
    missing = table.index.difference(groups.index)
    if len(missing):
        raise StatsInputError(
            "bootstrap_cis(groups)",
            f"no cluster label for query id(s) {missing[:5].tolist()}",
            "give every row of the table a cluster label",
        )
    return list(groups.loc[table.index])
