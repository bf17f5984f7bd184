"""The report's answer section: correctness with intervals, a paired test against the baseline, citation support,
refusals, and the diagnosis split of the wrong answers (evidence in the context: a generation failure; evidence
not in it: a retrieval failure), for runs that had a generator.

Reads the per-question columns a run with a generator writes into ``per_query.csv`` (``answer_correct``,
``answer_refused``, ``answer_no_final``: no final answer line, ``answer_citations_support``, ``answer_diagnosis``) and its logged latency and cost metrics.
Intervals resample questions (bootstrap for means, Wilson for the failure rates), or clusters of questions when
questions share their evidence (:mod:`ablate.study.clusters`: the correctness interval, the paired test and the
MDE, as the retrieval table's); with ``generator.repeats > 1`` a question's correctness is already the mean of its
repeats, so repeats are never resampled as if they were questions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ablate import record as R
from ablate.evaluation import stats
from ablate.study.clusters import Clustering, design_effect
from ablate.study.fetch import RunRecord
from ablate.study.options import P_COLUMNS, P_HEADS
from ablate.tables import fmt, format_table

CORRECT = "answer_correct"
#: The rule's verdict, kept beside an LLM judge's (``answer.judge=llm``)
CORRECT_RULE = "answer_correct_rule"
DIAGNOSIS = "answer_diagnosis"


@dataclass
class AnswerSection:
    """The answer table (CSV rows), its Markdown section, the console lines and the Oracle reading."""

    table: pd.DataFrame
    markdown: str
    console: str
    notes: list[str] = field(default_factory=list)


def has_answers(rec: RunRecord) -> bool:
    return CORRECT in rec.per_query.columns and DIAGNOSIS in rec.per_query.columns


def scored_questions(pq: pd.DataFrame) -> pd.DataFrame:
    """Answerable questions that have gold answers (their ``answer_correct`` is defined)."""
    correct = pd.to_numeric(pq[CORRECT], errors="coerce")
    mask = correct.notna()
    if "category" in pq.columns:
        mask &= pq["category"].astype(str) == "answerable"
    return pq.loc[mask.to_numpy()]


def _bool(col: pd.Series) -> pd.Series:
    return col.astype(str).str.lower().isin(("true", "1", "1.0"))


def _wilson_cell(k: int, n: int) -> tuple[str, float, float, float]:
    if n == 0:
        return "-", math.nan, math.nan, math.nan
    p, lo, hi = stats.wilson_interval(k, n)
    return f"{k} ({p:.2f} [{lo:.2f}, {hi:.2f}])", p, lo, hi


def _run_row(
    r: RunRecord, label: str, bootstrap: int, seed: int, clusters: Clustering | None = None
) -> tuple[dict[str, Any], dict[str, str], pd.Series]:
    pq = r.per_query.copy()
    if "qid" in pq.columns:
        pq = pq.set_index("qid")
    pq.index = pq.index.astype(str)
    sc = scored_questions(pq)
    correct = pd.to_numeric(sc[CORRECT], errors="coerce").astype(float)
    n = len(sc)
    groups = clusters.of([str(q) for q in sc.index]) if clusters is not None else None
    lo, hi = _interval(correct, bootstrap, seed, groups)
    mean = float(correct.mean()) if n else math.nan
    diag = sc[DIAGNOSIS].astype(str)
    gen_k, ret_k = int((diag == "generation_failure").sum()), int((diag == "retrieval_failure").sum())
    gen_txt, gen_p, gen_lo, gen_hi = _wilson_cell(gen_k, n)
    ret_txt, ret_p, ret_lo, ret_hi = _wilson_cell(ret_k, n)
    support = pd.to_numeric(sc.get("answer_citations_support"), errors="coerce")
    na = pq[pq["category"].astype(str) != "answerable"] if "category" in pq.columns else pq.iloc[:0]
    refused_na = int(_bool(na["answer_refused"]).sum()) if "answer_refused" in na.columns and len(na) else 0
    false_ref = int(_bool(sc["answer_refused"]).sum()) if "answer_refused" in sc.columns else 0
    no_final = int(_bool(sc["answer_no_final"]).sum()) if "answer_no_final" in sc.columns else 0
    m = r.metrics
    judge = R.judge_label(r.params) or "rule"
    rule = pd.to_numeric(sc.get(CORRECT_RULE), errors="coerce") if CORRECT_RULE in sc else None
    row: dict[str, Any] = {
        "run_id": r.run_id,
        "run": label,
        "variant": r.variant,
        "n": n,
        **({"clusters": len(set(groups))} if groups is not None else {}),
        "judge": judge,
        "correct": mean,
        "correct_rule": float(rule.mean()) if rule is not None and n else math.nan,
        "correct_ci_low": lo,
        "correct_ci_high": hi,
        "citations_support": float(support.mean()) if n else math.nan,
        "citation_precision": m.get("answer_citation_precision", math.nan),
        "answer_in_context": m.get("answer_answer_in_context", math.nan),
        "no_answer_questions": len(na),
        "correct_refusals": refused_na,
        "wrong_answers_no_answer": len(na) - refused_na,
        "false_refusals": false_ref,
        "no_final": no_final,
        "generation_failures": gen_k,
        "generation_failure_rate": gen_p,
        "generation_failure_low": gen_lo,
        "generation_failure_high": gen_hi,
        "retrieval_failures": ret_k,
        "retrieval_failure_rate": ret_p,
        "retrieval_failure_low": ret_lo,
        "retrieval_failure_high": ret_hi,
        "latency_p50_s": m.get("answer_latency_p50_s", math.nan),
        "latency_p95_s": m.get("answer_latency_p95_s", math.nan),
        "cost_per_question": m.get("answer_cost_per_question", math.nan),
    }
    md = {
        "run": label,
        "n": str(n),
        **({"G": str(len(set(groups)))} if groups is not None else {}),
        f"correct ({judge})": _ci(mean, lo, hi),
        "citations support": fmt(row["citations_support"], 2),
        "refused no-answer": f"{refused_na}/{len(na)}" if len(na) else "-",
        "false refusals": str(false_ref),
        "no final answer": str(no_final),
        "wrong, evidence in context (generation)": gen_txt,
        "wrong, evidence not in context (retrieval)": ret_txt,
        "latency p50/p95 s": f"{fmt(row['latency_p50_s'], 2)}/{fmt(row['latency_p95_s'], 2)}",
    }
    cached = int(m.get("answer_generations_cached", 0) or 0)
    if cached:  # their latency is the one measured when they were generated
        md["latency p50/p95 s"] += (
            f" ({cached}/{int(m.get('answer_questions', len(pq)))} cached, as generated)"
        )
    md.update(_beside_the_judge(judge, row["correct_rule"], m))
    if not math.isnan(row["cost_per_question"]):
        md["cost/question"] = fmt(row["cost_per_question"], 5)
    return row, md, correct


def _interval(correct: pd.Series, bootstrap: int, seed: int, groups: list[str] | None) -> tuple[float, float]:
    """The 95% bootstrap interval of the correctness (over ``groups``' clusters when given); NaN without questions."""
    if not len(correct) or bootstrap <= 0:
        return math.nan, math.nan
    got = stats.bootstrap_cis(correct.to_frame(), [CORRECT], n_resamples=bootstrap, seed=seed, groups=groups)
    return got[CORRECT][1], got[CORRECT][2]


def _beside_the_judge(judge: str, rule: float, m: Mapping[str, float]) -> dict[str, str]:
    """Beside an LLM judge's correctness: the rule's, the share it graded partly and the outputs it could not read."""
    if judge == "rule" or math.isnan(rule):
        return {}
    partly = m.get("answer_partly")
    return {
        "correct (rule)": f"{rule:.3f}",
        "partly / unparsed": f"{fmt(partly, 2)} / {int(m.get('answer_judge_unparsed', 0))}"
        if partly is not None
        else "-",
    }


def _ci(mean: float, lo: float, hi: float) -> str:
    if math.isnan(mean):
        return "-"
    return f"{mean:.3f} [{lo:.2f}, {hi:.2f}]" if not math.isnan(lo) else f"{mean:.3f}"


def _oracle_note(rows: list[dict[str, Any]]) -> list[str]:
    """What the Oracle row says about the generator, and what retrieval could at most recover."""
    oracle = [r for r in rows if str(r["variant"]).lower() == "oracle"]
    if not oracle:
        return []
    o = oracle[0]
    notes = [
        f"Oracle: with the gold evidence as the context the generator answered {fmt(o['correct'], 3)} of "
        f"{o['n']} answerable questions correctly; its {o['generation_failures']} wrong answers had the evidence "
        "in hand, so they are the generator's (prompt, model, decoding), and no retrieval change fixes them."
    ]
    for r in rows:
        if r is o or math.isnan(r["correct"]) or math.isnan(o["correct"]):
            continue
        gap = o["correct"] - r["correct"]
        notes.append(
            f"{r['run']}: {r['retrieval_failures']} wrong answers lacked the evidence (retrieval), "
            f"{r['generation_failures']} had it (generation); the Oracle is {gap:+.3f} above it in correctness "
            "(what gold evidence alone adds with this generator)."
        )
    return notes


def _paired(
    runs: list[RunRecord],
    base_a: RunRecord,
    correct: dict[str, pd.Series],
    rows: list[dict[str, Any]],
    md_rows: list[dict[str, str]],
    test_fn: Callable[..., stats.PairedResult],
    n_resamples: int,
    seed: int,
    correction: str = "holm",
    clusters: Clustering | None = None,
) -> None:
    """Δ correctness, its minimum detectable effect (80% power, α = 0.05; times the square root of the design
    effect when the questions cluster) and the paired test of each run against the baseline on the questions both
    scored (over their clusters; adjusted by ``correction`` over the runs), written into the rows."""
    others = [r for r in runs if r.run_id != base_a.run_id]
    results = {}
    for r in others:
        common = correct[base_a.run_id].index.intersection(correct[r.run_id].index, sort=False)
        groups = clusters.of([str(q) for q in common]) if clusters is not None else None
        res = test_fn(
            correct[r.run_id].loc[common].to_numpy(),
            correct[base_a.run_id].loc[common].to_numpy(),
            n_resamples=n_resamples,
            seed=seed,
            groups=groups,
        )
        diffs = correct[r.run_id].loc[common].to_numpy(float) - correct[base_a.run_id].loc[common].to_numpy(
            float
        )
        keep = ~np.isnan(diffs)
        mde = stats.mde(diffs[keep])
        if groups is not None:
            mde *= design_effect(
                diffs[keep].tolist(), [g for g, k in zip(groups, keep, strict=True) if k]
            ).inflation
        results[r.run_id] = (res, len(common), mde)
    raw = np.array([results[r.run_id][0].p_value for r in others], dtype=float)
    adjusted = stats.adjust(raw, correction) if raw.size else raw
    p_col, p_head = "correct_" + P_COLUMNS[correction], "p" + P_HEADS[correction]
    for row, md, r in zip(rows, md_rows, runs, strict=True):
        if r.run_id == base_a.run_id:
            row.update(
                {"role": "baseline", "correct_delta": 0.0, "correct_mde": math.nan, "correct_p": math.nan}
                | {p_col: math.nan}
            )
            md["Δ correct"], md["MDE"], md[p_head] = "-", "-", "-"
            md["run"] += " (baseline)"
            continue
        res, n_common, mde = results[r.run_id]
        p_adj = float(adjusted[others.index(r)])
        row.update(
            {
                "role": "",
                "correct_delta": res.delta,
                "correct_delta_ci_low": res.ci_low,
                "correct_delta_ci_high": res.ci_high,
                "correct_mde": mde,
                "correct_p": res.p_value,
                p_col: p_adj,
                "paired_n": n_common,
            }
        )
        md["Δ correct"] = f"{res.delta:+.3f}"
        md["MDE"] = "-" if math.isnan(mde) else f"{mde:.3f}"
        md[p_head] = f"{res.p_value:.3g}" if correction == "none" else f"{res.p_value:.3g} ({p_adj:.3g})"


def _correction_words(correction: str) -> str:
    return {"holm": "Holm over the runs", "bh": "Benjamini-Hochberg over the runs", "none": "p not adjusted"}[
        correction
    ]


def answer_section(
    ordered: list[RunRecord],
    labels: dict[str, str],
    base: RunRecord,
    test_fn: Callable[..., stats.PairedResult],
    n_resamples: int,
    seed: int,
    bootstrap: int,
    correction: str = "holm",
    clusters: Clustering | None = None,
) -> AnswerSection | None:
    """The answer section over the runs that had a generator (``None`` when none had one); the paired tests'
    p-values adjusted by ``correction``; intervals and tests over ``clusters`` of questions where they hold two or
    more."""
    runs = [r for r in ordered if has_answers(r)]
    if not runs:
        return None
    base_a = base if has_answers(base) else runs[0]
    rows, md_rows, correct = [], [], {}
    for r in runs:
        row, md, c = _run_row(r, labels[r.run_id], bootstrap, seed, clusters)
        rows.append(row)
        md_rows.append(md)
        correct[r.run_id] = c
    _paired(runs, base_a, correct, rows, md_rows, test_fn, n_resamples, seed, correction, clusters)
    p_head = "p" + P_HEADS[correction]
    cols = list(md_rows[0].keys())
    for md in md_rows[1:]:
        cols += [k for k in md if k not in cols]
    judged = [c for c in cols if c.startswith("correct (")]  # one column per judge (its name in the header)
    order = ["run", "n", *(["G"] if "G" in cols else []), *judged, "Δ correct", "MDE", p_head]
    cols = order + [c for c in cols if c not in order]
    table_md = format_table(md_rows, cols)
    notes = _oracle_note(rows)
    text = [
        "## Answers",
        "Correctness over the answerable questions with gold answers, by the judge each column names (rule: the "
        "normalised gold answer occurs in the short final answer, the `Answer:` line, numbers compared as numbers "
        "with their unit, an answer without that line is not answered and counted under no final answer; llm: "
        "<model>: the model graded the answer's conclusion correct against the gold answers, partly and wrong count "
        "0, answer.judge=llm), 95% bootstrap interval over questions; Δ and the "
        "paired test against the baseline on the questions both scored ("
        + _correction_words(correction)
        + "; MDE: the "
        "smallest true Δ a paired t test over them detects with 80% power at α = 0.05"
        + (
            "; G: the clusters of questions sharing evidence the interval, the test and the MDE resample"
            if "G" in cols
            else ""
        )
        + "). A wrong or refused "
        "answer is a *generation* failure when the evidence (a gold passage or a gold answer string) was in the "
        "context, else a *retrieval* failure (counts, share of the scored questions, 95% Wilson interval). "
        "No-answer questions are scored apart: refused / asked.",
        table_md,
    ]
    if notes:
        text.append("\n".join(f"- {n}" for n in notes))
    console_rows = [
        {k: md[k] for k in ("run", *judged, "Δ correct", "MDE", p_head) if k in md}
        | {
            "gen. fail": str(row["generation_failures"]),
            "retr. fail": str(row["retrieval_failures"]),
            "refused n/a": md["refused no-answer"],
        }
        for row, md in zip(rows, md_rows, strict=True)
    ]
    console = "answers:\n" + format_table(
        console_rows, ["run", *judged, "Δ correct", "MDE", p_head, "gen. fail", "retr. fail", "refused n/a"]
    )
    return AnswerSection(pd.DataFrame(rows), "\n\n".join(text) + "\n", console, notes)
