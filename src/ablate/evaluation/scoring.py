"""The one scoring entry point: every number a run logs about its ranking and its answers comes from
:func:`score_run`.

The pipeline calls it once the final ranking (and, with a generator, the answers) exist; ``python -m
ablate.evaluate`` calls it for a run file, for a run file scored against a corpus, and for a tracked run
(``--from-run``: its ``run.trec`` and ``answers.csv``). Nothing else computes a score, so a re-score cannot drift
from the run it re-scores.

Inputs, all plain data:

* the ranking (:class:`~ablate.data.types.Run`) and the **labels as the askers see them** (identity and date rules
  already applied: :mod:`ablate.runner.access` builds them), the question set and the rules
  (:class:`~ablate.evaluation.settings.EvalSettings`);
* a :class:`ScoringContext`: the corpus's chunk -> document map and passage texts, the questions (gold answers,
  answer parts, sub-questions, tags, personas), the unit the labels use, and — when questions are dated — the raw
  labels before the date rule and each question's out-of-force documents; the abstention threshold as applied; and
  the generator's output per question (:class:`~ablate.evaluation.answer_scores.Answered`).

What it computes (:class:`Scores`): the evaluation by its rules (:func:`~ablate.evaluation.retrieval.evaluate`), then
beside it ``superseded_first@K`` (dated questions, :mod:`~ablate.evaluation.conflicts`), ``answer_in_context@K``
(:mod:`~ablate.evaluation.answers`), sub-question coverage with each sub-question's evidence cut to what is in force
on the question's date (:mod:`~ablate.evaluation.subquestions`), refusals (:mod:`~ablate.evaluation.abstention`),
means per question tag (:mod:`~ablate.evaluation.slices`) and the scored answer table
(:mod:`~ablate.evaluation.answer_scores`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import pandas as pd

from ablate.data.types import Qrels, Query, Run
from ablate.evaluation.abstention import AbstentionReport, abstention_report
from ablate.evaluation.answer_scores import Answered, answer_slices, score_answers
from ablate.evaluation.result import EvalResult
from ablate.evaluation.retrieval import evaluate
from ablate.evaluation.settings import EvalSettings
from ablate.evaluation.slices import slice_means, slice_members
from ablate.evaluation.subquestions import add_subquestion_coverage
from ablate.evaluation.units import judgements_at


@dataclass(frozen=True)
class ScoringContext:
    """What a run's scores depend on besides its ranking, its labels and the rules (see the module docstring).

    ``chunk_to_doc`` ``None``: the run's ids are units as given (a bare TREC run against qrels). ``out_of_force``
    ``None``: dates are not used; else ``qid -> documents out of force on the question's date`` (empty for an undated
    question), and ``raw_labels`` are the labels before the date rule. ``answers`` ``None``: no generator ran.
    ``personas``: each question ran as its own persona (slices per persona too)."""

    chunk_to_doc: Mapping[str, str] | None = None
    labels_unit: str = "doc"
    queries: Mapping[str, Query] = field(default_factory=dict)
    chunk_text: Mapping[str, str] | None = None
    raw_labels: Qrels | None = None
    out_of_force: Mapping[str, frozenset[str]] | None = None
    rules: Mapping[str, str] = field(default_factory=dict)
    abstain_threshold: float | None = None
    personas: bool = False
    answers: Mapping[str, Answered] | None = None


@dataclass
class Scores:
    """Everything :func:`score_run` computed. ``answers``: one scored row per question (None without a generator)."""

    evaluation: EvalResult
    abstention: AbstentionReport
    slices: dict[str, dict[str, float]]
    answers: pd.DataFrame | None = None


def score_run(
    run: Run, labels: Qrels, qids: Sequence[str], settings: EvalSettings, context: ScoringContext
) -> Scores:
    """Score ``run`` on the question set ``qids`` against ``labels`` by ``settings`` in ``context`` (see the
    module docstring). Never mutates its arguments; never rounds."""
    qids = list(qids)
    result = evaluate(run, labels, qids, settings, chunk_to_doc=context.chunk_to_doc)
    rules = result.accounting.get("rules")
    if isinstance(rules, dict):
        rules.update(context.rules)
    if context.out_of_force is not None and context.raw_labels is not None:
        _add_superseded_first(result, run, context, qids)
    if context.chunk_text is not None and context.queries:
        _add_answer_in_context(result, run, context.queries, context.chunk_text, qids)
    if context.queries:
        add_subquestion_coverage(
            result, run, dated_evidence(context, qids), qids, context.chunk_to_doc, context.labels_unit
        )
    answers = _answer_table(result, labels, qids, context)
    return Scores(
        evaluation=result,
        abstention=abstention_report(result, run, context.abstain_threshold),
        slices=_slices(result, context, answers),
        answers=answers,
    )


def _doc_of(context: ScoringContext) -> Mapping[str, str] | None:
    return None if context.labels_unit == "doc" else context.chunk_to_doc


def dated_evidence(context: ScoringContext, qids: Sequence[str]) -> Mapping[str, Query]:
    """The questions with each sub-question's evidence cut to units in force on the question's date (a superseded
    clause does not cover a sub-question asked after it was replaced). Without dates: the questions as they are."""
    off_by_q = context.out_of_force
    if off_by_q is None:
        return context.queries
    doc_of = _doc_of(context)
    out = dict(context.queries)
    for q in qids:
        query = context.queries.get(q)
        off = off_by_q.get(q, frozenset()) if query is not None and query.subquestions else frozenset()
        if query is not None and off:
            subs = tuple(
                replace(sq, evidence=tuple(u for u in sq.evidence if (doc_of[u] if doc_of else u) not in off))
                for sq in query.subquestions
            )
            out[q] = replace(query, subquestions=subs)
    return out


def _add_superseded_first(result: EvalResult, run: Run, context: ScoringContext, qids: Sequence[str]) -> None:
    """Per-query ``superseded_first@K`` columns and their means over the questions in conflict that are answerable
    on their date; ``accounting["in_conflict"]`` counts them."""
    from ablate.evaluation.conflicts import superseded_first

    assert context.raw_labels is not None and context.out_of_force is not None
    ev = result.settings
    df = superseded_first(
        run,
        context.raw_labels,
        context.out_of_force,
        qids,
        ev.ks,
        result.unit,
        ev.budget,
        context.chunk_to_doc or {},
        ev.relevance_level,
    )
    pq = result.per_query
    answerable = pq["category"] == "answerable"
    for col in df.columns:
        pq[col] = df[col].where(answerable)
        vals = pq[col].dropna()
        result.means[col] = float(vals.mean()) if len(vals) else math.nan
    result.accounting["in_conflict"] = int(pq[df.columns[0]].notna().sum())


def _add_answer_in_context(
    result: EvalResult,
    run: Run,
    queries: Mapping[str, Query],
    chunk_text: Mapping[str, str],
    qids: Sequence[str],
) -> None:
    """Per-query ``answer_in_context@K`` columns and their means over answerable questions with answers."""
    from ablate.evaluation.answers import answer_in_context

    answers = {q: queries[q].answers for q in qids if q in queries and queries[q].answers}
    if not answers:
        return
    ks = result.settings.ks
    aic = answer_in_context(run, answers, chunk_text, tuple(ks), list(answers))
    pq = result.per_query
    for k in ks:
        col = f"answer_in_context@{k}"
        pq[col] = [aic[q][k] if q in aic else math.nan for q in pq.index]
        scored = pq[(pq["category"] == "answerable") & pq[col].notna()][col]
        if len(scored):
            result.means[col] = float(scored.mean())
    result.accounting["with_answers"] = len(answers)


def _answer_table(
    result: EvalResult, labels: Qrels, qids: Sequence[str], context: ScoringContext
) -> pd.DataFrame | None:
    if context.answers is None or context.chunk_text is None:
        return None
    judged = judgements_at(labels, result.unit, context.chunk_to_doc)
    unit_of = context.chunk_to_doc if result.unit == "doc" else None
    return score_answers(
        context.answers,
        qids,
        context.queries,
        judged,
        unit_of,
        context.chunk_text,
        result.settings.relevance_level,
        result.per_query["category"].to_dict(),
    )


def _slices(
    result: EvalResult, context: ScoringContext, answers: pd.DataFrame | None
) -> dict[str, dict[str, float]]:
    """Retrieval means per question tag (and per persona when each question runs as its own), with the answer
    metrics beside them when the run generated answers."""
    slices = slice_means(result, context.queries, personas=context.personas)
    if answers is not None:
        members = slice_members(result.per_query.index, context.queries, personas=context.personas)
        for tag, row in answer_slices(answers, members).items():
            slices.setdefault(tag, {}).update(row)
    return slices
