"""Sub-question coverage of multi-condition questions: does every part of a question have evidence in the top K?

Seed 003: "all relevant material found" is not "every sub-question has evidence": labels may list several
equivalent documents for one condition and none for the deadline the user asked about, so recall@K can be high while
one part of the answer has no evidence at all. A question may declare ``subquestions`` in ``queries.jsonl``
(:class:`~ablate.data.types.SubQuestion`: an id, a text and ``evidence``, unit ids at the labels' unit); a
sub-question is covered by ANY ONE of its evidence units.

Per question and K (columns of ``per_query``):

* ``subq_coverage@K`` = |sub-questions with at least one evidence unit in the top K| / |sub-questions|;
* ``subq_all@K`` = 1 when every sub-question is covered, else 0;
* ``n_subq`` = the number of sub-questions (0: the question has none; its coverage columns are NaN).

Rules (:data:`RULE`, also written into ``accounting["rules"]["subquestions"]``):

* **Same window as the retrieval metrics**: unit, lifting, dedup and budget are the run's (``budget=chunks``: first
  K results then dedup to units; ``budget=docs``: dedup then first K units), via
  :func:`ablate.evaluation.units.ranked_units`. A unit counts once, so one sub-question covered by two (or ten)
  retrieved units counts once, and one unit can cover several sub-questions.
* **Lifting**: chunk evidence scored at unit ``doc`` becomes its chunk's document (like chunk qrels); document
  evidence cannot be scored at unit ``chunk`` (refused, as for qrels).
* **Full ranking, even under ``unjudged=condensed``**: coverage is about what was retrieved (like judged@K), and
  sub-question evidence is its own label set: removing results without a qrels judgement first would let K read
  deeper than the reader does and could drop an evidence unit the qrels happen not to judge.
* **Queries**: questions without sub-questions are counted apart (``without_subquestions``) and never enter the
  means. A question with sub-questions enters the means when it is a scored answerable question (category
  ``answerable``, not excluded as missing), like every quality metric: one with no positive qrels for the run's
  identity (no labels, or all its evidence hidden by permissions) keeps its per-query values but is counted as
  ``subquestions_not_answerable`` instead. A question missing from the run follows ``eval.missing`` (``zero``: an
  empty ranking, covers nothing; ``exclude``: NaN).
* **Means**: plain averages over those questions (every question weighs the same, not every sub-question).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ablate.data.types import Query, Run, SubQuestion
from ablate.errors import ConfigError, InputError
from ablate.evaluation.result import EvalResult
from ablate.evaluation.settings import EvalSettings
from ablate.evaluation.units import ranked_units

#: The rule text logged with a run that has sub-questions (``accounting["rules"]["subquestions"]``).
RULE = (
    "subq_coverage@K = share of a question's sub-questions with at least one of their evidence units in the top-K "
    "window; subq_all@K = 1 when all are covered. The window is the retrieval metrics' (same unit, lifting, dedup "
    "and budget: {budget}) but always on the full ranking, also under unjudged=condensed (coverage is about what "
    "was retrieved, like judged@K). A sub-question covered by several units counts once. Means over the scored "
    "answerable questions that have sub-questions; questions without sub-questions are counted apart "
    "(without_subquestions), questions with sub-questions but no positive label for this identity are not averaged "
    "(subquestions_not_answerable)"
)

_BUDGET = {
    "chunks": "budget=chunks, first K results then dedup",
    "docs": "budget=docs, dedup then first K units",
}


def coverage_columns(ks: Sequence[int]) -> list[str]:
    """The per-query column names, in order: ``subq_coverage@K`` for every K, then ``subq_all@K``."""
    return [f"subq_coverage@{k}" for k in ks] + [f"subq_all@{k}" for k in ks]


def _evidence_at(
    subs: Sequence[SubQuestion],
    qid: str,
    unit: str,
    labels_unit: str,
    chunk_to_doc: Mapping[str, str] | None,
) -> list[set[str]]:
    """Each sub-question's evidence as a set of unit ids at the evaluation unit."""
    if labels_unit == unit:
        return [set(s.evidence) for s in subs]
    if labels_unit == "doc":
        raise ConfigError(
            "eval.unit",
            unit,
            "sub-question evidence is given at unit 'doc' and a document cannot be mapped down to its chunks. Fix: "
            "evaluate with eval.unit=doc (or auto), or give chunk ids as evidence (qrels_unit: chunk)",
        )
    if chunk_to_doc is None:
        raise ConfigError(
            "chunk_to_doc",
            None,
            "sub-question evidence is at unit 'chunk' and evaluation at unit 'doc'. Fix: pass chunk_to_doc (the "
            "snapshot's chunk->doc mapping)",
        )
    out: list[set[str]] = []
    for s in subs:
        docs: set[str] = set()
        for e in s.evidence:
            doc = chunk_to_doc.get(e)
            if doc is None:
                raise InputError(
                    f"query {qid!r}, sub-question {s.sid!r}",
                    f"evidence {e!r} is not a chunk of this snapshot",
                    "give the chunk ids the current chunker produces (as the qrels do)",
                )
            docs.add(doc)
        out.append(docs)
    return out


def subquestion_coverage(
    run: Run,
    subq: Mapping[str, Sequence[SubQuestion]],
    qids: Sequence[str],
    settings: EvalSettings,
    unit: str,
    labels_unit: str,
    chunk_to_doc: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Per-query sub-question coverage of ``run`` (see the module's rules), indexed by every qid of ``qids``.

    ``subq`` maps a qid to its sub-questions (absent or empty: none); ``unit`` is the resolved evaluation unit
    (``EvalResult.unit``), ``labels_unit`` the unit the evidence ids are given at (the corpus' ``qrels_unit``).
    Columns: ``n_subq``, then :func:`coverage_columns` (NaN for questions without sub-questions, and for questions
    missing from the run under ``eval.missing=exclude``). Pure: never mutates its arguments.
    """
    if not isinstance(settings, EvalSettings):
        raise ConfigError("settings", type(settings).__name__, "pass an ablate.evaluation.EvalSettings")
    ks = settings.ks
    depth = settings.max_k
    chunks_budget = settings.budget == "chunks"
    doc_unit = unit == "doc"
    qlist = list(qids)
    cover = np.full((len(qlist), len(ks)), np.nan)
    every = np.full((len(qlist), len(ks)), np.nan)
    n_subq = np.zeros(len(qlist), dtype=np.int64)
    kv = np.asarray(ks, dtype=np.int64)
    for i, qid in enumerate(qlist):
        subs = list(subq.get(qid) or ())
        if not subs:
            continue
        n_subq[i] = len(subs)
        evidence = _evidence_at(subs, qid, unit, labels_unit, chunk_to_doc)
        hits = run.results.get(qid)
        if hits is None and settings.missing == "exclude":
            continue
        ids = [h.doc_id if doc_unit else h.chunk_id for h in hits or ()]
        units, first = ranked_units(ids, depth, settings.budget)
        # a unit's budget position: its first result's position (chunks) or its place among the units (docs);
        # it is in the top K when that position is < K
        where = {u: (p if chunks_budget else j) for j, (u, p) in enumerate(zip(units, first, strict=True))}
        earliest = np.asarray(
            [min((where[u] for u in ev if u in where), default=depth) for ev in evidence], dtype=np.int64
        )
        covered = earliest[:, None] < kv[None, :]  # (sub-question, K)
        cover[i] = covered.mean(axis=0)
        every[i] = covered.all(axis=0)
    data: dict[str, np.ndarray] = {"n_subq": n_subq}
    for c, k in enumerate(ks):
        data[f"subq_coverage@{k}"] = cover[:, c]
    for c, k in enumerate(ks):
        data[f"subq_all@{k}"] = every[:, c]
    return pd.DataFrame(data, index=pd.Index(qlist, name="qid", dtype=object))


def add_subquestion_coverage(
    result: EvalResult,
    run: Run,
    queries: Mapping[str, Query],
    qids: Sequence[str],
    chunk_to_doc: Mapping[str, str] | None,
    labels_unit: str,
) -> None:
    """Join :func:`subquestion_coverage` into ``result``: the per-query columns, their means (over the scored
    answerable questions with sub-questions) and the counts ``with_subquestions``, ``without_subquestions``,
    ``subquestions_scored``, ``subquestions_not_answerable``, ``subquestions`` (sub-questions in total) in
    ``result.accounting``, plus the rule text in ``accounting["rules"]["subquestions"]``. Does nothing when no
    question of ``qids`` has sub-questions (a run without them logs nothing new).

    ``labels_unit`` is the unit the evidence ids are given at (the snapshot's ``qrels_unit``).
    """
    subq = {q: queries[q].subquestions for q in qids if q in queries and queries[q].subquestions}
    if not subq:
        return
    ks = result.settings.ks
    cov = subquestion_coverage(run, subq, qids, result.settings, result.unit, labels_unit, chunk_to_doc)
    pq = result.per_query
    for col in cov.columns:
        pq[col] = cov[col].reindex(pq.index).to_numpy()
    has = pq["n_subq"] > 0
    answerable = pq["category"] == "answerable"
    scored = pq[has & answerable & pq[f"subq_coverage@{ks[0]}"].notna()]
    for col in coverage_columns(ks):
        result.means[col] = float(scored[col].mean()) if len(scored) else float("nan")
    n_with = int(has.sum())
    result.accounting.update(
        {
            "with_subquestions": n_with,
            "without_subquestions": len(pq) - n_with,
            "subquestions": int(pq["n_subq"].sum()),
            "subquestions_scored": len(scored),
            "subquestions_not_answerable": int((has & ~answerable).sum()),
        }
    )
    rules = result.accounting.get("rules")
    if isinstance(rules, dict):
        rules["subquestions"] = RULE.format(budget=_BUDGET[result.settings.budget])
