"""The stage funnel: how much of the gold evidence survives each stage of a run, per question and on average.

For every answerable question, recall of its relevant units (grade >= ``eval.relevance_level``, at the labels' unit,
for the asking identity) in each list the pipeline produced: each retriever's candidates (as deep as fusion reads
them, or the final depth), the fused list, the reranked list, the final ranking, and the context the generator read
(its first ``context_k`` passages). Evidence a stage loses can never come back later, so a drop between two
neighbours says where to look.

Each list is also read at its head (``top_k``: the generator's ``context_k``, else 10): recall in its first ``top_k``
results (chunks, the context budget). On a small corpus every list holds all the evidence at full depth; the head
shows which stage moves it into (or out of) the part a generator would read.

:func:`funnel_per_query` is the table per question and stage (logged as ``funnel_per_query.csv``, with the rank of
the best-placed relevant unit in each list, so a reader can tell at which stage one question's evidence left the
first K); :func:`summarise` averages it over the questions into the logged ``funnel/*`` metrics, so the two always
agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ablate.data.types import Qrels, Run
from ablate.evaluation import EvalResult, judgements_at
from ablate.record import FUNNEL_PER_QUERY_COLUMNS


def funnel_per_query(
    stages: Mapping[str, Run],
    result: EvalResult,
    eval_qrels: Qrels,
    chunk_to_doc: Mapping[str, str],
    relevance_level: int,
    top_k: int = 10,
) -> pd.DataFrame:
    """One row per answerable question and stage (stages in order, ``position`` from 1), columns
    :data:`ablate.record.FUNNEL_PER_QUERY_COLUMNS`: the list's length for this question (``depth``), its relevant
    units (``relevant``), how many of them the list holds (``found``; ``recall`` = found / relevant, NaN without a
    relevant unit), the rank of the best-placed one (``first_rank``, 1-based, NaN when the list holds none; a rank of
    the list, whose entries are chunks even when the labels' unit is the document), and the same count and recall in
    the list's first ``topk``."""
    judged = judgements_at(eval_qrels, result.unit, chunk_to_doc)
    doc_unit = result.unit == "doc"
    qids = [q for q, c in result.per_query["category"].items() if c == "answerable"]
    relevant = {q: {u for u, g in judged.get(q, {}).items() if g >= relevance_level} for q in qids}
    rows: list[tuple[object, ...]] = []
    for position, (stage, run) in enumerate(stages.items(), 1):
        for qid in qids:
            rel, hits = relevant[qid], run.get(qid)
            units = [h.doc_id if doc_unit else h.chunk_id for h in hits]
            ranks = [i for i, u in enumerate(units, 1) if u in rel]
            found, head = len(rel & set(units)), len(rel & set(units[:top_k]))
            n = len(rel)
            rows.append(
                (
                    str(qid),
                    position,
                    stage,
                    len(hits),
                    n,
                    found,
                    found / n if n else np.nan,
                    ranks[0] if ranks else np.nan,
                    top_k,
                    head,
                    head / n if n else np.nan,
                )
            )
    return pd.DataFrame(rows, columns=list(FUNNEL_PER_QUERY_COLUMNS))


def summarise(per_query: pd.DataFrame, stages: Sequence[str], top_k: int) -> dict[str, dict[str, float]]:
    """``stage -> {"recall": mean recall, "depth": longest list, "topkrecall": mean recall in the first top_k,
    "topk": top_k}`` over the questions of :func:`funnel_per_query`'s table, in stage order (NaN means and depth 0
    for a stage without questions)."""
    out: dict[str, dict[str, float]] = {}
    for stage in stages:
        rows = per_query[per_query["stage"] == stage]
        out[stage] = {
            "recall": _mean(rows["recall"]),
            "depth": int(rows["depth"].max()) if len(rows) else 0,
            "topkrecall": _mean(rows["topk_recall"]),
            "topk": top_k,
        }
    return out


def funnel(
    stages: Mapping[str, Run],
    result: EvalResult,
    eval_qrels: Qrels,
    chunk_to_doc: Mapping[str, str],
    relevance_level: int,
    top_k: int = 10,
) -> dict[str, dict[str, float]]:
    """:func:`summarise` of :func:`funnel_per_query`: the funnel averaged over the answerable questions."""
    table = funnel_per_query(stages, result, eval_qrels, chunk_to_doc, relevance_level, top_k)
    return summarise(table, list(stages), top_k)


def _mean(values: pd.Series) -> float:
    arr = np.asarray(values, dtype=float)
    return float(np.nanmean(arr)) if np.isfinite(arr).any() else float("nan")
