"""The stage funnel: how much of the gold evidence survives each stage of a run.

For every answerable question, recall of its relevant units (grade >= ``eval.relevance_level``, at the labels' unit,
for the asking identity) in each list the pipeline produced: each retriever's candidates (as deep as fusion reads
them, or the final depth), the fused list, the reranked list, the final ranking, and the context the generator read
(its first ``context_k`` passages). Averaged over questions. Evidence a stage loses can never come back later, so a
drop between two neighbours says where to look.
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
) -> dict[str, dict[str, float]]:
    """``stage -> {"recall": mean recall, "depth": longest list}`` over the answerable questions, in stage order."""
    judged = judgements_at(eval_qrels, result.unit, chunk_to_doc)
    doc_unit = result.unit == "doc"
    qids = [q for q, c in result.per_query["category"].items() if c == "answerable"]
    out: dict[str, dict[str, float]] = {}
    for stage, run in stages.items():
        recalls = []
        depth = 0
        for qid in qids:
            relevant = {u for u, g in judged.get(qid, {}).items() if g >= relevance_level}
            hits = run.get(qid)
            depth = max(depth, len(hits))
            units = {h.doc_id if doc_unit else h.chunk_id for h in hits}
            recalls.append(len(relevant & units) / len(relevant) if relevant else np.nan)
        values = np.asarray(recalls, dtype=float)
        out[stage] = {
            "recall": float(np.nanmean(values)) if np.isfinite(values).any() else float("nan"),
            "depth": depth,
        }
    return out
