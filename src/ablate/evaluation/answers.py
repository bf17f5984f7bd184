"""Answer in context (DPR-style "top-K accuracy", what FlashRAG reports as retrieval "recall").

answer_in_context@K = 1 when any gold answer string of the question occurs in the text of the first K retrieved
chunks, else 0; averaged over the questions that have answers and at least one relevant label (answerable). It needs
no relevance labels on the retrieved text, so it also credits unlabelled passages that happen to contain the answer
— and it credits passages that contain the string by accident. Reported beside the ID-based metrics, never instead
of them; where they disagree, the per-query table shows which way (``answer_in_context@K`` vs ``hit@K``).

Matching rule: Unicode NFKC, case-folded, whitespace collapsed, then plain substring search (Karpukhin et al., 2020,
use token-level matching after normalisation; substring matching is the common simplification and works for Chinese,
which has no spaces). K counts retrieved chunks (the reading budget), not documents.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence

from ablate.data.types import Run

_WS = re.compile(r"\s+")


def normalize(text: str) -> str:
    return _WS.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def answer_in_context(
    run: Run,
    answers: Mapping[str, Sequence[str]],
    chunk_text: Mapping[str, str],
    ks: Sequence[int],
    qids: Sequence[str] | None = None,
) -> dict[str, dict[int, float]]:
    """``qid -> {K: 0.0 | 1.0}`` for every query in ``qids`` (default: those with answers) that has answers."""
    out: dict[str, dict[int, float]] = {}
    for qid in qids if qids is not None else list(answers):
        golds = [normalize(a) for a in answers.get(qid, ()) if a and normalize(a)]
        if not golds:
            continue
        hits = run.get(qid)
        first: int | None = None  # 1-based chunk rank at which an answer first appears
        for rank, h in enumerate(hits, start=1):
            text = normalize(chunk_text.get(h.chunk_id, ""))
            if any(g in text for g in golds):
                first = rank
                break
        out[qid] = {k: float(first is not None and first <= k) for k in ks}
    return out
