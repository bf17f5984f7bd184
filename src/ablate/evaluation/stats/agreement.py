"""Agreement between two assessors who graded the same (question, unit) pairs: Cohen's kappa (graded or weighted)
with a bootstrap interval over questions, the confusion matrix, and Kendall's tau-b of the order two sets of labels
give the same runs. The labelling validation (``ablate.label validate``) builds its report from these.

The first rater is the reference (a human), the second the assessor under test (an LLM); kappa itself is symmetric.
Grades are integers (a corpus's grade legend, e.g. 0/1/2); a grade missing from the ``labels`` given is bad input,
never silently dropped (scikit-learn drops such pairs).

**The unit of resampling is the question**, as everywhere in :mod:`ablate.evaluation.stats`: the pairs of one
question share its topic, its difficulty and the assessor's reading of it, so they are not independent draws. The
intervals resample questions with replacement (``groups``: the question id of each pair); every pair of a drawn
question comes along.

References
----------
* Cohen, J. (1960). A coefficient of agreement for nominal scales. *Educ. Psychol. Meas.* 20(1):37-46.
* Cohen, J. (1968). Weighted kappa. *Psychol. Bull.* 70(4):213-220.
* Kendall, M. G. (1945). The treatment of ties in ranking problems. *Biometrika* 33(3):239-251 (tau-b).
* Thomas, P., Spielman, S., Craswell, N. & Mitra, B. (2024). Large language models can accurately predict searcher
  preferences. *SIGIR 2024* (LLM relevance labels validated against human ones by kappa).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ablate.evaluation.stats.bootstrap import percentile_bounds
from ablate.evaluation.stats.checks import (
    NAN3,
    Interval,
    StatsConfigError,
    StatsInputError,
    check_confidence,
    check_resamples,
    check_seed,
)
from ablate.evaluation.stats.resampling import resample_indices

#: Accepted ``weights`` of :func:`kappa_interval` (``None``: unweighted).
KAPPA_WEIGHTS: tuple[str, ...] = ("linear", "quadratic")


# ---------------------------------------------------------------------------------------------------------- checks
def _is_integer(v: object) -> bool:
    if isinstance(v, bool | np.bool_):
        return False
    if isinstance(v, int | np.integer):
        return True
    return isinstance(v, float | np.floating) and math.isfinite(v) and float(v).is_integer()


def _grades(values: ArrayLike, where: str) -> np.ndarray:
    """``values`` as a 1-D int64 array; integral floats (a CSV column read as float) are accepted, anything else
    (fractions, NaN, text, booleans) is refused."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise StatsInputError(where, f"got an array of shape {arr.shape}", "pass one integer grade per pair")
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64)
    items = arr.tolist()
    bad = [v for v in items if not _is_integer(v)]
    if bad:
        raise StatsInputError(
            where, f"grade {bad[0]!r} is not an integer", "pass integer grades (the corpus's legend)"
        )
    return np.array([int(v) for v in items], dtype=np.int64)


def _codes(
    a: ArrayLike, b: ArrayLike, labels: Sequence[int] | None, where: str
) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """Both raters' grades as positions in ``labels`` (sorted union of the grades seen when ``labels`` is None)."""
    x, y = _grades(a, f"{where}(a)"), _grades(b, f"{where}(b)")
    if x.size != y.size:
        raise StatsInputError(
            where,
            f"a has {x.size} grades and b has {y.size}",
            "pass one grade per pair from each rater, aligned",
        )
    if labels is None:
        legend = tuple(int(v) for v in np.union1d(x, y))
    else:
        lab = _grades(list(labels), f"{where}(labels)")
        if lab.size == 0 or np.unique(lab).size != lab.size:
            raise StatsInputError(
                f"{where}(labels)", f"{list(labels)!r} is empty or repeats a grade", "list each grade once"
            )
        legend = tuple(int(v) for v in lab)
    if not legend:
        return x, y, legend
    order = np.array(legend, dtype=np.int64)
    sorter = np.argsort(order, kind="stable")
    ordered = order[sorter]
    codes = []
    for arr in (x, y):
        pos = np.minimum(np.searchsorted(ordered, arr), order.size - 1)
        unknown = np.flatnonzero(ordered[pos] != arr)
        if unknown.size:
            raise StatsInputError(
                where,
                f"grade {int(arr[unknown[0]])} is not in labels {list(legend)}",
                "pass every grade the legend allows in labels",
            )
        codes.append(sorter[pos].astype(np.int64))
    return codes[0], codes[1], legend


def _check_weights(weights: str | None) -> str | None:
    if weights is not None and weights not in KAPPA_WEIGHTS:
        raise StatsConfigError("weights", weights, "options: None (unweighted), " + ", ".join(KAPPA_WEIGHTS))
    return weights


# ----------------------------------------------------------------------------------------------------------- kappa
def _weight_matrix(k: int, weights: str | None) -> np.ndarray:
    """Disagreement weights over label *positions*, as scikit-learn: 1 off the diagonal (unweighted),
    ``|i - j|`` (linear) or ``(i - j)^2`` (quadratic). Pass the full legend as ``labels`` so that positions are
    grades."""
    i = np.arange(k, dtype=np.float64)
    if weights is None:
        return 1.0 - np.eye(k)
    d = np.abs(i[:, None] - i[None, :])
    return d if weights == "linear" else d**2


def _kappa_from_counts(counts: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Kappa of each ``(K, K)`` contingency table in ``counts`` (shape ``(r, K, K)``): ``1 - sum(w O) / sum(w E)``
    with ``E = outer(row sums, column sums) / n`` (scikit-learn's formula). NaN where ``sum(w E) = 0``, i.e. when
    both raters put every pair in the same single category (or there is no pair)."""
    c = counts.astype(np.float64)
    n = c.sum(axis=(1, 2))
    rows, cols = c.sum(axis=2), c.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = rows[:, :, None] * cols[:, None, :] / n[:, None, None]
        num = (w * c).sum(axis=(1, 2))
        den = (w * expected).sum(axis=(1, 2))
        out = 1.0 - num / den
    out[~(den > 0)] = math.nan
    return np.asarray(out)


def _table(ia: np.ndarray, ib: np.ndarray, k: int) -> np.ndarray:
    return np.bincount(ia * k + ib, minlength=k * k).reshape(k, k)


def _group_index(groups: Sequence[Hashable] | None, n: int, where: str) -> tuple[np.ndarray, int]:
    """Position of each pair's group (question) among the distinct groups, and how many there are; each pair is
    its own group when ``groups`` is None."""
    if groups is None:
        return np.arange(n, dtype=np.int64), n
    gs = list(groups)
    if len(gs) != n:
        raise StatsInputError(
            where, f"{len(gs)} group ids for {n} pairs", "pass the question id of every pair"
        )
    index: dict[Hashable, int] = {}
    try:
        pos = [index.setdefault(g, len(index)) for g in gs]
    except TypeError:
        raise StatsInputError(where, "group ids are not hashable", "pass question ids (strings)") from None
    return np.array(pos, dtype=np.int64), len(index)


def _resampled_tables(
    ia: np.ndarray, ib: np.ndarray, k: int, gidx: np.ndarray, n_groups: int, n_resamples: int, seed: int
) -> np.ndarray:
    """``(n_resamples, k, k)`` contingency tables, one per resample of the groups (questions).

    Each resample draws ``n_groups`` group indices with replacement (:func:`resample_indices`, the stream every
    resampling statistic here shares) and sums the drawn groups' own tables, so every pair of a drawn question comes
    along, as often as its question is drawn. Integer arithmetic throughout: results do not depend on chunking.
    """
    per_group = np.bincount(gidx * k * k + ia * k + ib, minlength=n_groups * k * k).reshape(n_groups, k * k)
    out = np.empty((n_resamples, k * k), dtype=np.int64)
    start = 0
    for idx in resample_indices(np.random.default_rng(seed), n_groups, n_resamples):
        rows = idx.shape[0]
        flat = (idx + n_groups * np.arange(rows)[:, None]).ravel()
        times = np.bincount(flat, minlength=rows * n_groups).reshape(
            rows, n_groups
        )  # how often each is drawn
        out[start : start + rows] = times @ per_group
        start += rows
    return out.reshape(n_resamples, k, k)


def kappa_interval(
    a: ArrayLike,
    b: ArrayLike,
    groups: Sequence[Hashable] | None = None,
    labels: Sequence[int] | None = None,
    weights: str | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Cohen's kappa with a bootstrap percentile interval that resamples **questions**: ``(kappa, low, high)``.

    ``kappa = (p_o - p_e) / (1 - p_e)``: ``p_o`` is the share of pairs both raters graded alike, ``p_e`` the share
    expected by chance from each rater's own grade distribution (Cohen 1960). ``weights="linear"`` or
    ``"quadratic"`` gives weighted kappa ``1 - sum(w O) / sum(w E)`` for ordinal grades (Cohen 1968), with
    disagreement weights ``|i - j|`` or ``(i - j)^2`` over positions in ``labels`` (default: the sorted grades either
    rater used). ``kappa`` equals ``sklearn.metrics.cohen_kappa_score(a, b, labels=labels, weights=weights)``
    wherever that is defined; it is NaN (and so is the interval) when undefined: no pair, or both raters put every
    pair in the same single category (``p_e = 1``). Two raters who each use one category, but different ones, have
    kappa 0. A grade not in ``labels`` raises :class:`StatsInputError`.

    ``groups`` holds the question id of each pair; each of the ``n_resamples`` resamples draws as many questions as
    there are, with replacement, keeps all pairs of each drawn question (as many times as it is drawn) and computes
    kappa on them; ``low, high`` are the ``alpha/2`` and ``1 - alpha/2`` quantiles (``numpy.quantile``, linear) of
    those kappas for ``confidence = 1 - alpha``. ``groups=None`` resamples pairs, as if each pair were its own
    question. Seeded (``numpy.random.default_rng(seed)``): same inputs and seed, same interval. A resample where
    kappa is undefined (every drawn pair in one shared category) is left out of the quantiles.
    """
    weights = _check_weights(weights)
    n_resamples, seed = check_resamples(n_resamples), check_seed(seed)
    confidence = check_confidence(confidence)
    ia, ib, legend = _codes(a, b, labels, "kappa_interval")
    gidx, n_groups = _group_index(groups, ia.size, "kappa_interval(groups)")
    k = len(legend)
    w = _weight_matrix(k, weights)
    estimate = float(_kappa_from_counts(_table(ia, ib, k)[None], w)[0])
    if math.isnan(estimate):
        return NAN3
    boot = _kappa_from_counts(_resampled_tables(ia, ib, k, gidx, n_groups, n_resamples, seed), w)
    low, high = percentile_bounds(boot, confidence)
    return estimate, low, high


# ------------------------------------------------------------------------------------------------------ confusion
@dataclass(frozen=True)
class Confusion:
    """How often the first rater (rows, the human) gave ``labels[i]`` where the second (columns, the assessor) gave
    ``labels[j]``: ``counts[i][j]``."""

    labels: tuple[int, ...]
    counts: tuple[tuple[int, ...], ...]


def confusion(a: ArrayLike, b: ArrayLike, labels: Sequence[int] | None = None) -> Confusion:
    """The confusion matrix of two raters' grades: rows ``a`` (the human), columns ``b`` (the assessor), over
    ``labels`` (default: the sorted grades either used; a grade outside ``labels`` raises)."""
    ia, ib, legend = _codes(a, b, labels, "confusion")
    table = _table(ia, ib, len(legend))
    return Confusion(legend, tuple(tuple(int(v) for v in r) for r in table))


# ---------------------------------------------------------------------------------------------------------- order
def kendall_tau(scores_a: Mapping[str, float], scores_b: Mapping[str, float]) -> float:
    """Kendall's tau-b (Kendall 1945) between two scorings of the same items (runs): how alike the orders are.

    ``tau_b = (C - D) / sqrt((n0 - t_a) (n0 - t_b))`` over the ``n0 = n (n - 1) / 2`` pairs of items: ``C`` pairs
    ordered alike, ``D`` ordered oppositely, ``t_a`` / ``t_b`` pairs tied in ``a`` / in ``b`` (a pair tied in both
    counts in both and in neither ``C`` nor ``D``). Equals ``scipy.stats.kendalltau(x, y).statistic`` (its default
    variant ``"b"``). NaN with fewer than two items or when one side ties every item. The two mappings must have
    the same keys; scores must be finite.
    """
    where = "kendall_tau"
    if set(scores_a) != set(scores_b):
        only_a, only_b = sorted(set(scores_a) - set(scores_b)), sorted(set(scores_b) - set(scores_a))
        raise StatsInputError(
            where,
            f"the two scorings cover different runs (only in a: {only_a[:3]}, only in b: {only_b[:3]})",
            "score the same runs under both sets of labels",
        )
    keys = list(scores_a)
    x = np.array([scores_a[k] for k in keys], dtype=np.float64)
    y = np.array([scores_b[k] for k in keys], dtype=np.float64)
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise StatsInputError(where, "a score is NaN or infinite", "pass one finite score per run")
    n = x.size
    if n < 2:
        return math.nan
    iu = np.triu_indices(n, k=1)
    sx = np.sign(x[:, None] - x[None, :])[iu]
    sy = np.sign(y[:, None] - y[None, :])[iu]
    n0 = n * (n - 1) // 2
    t_a, t_b = int(np.count_nonzero(sx == 0)), int(np.count_nonzero(sy == 0))
    s = int(np.sum(sx * sy))  # C - D
    den = (n0 - t_a) * (n0 - t_b)
    return math.nan if den == 0 else s / math.sqrt(den)


def json_finite(v: Any) -> Any:
    """JSON has no NaN: undefined figures (an undefined kappa or tau) become null."""
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, dict):
        return {k: json_finite(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [json_finite(x) for x in v]
    return v
