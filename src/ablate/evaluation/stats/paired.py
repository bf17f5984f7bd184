"""Paired comparisons of a variant against a baseline over the same queries: the paired bootstrap test
(studentized, shifted null) and Fisher's randomization (sign-flip) test, each one pair or many pairs at once; with
``groups`` (one cluster label per query) over clusters of queries (:mod:`.cluster_paired`)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from ablate.evaluation.stats.bootstrap import bootstrap_columns, percentile_bounds
from ablate.evaluation.stats.checks import (
    NAN_POLICIES,
    StatsInputError,
    as_float,
    check_choice,
    check_confidence,
    check_resamples,
    check_seed,
    nan_problem,
)
from ablate.evaluation.stats.cluster import cluster_codes, clustered
from ablate.evaluation.stats.cluster_paired import cluster_bootstrap, cluster_randomization
from ablate.evaluation.stats.resampling import (
    FLAT_VARIANCE,
    ZERO_MEAN,
    resample_indices,
    sign_flip_pvalues,
    ties_or_beyond,
)


@dataclass(frozen=True)
class PairedResult:
    """Outcome of a paired comparison of a variant ``a`` against a baseline ``b`` over the same ``n`` queries.

    ``delta = mean(a - b)``; ``[ci_low, ci_high]`` is an interval for the mean paired difference; ``p_value`` is
    two-sided (H0: no difference). All fields are NaN (and ``n == 0``) when there is no query to compare.
    """

    mean_a: float
    mean_b: float
    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    n: int


#: One cluster label per query (a Series: by query id).
Labels: TypeAlias = Iterable[Hashable] | pd.Series


def _paired(
    a: ArrayLike, b: ArrayLike, where: str, nan_policy: str, groups: Labels | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Aligned float arrays for a paired test: Series are aligned on query ids, arrays must have equal length; and
    each kept query's cluster code when ``groups`` gives a label per query (a Series read by ``a``'s query ids).

    With ``nan_policy="omit"`` a query is dropped when either of its two values is NaN.
    """
    if isinstance(a, pd.Series) and isinstance(b, pd.Series):
        for name, s in (("a", a), ("b", b)):
            if s.index.has_duplicates:
                raise StatsInputError(
                    f"{where}({name})", "repeats query ids", "average repeats per query first"
                )
        if not a.index.equals(b.index):
            only_a, only_b = a.index.difference(b.index), b.index.difference(a.index)
            if len(only_a) or len(only_b):
                raise StatsInputError(
                    where,
                    f"the two systems cover different queries ({len(only_a)} only in a, e.g. "
                    f"{only_a[:3].tolist()}; {len(only_b)} only in b, e.g. {only_b[:3].tolist()})",
                    "evaluate both systems on the same query set",
                )
            b = b.reindex(a.index)
    x = as_float(a, f"{where}(a)", ndim=1)
    y = as_float(b, f"{where}(b)", ndim=1)
    if x.shape != y.shape:
        raise StatsInputError(
            where,
            f"a has {x.size} values and b has {y.size}",
            "pass one value per query for both systems, aligned on the same query ids",
        )
    codes = None
    if groups is not None:
        if isinstance(groups, pd.Series) and isinstance(a, pd.Series):
            aligned = groups.reindex(a.index)
            if aligned.isna().any():
                raise StatsInputError(
                    f"{where}(groups)",
                    f"no cluster label for query id(s) {aligned.index[aligned.isna()][:5].tolist()}",
                    "give every query a cluster label",
                )
            groups = aligned.tolist()
        codes = cluster_codes(groups, x.size, f"{where}(groups)")
    nan = np.isnan(x) | np.isnan(y)
    if nan.any():
        if nan_policy == "raise":
            raise nan_problem(where, nan)
        x, y = x[~nan], y[~nan]
        codes = None if codes is None else cluster_codes(codes[~nan].tolist(), int(x.size), where)
    return x, y, codes


def _labels_of(groups: Sequence[Labels | None] | None, pairs: Sequence[object], i: int) -> Labels | None:
    """Pair ``i``'s cluster labels (None: its queries are independent); one entry per pair or none at all."""
    if groups is None:
        return None
    if len(groups) != len(pairs):
        raise StatsInputError(
            "paired tests(groups)",
            f"got {len(groups)} entries of cluster labels for {len(pairs)} pairs",
            "pass one entry (the labels of its queries, or None) per pair",
        )
    return groups[i]


def _empty_result() -> PairedResult:
    return PairedResult(math.nan, math.nan, math.nan, math.nan, math.nan, math.nan, 0)


def _check_paired_settings(
    n_resamples: int, confidence: float, seed: int, nan_policy: str
) -> tuple[int, float, int]:
    check_choice("nan_policy", nan_policy, NAN_POLICIES)
    return check_resamples(n_resamples), check_confidence(confidence), check_seed(seed)


def paired_bootstrap_test(
    a: ArrayLike,
    b: ArrayLike,
    n_resamples: int = 10000,
    seed: int = 0,
    confidence: float = 0.95,
    nan_policy: str = "raise",
    groups: Labels | None = None,
) -> PairedResult:
    """Paired bootstrap test over queries, two-sided, by the shifted-null method.

    The paired problem is the one-sample problem on the per-query differences ``d_i = a_i - b_i`` (Efron &
    Tibshirani 1993, §16.4; as used in IR by Sakai 2006 and Smucker et al. 2007), with a studentized statistic as
    Hall & Wilson (1991) advise:

    1. ``t = mean(d) / (sd(d) / sqrt(n))`` (``sd`` with ``n - 1``).
    2. Shift the data so that H0 (``E[d] = 0``) holds exactly: ``w_i = d_i - mean(d)``.
    3. Draw ``B = n_resamples`` resamples of ``n`` queries with replacement; for each compute
       ``t*_b = mean(w*) / (sd(w*) / sqrt(n))`` on the shifted values (a resample whose values are all equal has
       ``sd = 0``; its ``t*`` is taken as 0 if its mean is 0 and as infinite otherwise).
    4. ``p = (1 + #{b : |t*_b| >= |t|}) / (B + 1)``: the Monte-Carlo ``+1`` form (Phipson & Smyth 2010), which
       counts the observed data as one resample and so never reports ``p = 0`` from finitely many resamples.

    ``ci_low, ci_high``: percentile interval of ``mean(d*)`` over the *same* resamples, unshifted.
    Edge cases: all ``d_i = 0`` -> ``delta = 0``, ``p = 1``; a constant nonzero shift (``n >= 2``) ->
    ``p = 1 / (B + 1)``; a single nonzero pair -> ``p = nan``; no pair -> all NaN.

    ``groups``: one cluster label per query. When a cluster holds two or more queries, clusters are drawn instead
    of queries and ``t`` is studentised by the cluster-robust standard error
    (:func:`~ablate.evaluation.stats.cluster_paired.cluster_bootstrap`; one cluster: p and interval NaN); with every
    query its own cluster the result is the per-query test's.
    """
    return paired_bootstrap_tests([(a, b)], n_resamples, seed, confidence, nan_policy, [groups])[0]


def paired_bootstrap_tests(
    pairs: Sequence[tuple[ArrayLike, ArrayLike]],
    n_resamples: int = 10000,
    seed: int = 0,
    confidence: float = 0.95,
    nan_policy: str = "raise",
    groups: Sequence[Labels | None] | None = None,
) -> list[PairedResult]:
    """:func:`paired_bootstrap_test` for many ``(a, b)`` pairs at once: entry ``i`` equals
    ``paired_bootstrap_test(*pairs[i], ...)`` exactly. Every test starts from the same ``seed``, so pairs over the
    same number of queries draw the same resampled query indices: they are drawn once and applied to every pair.
    ``groups``: one entry per pair (its cluster labels, one per query, or None); pairs with one clustering share
    their drawn clusters likewise."""
    n_resamples, confidence, seed = _check_paired_settings(n_resamples, confidence, seed, nan_policy)
    out: list[PairedResult | None] = [None] * len(pairs)
    by_n: dict[int, list[tuple[int, np.ndarray, float, float]]] = {}
    by_clusters: dict[bytes, list[tuple[int, np.ndarray, float, float]]] = {}
    cluster_of: dict[bytes, np.ndarray] = {}
    for i, (a, b) in enumerate(pairs):
        x, y, codes = _paired(a, b, "paired_bootstrap_test", nan_policy, _labels_of(groups, pairs, i))
        n = x.size
        if n == 0:
            out[i] = _empty_result()
            continue
        d = x - y
        mean_a, mean_b, delta = float(x.mean()), float(y.mean()), float(d.mean())
        if np.all(d == d[0]):
            c = float(d[0])
            p = 1.0 if c == 0.0 else (1.0 / (n_resamples + 1) if n >= 2 else math.nan)
            out[i] = PairedResult(mean_a, mean_b, c, c, c, p, n)
            continue
        if codes is not None and clustered(codes):
            key = cluster_of.setdefault(codes.tobytes(), codes).tobytes()
            by_clusters.setdefault(key, []).append((i, d, mean_a, mean_b))
            continue
        by_n.setdefault(n, []).append((i, d, mean_a, mean_b))
    for key, items in by_clusters.items():
        got = cluster_bootstrap([d for _, d, _, _ in items], cluster_of[key], n_resamples, seed, confidence)
        for (i, d, mean_a, mean_b), (low, high, p) in zip(items, got, strict=True):
            out[i] = PairedResult(mean_a, mean_b, float(d.mean()), low, high, p, d.size)
    for n, items in by_n.items():
        ws, t_obs, scales, deltas = [], [], [], []
        for _, d, _, _ in items:
            delta = float(d.mean())
            w = d - delta
            ws.append(w)
            deltas.append(delta)
            t_obs.append(delta / (d.std(ddof=1) / math.sqrt(n)))
            scales.append(float((w**2).max()))
        means = np.empty((len(items), n_resamples))
        counts = [0] * len(items)
        start = 0
        for idx in resample_indices(np.random.default_rng(seed), n, n_resamples):
            stop = start + idx.shape[0]
            for j, w in enumerate(ws):
                drawn = w[idx]
                mean_w = drawn.sum(axis=1) / n
                var_w = np.maximum((drawn * drawn).sum(axis=1) / n - mean_w**2, 0.0) * n / (n - 1)
                flat = var_w <= FLAT_VARIANCE * scales[j]  # all drawn values equal (up to rounding)
                with np.errstate(divide="ignore", invalid="ignore"):
                    t_star = np.where(
                        flat,
                        np.where(np.abs(mean_w) <= ZERO_MEAN * math.sqrt(scales[j]), 0.0, np.inf),
                        mean_w / np.sqrt(var_w / n),
                    )
                counts[j] += ties_or_beyond(t_star, t_obs[j])
                means[j, start:stop] = mean_w + deltas[j]
            start = stop
        for j, (i, _, mean_a, mean_b) in enumerate(items):
            low, high = percentile_bounds(means[j], confidence)
            out[i] = PairedResult(
                mean_a, mean_b, deltas[j], low, high, (counts[j] + 1) / (n_resamples + 1), n
            )
    return [r if r is not None else _empty_result() for r in out]


def paired_randomization_test(
    a: ArrayLike,
    b: ArrayLike,
    n_resamples: int = 10000,
    seed: int = 0,
    confidence: float = 0.95,
    nan_policy: str = "raise",
    groups: Labels | None = None,
) -> PairedResult:
    """Fisher's (1935) paired randomization test (sign-flip permutation test) over queries, two-sided.

    H0: for every query the labels "variant" and "baseline" are exchangeable, so each difference ``d_i = a_i - b_i``
    is as likely to have had the opposite sign. Statistic ``T = mean(d)``; under H0 its distribution is that of
    ``T_s = mean(s_i d_i)`` over sign vectors ``s`` in ``{-1, +1}^n`` (swapping a query's two values flips
    ``d_i``; Smucker et al. 2007 recommend this test for IR).

    * Exact, when ``2^n <= n_resamples``: enumerate all ``2^n`` sign vectors (the identity included) and report
      ``p = #{s : |T_s| >= |T|} / 2^n``.
    * Monte Carlo otherwise: ``B = n_resamples`` random sign vectors (each sign +-1 with probability 1/2) and
      ``p = (1 + #{b : |T_b| >= |T|}) / (B + 1)`` (the observed labelling counts as one draw; Phipson & Smyth
      2010), so that ``p`` is never 0 and the test is exact in size for any ``B``.

    Ties: ``|T_s|`` within a relative ``1e-12`` of ``|T|`` count as ``>=``. This matches
    ``scipy.stats.permutation_test(..., permutation_type="samples")``, which we use as a differential reference.
    The randomization test yields no interval of its own: ``ci_low, ci_high`` are
    ``bootstrap_ci(a - b, n_resamples, confidence, seed)`` (percentile bootstrap over queries).
    Edge cases: all ``d_i = 0`` -> ``p = 1``; no pair -> all NaN.

    ``groups``: one cluster label per query. When a cluster holds two or more queries, the differences of a cluster
    flip their signs together (exact over the ``2^G`` patterns of G clusters when ``2^G <= n_resamples``) and the
    interval is the cluster bootstrap's (:func:`~ablate.evaluation.stats.cluster_paired.cluster_randomization`);
    with every query its own cluster the result is the per-query test's.
    """
    return paired_randomization_tests([(a, b)], n_resamples, seed, confidence, nan_policy, [groups])[0]


def paired_randomization_tests(
    pairs: Sequence[tuple[ArrayLike, ArrayLike]],
    n_resamples: int = 10000,
    seed: int = 0,
    confidence: float = 0.95,
    nan_policy: str = "raise",
    groups: Sequence[Labels | None] | None = None,
) -> list[PairedResult]:
    """:func:`paired_randomization_test` for many ``(a, b)`` pairs at once: entry ``i`` equals
    ``paired_randomization_test(*pairs[i], ...)`` exactly. Every test starts from the same ``seed``, so pairs over
    the same number of queries draw the same sign vectors and the same resampled queries (for the interval): they are
    drawn once and applied to every pair (the differences of a group form one queries x pairs table). ``groups``: one
    entry per pair (its cluster labels, one per query, or None); pairs with one clustering share their draws
    likewise."""
    n_resamples, confidence, seed = _check_paired_settings(n_resamples, confidence, seed, nan_policy)
    out: list[PairedResult | None] = [None] * len(pairs)
    by_n: dict[int, list[tuple[int, np.ndarray, float, float]]] = {}
    by_clusters: dict[bytes, list[tuple[int, np.ndarray, float, float]]] = {}
    cluster_of: dict[bytes, np.ndarray] = {}
    for i, (a, b) in enumerate(pairs):
        x, y, codes = _paired(a, b, "paired_randomization_test", nan_policy, _labels_of(groups, pairs, i))
        if x.size == 0:
            out[i] = _empty_result()
            continue
        item = (i, x - y, float(x.mean()), float(y.mean()))
        if codes is not None and clustered(codes):
            by_clusters.setdefault(cluster_of.setdefault(codes.tobytes(), codes).tobytes(), []).append(item)
        else:
            by_n.setdefault(x.size, []).append(item)
    for key, items in by_clusters.items():
        got = cluster_randomization(
            [d for _, d, _, _ in items], cluster_of[key], n_resamples, seed, confidence
        )
        for (i, d, mean_a, mean_b), (low, high, p) in zip(items, got, strict=True):
            out[i] = PairedResult(mean_a, mean_b, float(d.mean()), low, high, p, d.size)
    for n, items in by_n.items():
        table = np.column_stack([d for _, d, _, _ in items])
        intervals = bootstrap_columns(table, n_resamples, confidence, seed, "percentile")
        deltas = [float(d.mean()) for _, d, _, _ in items]
        pvalues = sign_flip_pvalues([d for _, d, _, _ in items], deltas, n, n_resamples, seed)
        for j, (i, _, mean_a, mean_b) in enumerate(items):
            _, low, high = intervals[j]
            out[i] = PairedResult(mean_a, mean_b, deltas[j], low, high, pvalues[j], n)
    return [r if r is not None else _empty_result() for r in out]
