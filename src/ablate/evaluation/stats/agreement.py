"""Agreement between two assessors who graded the same (question, unit) pairs: Cohen's kappa (graded, weighted,
binary) with bootstrap intervals over questions, the confusion matrix, Kendall's tau-b of the order two sets of
labels give the same runs, and the report ``ablate.label validate`` writes (Markdown and JSON).

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

import json
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass
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
from ablate.tables import fmt, format_table

#: Accepted ``weights`` of :func:`cohen_kappa` / :func:`kappa_interval` (``None``: unweighted).
KAPPA_WEIGHTS: tuple[str, ...] = ("linear", "quadratic")

#: One judged pair as ``agreement_report`` takes it: ``(qid, unit, human grade, assessor grade)``.
Pair = tuple[Hashable, Hashable, int, int]


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


def _check_level(relevance_level: int) -> int:
    if (
        isinstance(relevance_level, bool)
        or not isinstance(relevance_level, int | np.integer)
        or relevance_level < 1
    ):
        raise StatsConfigError(
            "relevance_level", relevance_level, "give an integer >= 1 (grade 0 means judged non-relevant)"
        )
    return int(relevance_level)


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


def cohen_kappa(
    a: ArrayLike, b: ArrayLike, labels: Sequence[int] | None = None, weights: str | None = None
) -> float:
    """Cohen's kappa between two raters' grades of the same items: ``(p_o - p_e) / (1 - p_e)``.

    ``p_o`` is the share of items both raters graded alike, ``p_e`` the share expected by chance from each rater's
    own grade distribution (Cohen 1960). ``weights="linear"`` or ``"quadratic"`` gives weighted kappa
    ``1 - sum(w O) / sum(w E)`` for ordinal grades (Cohen 1968), with disagreement weights ``|i - j|`` or
    ``(i - j)^2`` over positions in ``labels`` (default: the sorted grades either rater used). Equals
    ``sklearn.metrics.cohen_kappa_score(a, b, labels=labels, weights=weights)`` wherever that is defined.

    Returns NaN when kappa is undefined: no item, or both raters put every item in the same single category
    (``p_e = 1``; scikit-learn returns NaN there too, with a warning). Two raters who each use one category, but
    different ones, have kappa 0. A grade not in ``labels`` raises :class:`StatsInputError`.
    """
    weights = _check_weights(weights)
    ia, ib, legend = _codes(a, b, labels, "cohen_kappa")
    k = len(legend)
    return float(_kappa_from_counts(_table(ia, ib, k)[None], _weight_matrix(k, weights))[0])


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


def _interval(estimate: float, boot: np.ndarray, confidence: float) -> Interval:
    if math.isnan(estimate):
        return NAN3
    low, high = percentile_bounds(boot, confidence)
    return estimate, low, high


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

    ``groups`` holds the question id of each pair; each of the ``n_resamples`` resamples draws as many questions as
    there are, with replacement, keeps all pairs of each drawn question (as many times as it is drawn) and computes
    kappa on them; ``low, high`` are the ``alpha/2`` and ``1 - alpha/2`` quantiles (``numpy.quantile``, linear) of
    those kappas for ``confidence = 1 - alpha``. ``groups=None`` resamples pairs, as if each pair were its own
    question. Seeded (``numpy.random.default_rng(seed)``): same inputs and seed, same interval.

    ``kappa`` is :func:`cohen_kappa` on all pairs. A resample where kappa is undefined (every drawn pair in one
    shared category) is left out of the quantiles; when kappa itself is undefined the result is ``(nan, nan, nan)``.
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
    return _interval(estimate, boot, confidence)


# ----------------------------------------------------------------------------------------- binary and confusion
def binary(grades: ArrayLike, relevance_level: int = 1) -> list[int]:
    """Graded labels as relevant (1) or not (0): ``grade >= relevance_level``, the rule the metrics use
    (``eval.relevance_level``, trec_eval's ``-l``)."""
    level = _check_level(relevance_level)
    return [int(g >= level) for g in _grades(grades, "binary(grades)").tolist()]


@dataclass(frozen=True)
class Confusion:
    """How often the first rater (rows, the human) gave ``labels[i]`` where the second (columns, the assessor) gave
    ``labels[j]``: ``counts[i][j]``."""

    labels: tuple[int, ...]
    counts: tuple[tuple[int, ...], ...]
    rows: str = "human"
    columns: str = "assessor"

    def to_markdown(self) -> str:
        """A Markdown table with row and column totals; the corner cell names the two raters."""
        corner = f"{self.rows} \\ {self.columns}"
        cols = [corner, *(str(g) for g in self.labels), "total"]
        body: list[dict[str, Any]] = []
        for g, row in zip(self.labels, self.counts, strict=True):
            body.append(
                {
                    corner: str(g),
                    **{str(h): c for h, c in zip(self.labels, row, strict=True)},
                    "total": sum(row),
                }
            )
        col_totals = [sum(col) for col in zip(*self.counts, strict=True)] if self.counts else []
        totals = dict(zip((str(h) for h in self.labels), col_totals, strict=True))
        body.append({corner: "total", **totals, "total": sum(col_totals)})
        return format_table(body, cols)


def confusion(
    a: ArrayLike,
    b: ArrayLike,
    labels: Sequence[int] | None = None,
    rows: str = "human",
    columns: str = "assessor",
) -> Confusion:
    """The confusion matrix of two raters' grades: rows ``a`` (the human), columns ``b`` (the assessor), over
    ``labels`` (default: the sorted grades either used; a grade outside ``labels`` raises)."""
    ia, ib, legend = _codes(a, b, labels, "confusion")
    table = _table(ia, ib, len(legend))
    return Confusion(legend, tuple(tuple(int(v) for v in r) for r in table), rows, columns)


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


def kendall_tau_orders(order_a: Sequence[str], order_b: Sequence[str]) -> float:
    """:func:`kendall_tau` of two orders (best first, no ties) of the same items."""
    for name, order in (("order_a", order_a), ("order_b", order_b)):
        if len(set(order)) != len(order):
            raise StatsInputError(f"kendall_tau_orders({name})", "repeats an item", "list each run once")
    return kendall_tau(
        {k: -float(i) for i, k in enumerate(order_a)}, {k: -float(i) for i, k in enumerate(order_b)}
    )


@dataclass(frozen=True)
class OrderAgreement:
    """One metric of each run under the human labels and under the assessor's, and tau-b of the two orders."""

    metric: str
    runs: tuple[str, ...]
    human: tuple[float, ...]
    assessor: tuple[float, ...]
    tau: float

    def to_markdown(self) -> str:
        rows = [
            {"run": r, "human labels": fmt(h), "assessor labels": fmt(s), "difference": fmt(s - h)}
            for r, h, s in zip(self.runs, self.human, self.assessor, strict=True)
        ]
        table = format_table(rows, ["run", "human labels", "assessor labels", "difference"])
        return f"{table}\n\nKendall's tau-b of the runs' order by {self.metric}: {fmt(self.tau)} ({len(self.runs)} runs)."


def order_agreement(human: Mapping[str, float], assessor: Mapping[str, float], metric: str) -> OrderAgreement:
    """Each run's ``metric`` under both sets of labels (runs ordered best first by the human labels, ties by name)
    and :func:`kendall_tau` of the two orders."""
    tau = kendall_tau(human, assessor)
    runs = sorted(human, key=lambda r: (-float(human[r]), r))
    return OrderAgreement(
        metric,
        tuple(runs),
        tuple(float(human[r]) for r in runs),
        tuple(float(assessor[r]) for r in runs),
        tau,
    )


# --------------------------------------------------------------------------------------------------------- report
@dataclass(frozen=True)
class Kappa:
    """Cohen's kappa with its bootstrap interval over questions, and the raw share of pairs graded alike."""

    kappa: float
    low: float
    high: float
    agreement: float
    weights: str | None = None


@dataclass(frozen=True)
class AgreementReport:
    """The agreement of an assessor with the human labels on the same (qid, unit) pairs (see
    :func:`agreement_report`); ``grade_counts`` is ``(grade, pairs the human gave it, pairs the assessor gave it)``."""

    n_pairs: int
    n_questions: int
    labels: tuple[int, ...]
    relevance_level: int
    graded: Kappa
    weighted: Kappa
    binary: Kappa
    confusion: Confusion
    binary_confusion: Confusion
    grade_counts: tuple[tuple[int, int, int], ...]
    n_resamples: int
    confidence: float
    seed: int


def _pairs(pairs: Sequence[Pair]) -> tuple[list[Hashable], list[int], list[int]]:
    where = "agreement_report(pairs)"
    if len(pairs) == 0:
        raise StatsInputError(
            where, "no pair to compare", "judge at least one labelled pair with the assessor"
        )
    seen: set[tuple[Hashable, Hashable]] = set()
    qids, human, assessor = [], [], []
    for i, p in enumerate(pairs):
        if len(p) != 4:
            raise StatsInputError(
                f"{where}[{i}]", f"{p!r} is not (qid, unit, human, assessor)", "pass 4-tuples"
            )
        qid, unit, h, s = p
        if (qid, unit) in seen:
            raise StatsInputError(
                f"{where}[{i}]",
                f"pair ({qid!r}, {unit!r}) appears twice",
                "keep one judgement per rater and pair",
            )
        seen.add((qid, unit))
        qids.append(qid)
        human.append(h)
        assessor.append(s)
    return qids, human, assessor


def agreement_report(
    pairs: Sequence[Pair],
    relevance_level: int = 1,
    labels: Sequence[int] | None = None,
    weights: str = "linear",
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> AgreementReport:
    """Agreement of an assessor with the human labels on ``pairs`` of ``(qid, unit, human grade, assessor grade)``.

    Kappa on the graded labels (unweighted, and ``weights``-weighted for their order), and on the binary ones
    (:func:`binary` at ``relevance_level``), each with a percentile interval from ONE shared set of resampled
    questions (each equals :func:`kappa_interval` with ``groups`` = the qids and the same seed); the confusion
    matrices (rows human, columns assessor) and per-grade counts. ``labels`` is the corpus's grade legend (default:
    the grades either used); pass it so that a grade neither rater used still gets a row and weighted kappa measures
    distances in grades. A (qid, unit) pair given twice is refused.
    """
    if weights not in KAPPA_WEIGHTS:
        raise StatsConfigError("weights", weights, "options: " + ", ".join(KAPPA_WEIGHTS))
    level = _check_level(relevance_level)
    n_resamples, seed = check_resamples(n_resamples), check_seed(seed)
    confidence = check_confidence(confidence)
    qids, human, assessor = _pairs(pairs)
    ia, ib, legend = _codes(human, assessor, labels, "agreement_report")
    gidx, n_groups = _group_index(qids, ia.size, "agreement_report(qids)")
    k = len(legend)
    tables = _resampled_tables(ia, ib, k, gidx, n_groups, n_resamples, seed)
    full = _table(ia, ib, k)
    relevant = (np.array(legend) >= level).astype(np.int64)  # graded position -> binary position
    collapse = np.zeros((k, 2), dtype=np.int64)
    collapse[np.arange(k), relevant] = 1
    bin_full = collapse.T @ full @ collapse
    bin_tables = np.einsum("ki,bkl,lj->bij", collapse, tables, collapse)

    def figure(table: np.ndarray, boot_tables: np.ndarray, w: np.ndarray, name: str | None) -> Kappa:
        est = float(_kappa_from_counts(table[None], w)[0])
        boot = _kappa_from_counts(boot_tables, w) if not math.isnan(est) else np.empty(0)
        kappa, low, high = _interval(est, boot, confidence)
        return Kappa(kappa, low, high, float(np.trace(table)) / float(table.sum()), name)

    bin_labels = (0, 1)
    return AgreementReport(
        n_pairs=int(ia.size),
        n_questions=n_groups,
        labels=legend,
        relevance_level=level,
        graded=figure(full, tables, _weight_matrix(k, None), None),
        weighted=figure(full, tables, _weight_matrix(k, weights), weights),
        binary=figure(bin_full, bin_tables, _weight_matrix(2, None), None),
        confusion=Confusion(legend, tuple(tuple(int(v) for v in r) for r in full)),
        binary_confusion=Confusion(bin_labels, tuple(tuple(int(v) for v in r) for r in bin_full)),
        grade_counts=tuple((g, int(full[i].sum()), int(full[:, i].sum())) for i, g in enumerate(legend)),
        n_resamples=n_resamples,
        confidence=confidence,
        seed=seed,
    )


_KAPPA_COLUMN = "Cohen's kappa"


def _kappa_cell(k: Kappa) -> dict[str, str]:
    if math.isnan(k.kappa):
        return {_KAPPA_COLUMN: "undefined (one shared grade only)", "interval": "-"}
    return {_KAPPA_COLUMN: fmt(k.kappa), "interval": f"{fmt(k.low)} to {fmt(k.high)}"}


def agreement_markdown(
    report: AgreementReport,
    orders: Sequence[OrderAgreement] = (),
    sections: Sequence[tuple[str, str]] = (),
) -> str:
    """The body of ``validation.md``: the kappa table, grade counts, both confusion matrices, then one section per
    :class:`OrderAgreement` (each run's metric under both labels and tau) and the caller's ``(heading, Markdown)``
    ``sections`` in order. Headings are level 2 (``##``) so the caller can put a title above."""
    pct = f"{report.confidence:.0%}"
    legend = ", ".join(map(str, report.labels))
    rows = [
        {
            "labels": f"graded ({legend})",
            **_kappa_cell(report.graded),
            "agree": f"{report.graded.agreement:.1%}",
        },
        {
            "labels": f"graded, {report.weighted.weights} weights",
            **_kappa_cell(report.weighted),
            "agree": f"{report.weighted.agreement:.1%}",
        },
        {
            "labels": f"binary (relevant: grade >= {report.relevance_level})",
            **_kappa_cell(report.binary),
            "agree": f"{report.binary.agreement:.1%}",
        },
    ]
    kappa_table = format_table(rows, ["labels", _KAPPA_COLUMN, "interval", "agree"])
    grades = format_table(
        [{"grade": str(g), "human": h, "assessor": s} for g, h, s in report.grade_counts],
        ["grade", "human", "assessor"],
    )
    parts = [
        "## Agreement",
        f"{report.n_pairs} (qid, unit) pairs on {report.n_questions} questions, each graded by a human and by the "
        f"assessor. Intervals: {pct} bootstrap percentile, {report.n_resamples} resamples of questions "
        f"(a question's pairs move together), seed {report.seed}. 'agree': share of pairs graded alike.",
        kappa_table,
        "## Grades",
        grades,
        "## Confusion (rows human, columns assessor)",
        report.confusion.to_markdown(),
        f"Binary (1 = grade >= {report.relevance_level}):",
        report.binary_confusion.to_markdown(),
    ]
    for order in orders:
        parts += [f"## Runs by {order.metric}", order.to_markdown()]
    for heading, body in sections:
        parts += [f"## {heading}", body.strip()]
    return "\n\n".join(parts) + "\n"


def json_finite(v: Any) -> Any:
    """JSON has no NaN: undefined figures become null."""
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, dict):
        return {k: json_finite(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [json_finite(x) for x in v]
    return v


def agreement_json(report: AgreementReport, orders: Sequence[OrderAgreement] = ()) -> str:
    """``validation.json``: every field of ``report`` (and of each :class:`OrderAgreement` under ``"orders"``),
    undefined figures as ``null``."""
    data = {**asdict(report), "orders": [asdict(o) for o in orders]}
    return json.dumps(json_finite(data), indent=2, ensure_ascii=False) + "\n"
