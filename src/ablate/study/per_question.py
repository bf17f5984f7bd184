"""The report's per-question section: against the baseline, the questions each run fixed and those it broke, and for
each broken question the stage of the run where its evidence was lost.

The rules (the section's text says them too):

* **Retrieval**, at the K of the report's main metric (its first, ``ndcg@10`` -> K = 10): a question *hits* when a
  relevant unit (grade >= ``eval.relevance_level``, at the labels' unit) is in the run's first K results, i.e. its
  ``hit@K`` in ``per_query.csv`` is 1 (a run without that column: its main metric above 0). Compared on the questions
  both runs score as answerable. *Fixed*: the baseline misses it and the run hits it; *broken*: the reverse.
* **Answers** (both runs had a generator): a question is *correct* when its ``answer_correct`` is at least 0.5 (with
  ``generator.repeats`` > 1: at least half of the repeats right); compared on the questions both runs score. Fixed and
  broken as above.
* **Lost at** (a broken question, from the run's ``funnel_per_query.csv``: the rank of the best-placed relevant unit
  in each stage's list): the chain is the candidates (any retriever's list), then each later stage in order (fusion,
  rerank, the final ranking; for answers the context too), each read in its first *cutoff* results (K for retrieval,
  the generator's ``context_k`` for answers). The evidence was lost at the stage that follows the last list of the
  chain holding a relevant unit within the cutoff. When no list of the chain ever held one: ``not retrieved`` (no
  candidate list holds a relevant unit at any depth) or ``candidates below <cutoff>`` (one does, lower down). A
  broken answer whose context held the evidence: ``in context (generation)``. A run without the per-question funnel
  (logged before ablate recorded it), or a question it does not list: ``unknown``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from ablate import record as R
from ablate.study.fetch import RunRecord

CORRECT = "answer_correct"
#: Lists in the text stop after this many question ids (the counts are always whole; the CSV has every question).
SHOWN = 10
NOT_RETRIEVED = "not retrieved"
IN_CONTEXT = "in context (generation)"
UNKNOWN = "unknown"
NO_FUNNEL = f"{UNKNOWN} (no {R.A_FUNNEL_PER_QUERY})"
COLUMNS = ("run_id", "run", "judged_by", "change", "qid", "baseline", "value", "lost_at")


@dataclass
class PerQuestionSection:
    """The per-question rows (``per_question.csv``: one per run, judgement and changed question), the Markdown
    section (in ``ablation.md``; the console keeps its narrow table) and the counts."""

    table: pd.DataFrame
    markdown: str
    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # run id -> {"hit@10 fixed": n, ...}


def _indexed(pq: pd.DataFrame) -> pd.DataFrame:
    out = pq.set_index("qid") if "qid" in pq.columns else pq.copy()
    out.index = out.index.astype(str)
    return out


def hits(pq: pd.DataFrame, hit_col: str, metric_col: str) -> pd.Series:
    """Per answerable question, whether the run hits at K: its ``hit_col`` (``hit@K``) is 1, or without that column
    its ``metric_col`` is above 0; questions without a value are left out."""
    t = _indexed(pq)
    values = pd.to_numeric(t[hit_col if hit_col in t.columns else metric_col], errors="coerce")
    if "category" in t.columns:
        values = values[t["category"].astype(str) == "answerable"]
    return values.dropna() > 0


def correct(pq: pd.DataFrame) -> pd.Series | None:
    """Per scored question, whether the answer is correct (``answer_correct`` >= 0.5); None without answers."""
    t = _indexed(pq)
    if CORRECT not in t.columns:
        return None
    values = pd.to_numeric(t[CORRECT], errors="coerce")
    if "category" in t.columns:
        values = values[t["category"].astype(str) == "answerable"]
    return values.dropna() >= 0.5


def changes(base: pd.Series, run: pd.Series) -> tuple[list[str], list[str]]:
    """(fixed, broken) question ids, in the run's order, among the questions both judge."""
    common = [q for q in run.index if q in base.index]
    fixed = [q for q in common if bool(run[q]) and not bool(base[q])]
    broken = [q for q in common if bool(base[q]) and not bool(run[q])]
    return fixed, broken


def lost_at(rows: pd.DataFrame, retrievers: Sequence[str], cutoff: int | None, context: bool) -> str:
    """Where one broken question's evidence was lost (the module's rule), from its rows of the run's per-question
    funnel. ``cutoff``: K (retrieval) or None for the generator's context (the rows' ``topk``); ``context``: judge an
    answer (the context stage is part of the chain)."""
    if rows.empty:
        return f"{UNKNOWN} (not in the run's funnel)"
    rows = rows.sort_values("position")
    if cutoff is None:
        cutoff = int(rows["topk"].iloc[0])
    rank = pd.to_numeric(rows["first_rank"], errors="coerce")
    held = (rank <= cutoff).to_numpy()  # NaN (not in the list): False
    stages = rows["stage"].astype(str).tolist()
    is_cand = [s in retrievers for s in stages]
    chain: list[tuple[str, bool]] = [("candidates", any(h for h, c in zip(held, is_cand, strict=True) if c))]
    for s, h, c in zip(stages, held, is_cand, strict=True):
        if not c and (context or s != "context"):
            chain.append((s, bool(h)))
    last = max((i for i, (_, h) in enumerate(chain) if h), default=None)
    if last is None:
        found = pd.to_numeric(rows["found"], errors="coerce").fillna(0).to_numpy()
        retrieved = any(f > 0 for f, c in zip(found, is_cand, strict=True) if c)
        return f"candidates below {cutoff}" if retrieved else NOT_RETRIEVED
    if last == len(chain) - 1:
        return IN_CONTEXT if context else f"{UNKNOWN} (held in the first {cutoff} of the final ranking)"
    return chain[last + 1][0]


def _ids(qids: Sequence[str], where: Mapping[str, str] | None = None) -> str:
    shown = [f"{q} [{where[q]}]" if where else q for q in qids[:SHOWN]]
    more = f", ... ({len(qids) - SHOWN} more)" if len(qids) > SHOWN else ""
    return ", ".join(shown) + more


def _tally(where: Mapping[str, str]) -> str:
    counts: dict[str, int] = {}
    for v in where.values():
        counts[v] = counts.get(v, 0) + 1
    return ", ".join(f"{k} {n}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _funnel_rows(rec: RunRecord) -> dict[str, pd.DataFrame] | None:
    f = rec.funnel_per_query
    if f is None:
        return None
    f = f.copy()
    f["qid"] = f["qid"].astype(str)
    return {str(q): g for q, g in f.groupby("qid", sort=False)}


def per_question_section(
    runs: Sequence[RunRecord],
    labels: Mapping[str, str],
    base: RunRecord,
    metric: str,
    metric_col: str,
) -> PerQuestionSection:
    """The section over ``runs`` against ``base`` at the K of ``metric`` (read from ``metric_col`` of
    ``per_query.csv``: ``ndcg@10``, or ``doc_ndcg@10`` when the report compares at the document level, where the
    funnel, kept at the labels' unit, cannot say the stage)."""
    k = metric.rpartition("@")[2]
    doc_level = metric_col.startswith(R.DOC_PREFIX)
    judge = f"{R.DOC_PREFIX if doc_level else ''}hit@{k}"
    base_hits, base_correct = hits(base.per_query, judge, metric_col), correct(base.per_query)
    rows: list[dict[str, object]] = []
    lines: list[str] = []
    counts: dict[str, dict[str, int]] = {}
    for r in runs:
        if r.run_id == base.run_id:
            continue
        label = labels.get(r.run_id, r.name)
        funnel = None if doc_level else _funnel_rows(r)
        retrievers = R.json_list(r.params.get(R.P_RETRIEVERS))
        judged: list[tuple[str, pd.Series, pd.Series, int | None, bool]] = [
            (judge, base_hits, hits(r.per_query, judge, metric_col), int(k), False)
        ]
        run_correct = correct(r.per_query)
        if base_correct is not None and run_correct is not None:
            judged.append(("answer correct", base_correct, run_correct, None, True))
        parts = []
        for name, b, v, cutoff, ctx in judged:
            fixed, broken = changes(b, v)
            if funnel is None:
                where = {
                    q: (f"{UNKNOWN} (document-level comparison)" if doc_level else NO_FUNNEL) for q in broken
                }
            else:
                empty = pd.DataFrame(columns=list(R.FUNNEL_PER_QUERY_COLUMNS))
                where = {q: lost_at(funnel.get(q, empty), retrievers, cutoff, ctx) for q in broken}
            counts.setdefault(r.run_id, {}).update(
                {f"{name} fixed": len(fixed), f"{name} broken": len(broken)}
            )
            for change, qids in (("fixed", fixed), ("broken", broken)):
                for q in qids:
                    rows.append(
                        {
                            "run_id": r.run_id,
                            "run": label,
                            "judged_by": name,
                            "change": change,
                            "qid": q,
                            "baseline": bool(b[q]),
                            "value": bool(v[q]),
                            "lost_at": where.get(q, ""),
                        }
                    )
            n = len([q for q in v.index if q in b.index])
            text = f"{name} (of {n}): fixed {len(fixed)}" + (f" ({_ids(fixed)})" if fixed else "")
            text += f"; broken {len(broken)}" + (
                f" ({_ids(broken, where)}; lost at: {_tally(where)})" if broken else ""
            )
            parts.append(text)
        lines.append(f"- **{label}**: " + ". ".join(parts))
        if funnel is None and not doc_level:
            lines.append(
                f"  - {label} has no {R.A_FUNNEL_PER_QUERY} (logged before ablate recorded it): stage unknown"
            )
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    markdown = _markdown(labels.get(base.run_id, base.name), judge, k, base_correct is not None, lines)
    return PerQuestionSection(table, markdown, counts)


def _markdown(base: str, judge: str, k: str, answers: bool, lines: list[str]) -> str:
    rule = (
        f"Against the baseline {base}. A question *hits* when a relevant unit (grade >= eval.relevance_level) is in "
        f"the first {k} results (per_query.csv's {judge}); compared on the questions both runs score as answerable. "
        "*Fixed*: the baseline misses it and the run hits it; *broken*: the reverse."
    )
    if answers:
        rule += (
            " Answers: *correct* when answer_correct >= 0.5 (at least half of the repeats), on the questions both runs "
            "score; fixed and broken the same way."
        )
    rule += (
        " *Lost at* (broken questions, from the run's funnel_per_query.csv): the chain is the candidates (any "
        f"retriever's list), fusion, rerank and the final ranking (for answers, the context too), each read in its "
        f"first {k} results (answers: the generator's context_k); the evidence was lost at the stage after the last "
        f"list holding a relevant unit there; `{NOT_RETRIEVED}`: no candidate list holds one at any depth; "
        f"`candidates below N`: one does, lower down; `{IN_CONTEXT}`: the context held it and the answer is still "
        f"wrong. First {SHOWN} question ids per list, the stage in brackets; every question in per_question.csv."
    )
    body = "\n".join(lines) if lines else "- (no run besides the baseline)"
    return f"## Per question\n\n{rule}\n\n{body}\n"
