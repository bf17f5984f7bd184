"""The answer stage of a run: each question's context goes to the generator, and the answers are scored.

The context of a question is the first ``context_k`` passages of the final ranking (for the Oracle: the gold
evidence, ranked by grade). Every question of the split is asked, no-answer questions included (the generator
should refuse them). Scoring rules: :mod:`ablate.evaluation.generation`. A context passage is *gold* when its unit
(chunk or document, as the labels are) has a grade >= ``eval.relevance_level`` for the asking identity.

:func:`answer_metrics` turns the per-question table into the run's answer metrics (means over the answerable
questions that have gold answers, refusals over no-answer questions, the diagnosis split with Wilson intervals,
latency percentiles, tokens and cost; for multi-condition questions with ``answer_parts``, ``answer_parts_covered``
and ``answer_parts_all`` over the answerable questions that have parts); :func:`answer_slices` gives the same means
per question tag.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ablate.cache import Cache
from ablate.data.corpus import Snapshot
from ablate.data.types import Qrels, Run
from ablate.evaluation import EvalResult, judgements_at
from ablate.evaluation.generation import diagnosis, normalize_answer, score_answer, score_parts
from ablate.runner.session import Session
from ablate.stages.base import Generator

#: Diagnosis labels of answerable questions (see :func:`ablate.evaluation.generation.diagnosis`).
FAILURES = ("generation_failure", "retrieval_failure")
#: Answer-part scores of multi-condition questions (:func:`ablate.evaluation.generation.score_parts`).
PART_COLUMNS = ("parts_covered", "parts_all")


#: (generator fingerprint, snapshot fingerprint, split) already checked in this process (a sweep checks each once)
_FITS: set[tuple[str, str, str]] = set()


def check_context(snapshot: Snapshot, split: str, generator: Generator, cache: Cache) -> None:
    """Before anything runs: every prompt the generator may see must fit it (``check_fits``: for a llama.cpp model,
    the worst case of ``context_k`` passages of this corpus and a question of ``split`` within ``n_ctx``).
    Checked once per process for each generator, corpus and split."""
    check = getattr(generator, "check_fits", None)
    if check is None:
        return
    key = (generator.fingerprint().key, snapshot.fingerprint, split)
    if key in _FITS:
        return
    questions = [snapshot.queries[q].text for q in snapshot.split_qids(split)]
    check(list(snapshot.chunk_text.values()), questions, cache)
    _FITS.add(key)


def answer_questions(
    snapshot: Snapshot,
    split: str,
    generator: Generator,
    run: Run,
    result: EvalResult,
    eval_qrels: Qrels,
    relevance_level: int,
    cache: Cache,
    session: Session,
    show_progress: bool = False,
) -> pd.DataFrame:
    """One row per question of ``split``: the answer, its scores, its diagnosis, latency and tokens."""
    generator = session.prepared(generator, snapshot, cache, show_progress)
    qids = snapshot.split_qids(split)
    judged = judgements_at(eval_qrels, result.unit, snapshot.chunk_to_doc)
    doc_unit = result.unit == "doc"
    prompts, contexts = [], []
    for qid in qids:
        hits = run.get(qid)[: generator.context_k]
        grades = judged.get(qid, {})
        gold = [grades.get(h.doc_id if doc_unit else h.chunk_id, 0) >= relevance_level for h in hits]
        texts = [snapshot.chunk_text[h.chunk_id] for h in hits]
        contexts.append((hits, gold, texts))
        prompts.append(generator.template.render(snapshot.queries[qid].text, texts))  # type: ignore[attr-defined]
    generations = generator.generate(prompts, cache, show_progress)
    category = result.per_query["category"].to_dict()
    rows = []
    for qid, (hits, gold, texts), gens in zip(qids, contexts, generations, strict=True):
        golds = list(snapshot.queries[qid].answers)
        answerable = category.get(qid) == "answerable"
        scores = [score_answer(g.text, golds, gold, texts) for g in gens]
        parts = np.asarray(
            [score_parts(g.text, snapshot.queries[qid].answer_parts) for g in gens], dtype=float
        )
        first, score = gens[0], scores[0]
        rows.append(
            {
                "qid": qid,
                "answer": first.text,
                "gold_answers": " | ".join(golds),
                "answerable": answerable and bool(golds),
                "no_answer": category.get(qid) != "answerable",
                "context": " ".join(h.chunk_id for h in hits),
                "context_gold": sum(gold),
                "correct": float(np.mean([s.correct for s in scores])),
                "em": float(np.mean([s.em for s in scores])),
                "f1": float(np.mean([s.f1 for s in scores])),
                "parts_covered": float(parts[:, 0].mean()),  # NaN: the question has no answer_parts
                "parts_all": float(parts[:, 1].mean()),
                "refused": score.refused,
                "cited": score.cited,
                "cited_gold": score.cited_gold,
                "citations_support": score.citations_support,
                "evidence_in_context": score.evidence_in_context,
                "answer_in_context": score.answer_in_context,
                "diagnosis": diagnosis(score, answerable),
                "consistent": float(len({normalize_answer(g.text) for g in gens}) == 1),
                "latency_s": first.latency_s,
                "tokens_in": first.tokens_in,
                "tokens_out": first.tokens_out,
                "cached": first.cached,
            }
        )
    return pd.DataFrame(rows).set_index("qid")


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


def answer_metrics(
    answers: pd.DataFrame, generator: Generator, bootstrap: int, seed: int
) -> dict[str, float]:
    """The run's answer metrics (library keys ``answer_*``; see the module docstring)."""
    from ablate.evaluation.stats import bootstrap_cis

    m: dict[str, float] = {}
    scored = answers[answers["answerable"]]
    n = len(scored)
    m["answer_questions"] = float(len(answers))
    m["answer_scored"] = float(n)
    if n:
        for col in ("correct", "em", "f1", "citations_support", "answer_in_context"):
            m[f"answer_{col}"] = float(scored[col].mean())
        if bootstrap > 0:
            cis = bootstrap_cis(
                scored[["correct", "f1"]].astype(float), ["correct", "f1"], n_resamples=bootstrap, seed=seed
            )
            for name, (_, lo, hi) in cis.items():
                m[f"answer_{name!s}_ci_low"], m[f"answer_{name!s}_ci_high"] = float(lo), float(hi)
        m["answer_false_refusal_rate"] = float(scored["refused"].mean())
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
    cited = int(answers["cited"].sum())
    m["answer_citation_precision"] = float(answers["cited_gold"].sum()) / cited if cited else math.nan
    m["answer_cited_passages"] = float(cited)
    na = answers[answers["no_answer"]]
    m["answer_no_answer_questions"] = float(len(na))
    if len(na):
        m["answer_correct_refusal_rate"] = float(na["refused"].mean())
        m["answer_wrong_answer_count"] = float((~na["refused"]).sum())
    if generator.repeats > 1:
        m["answer_consistency"] = float(answers["consistent"].mean())
    lat = answers["latency_s"].to_numpy(dtype=float)
    m["answer_latency_p50_s"] = float(np.percentile(lat, 50))
    m["answer_latency_p95_s"] = float(np.percentile(lat, 95))
    tin, tout = int(answers["tokens_in"].sum()), int(answers["tokens_out"].sum())
    m["answer_tokens_in"], m["answer_tokens_out"] = float(tin), float(tout)
    m["answer_tokens_in_per_question"] = tin / len(answers)
    m["answer_tokens_out_per_question"] = tout / len(answers)
    cost = generator.cost(tin, tout)
    if cost is not None:
        m["answer_cost"] = cost
        m["answer_cost_per_question"] = cost / len(answers)
    m["answer_generations_cached"] = float(answers["cached"].sum())
    return m


def diagnosis_table(answers: pd.DataFrame) -> dict[str, Any]:
    """Counts of each diagnosis label (for accounting.json and the console)."""
    return {str(k): int(v) for k, v in answers["diagnosis"].value_counts().items()}
