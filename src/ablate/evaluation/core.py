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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import compress
from typing import Any, Literal

import numpy as np
import pandas as pd

from ablate.data.types import TIE_RULE, Hit, Qrels, Run
from ablate.errors import ConfigError, InputError
from ablate.evaluation.units import judgements_at, ranked_units, resolve_unit

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
    rows: list[tuple[str, list[Hit], Mapping[str, int]]]


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
            rows: list[tuple[str, str, int, str, str]] = []
            src = self._source
            if src is not None:
                for qid, hits, judged in src.rows:
                    ids = [h.doc_id for h in hits] if src.unit == "doc" else [h.chunk_id for h in hits]
                    units, first = ranked_units(ids, src.depth, src.budget)
                    for rank, (u, p) in enumerate(zip(units, first, strict=True), start=1):
                        if u not in judged:
                            rows.append((qid, u, rank, hits[p].chunk_id, hits[p].doc_id))
            df = pd.DataFrame(rows, columns=_EXPORT_COLUMNS)
            df["rank"] = df["rank"].astype("int64")
            self._unjudged = df
        return self._unjudged

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


def _query_set(qids: Iterable[str]) -> list[str]:
    if isinstance(qids, str):
        raise ConfigError("qids", qids, "give a sequence of query ids, not one string")
    out = list(qids)
    if len(set(out)) != len(out):
        seen: set[str] = set()
        dup = next(q for q in out if q in seen or seen.add(q))  # type: ignore[func-returns-value]
        raise InputError(
            "query set", f"query id {dup!r} is declared more than once", "declare each query once"
        )
    return out


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
    """``cum[q, w[q] - 1]`` (a prefix sum over the first w[q] positions), 0 where w[q] == 0."""
    r = np.arange(cum.shape[0])
    vals = cum[r, np.maximum(w - 1, 0)]
    return np.where(w > 0, vals, 0)


def _gains(grades: np.ndarray, level: int, gain: str) -> np.ndarray:
    """Gain per position: 2^g - 1 (exponential) or g (linear) for relevant grades (g >= level), else 0."""
    rel = grades >= level
    g = np.where(rel, grades, 0).astype(np.float64)
    return np.exp2(g) - 1.0 if gain == "exponential" else g


def _ideal(
    n_labels: np.ndarray, flat: list[int], level: int, depth: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Query categories, relevant counts and the ideal (descending) relevant grades cut at ``depth``, from each
    query's label count and all label grades in query order."""
    nq = len(n_labels)
    grades = np.asarray(flat, dtype=np.int64)
    rows = np.repeat(np.arange(nq), n_labels)
    keep = grades >= level
    grades, rows = grades[keep], rows[keep]
    n_rel = np.bincount(rows, minlength=nq).astype(np.int64)
    order = np.lexsort((-grades, rows))
    grades, rows = grades[order], rows[order]
    starts = np.concatenate(([0], np.cumsum(n_rel)[:-1])) if nq else np.zeros(0, dtype=np.int64)
    cols = np.arange(len(rows)) - starts[rows] if len(rows) else np.zeros(0, dtype=np.int64)
    keep = cols < depth
    width = max(1, min(depth, int(n_rel.max()) if nq else 1))
    ideal = np.full((nq, width), UNJUDGED, dtype=np.int32)
    ideal[rows[keep], cols[keep]] = grades[keep]
    category = np.where(n_labels == 0, 1, np.where(n_rel == 0, 2, 0))
    return category, n_rel, ideal


def evaluate(
    run: Run,
    qrels: Qrels,
    qids: Iterable[str],
    settings: EvalSettings = DEFAULT_SETTINGS,
    *,
    chunk_to_doc: Mapping[str, str] | None = None,
) -> EvalResult:
    """Score ``run`` against ``qrels`` on the declared query set ``qids`` (see the module's rules).

    ``qids`` is the split's query set, so queries missing from the run are detected; queries of the run outside it
    are ignored and counted. ``chunk_to_doc`` is needed only when chunk qrels are evaluated at unit ``doc``.
    Never mutates its arguments; never rounds.


    Long because it is the hot loop: one pass per query in plain Python, everything else vectorised, so a
    100k-query run scores in seconds; splitting it would add calls per query on the critical path.
    """
    if not isinstance(settings, EvalSettings):
        raise ConfigError("settings", type(settings).__name__, "pass an ablate.evaluation.EvalSettings")
    unit = resolve_unit(settings.unit, qrels.unit)
    judg = judgements_at(qrels, unit, chunk_to_doc)
    qlist = _query_set(qids)
    qset = set(qlist)
    ks = settings.ks
    depth = settings.max_k
    level = settings.relevance_level
    chunks_budget = settings.budget == "chunks"
    condensed = settings.unjudged == "condensed"
    tie_rule = str(run.meta.get("tie_rule", TIE_RULE)) if isinstance(run.meta, Mapping) else TIE_RULE
    results = run.results
    nq = len(qlist)

    n_results = np.zeros(nq, dtype=np.int64)
    n_units = np.zeros(nq, dtype=np.int64)
    status = np.zeros(nq, dtype=np.int64)  # index into STATUSES
    full = _Placement(nq)  # the ranking as retrieved (judged statistics, export)
    scoring = _Placement(nq) if condensed else full  # the ranking that is scored
    export_rows: list[tuple[str, list[Hit], Mapping[str, int]]] = []
    empty: dict[str, int] = {}
    doc_unit = unit == "doc"

    label_counts = np.zeros(nq, dtype=np.int64)
    label_flat: list[int] = []
    lens, counts, cols_flat, grades_flat = full.lens, full.counts, full.cols, full.grades
    for i, qid in enumerate(qlist):
        judged = judg.get(qid) or empty
        if judged:
            label_counts[i] = len(judged)
            label_flat.extend(judged.values())
        hits = results.get(qid)
        if hits is None:
            status[i] = 3
            continue
        n = len(hits)
        n_results[i] = n
        if n == 0:
            status[i] = 2
            continue
        ids = [h.doc_id for h in hits] if doc_unit else [h.chunk_id for h in hits]
        if n <= depth and len(set(ids)) == n:  # fast path: no duplicates, the whole list inside the budget
            if n < depth:
                status[i] = 1
            n_units[i] = lens[i] = n
            if judged:
                cols = list(compress(range(n), map(judged.__contains__, ids)))
                if cols:
                    counts[i] = len(cols)
                    cols_flat.extend(cols)
                    grades_flat.extend(map(judged.__getitem__, map(ids.__getitem__, cols)))
                nj = len(cols)
            else:
                nj = 0
            if nj < n:  # has unjudged results: keep what the export needs (references, read lazily)
                export_rows.append((qid, hits, judged))
        else:
            nd, nw, pos, placed, grades = _place(ids, judged, depth, chunks_budget)
            n_units[i] = nd
            if (n if chunks_budget else nd) < depth:
                status[i] = 1
            full.add(i, nw, pos, placed, grades)
            if len(placed) < nw:
                export_rows.append((qid, hits, judged))
        if condensed and judged:
            cids = [u for u in ids if u in judged]
            if cids:
                _, cnw, cpos, ccols, cgrades = _place(cids, judged, depth, chunks_budget)
                scoring.add(i, cnw, cpos, ccols, cgrades)

    category, n_rel, ideal = _ideal(label_counts, label_flat, level, depth)

    # Scores, vectorised over queries: prefix sums along the deduplicated list, read at each K's window length.
    g = scoring.matrix()
    width = g.shape[1]
    disc = 1.0 / np.log2(np.arange(2, width + 2, dtype=np.float64))
    rel = g >= level
    cum_rel = np.cumsum(rel, axis=1, dtype=np.int32)
    cum_dcg = np.cumsum(_gains(g, level, settings.gain) * disc, axis=1)
    first_rel = np.where(rel.any(axis=1), rel.argmax(axis=1), width)
    iwidth = ideal.shape[1]
    idisc = 1.0 / np.log2(np.arange(2, iwidth + 2, dtype=np.float64))
    cum_idcg = np.cumsum(_gains(ideal, level, settings.gain) * idisc, axis=1)
    win = scoring.windows(ks)

    # Judged statistics on the full ranking.
    g_full = full.matrix() if condensed else g
    cum_judged = np.cumsum(g_full != UNJUDGED, axis=1, dtype=np.int32)
    win_full = full.windows(ks) if condensed else win

    answerable = category == 0
    n_rel_f = n_rel.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_first = 1.0 / (first_rel + 1.0)
    metric_cols: dict[str, np.ndarray] = {}
    per_metric: dict[str, list[tuple[str, np.ndarray]]] = {m: [] for m in METRICS}
    for c, k in enumerate(ks):
        w = win[:, c]
        hits_k = _take(cum_rel, w).astype(np.float64)
        dcg = _take(cum_dcg, w)
        idcg = cum_idcg[:, min(k, iwidth) - 1]
        with np.errstate(divide="ignore", invalid="ignore"):
            recall = hits_k / n_rel_f
            ndcg = dcg / idcg
        wf = win_full[:, c]
        unj = (wf - _take(cum_judged, wf)).astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            judged_share = np.where(wf > 0, 1.0 - unj / wf, 1.0)
        vals = {
            "hit": (hits_k > 0).astype(np.float64),
            "recall": recall,
            "rr": np.where(first_rel < w, inv_first, 0.0),
            "ndcg": ndcg,
            "judged": judged_share,
            "complete": (hits_k >= n_rel_f).astype(np.float64),
            "unjudged": unj,
        }
        for m in QUALITY_METRICS:
            vals[m] = np.where(answerable, vals[m], np.nan)
        for m in METRICS:
            per_metric[m].append((f"{m}@{k}", vals[m]))
    excluded = (status == 3) if settings.missing == "exclude" else np.zeros(nq, dtype=bool)
    for m in METRICS:
        for name, v in per_metric[m]:
            metric_cols[name] = np.where(excluded, np.nan, v)

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
    means = means_of(per_query, ks)

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
        "not_in_query_set": sum(1 for q in results if q not in qset),
        "qrels_not_in_query_set": sum(1 for q in judg if q not in qset),
        "unjudged_results": int(per_query[f"unjudged@{depth}"].fillna(0).sum()),
        "by_category": by_category,
        "rules": applied_rules(settings, unit, qrels.unit, tie_rule),
    }
    return EvalResult(
        per_query=per_query,
        means=means,
        accounting=accounting,
        settings=settings,
        unit=unit,
        tie_rule=tie_rule,
        run_name=run.name,
        _source=_UnjudgedSource(unit, settings.budget, depth, export_rows),
    )
