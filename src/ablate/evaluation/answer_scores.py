"""The answer side of a run's score: one row per question from what the generator wrote, and the run's answer metrics.

A generator's output for one question is an :class:`Answered`: the chunk ids of the passages it read (the first
``context_k`` of the final ranking; for the Oracle, the gold evidence), the text of every repeat, and the first
repeat's latency, tokens and whether it came from the cache. That is all scoring needs besides the corpus (passage
texts, gold answers, answer parts) and the labels, so a run's ``answers.csv`` scores again exactly as the run did,
without generating anything (:func:`ablate.evaluation.scoring.score_run`).

Scoring rules per answer: :mod:`ablate.evaluation.generation`. With an LLM judge (``answer.judge=llm``) an
:class:`Answered` also carries the judge's grade and rationale of each repeat: ``correct`` (and the diagnosis) then
follow the grades (``correct`` 1, ``partly``/``wrong``/``unparsed`` 0), the rule's verdict is kept as
``correct_rule``, and ``answers.csv`` keeps both, so a re-score needs no model. A context passage is *gold* when its unit (chunk or
document, as the run is scored) has a grade >= ``relevance_level`` for the asking identity on its date.

:func:`answer_metrics` turns the table into the run's answer metrics (means over the answerable questions that have
gold answers, refusals over no-answer questions, ``answer_no_final`` (answerable questions whose answer has no
final answer line, and its rate), the diagnosis split with Wilson intervals, latency percentiles,
tokens and cost; for multi-condition questions with ``answer_parts``, ``answer_parts_covered`` and
``answer_parts_all`` over the answerable questions that have parts); :func:`answer_slices` gives the same means per
question tag.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ablate.data.types import Query
from ablate.evaluation.generation import diagnosis, normalize_answer, score_answer, score_parts

#: Diagnosis labels of answerable questions (see :func:`ablate.evaluation.generation.diagnosis`).
FAILURES = ("generation_failure", "retrieval_failure")
#: Answer-part scores of multi-condition questions (:func:`ablate.evaluation.generation.score_parts`).
PART_COLUMNS = ("parts_covered", "parts_all")


@dataclass(frozen=True)
class Answered:
    """What the generator did for one question (see the module docstring)."""

    context: tuple[str, ...]  # chunk ids of the passages it read, in prompt order
    texts: tuple[str, ...]  # one answer per repeat
    latency_s: float = 0.0  # of the first repeat
    tokens_in: int = 0
    tokens_out: int = 0
    cached: bool = False
    #: an LLM judge's grade and rationale of each repeat (``answer.judge=llm``: :mod:`ablate.runner.judge`); empty
    #: when the rule decides or the question has no gold answers
    grades: tuple[str, ...] = ()
    rationales: tuple[str, ...] = ()
    #: passages of the ranking left out so the prompt fits the model's context window (:mod:`ablate.runner.context_fit`)
    dropped: int = 0


@dataclass(frozen=True)
class AnswerCosts:
    """What the answer metrics need of the generator besides its answers: repeats per question (> 1 logs
    consistency) and prices per 1,000 input / output tokens (``None``: no cost figure)."""

    repeats: int = 1
    price_in_per_1k: float | None = None
    price_out_per_1k: float | None = None

    def cost(self, tokens_in: int, tokens_out: int) -> float | None:
        if self.price_in_per_1k is None and self.price_out_per_1k is None:
            return None
        return tokens_in / 1000 * (self.price_in_per_1k or 0.0) + tokens_out / 1000 * (
            self.price_out_per_1k or 0.0
        )


def score_answers(
    answered: Mapping[str, Answered],
    qids: Sequence[str],
    queries: Mapping[str, Query],
    judged: Mapping[str, Mapping[str, int]],
    unit_of: Mapping[str, str] | None,
    chunk_text: Mapping[str, str],
    relevance_level: int,
    categories: Mapping[str, str],
) -> pd.DataFrame:
    """One row per question of ``qids`` that was answered: the answer, its scores, its diagnosis, latency and
    tokens. ``judged``: the labels at the evaluation unit (``qid -> unit -> grade``); ``unit_of``: chunk id -> the
    unit it counts as (``None``: the chunk itself)."""
    rows = []
    for qid in qids:
        a = answered.get(qid)
        if a is None:
            continue
        query = queries[qid]
        grades = judged.get(qid, {})
        gold = [grades.get(unit_of[c] if unit_of is not None else c, 0) >= relevance_level for c in a.context]
        texts = [chunk_text[c] for c in a.context]
        golds = list(query.answers)
        answerable = categories.get(qid) == "answerable"
        scores = [
            score_answer(t, golds, gold, texts, query.text, query.candidates, query.answer_parts)
            for t in a.texts
        ]
        parts = np.asarray([score_parts(t, query.answer_parts) for t in a.texts], dtype=float)
        first = scores[0]
        verdicts = _judged(a, [s.correct for s in scores])
        if a.grades:  # the judge in force decides the diagnosis too
            first = replace(first, correct=correct_of(a.grades[:1]))
        rows.append(
            {
                "qid": qid,
                "question": query.text,  # answers.csv reads alone: the question beside its answer
                "answer": a.texts[0],
                "final_answer": first.final,  # the short answer the rule scored ("" when none)
                "gold_answers": " | ".join(golds),
                "answerable": answerable and bool(golds),
                "no_answer": categories.get(qid) != "answerable",
                "context": " ".join(a.context),
                "context_ids": json.dumps(list(a.context), ensure_ascii=False),  # exact, whatever an id holds
                "context_gold": sum(gold),
                "context_dropped": a.dropped,
                "correct": float(np.mean([s.correct for s in scores])),
                "em": float(np.mean([s.em for s in scores])),
                "f1": float(np.mean([s.f1 for s in scores])),
                "parts_covered": float(parts[:, 0].mean()),  # NaN: the question has no answer_parts
                "parts_all": float(parts[:, 1].mean()),
                "refused": first.refused,
                "no_final": first.no_final,  # no final answer line: scored as not answered
                "cited": first.cited,
                "cited_gold": first.cited_gold,
                "citations_support": first.citations_support,
                "evidence_in_context": first.evidence_in_context,
                "answer_in_context": first.answer_in_context,
                "diagnosis": diagnosis(first, answerable),
                "consistent": float(
                    len({normalize_answer(s.final or t) for s, t in zip(scores, a.texts, strict=True)}) == 1
                ),
                "latency_s": a.latency_s,
                "tokens_in": a.tokens_in,
                "tokens_out": a.tokens_out,
                "cached": a.cached,
                "answer_texts": json.dumps(list(a.texts), ensure_ascii=False),
                **verdicts,
            }
        )
    table = pd.DataFrame(rows).set_index("qid")
    if all(len(a.texts) == 1 for a in answered.values()):
        del table["answer_texts"]  # one answer per question: the answer column holds it
        table = table.drop(columns=["judge_grades"], errors="ignore")
    return table


def correct_of(grades: Sequence[str]) -> float:
    """An answer's correctness from its grades, one per repeat (an LLM judge's or a person's): the share graded
    ``correct``; ``partly``, ``wrong`` and ``unparsed`` count 0."""
    return float(np.mean([g == "correct" for g in grades]))


def _judged(a: Answered, rule: Sequence[float]) -> dict[str, object]:
    """The judge's columns of one answer row: ``correct_rule`` (the rule's verdict, always kept) and, with an LLM
    judge, ``correct`` by its grades (1 for ``correct``; ``partly``, ``wrong`` and ``unparsed`` 0), the first repeat's
    ``judge_grade`` and ``judge_rationale``, and every repeat's grade (``judge_grades``)."""
    out: dict[str, object] = {"correct_rule": float(np.mean(rule))}
    if a.grades:
        out["correct"] = correct_of(a.grades)
        out["judge_grade"] = a.grades[0]
        out["judge_rationale"] = a.rationales[0] if a.rationales else ""
        out["judge_grades"] = json.dumps(list(a.grades))
    return out


def answer_slices(answers: pd.DataFrame, members: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    """Per question tag (``tag -> question ids``): ``answer_correct``, ``answer_f1`` and ``answer_citations_support``
    (means over the tag's answerable questions, NaN when it has none), the diagnosis counts
    ``answer_generation_failures`` / ``answer_retrieval_failures``, and ``answer_n`` (questions scored)."""
    out: dict[str, dict[str, float]] = {}
    for tag, qids in members.items():
        sub = answers.loc[[q for q in qids if q in answers.index]]
        scored = sub[sub["answerable"].astype(bool)] if len(sub) else sub
        row: dict[str, float] = {"answer_n": float(len(scored))}
        for col in ("correct", "f1", "citations_support"):
            row[f"answer_{col}"] = float(scored[col].mean()) if len(scored) else math.nan
        for label in FAILURES:
            row[f"answer_{label}s"] = float((scored["diagnosis"] == label).sum()) if len(scored) else 0.0
        if "parts_covered" in sub:
            with_parts = scored[scored["parts_covered"].notna()]
            for col in PART_COLUMNS:
                row[f"answer_{col}"] = float(with_parts[col].mean()) if len(with_parts) else math.nan
        out[tag] = row
    return out


def _wilson(k: int, n: int) -> tuple[float, float]:
    from ablate.evaluation.stats import wilson_interval

    if n == 0:
        return math.nan, math.nan
    _, lo, hi = wilson_interval(k, n)
    return lo, hi


def _part_metrics(scored: pd.DataFrame, bootstrap: int, seed: int) -> dict[str, float]:
    """``answer_parts_covered`` / ``answer_parts_all`` (means over the scored answerable questions that have
    ``answer_parts``, with bootstrap intervals) and ``answer_parts_questions``; nothing when no question has parts."""
    from ablate.evaluation.stats import bootstrap_cis

    if "parts_covered" not in scored:
        return {}
    rows = scored[scored["parts_covered"].notna()]
    if not len(rows):
        return {}
    m: dict[str, float] = {"answer_parts_questions": float(len(rows))}
    for col in PART_COLUMNS:
        m[f"answer_{col}"] = float(rows[col].mean())
    if bootstrap > 0:
        table = rows[list(PART_COLUMNS)].astype(float)
        for name, (_, lo, hi) in bootstrap_cis(
            table, list(PART_COLUMNS), n_resamples=bootstrap, seed=seed
        ).items():
            m[f"answer_{name!s}_ci_low"], m[f"answer_{name!s}_ci_high"] = float(lo), float(hi)
    return m


def _scored_metrics(scored: pd.DataFrame, bootstrap: int, seed: int) -> dict[str, float]:
    """Means, intervals and the diagnosis split over the scored answerable questions (``scored`` not empty)."""
    from ablate.evaluation.stats import bootstrap_cis

    n = len(scored)
    m: dict[str, float] = {}
    for col in ("correct", "em", "f1", "citations_support", "answer_in_context"):
        m[f"answer_{col}"] = float(scored[col].mean())
    m.update(_judge_metrics(scored))
    if bootstrap > 0:
        cis = bootstrap_cis(
            scored[["correct", "f1"]].astype(float), ["correct", "f1"], n_resamples=bootstrap, seed=seed
        )
        for name, (_, lo, hi) in cis.items():
            m[f"answer_{name!s}_ci_low"], m[f"answer_{name!s}_ci_high"] = float(lo), float(hi)
    m["answer_false_refusal_rate"] = float(scored["refused"].mean())
    if "no_final" in scored:  # answers without a final answer line, scored as not answered
        m["answer_no_final"] = float(scored["no_final"].astype(bool).sum())
        m["answer_no_final_rate"] = m["answer_no_final"] / n
    m.update(_part_metrics(scored, bootstrap, seed))
    for label in FAILURES:
        k = int((scored["diagnosis"] == label).sum())
        lo, hi = _wilson(k, n)
        m[f"diagnosis_{label}_count"] = float(k)
        m[f"diagnosis_{label}_rate"] = k / n
        m[f"diagnosis_{label}_rate_wilson_low"], m[f"diagnosis_{label}_rate_wilson_high"] = lo, hi
    wrong = int((scored["diagnosis"] != "correct").sum())
    m["diagnosis_wrong_count"] = float(wrong)
    m["diagnosis_generation_share_of_wrong"] = (
        float((scored["diagnosis"] == "generation_failure").sum()) / wrong if wrong else math.nan
    )
    return m


def _judge_metrics(scored: pd.DataFrame) -> dict[str, float]:
    """``answer_correct_rule`` (the rule's correctness, whoever judges) and, with an LLM judge, the answers it graded
    (``answer_judged``), the share graded ``partly`` (``answer_partly``) and the outputs it could not read
    (``answer_judge_unparsed``: counted, never correct)."""
    m: dict[str, float] = {}
    if "correct_rule" in scored:
        m["answer_correct_rule"] = float(scored["correct_rule"].mean())
    if "judge_grade" in scored:
        grades = scored["judge_grade"].fillna("").astype(str)
        judged = grades[grades != ""]
        m["answer_judged"] = float(len(judged))
        m["answer_partly"] = float((judged == "partly").mean()) if len(judged) else math.nan
        m["answer_judge_unparsed"] = float((judged == "unparsed").sum())
    return m


def answer_metrics(answers: pd.DataFrame, costs: AnswerCosts, bootstrap: int, seed: int) -> dict[str, float]:
    """The run's answer metrics (library keys ``answer_*`` and ``diagnosis_*``; see the module docstring)."""
    m: dict[str, float] = {}
    scored = answers[answers["answerable"].astype(bool)]
    m["answer_questions"] = float(len(answers))
    m["answer_scored"] = float(len(scored))
    if len(scored):
        m.update(_scored_metrics(scored, bootstrap, seed))
    cited = int(answers["cited"].sum())
    m["answer_citation_precision"] = float(answers["cited_gold"].sum()) / cited if cited else math.nan
    m["answer_cited_passages"] = float(cited)
    na = answers[answers["no_answer"].astype(bool)]
    m["answer_no_answer_questions"] = float(len(na))
    if len(na):
        m["answer_correct_refusal_rate"] = float(na["refused"].mean())
        m["answer_wrong_answer_count"] = float((~na["refused"].astype(bool)).sum())
    if costs.repeats > 1:
        m["answer_consistency"] = float(answers["consistent"].mean())
    lat = answers["latency_s"].to_numpy(dtype=float)
    known = lat[
        ~np.isnan(lat)
    ]  # a cached answer's latency is the one it was generated with, unknown if not kept
    m["answer_latency_p50_s"] = float(np.percentile(known, 50)) if len(known) else math.nan
    m["answer_latency_p95_s"] = float(np.percentile(known, 95)) if len(known) else math.nan
    if len(known) < len(lat):
        m["answer_latency_unknown"] = float(len(lat) - len(known))
    tin, tout = int(answers["tokens_in"].sum()), int(answers["tokens_out"].sum())
    m["answer_tokens_in"], m["answer_tokens_out"] = float(tin), float(tout)
    m["answer_tokens_in_per_question"] = tin / len(answers)
    m["answer_tokens_out_per_question"] = tout / len(answers)
    cost = costs.cost(tin, tout)
    if cost is not None:
        m["answer_cost"] = cost
        m["answer_cost_per_question"] = cost / len(answers)
    m["answer_generations_cached"] = float(answers["cached"].sum())
    return m
