"""The Oracle: the gold evidence itself, ranked by grade — the upper bound of any retriever.

Fed to a generator, it shows whether answers fail for reasons retrieval cannot fix. Rule: every judged unit with
grade >= ``min_grade`` in the split's qrels, highest grade first, ties by chunk id ascending (``types.TIE_RULE`` with
the grade as score). Document-level qrels are expanded to the document's chunks in document order, so the oracle
hands a reader whole documents. Permission filtering applies as for any retriever: a unit the identity may not see
is never returned.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ablate.data.types import Chunk, Hit, Qrels, Query, Run

TIE_RULE = "grade desc, then chunk id asc (document order for doc-level labels)"


class OracleRetriever:
    name = "oracle"

    def __init__(self, chunks: Sequence[Chunk], qrels: Qrels, min_grade: int = 1) -> None:
        self.chunks = list(chunks)
        self.qrels = qrels
        self.min_grade = min_grade
        self._index = {c.chunk_id: i for i, c in enumerate(self.chunks)}
        self._by_doc: dict[str, list[int]] = {}
        for i, c in enumerate(self.chunks):
            self._by_doc.setdefault(c.doc_id, []).append(i)

    def fingerprint(self) -> dict[str, object]:
        return {"name": self.name, "min_grade": self.min_grade, "qrels": self.qrels.content_hash(), "tie": TIE_RULE}

    def search(self, queries: Sequence[Query], depth: int, allowed: np.ndarray | None = None) -> Run:
        out: dict[str, list[Hit]] = {}
        for q in queries:
            pos = self.qrels.positives(q.qid, self.min_grade)
            ordered = sorted(pos.items(), key=lambda kv: (-kv[1], kv[0]))
            picked: list[tuple[int, int]] = []  # (grade, chunk index) in oracle order
            for uid, grade in ordered:
                idxs = self._by_doc.get(uid, []) if self.qrels.unit == "doc" else [self._index[uid]]
                picked.extend((grade, i) for i in idxs if allowed is None or allowed[i])
            picked = picked[:depth]
            # score = grade, made strictly decreasing inside a grade so that the order above is the ranking
            n = len(picked)
            out[q.qid] = [
                Hit(self.chunks[i].chunk_id, self.chunks[i].doc_id, float(g) + (n - r) / (n + 1) * 1e-3,
                    self.chunks[i].version)
                for r, (g, i) in enumerate(picked)
            ]
        return Run(self.name, out, {"oracle.tie_rule": TIE_RULE})


