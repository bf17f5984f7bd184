"""Retrieval evaluation by declared rules: units and budgets, per-query metrics, query accounting, unjudged export.

``evaluate(run, qrels, qids, settings)`` scores one run against graded qrels on a declared query set and returns an
:class:`EvalResult`. Every choice the two seed articles ask to be fixed in advance (unit, dedup, budget, unjudged
results, queries without answers, empty or short rankings, queries missing from the run) is a named rule below. The
rules actually applied (with the settings filled in) are also returned in ``EvalResult.accounting["rules"]`` so a
tracked run says how it was scored.

References: Järvelin & Kekäläinen (2002), *Cumulated gain-based evaluation of IR techniques*, TOIS 20(4) (nDCG);
Burges et al. (2005), *Learning to rank using gradient descent*, ICML (the 2^rel - 1 gain); Sakai (2007), *Alternatives
to bpref*, SIGIR (condensed lists); Buckley & Voorhees (2004), *Retrieval evaluation with incomplete information*,
SIGIR (unjudged results). trec_eval (``ndcg_cut``, ``recall``, ``recip_rank``) is the reference for linear gains.

Rules
-----
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import chain, compress
from typing import Any, Literal

import numpy as np
import pandas as pd

from ablate.data.types import TIE_RULE, Hit, Qrels, Run
from ablate.errors import ConfigError, InputError
from ablate.evaluation.coded import CodedInputs, coded_inputs
from ablate.evaluation.idbytes import id_tokens as _tokens
from ablate.evaluation.units import judgements_at, ranked_units, resolve_unit
from ablate.tables import text_csv, unquoted_csv

#: Metrics computed per query at every K, in column order. ``rr`` is averaged into ``mrr``.
METRICS: tuple[str, ...] = ("hit", "recall", "rr", "ndcg", "judged", "complete", "unjudged")
#: Metrics only defined for answerable queries (NaN on the others).
QUALITY_METRICS: tuple[str, ...] = ("hit", "recall", "rr", "ndcg", "complete")
CATEGORIES: tuple[str, ...] = ("answerable", "no_answer", "idcg_zero")
STATUSES: tuple[str, ...] = ("ok", "fewer_than_k", "empty_result", "missing_from_run")

_OPTIONS: dict[str, tuple[str, ...]] = {
    "unit": ("auto", "doc", "chunk"),
    "budget": ("chunks", "docs"),
    "gain": ("exponential", "linear"),
    "unjudged": ("nonrelevant", "condensed"),
    "missing": ("zero", "exclude"),
}

#: Rule texts. ``{…}`` fields are filled from the settings by :func:`applied_rules`.
RULES: dict[str, str] = {
    "ranking": "the run's list order is the ranking (rank = position + 1); evaluate never re-sorts. Ties were broken "
    "by the producer's declared rule: {tie_rule}",
    "unit": "results are scored as '{unit}' units (requested '{requested}', qrels unit '{qrels_unit}'); a hit's doc "
    "unit is its explicit Hit.doc_id, its chunk unit is Hit.chunk_id",
    "lift": "{lift}",
    "dedup": "a unit counts once, at its first appearance; RR and nDCG positions are positions in the "
    "deduplicated unit list",
    "budget": "{budget}",
    "unjudged": "{unjudged}",
    "relevance_level": "a unit is relevant when its grade >= {level} (hit, recall, RR, complete, answerable); grades "
    "below {level} (0 and negative grades included) give no nDCG gain, so 'relevant' means one thing for every "
    "metric (trec_eval's ndcg ignores -l and gains every positive grade; at level 1 the two agree)",
    "hit": "hit@K = 1 if any relevant unit is in the top K, else 0",
    "recall": "recall@K = |relevant ∩ top K| / |relevant|",
    "rr": "rr@K = 1 / rank of the first relevant unit in the top K, else 0; its mean is reported as mrr@K",
    "ndcg": "ndcg@K = DCG@K / IDCG@K with gain {gain_formula} and discount 1/log2(rank + 1); IDCG@K from this "
    "query's judged grades sorted descending, cut at K positions (K positions under either budget)",
    "judged": "judged@K = 1 - unjudged@K / |window|, the share of the units in the top-K window with a judgement "
    "(any grade, 0 included) for THIS query; 1.0 for an empty window (nothing unknown). It divides by the window, "
    "not by K, so a short list or the chunks budget (K chunks may be fewer than K documents) is not read as missing "
    "labels; the count unjudged@K and n_units are reported beside it",
    "complete": "complete@K = 1 if every relevant unit is in the top K, else 0",
    "unjudged_count": "unjudged@K = number of units in the top-K window with no judgement for this query (labels "
    "given for other queries do not count); every such result within max K is listed in EvalResult.unjudged "
    "(rank = position in the deduplicated list)",
    "answerable": "at least one judgement with grade >= {level}: scored and averaged",
    "no_answer": "no judgements at all: hit/recall/rr/ndcg/complete are undefined (NaN) and never enter the means; "
    "scored apart (ablate.evaluation.abstention); judged/unjudged are still reported",
    "idcg_zero": "judgements exist but none has grade >= {level}, so IDCG = 0 and recall's denominator is 0: "
    "handled like no_answer",
    "empty_result": "in the run with zero results: scored as an empty list (quality metrics 0), counted",
    "fewer_than_k": "fewer results than max K = {max_k} in the budget's unit ({budget_unit}): the empty positions "
    "count as non-relevant, counted",
    "missing_from_run": "{missing}",
    "not_in_query_set": "queries in the run that are not in the declared query set are ignored and counted",
    "qrels_not_in_query_set": "judged queries outside the declared query set are ignored and counted",
    "means": "arithmetic mean over the scored answerable queries, every query weighing the same; no rounding "
    "anywhere in evaluation",
}

_BUDGET_TEXT = {
    "chunks": "budget=chunks: K counts ranked results (chunks): take the first K results, then dedup to units; a "
    "unit is in the top K when its first result is among the first K (the window can hold fewer than K units)",
    "docs": "budget=docs: K counts units: dedup the whole ranking, then take the first K units (this may read "
    "deeper than K results)",
}
_UNJUDGED_TEXT = {
    "nonrelevant": "unjudged=nonrelevant: a result with no judgement for this query scores as grade 0 (as trec_eval)",
    "condensed": "unjudged=condensed: results with no judgement for this query are removed before the budget and the "
    "positions are counted (condensed list, Sakai 2007); judged@K and unjudged@K are measured on the full ranking",
}
_MISSING_TEXT = {
    "zero": "missing=zero: a declared query absent from the run is scored as an empty result (quality metrics 0) "
    "and counted",
    "exclude": "missing=exclude: a declared query absent from the run gets NaN metrics, stays out of the means, and "
    "is counted",
}


def _rules_doc() -> str:
    generic = {
        "tie_rule": "run.meta['tie_rule'] (default types.TIE_RULE)",
        "unit": "<unit>",
        "requested": "<eval.unit>",
        "qrels_unit": "<qrels.unit>",
        "level": "relevance_level",
        "gain_formula": "2^grade - 1 (exponential) or grade (linear, trec_eval)",
        "max_k": "max(ks)",
        "budget_unit": "results for budget=chunks, deduplicated units for budget=docs",
    }
    skip = ("lift", "budget", "unjudged", "missing_from_run")
    lines = [f"* ``{k}``: {v.format(**generic)}" for k, v in RULES.items() if k not in skip]
    lines += [f"* ``budget``: {t}" for t in _BUDGET_TEXT.values()]
    lines += [f"* ``unjudged``: {t}" for t in _UNJUDGED_TEXT.values()]
    lines += [f"* ``missing_from_run``: {t}" for t in _MISSING_TEXT.values()]
    lines.append(
        "* ``lift``: chunk qrels evaluated at unit doc: a document's grade is the max grade of its judged "
        "chunks; a document is judged when any of its chunks is (needs chunk_to_doc)"
    )
    return "\n".join(lines) + "\n"


__doc__ = (__doc__ or "") + _rules_doc()


@dataclass(frozen=True)
class EvalSettings:
    """How a run is scored. Invalid values raise :class:`~ablate.errors.ConfigError`; ``ks`` is stored sorted and
    deduplicated."""

    ks: tuple[int, ...] = (1, 3, 5, 10, 20, 50, 100)
    unit: Literal["auto", "doc", "chunk"] = "auto"  # auto = the qrels' unit
    budget: Literal["chunks", "docs"] = "chunks"
    gain: Literal["exponential", "linear"] = "exponential"
    unjudged: Literal["nonrelevant", "condensed"] = "nonrelevant"
    relevance_level: int = 1  # grade >= this counts as relevant (trec_eval's -l)
    missing: Literal["zero", "exclude"] = (
        "zero"  # queries absent from the run: scored 0 or excluded; always counted
    )

    def __post_init__(self) -> None:
        ks: Any = self.ks
        if isinstance(ks, int) and not isinstance(ks, bool):
            ks = (ks,)
        try:
            items = list(ks)
        except TypeError:
            raise ConfigError(
                "eval.ks", self.ks, "give a list of positive integers, e.g. [1, 5, 10]"
            ) from None
        if not items or not all(
            isinstance(k, (int, np.integer)) and not isinstance(k, bool) and k > 0 for k in items
        ):
            raise ConfigError(
                "eval.ks", self.ks, "give a non-empty list of positive integers, e.g. [1, 5, 10]"
            )
        object.__setattr__(self, "ks", tuple(sorted({int(k) for k in items})))
        for key, options in _OPTIONS.items():
            value = getattr(self, key)
            if value not in options:
                raise ConfigError(f"eval.{key}", value, f"valid options: {', '.join(options)}")
        lvl = self.relevance_level
        if not isinstance(lvl, (int, np.integer)) or isinstance(lvl, bool) or lvl < 1:
            raise ConfigError(
                "eval.relevance_level", lvl, "give an integer >= 1 (grade 0 means judged non-relevant)"
            )

    @property
    def max_k(self) -> int:
        return self.ks[-1]

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ks"] = list(self.ks)
        return d


DEFAULT_SETTINGS = EvalSettings()


def applied_rules(settings: EvalSettings, unit: str, qrels_unit: str, tie_rule: str) -> dict[str, str]:
    """The rule texts with this evaluation's settings filled in (goes into ``accounting["rules"]``)."""
    lifted = qrels_unit == "chunk" and unit == "doc"
    fields = {
        "tie_rule": tie_rule,
        "unit": unit,
        "requested": settings.unit,
        "qrels_unit": qrels_unit,
        "lift": (
            "chunk qrels lifted to documents: a document's grade is the max grade of its judged chunks; a document "
            "is judged when any of its chunks is (mapping: chunk_to_doc)"
            if lifted
            else "none: qrels are already at the evaluation unit"
        ),
        "budget": _BUDGET_TEXT[settings.budget],
        "unjudged": _UNJUDGED_TEXT[settings.unjudged],
        "missing": _MISSING_TEXT[settings.missing],
        "level": settings.relevance_level,
        "gain_formula": "2^grade - 1 (exponential)"
        if settings.gain == "exponential"
        else "grade (linear, trec_eval)",
        "max_k": settings.max_k,
        "budget_unit": "results" if settings.budget == "chunks" else "deduplicated units",
    }
    return {k: v.format(**fields) for k, v in RULES.items()}


def mean_key(metric: str, k: int) -> str:
    """Canonical key of a mean: ``rr`` is reported as ``mrr``."""
    return f"{'mrr' if metric == 'rr' else metric}@{k}"


def means_of(per_query: pd.DataFrame, ks: Iterable[int]) -> dict[str, float]:
    """Means over the rows of ``per_query`` that are scored answerable queries (``category == "answerable"`` and
    metrics not NaN, i.e. not excluded as missing). Shared by :func:`evaluate` and the slices."""
    ks = list(ks)
    scored = per_query[(per_query["category"] == "answerable") & per_query[f"hit@{ks[0]}"].notna()]
    out: dict[str, float] = {}
    for m in METRICS:
        for k in ks:
            col = scored[f"{m}@{k}"].to_numpy(dtype=float)
            out[mean_key(m, k)] = float(col.mean()) if col.size else float("nan")
    return out


@dataclass
class _UnjudgedSource:
    """What the unjudged export needs, captured at evaluation time: references to the run's hit lists of the
    queries that have unjudged results (runs are never mutated once built; see docs/architecture.md)."""

    unit: str
    budget: str
    depth: int
    qids: Sequence[str]
    lists: Sequence[Sequence[Hit]]
    judged: Sequence[Mapping[str, int]]
    which: np.ndarray  # indices of the queries with unjudged results in the window

    @property
    def rows(self) -> list[tuple[str, Sequence[Hit], Mapping[str, int]]]:
        return [(self.qids[i], self.lists[i], self.judged[i]) for i in self.which.tolist()]


_EXPORT_COLUMNS = ["qid", "unit_id", "rank", "chunk_id", "doc_id"]


@dataclass
class EvalResult:
    """Per-query metrics, means over answerable queries, query accounting and the unjudged export of one run."""

    per_query: pd.DataFrame  # index qid; category, status, n_relevant, n_results, n_units, <metric>@<k>...
    means: dict[str, float]  # over the scored answerable queries; rr is reported as mrr
    accounting: dict[str, Any]  # counts + "by_category" + "rules"
    settings: EvalSettings
    unit: str  # the resolved evaluation unit
    tie_rule: str
    run_name: str = ""
    _source: _UnjudgedSource | None = field(default=None, repr=False, compare=False)
    _unjudged: pd.DataFrame | None = field(default=None, repr=False, compare=False)

    @property
    def unjudged(self) -> pd.DataFrame:
        """Every unjudged result within max K (on the full, uncondensed ranking): ``qid, unit_id, rank, chunk_id,
        doc_id``, where ``rank`` is the position in the deduplicated unit list and ``chunk_id``/``doc_id`` belong to
        the unit's first result. Ready to export as a labelling CSV. Built on first access."""
        if self._unjudged is None:
            df = pd.DataFrame(self._unjudged_rows(), columns=_EXPORT_COLUMNS)
            df["rank"] = df["rank"].astype("int64")
            self._unjudged = df
        return self._unjudged

    def unjudged_csv(self) -> str:
        """``self.unjudged.to_csv(index=False)``: the same text, written straight from the rows when no field needs
        quoting (no DataFrame built: 2.9x faster than building one and writing it, 65k rows), else by pandas."""
        if self._unjudged is None:
            rows = self._unjudged_rows()
            try:  # ids are strings (a join raises otherwise); ranks are ints from enumerate
                lines = [",".join((q, u, str(r), c, d)) for q, u, r, c, d in rows]
            except TypeError:
                lines = []
            text = ",".join(_EXPORT_COLUMNS) + "\n" + "\n".join(lines) + "\n"
            if lines and unquoted_csv(text, len(lines), len(_EXPORT_COLUMNS)):
                return text
        return text_csv(self.unjudged)

    def _unjudged_rows(self) -> list[tuple[str, str, int, str, str]]:
        rows: list[tuple[str, str, int, str, str]] = []
        src = self._source
        if src is not None:
            for qid, hits, judged in src.rows:
                ids = [h.doc_id for h in hits] if src.unit == "doc" else [h.chunk_id for h in hits]
                units, first = ranked_units(ids, src.depth, src.budget)
                for rank, (u, p) in enumerate(zip(units, first, strict=True), start=1):
                    if u not in judged:
                        rows.append((qid, u, rank, hits[p].chunk_id, hits[p].doc_id))
        return rows

    def to_dict(self, per_query: bool = False) -> dict[str, Any]:
        """One flat object: every mean under its canonical key, plus accounting, settings, unit and tie rule. NaN
        becomes ``None``."""
        d: dict[str, Any] = dict(self.means)
        d.update(
            {
                "accounting": self.accounting,
                "settings": self.settings.as_dict(),
                "unit": self.unit,
                "tie_rule": self.tie_rule,
                "run": self.run_name,
            }
        )
        if per_query:
            pq = self.per_query.reset_index()
            d["per_query"] = pq.to_dict(orient="records")
        return _json_safe(d)

    def to_json(self, per_query: bool = False, indent: int | None = None) -> str:
        return json.dumps(
            self.to_dict(per_query=per_query), indent=indent, ensure_ascii=False, allow_nan=False
        )


def _json_safe(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        f = float(x)
        return None if math.isnan(f) or math.isinf(f) else f
    return x


def _query_set(qids: Iterable[str]) -> tuple[list[str], set[str]]:
    """The declared query ids as a list (their order) and a set; a repeated id is refused."""
    if isinstance(qids, str):
        raise ConfigError("qids", qids, "give a sequence of query ids, not one string")
    out = list(qids)
    qset = set(out)
    if len(qset) != len(out):
        seen: set[str] = set()
        dup = next(q for q in out if q in seen or seen.add(q))  # type: ignore[func-returns-value]
        raise InputError(
            "query set", f"query id {dup!r} is declared more than once", "declare each query once"
        )
    return out, qset


#: Grade-matrix marker for "no judgement for this query" (also fills positions past the end of a list).
UNJUDGED = np.iinfo(np.int32).min


def _place(
    ids: list[str], judged: Mapping[str, int], depth: int, chunks_budget: bool
) -> tuple[int, int, list[int] | None, Sequence[int], Sequence[int]]:
    """Place one ranking: ``(n_distinct, n_window_units, positions, judged_cols, judged_grades)``.

    ``n_window_units`` is the length of the deduplicated unit list inside the max-K budget; ``positions`` is
    ``None`` when unit j's budget position is j itself, else (chunks budget with duplicates) the 0-based position of
    each window unit's first result, from which the top-K window at each K is ``#(positions < K)``. The judged units
    of the window come back as (column, grade) lists. Only C-level passes over the list (this loop runs once per
    query, so it decides the speed on 100k-query sets).
    """
    n = len(ids)
    nd = len(set(ids))
    pos = None
    if nd == n:  # no duplicate units: unit j is result j
        units = ids if n <= depth else ids[:depth]
    elif chunks_budget:
        window = ids[:depth]
        units = list(dict.fromkeys(window))
        if len(units) != len(window):
            first = dict(zip(reversed(window), range(len(window) - 1, -1, -1), strict=True))
            pos = list(map(first.__getitem__, units))
    else:
        units = list(dict.fromkeys(ids))
        if len(units) > depth:
            units = units[:depth]
    nw = len(units)
    if not judged:
        return nd, nw, pos, (), ()
    cols = list(compress(range(nw), map(judged.__contains__, units)))
    grades = list(map(judged.__getitem__, map(units.__getitem__, cols)))
    return nd, nw, pos, cols, grades


class _Placement:
    """The placed rankings of all queries, accumulated as flat lists and turned into matrices."""

    def __init__(self, nq: int) -> None:
        self.lens = np.zeros(nq, dtype=np.int64)
        self.counts = np.zeros(nq, dtype=np.int64)  # judged units per row
        self.cols: list[int] = []
        self.grades: list[int] = []
        self.pos_rows: list[int] = []
        self.pos_counts: list[int] = []
        self.pos_flat: list[int] = []

    def add(self, i: int, nw: int, pos: list[int] | None, cols: Sequence[int], grades: Sequence[int]) -> None:
        self.lens[i] = nw
        if cols:
            self.counts[i] = len(cols)
            self.cols.extend(cols)
            self.grades.extend(grades)
        if pos is not None:
            self.pos_rows.append(i)
            self.pos_counts.append(len(pos))
            self.pos_flat.extend(pos)

    def windows(self, ks: tuple[int, ...]) -> np.ndarray:
        """``W[q, k]``: how many units of query q's deduplicated list are inside the top-K budget window."""
        kv = np.asarray(ks, dtype=np.int64)
        w = np.minimum(self.lens[:, None], kv[None, :])
        if self.pos_rows:
            prow = np.repeat(np.asarray(self.pos_rows, dtype=np.int64), self.pos_counts)
            ppos = np.asarray(self.pos_flat, dtype=np.int64)
            rows = np.asarray(self.pos_rows, dtype=np.int64)
            for c, k in enumerate(ks):
                counts = np.bincount(prow[ppos < k], minlength=len(self.lens))
                w[rows, c] = counts[rows]
        return w

    def matrix(self) -> np.ndarray:
        """Grades by (query, position in the deduplicated list); :data:`UNJUDGED` where there is no judgement."""
        width = max(1, int(self.lens.max()) if self.lens.size else 1)
        g = np.full((len(self.lens), width), UNJUDGED, dtype=np.int32)
        if self.cols:
            rows = np.repeat(np.arange(len(self.lens)), self.counts)
            g[rows, np.asarray(self.cols, dtype=np.int64)] = np.asarray(self.grades, dtype=np.int64)
        return g


def _take(cum: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``cum[q, w[q, c] - 1]`` (a prefix sum over the first w[q, c] positions), 0 where w[q, c] == 0; ``w`` is
    queries x K (or one value per query)."""
    r = np.arange(cum.shape[0])
    if w.ndim == 2:
        r = r[:, None]
    vals = cum[r, np.maximum(w - 1, 0)]
    return np.where(w > 0, vals, 0)


def _gains(grades: np.ndarray, level: int, gain: str) -> np.ndarray:
    """Gain per position: 2^g - 1 (exponential) or g (linear) for relevant grades (g >= level), else 0."""
    rel = grades >= level
    g = np.where(rel, grades, 0).astype(np.float64)
    return np.exp2(g) - 1.0 if gain == "exponential" else g


#: Up to this many relevant grade levels the ideal lists are built from per-level counts (no sort).
_IDEAL_COUNTED = 16


def _ideal(
    n_labels: np.ndarray, flat: Sequence[int] | np.ndarray, level: int, depth: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Query categories, relevant counts and the ideal (descending) relevant grades cut at ``depth``, from each
    query's label count and all label grades in query order."""
    nq = len(n_labels)
    grades = np.asarray(flat, dtype=np.int64)
    rows = np.repeat(np.arange(nq), n_labels)
    keep = grades >= level
    grades, rows = grades[keep], rows[keep]
    n_rel = np.bincount(rows, minlength=nq).astype(np.int64)
    width = max(1, min(depth, int(n_rel.max()) if nq else 1))
    top = int(grades.max()) if len(grades) else level
    span = top - level + 1
    if span <= _IDEAL_COUNTED:
        # Few grade levels: count each query's labels per level (column 0 = the top grade); the ideal list's
        # position j holds the grade whose cumulative count first exceeds j.
        counts = np.bincount(rows * span + (top - grades), minlength=nq * span).reshape(nq, span)
        cum = np.cumsum(counts, axis=1)
        pos = np.arange(width)
        below = np.zeros((nq, width), dtype=np.int32)
        for c in range(span - 1):
            below += cum[:, c, None] <= pos
        ideal = np.where(pos < n_rel[:, None], top - below, UNJUDGED).astype(np.int32)
    else:
        if nq * span < 1 << 62:  # one sort of row * span + (top - grade): rows ascending, grades descending
            packed = np.sort(rows * span + (top - grades))
            rows, grades = packed // span, top - packed % span
        else:
            order = np.lexsort((-grades, rows))
            grades, rows = grades[order], rows[order]
        starts = np.concatenate(([0], np.cumsum(n_rel)[:-1])) if nq else np.zeros(0, dtype=np.int64)
        cols = np.arange(len(rows)) - starts[rows] if len(rows) else np.zeros(0, dtype=np.int64)
        keep = cols < depth
        ideal = np.full((nq, width), UNJUDGED, dtype=np.int32)
        ideal[rows[keep], cols[keep]] = grades[keep]
    category = np.where(n_labels == 0, 1, np.where(n_rel == 0, 2, 0))
    return category, n_rel, ideal


@dataclass
class _Placed:
    """One block's placed rankings: ``lens`` (units in the max-K window), ``grades`` (query x window position,
    :data:`UNJUDGED` where there is no judgement or no unit) and ``windows`` (units inside the top-K window, per K)."""

    lens: np.ndarray
    grades: np.ndarray
    windows: np.ndarray


@dataclass
class _Block:
    """What scoring one block of queries needs: the scored ranking, the full ranking (the same object unless
    ``unjudged=condensed``), distinct units over the whole list, and which queries have unjudged units in the window."""

    scoring: _Placed
    full: _Placed
    n_units: np.ndarray
    has_unjudged: np.ndarray


def _from_placement(p: _Placement, ks: tuple[int, ...]) -> _Placed:
    return _Placed(p.lens, p.matrix(), p.windows(ks))


def _block_python(
    lists: Sequence[Sequence[Hit]],
    jdicts: Sequence[Mapping[str, int]],
    doc_unit: bool,
    depth: int,
    chunks_budget: bool,
    condensed: bool,
    ks: tuple[int, ...],
) -> _Block:
    """The reference placement: one pass per query in plain Python (dicts and sets). Used when the vectorised
    placement cannot vouch for its result (a hash collision, an id holding the separator, non-string ids)."""
    nb = len(lists)
    n_units = np.zeros(nb, dtype=np.int64)
    has_unjudged = np.zeros(nb, dtype=bool)
    full = _Placement(nb)
    scoring = _Placement(nb) if condensed else full
    for i, (hits, judged) in enumerate(zip(lists, jdicts, strict=True)):
        if not hits:
            continue
        ids = [h.doc_id for h in hits] if doc_unit else [h.chunk_id for h in hits]
        nd, nw, pos, placed, grades = _place(ids, judged, depth, chunks_budget)
        n_units[i] = nd
        full.add(i, nw, pos, placed, grades)
        has_unjudged[i] = len(placed) < nw
        if condensed and judged:
            cids = [u for u in ids if u in judged]
            if cids:
                _, cnw, cpos, ccols, cgrades = _place(cids, judged, depth, chunks_budget)
                scoring.add(i, cnw, cpos, ccols, cgrades)
    f = _from_placement(full, ks)
    return _Block(_from_placement(scoring, ks) if condensed else f, f, n_units, has_unjudged)


def _block_vectorised(
    lists: Sequence[Sequence[Hit]],
    jdicts: Sequence[Mapping[str, int]],
    lab_grades: np.ndarray,
    doc_unit: bool,
    depth: int,
    chunks_budget: bool,
    condensed: bool,
    ks: tuple[int, ...],
) -> _Block | None:
    """The placement of a block of queries with no Python work per result beyond reading its id.

    The run's ids and the judged ids of the block are read as exact bytes (:func:`_tokens`) and placed by
    :func:`_place_keyed` with their hash as identity; equal hashes are checked byte for byte there, so a hash
    collision can never merge two ids: it returns ``None`` and the caller places the block with
    :func:`_block_python`."""
    nb = len(lists)
    n = np.fromiter(map(len, lists), dtype=np.int64, count=nb)
    m = np.fromiter(map(len, jdicts), dtype=np.int64, count=nb)
    if int(n.sum()) == 0:
        return None
    if doc_unit:
        ids = [h.doc_id for hs in lists for h in hs]
    else:
        ids = [h.chunk_id for hs in lists for h in hs]
    ids.extend([k for j in jdicts for k in j])
    tok = _tokens(ids)
    del ids
    if tok is None:
        return None
    lengths, words, h = tok

    def same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        equal = lengths[a] == lengths[b]
        for word in words:
            equal &= word[a] == word[b]
        return equal

    pbits = int((n + m).max()).bit_length()
    h &= ~np.uint64((1 << pbits) - 1)
    return _place_keyed(h, n, m, lab_grades, pbits, same, depth, chunks_budget, condensed, ks)


def _block_coded(
    units: np.ndarray,
    labels: np.ndarray,
    n: np.ndarray,
    m: np.ndarray,
    lab_grades: np.ndarray,
    n_codes: int,
    depth: int,
    chunks_budget: bool,
    condensed: bool,
    ks: tuple[int, ...],
) -> _Block | None:
    """The placement of a block of a coded run (:mod:`ablate.evaluation.coded`): the results' and judgements' unit
    codes are the identities :func:`_place_keyed` sorts on. Codes are exact, so nothing is checked byte for byte.
    ``None`` (the caller then places the block from the Hit lists) for an empty block or codes too wide for the
    key."""
    if int(n.sum()) == 0:
        return None
    pbits = int((n + m).max()).bit_length()
    if n_codes >= (1 << (64 - pbits)) - 1:
        return None
    # Narrow keys sort and move twice as fast; they fit whenever the code space is below 2^(32 - pbits) - 1.
    dtype = np.uint32 if n_codes < (1 << (32 - pbits)) - 1 else np.uint64
    ident = np.left_shift(np.concatenate((units, labels)).astype(dtype), dtype(pbits))
    return _place_keyed(ident, n, m, lab_grades, pbits, None, depth, chunks_budget, condensed, ks)


def _place_keyed(
    h: np.ndarray,
    n: np.ndarray,
    m: np.ndarray,
    lab_grades: np.ndarray,
    pbits: int,
    same: Callable[[np.ndarray, np.ndarray], np.ndarray] | None,
    depth: int,
    chunks_budget: bool,
    condensed: bool,
    ks: tuple[int, ...],
) -> _Block | None:
    """Place a block from one identity per result and per judgement (``h``: the block's results in query and rank
    order, then its judgements in query order; identities in the bits above the low ``pbits``, which are zero;
    unsigned, 32 or 64 bits).

    Per query, one row holds a sort key per result and per judgement (identity in the high bits, slot in the low
    bits: results first, in rank order, then judgements); sorting the rows puts equal ids next to each other with the
    first result first. Equal neighbours (few: matched judgements and repeated units) are then handled sparsely; when
    identities are hashes, ``same(a, b)`` says whether the ids at flat positions a and b really are equal, and any
    that are not return ``None``. From "first occurrence" and "grade" per result everything else (dedup, condensed
    list, both budgets, windows) is prefix sums over flat arrays (:func:`_placed_flat`).

    Long because it is one vectorised pass: the sort order, run lengths and offsets it computes feed every later
    step, so pieces of it would each take and return half a dozen of the same arrays.
    """
    nb = len(n)
    n_run, n_lab = int(n.sum()), int(m.sum())
    # One row per query: results in slots [0, n), judgements in [n, n + m); pads are all ones and sort last.
    width = int((n + m).max())
    dtype = h.dtype.type
    low = dtype((1 << pbits) - 1)
    pad = dtype(np.iinfo(dtype).max)
    run_off = np.zeros(nb, dtype=np.int64)
    np.cumsum(n[:-1], out=run_off[1:])
    lab_off = np.zeros(nb, dtype=np.int64)
    np.cumsum(m[:-1], out=lab_off[1:])
    run_row = np.repeat(np.arange(nb), n)
    if (n == n[0]).all():
        run_slot = np.tile(np.arange(int(n[0]), dtype=np.int64), nb)
    else:
        run_slot = np.arange(n_run) - run_off[run_row]
    key = np.full(nb * width, pad, dtype=dtype)
    if (n == width).all():  # every row holds results only, all of one length: fill the matrix row-wise
        key.reshape(nb, width)[:] = h[:n_run].reshape(nb, width) | np.arange(width, dtype=dtype)
    elif (n == n[0]).all():
        key.reshape(nb, width)[:, : int(n[0])] = h[:n_run].reshape(nb, int(n[0])) | np.arange(
            int(n[0]), dtype=dtype
        )
    else:
        key[run_row * width + run_slot] = h[:n_run] | run_slot.astype(dtype)
    if n_lab:
        lab_row = np.repeat(np.arange(nb), m)
        lab_slot = np.arange(n_lab) - lab_off[lab_row] + n[lab_row]
        key[lab_row * width + lab_slot] = h[n_run:] | lab_slot.astype(dtype)
    del h
    key.reshape(nb, width).sort(axis=1)  # a view: sorts each row of the flat array in place
    top = key >> dtype(pbits)
    dup = np.flatnonzero(top[1:] == top[:-1]) + 1  # sorted positions equal to their left neighbour (sparse)
    del top
    dup = dup[(dup % width != 0) & (key[dup] != pad)]  # not across rows, not pads
    first = np.ones(n_run, dtype=bool)
    grade = np.full(n_run, UNJUDGED, dtype=np.int64)
    if len(dup):
        row = dup // width
        slot = (key[dup] & low).astype(np.int64)
        # The start of each equal run: step left while the left neighbour is itself a repeat.
        is_dup = np.zeros(len(key), dtype=bool)
        is_dup[dup] = True
        start = dup - 1
        while True:
            more = is_dup[start]
            if not more.any():
                break
            start[more] -= 1
        del is_dup
        first_slot = (key[start] & low).astype(np.int64)
        nrow = n[row]
        if (first_slot >= nrow).any():
            return None  # two judged ids alike: impossible for dict keys unless the hash collides
        a = run_off[row] + first_slot
        b = np.where(slot < nrow, run_off[row] + slot, n_run + lab_off[row] + slot - nrow)
        if same is not None and not same(a, b).all():
            return None  # two different ids share the hash's high bits: place this block exactly instead
        is_run = slot < nrow
        first[b[is_run]] = False
        lab = ~is_run
        # A judgement grades every result of its unit: the results sit between the run's start and the judgement.
        g = lab_grades[b[lab] - n_run]
        pos, stop = dup[lab] - 1, start[lab]
        while len(pos):
            grade[run_off[pos // width] + (key[pos] & low).astype(np.int64)] = g
            keep = pos > stop
            pos, stop, g = pos[keep] - 1, stop[keep], g[keep]
    del key

    repeats = np.flatnonzero(~first)
    no_dups = not len(repeats)
    n_units = n - np.bincount(run_row[repeats], minlength=nb) if len(repeats) else n
    full = _placed_flat(first, grade, run_row, run_slot, n, depth, chunks_budget, ks, None, no_dups)
    judged_units = np.count_nonzero(full.grades != UNJUDGED, axis=1)
    has_unjudged = judged_units < full.lens
    scoring = (
        _placed_flat(first, grade, run_row, run_slot, n, depth, chunks_budget, ks, grade != UNJUDGED, no_dups)
        if condensed
        else full
    )
    return _Block(scoring, full, n_units, has_unjudged)


def _row_rank(mask: np.ndarray, row: np.ndarray, nb: int) -> np.ndarray:
    """0-based rank of each flat element among the ``mask`` elements of its row (meaningful where ``mask``)."""
    csum = np.cumsum(mask, dtype=np.int64)
    before = np.bincount(row, weights=mask, minlength=nb).astype(np.int64)
    offset = np.zeros(nb, dtype=np.int64)
    np.cumsum(before[:-1], out=offset[1:])
    return csum - 1 - offset[row]


def _placed_flat(
    first: np.ndarray,
    grade: np.ndarray,
    row: np.ndarray,
    slot: np.ndarray,
    n: np.ndarray,
    depth: int,
    chunks_budget: bool,
    ks: tuple[int, ...],
    kept: np.ndarray | None,
    no_dups: bool,
) -> _Placed:
    """Dedup and budget on flat per-result arrays (rows in order, results in rank order; ``slot`` = rank - 1).

    ``kept`` selects the results that stay in the list (``unjudged=condensed``: the judged ones); positions are
    counted in the kept list. A unit is judged at all its results or at none, so "first occurrence" is the same in
    the kept list as in the full one."""
    nb = len(n)
    kv = np.asarray(ks, dtype=np.int64)
    if kept is None and no_dups and nb and 0 < int(n[0]) <= depth and (n == n[0]).all():
        # Every list has the same length within the budget (a fixed-depth run): the grades are already a matrix.
        g = grade.reshape(nb, int(n[0])).astype(np.int32)
        return _Placed(n.copy(), g, np.minimum(n[:, None], kv[None, :]))
    if kept is None and no_dups:  # unit j is result j
        lens = np.minimum(n, depth)
        width = max(1, int(lens.max()) if nb else 1)
        g = np.full((nb, width), UNJUDGED, dtype=np.int32)
        inwin = slot < depth
        if inwin.all():
            g[row, slot] = grade
        else:
            g[row[inwin], slot[inwin]] = grade[inwin]
        return _Placed(lens, g, np.minimum(lens[:, None], kv[None, :]))
    if kept is None:
        units, pos = first, slot
    else:
        units = first & kept
        pos = _row_rank(kept, row, nb)
    u = pos if (no_dups and kept is None) else _row_rank(units, row, nb)
    inwin = units & ((pos < depth) if chunks_budget else (u < depth))
    wr, wu = row[inwin], u[inwin]
    lens = np.bincount(wr, minlength=nb).astype(np.int64)
    width = max(1, int(lens.max()) if nb else 1)
    g = np.full((nb, width), UNJUDGED, dtype=np.int32)
    g[wr, wu] = grade[inwin]
    if chunks_budget and not no_dups:
        at = np.full((nb, width), depth, dtype=np.int64)  # position of each window unit's first result
        at[wr, wu] = pos[inwin]
        windows = np.stack([np.count_nonzero(at < k, axis=1) for k in ks], axis=1).astype(np.int64)
    else:
        windows = np.minimum(lens[:, None], kv[None, :])
    return _Placed(lens, g, windows)


def _block_metrics(
    block: _Block,
    category: np.ndarray,
    n_rel: np.ndarray,
    ideal: np.ndarray,
    settings: EvalSettings,
) -> dict[str, np.ndarray]:
    """``metric -> (queries x K)`` values of one block: prefix sums along the deduplicated list, read at each K's
    window (column c is ``ks[c]``)."""
    level, ks = settings.relevance_level, settings.ks
    g = block.scoring.grades
    width = g.shape[1]
    disc = 1.0 / np.log2(np.arange(2, width + 2, dtype=np.float64))
    rel = g >= level
    count = np.uint8 if width < 256 else np.int32  # counts of positions: the narrowest type that holds them
    cum_rel = np.cumsum(rel, axis=1, dtype=count)
    # The gain x discount terms: relevant positions only (the others add 0.0, as in _gains(g) * disc).
    gain = g * disc if settings.gain == "linear" else (np.exp2(g) - 1.0) * disc
    cum_dcg = np.cumsum(np.where(rel, gain, 0.0), axis=1)
    first_rel = np.where(rel.any(axis=1), rel.argmax(axis=1), width)
    iwidth = ideal.shape[1]
    idisc = 1.0 / np.log2(np.arange(2, iwidth + 2, dtype=np.float64))
    cum_idcg = np.cumsum(_gains(ideal, level, settings.gain) * idisc, axis=1)
    win = block.scoring.windows
    win_full = block.full.windows  # judged statistics are on the full ranking
    cum_judged = np.cumsum(block.full.grades != UNJUDGED, axis=1, dtype=count)

    answerable = (category == 0)[:, None]
    n_rel_f = n_rel.astype(np.float64)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_first = 1.0 / (first_rel + 1.0)
    hits_k = _take(cum_rel, win).astype(np.float64)
    dcg = _take(cum_dcg, win)
    idcg = cum_idcg[:, np.minimum(np.asarray(ks), iwidth) - 1]
    unj = (win_full - _take(cum_judged, win_full)).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        recall = hits_k / n_rel_f
        ndcg = dcg / idcg
        judged_share = np.where(win_full > 0, 1.0 - unj / win_full, 1.0)
    vals = {
        "hit": (hits_k > 0).astype(np.float64),
        "recall": recall,
        "rr": np.where(first_rel[:, None] < win, inv_first[:, None], 0.0),
        "ndcg": ndcg,
        "judged": judged_share,
        "complete": (hits_k >= n_rel_f).astype(np.float64),
        "unjudged": unj,
    }
    for m in QUALITY_METRICS:
        vals[m] = np.where(answerable, vals[m], np.nan)
    return vals


#: Queries per block: bounds the working arrays (experiments/results/bench_eval.md measures the peak per query) and keeps them
#: in cache; rows are also capped at ``_BLOCK_CELLS`` (results + judgements) so one very long list cannot widen a block.
_BLOCK_QUERIES = 1024
_BLOCK_CELLS = 1 << 20


def _blocks(width: np.ndarray) -> list[tuple[int, int]]:
    """Contiguous query ranges with at most ``_BLOCK_QUERIES`` queries and ``rows x widest row <= _BLOCK_CELLS``."""
    if not len(width) or int(width.max()) * _BLOCK_QUERIES <= _BLOCK_CELLS:  # the cell cap cannot bind
        bounds = [*range(0, len(width), _BLOCK_QUERIES), len(width)]
        return list(zip(bounds[:-1], bounds[1:], strict=True)) or [(0, 0)]
    out: list[tuple[int, int]] = []
    start, widest = 0, 0
    for i, w in enumerate(width.tolist()):
        wider = max(widest, w)
        if i > start and (i - start >= _BLOCK_QUERIES or (i - start + 1) * wider > _BLOCK_CELLS):
            out.append((start, i))
            start, wider = i, w
        widest = wider
    if start < len(width) or not out:
        out.append((start, len(width)))
    return out


def _accounting(
    category: np.ndarray,
    status: np.ndarray,
    excluded: np.ndarray,
    per_query: pd.DataFrame,
    outside: tuple[int, int],
    settings: EvalSettings,
    unit: str,
    qrels_unit: str,
    tie_rule: str,
) -> dict[str, Any]:
    """Where every query of the set went (the module's accounting rules): counts per category and status.
    ``outside``: how many of the run's queries and of the judged queries are not in the declared set."""
    nq = len(category)
    answerable = category == 0
    depth = settings.max_k
    by_category = {
        cat: {st: int(np.sum((category == ci) & (status == si))) for si, st in enumerate(STATUSES)}
        for ci, cat in enumerate(CATEGORIES)
    }
    accounting: dict[str, Any] = {
        "total": nq,
        "answerable": int(answerable.sum()),
        "no_answer": int((category == 1).sum()),
        "idcg_zero": int((category == 2).sum()),
        "scored": int((answerable & ~excluded).sum()),
        "empty_result": int((status == 2).sum()),
        "fewer_than_k": int((status == 1).sum()),
        "missing_from_run": int((status == 3).sum()),
        "excluded_missing": int((answerable & excluded).sum()),
        "not_in_query_set": outside[0],
        "qrels_not_in_query_set": outside[1],
        "unjudged_results": int(per_query[f"unjudged@{depth}"].fillna(0).sum()),
        "by_category": by_category,
        "rules": applied_rules(settings, unit, qrels_unit, tie_rule),
    }
    return accounting


def _score_blocks(
    lists: Sequence[Sequence[Hit]],
    jdicts: Sequence[Mapping[str, int]],
    n_results: np.ndarray,
    label_counts: np.ndarray,
    settings: EvalSettings,
    doc_unit: bool,
    vectorised: bool,
    coded: CodedInputs | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Place and score the queries block by block: units counted, unjudged flags, category, relevant count and one
    column per metric@K (the coded placement when the run's codes were vouched for, else the vectorised placement,
    else the Python reference where neither can vouch for a block)."""
    nq = len(lists)
    ks, depth = settings.ks, settings.max_k
    chunks_budget = settings.budget == "chunks"
    condensed = settings.unjudged == "condensed"
    n_units = np.zeros(nq, dtype=np.int64)
    has_unjudged = np.zeros(nq, dtype=bool)
    category = np.zeros(nq, dtype=np.int64)
    n_rel = np.zeros(nq, dtype=np.int64)
    values = {m: np.empty((nq, len(ks)), dtype=np.float64) for m in METRICS}
    for a, b in _blocks(n_results + label_counts):
        bl, bj = lists[a:b], jdicts[a:b]
        block = None
        if coded is not None:
            labels, grades, n_codes = coded.labels(bj, int(label_counts[a:b].sum()))
            block = _block_coded(
                coded.units(a, b),
                labels,
                n_results[a:b],
                label_counts[a:b],
                grades,
                n_codes,
                depth,
                chunks_budget,
                condensed,
                ks,
            )
        else:
            grades = np.fromiter(chain.from_iterable(j.values() for j in bj), dtype=np.int64)
        if block is None and vectorised:
            block = _block_vectorised(bl, bj, grades, doc_unit, depth, chunks_budget, condensed, ks)
        if block is None:
            block = _block_python(bl, bj, doc_unit, depth, chunks_budget, condensed, ks)
        n_units[a:b] = block.n_units
        has_unjudged[a:b] = block.has_unjudged
        cat, rel, ideal = _ideal(label_counts[a:b], grades, settings.relevance_level, depth)
        category[a:b], n_rel[a:b] = cat, rel
        for m, v in _block_metrics(block, cat, rel, ideal, settings).items():
            values[m][a:b] = v
    metric_cols = {f"{m}@{k}": values[m][:, c] for m in METRICS for c, k in enumerate(ks)}
    return n_units, has_unjudged, category, n_rel, metric_cols


def _per_query(
    results: Mapping[str, Sequence[Hit]],
    judg: Mapping[str, Mapping[str, int]],
    qlist: list[str],
    qset: set[str],
) -> tuple[list[Sequence[Hit]], np.ndarray, list[Mapping[str, int]], tuple[int, int]]:
    """Each declared query's hit list (empty when missing), which are missing from the run, its judgements (empty
    when none), and how many of the run's and of the judged queries are outside the declared set. The run's (and
    the qrels') own query order is usually the declared one: then no per-query lookup is needed."""
    nq = len(qlist)
    run_aligned = len(results) == nq and list(results) == qlist
    found = list(results.values()) if run_aligned else list(map(results.get, qlist))
    missing = np.fromiter((h is None for h in found), dtype=bool, count=nq)
    lists: list[Sequence[Hit]] = [() if h is None else h for h in found]
    empty: dict[str, int] = {}
    qrels_aligned = len(judg) == nq and list(judg) == qlist
    if qrels_aligned:
        jdicts: list[Mapping[str, int]] = [j or empty for j in judg.values()]
    else:
        jdicts = [judg.get(q) or empty for q in qlist]
    outside = (
        0 if run_aligned else sum(1 for q in results if q not in qset),
        0 if qrels_aligned else sum(1 for q in judg if q not in qset),
    )
    return lists, missing, jdicts, outside


def evaluate(
    run: Run,
    qrels: Qrels,
    qids: Iterable[str],
    settings: EvalSettings = DEFAULT_SETTINGS,
    *,
    chunk_to_doc: Mapping[str, str] | None = None,
    vectorised: bool = True,
) -> EvalResult:
    """Score ``run`` against ``qrels`` on the declared query set ``qids`` (see the module's rules).

    ``qids`` is the split's query set, so queries missing from the run are detected; queries of the run outside it
    are ignored and counted. ``chunk_to_doc`` is needed only when chunk qrels are evaluated at unit ``doc``.
    Never mutates its arguments; never rounds.

    Queries are scored in blocks (:func:`_blocks`). A run carrying integer codes (``run.codes``) is placed from them
    (:func:`_block_coded`; no id string read per result, see :mod:`ablate.evaluation.coded`); otherwise each block
    is placed by :func:`_block_vectorised` (ids read once as bytes, dedup and judgement lookup by sorting per query)
    and, only where that cannot vouch for its result, by the plain Python reference :func:`_block_python`;
    ``vectorised=False`` uses the reference everywhere (tests compare all three).
    """
    if not isinstance(settings, EvalSettings):
        raise ConfigError("settings", type(settings).__name__, "pass an ablate.evaluation.EvalSettings")
    unit = resolve_unit(settings.unit, qrels.unit)
    judg = judgements_at(qrels, unit, chunk_to_doc)
    qlist, qset = _query_set(qids)
    depth = settings.max_k
    chunks_budget = settings.budget == "chunks"
    tie_rule = str(run.meta.get("tie_rule", TIE_RULE)) if isinstance(run.meta, Mapping) else TIE_RULE
    results = run.results
    nq = len(qlist)
    doc_unit = unit == "doc"

    lists, missing, jdicts, outside = _per_query(results, judg, qlist, qset)
    n_results = np.fromiter(map(len, lists), dtype=np.int64, count=nq)
    label_counts = np.fromiter(map(len, jdicts), dtype=np.int64, count=nq)
    coded = coded_inputs(run, qlist, n_results, unit) if vectorised else None
    n_units, has_unjudged, category, n_rel, metric_cols = _score_blocks(
        lists, jdicts, n_results, label_counts, settings, doc_unit, vectorised, coded
    )

    status = np.where(
        missing,
        3,
        np.where(n_results == 0, 2, np.where((n_results if chunks_budget else n_units) < depth, 1, 0)),
    )
    excluded = missing if settings.missing == "exclude" else np.zeros(nq, dtype=bool)
    if excluded.any():
        for v in metric_cols.values():
            v[excluded] = np.nan
    export = np.flatnonzero(has_unjudged & (n_results > 0))

    per_query = pd.DataFrame(
        {
            "category": np.asarray(CATEGORIES, dtype=object)[category],
            "status": np.asarray(STATUSES, dtype=object)[status],
            "n_relevant": n_rel,
            "n_results": n_results,
            "n_units": n_units,
            **metric_cols,
        },
        index=pd.Index(qlist, name="qid", dtype=object),
    )
    means = means_of(per_query, settings.ks)

    accounting = _accounting(
        category, status, excluded, per_query, outside, settings, unit, qrels.unit, tie_rule
    )
    return EvalResult(
        per_query=per_query,
        means=means,
        accounting=accounting,
        settings=settings,
        unit=unit,
        tie_rule=tie_rule,
        run_name=run.name,
        _source=_UnjudgedSource(unit, settings.budget, depth, qlist, lists, jdicts, export),
    )
