"""Retrieval evaluation of one run: ``evaluate(run, qrels, qids, settings)`` scores a run against graded qrels on a
declared query set, by the rules of :mod:`ablate.evaluation.rules`, and returns an
:class:`~ablate.evaluation.result.EvalResult`.

It resolves the unit and the judgements at it (:mod:`ablate.evaluation.units`), lines up each declared query's
ranking and judgements, then scores the queries block by block: placement (:mod:`ablate.evaluation.placement`),
ideal lists (:mod:`ablate.evaluation.ideal`) and metric math (:mod:`ablate.evaluation.metrics`); then the query
accounting (:mod:`ablate.evaluation.accounting`). The scoring entry point,
:func:`ablate.evaluation.scoring.score_run`, calls it and adds everything else a run reports.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import chain

import numpy as np
import pandas as pd

import ablate.evaluation.placement as placement
from ablate.data.types import TIE_RULE, Hit, Qrels, Run
from ablate.errors import ConfigError, InputError
from ablate.evaluation.accounting import CATEGORIES, STATUSES, query_accounting, query_status
from ablate.evaluation.coded import CodedInputs, coded_inputs
from ablate.evaluation.ideal import ideal_lists
from ablate.evaluation.metrics import METRICS, block_metrics, means_of
from ablate.evaluation.result import EvalResult, UnjudgedSource
from ablate.evaluation.settings import DEFAULT_SETTINGS, EvalSettings
from ablate.evaluation.units import judgements_at, resolve_unit


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


#: Queries per block: bounds the working arrays (experiments/results/bench_eval.md measures the peak per query)
#: and keeps them in cache; rows are also capped at ``_BLOCK_CELLS`` (results + judgements) so one very long list cannot widen a block.
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
            block = placement.block_coded(
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
            block = placement.block_vectorised(bl, bj, grades, doc_unit, depth, chunks_budget, condensed, ks)
        if block is None:
            block = placement.block_python(bl, bj, doc_unit, depth, chunks_budget, condensed, ks)
        n_units[a:b] = block.n_units
        has_unjudged[a:b] = block.has_unjudged
        cat, rel, ideal = ideal_lists(label_counts[a:b], grades, settings.relevance_level, depth)
        category[a:b], n_rel[a:b] = cat, rel
        for m, v in block_metrics(block, cat, rel, ideal, settings).items():
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
    """Score ``run`` against ``qrels`` on the declared query set ``qids`` (the rules of
    :mod:`ablate.evaluation.rules`).

    ``qids`` is the split's query set, so queries missing from the run are detected; queries of the run outside it
    are ignored and counted. ``chunk_to_doc`` is needed only when chunk qrels are evaluated at unit ``doc``.
    Never mutates its arguments; never rounds.

    Queries are scored in blocks (:func:`_blocks`), each placed by one of the engines of
    :mod:`ablate.evaluation.placement`: a run carrying integer codes (``run.codes``) from them (no id string read per
    result, see :mod:`ablate.evaluation.coded`); otherwise by the vectorised engine (ids read once as bytes) and,
    only where that cannot vouch for its result, by the plain Python reference; ``vectorised=False`` uses the
    reference everywhere (tests compare all three).
    """
    if not isinstance(settings, EvalSettings):
        raise ConfigError("settings", type(settings).__name__, "pass an ablate.evaluation.EvalSettings")
    unit = resolve_unit(settings.unit, qrels.unit)
    judg = judgements_at(qrels, unit, chunk_to_doc)
    qlist, qset = _query_set(qids)
    depth = settings.max_k
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

    status = query_status(missing, n_results, n_units, settings)
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

    accounting = query_accounting(
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
        _source=UnjudgedSource(unit, settings.budget, depth, qlist, lists, jdicts, export),
    )
