"""The stage funnel: how much of the gold evidence survives each stage of a run.

For every answerable question, recall of its relevant units (grade >= ``eval.relevance_level``, at the labels' unit,
for the asking identity) in each list the pipeline produced: each retriever's candidates (as deep as fusion reads
them, or the final depth), the fused list, the reranked list, the final ranking, and the context the generator read
(its first ``context_k`` passages). Averaged over questions. Evidence a stage loses can never come back later, so a
drop between two neighbours says where to look.

Each list is also read at its head (``top_k``: the generator's ``context_k``, else 10): recall in its first ``top_k``
results (chunks, the context budget). On a small corpus every list holds all the evidence at full depth; the head
shows which stage moves it into (or out of) the part a generator would read.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ablate.data.types import Qrels, Run
from ablate.evaluation import EvalResult, judgements_at


def funnel(
    stages: Mapping[str, Run],
    result: EvalResult,
    eval_qrels: Qrels,
    chunk_to_doc: Mapping[str, str],
    relevance_level: int,
    top_k: int = 10,
) -> dict[str, dict[str, float]]:
    """``stage -> {"recall": mean recall, "depth": longest list, "topkrecall": mean recall in the first top_k,
    "topk": top_k}`` over the answerable questions, in stage order."""
    judged = judgements_at(eval_qrels, result.unit, chunk_to_doc)
    doc_unit = result.unit == "doc"
    qids = [q for q, c in result.per_query["category"].items() if c == "answerable"]
    out: dict[str, dict[str, float]] = {}
    for stage, run in stages.items():
        recalls, heads = [], []
        depth = 0
        for qid in qids:
            relevant = {u for u, g in judged.get(qid, {}).items() if g >= relevance_level}
            hits = run.get(qid)
            depth = max(depth, len(hits))
            units = {h.doc_id if doc_unit else h.chunk_id for h in hits}
            head = {h.doc_id if doc_unit else h.chunk_id for h in hits[:top_k]}
            recalls.append(len(relevant & units) / len(relevant) if relevant else np.nan)
            heads.append(len(relevant & head) / len(relevant) if relevant else np.nan)
        out[stage] = {"recall": _mean(recalls), "depth": depth, "topkrecall": _mean(heads), "topk": top_k}
    return out


def _mean(values: list[float]) -> float:
    arr = np.asarray(values, dtype=float)
    return float(np.nanmean(arr)) if np.isfinite(arr).any() else float("nan")
