"""The Oracle: the gold evidence itself, ranked by grade — the upper bound of any retriever.

Fed to a generator, it shows whether answers fail for reasons retrieval cannot fix. Rule: every judged unit with
grade >= ``min_grade`` in the split's qrels, highest grade first, ties by chunk id ascending (``types.TIE_RULE`` with
the grade as score). Document-level qrels are expanded to the document's chunks in document order, so the oracle
hands a reader whole documents. Permission filtering applies as for any retriever: a unit the identity may not see
is never returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ablate.data.types import Chunk, Hit, Qrels, Query, Run
from ablate.stages.base import Fingerprint, StageContext, check_int, fingerprint_of
from ablate.stages.retrievers.base import check_depth, check_mask

if TYPE_CHECKING:
    from ablate.data.snapshot import Snapshot

#: Bump when the oracle's rule changes (part of its fingerprint).
CODE_VERSION = "ablate-oracle/2"
TIE_RULE = "grade desc, then chunk id asc (document order for doc-level labels)"


class OracleIndex:
    """The oracle's rule over ``chunks`` and one split's ``qrels``."""

    name = "oracle"

    def __init__(self, chunks: Sequence[Chunk], qrels: Qrels, min_grade: int = 1) -> None:
        self.chunks = list(chunks)
        self.qrels = qrels
        self.min_grade = min_grade
        self._index = {c.chunk_id: i for i, c in enumerate(self.chunks)}
        self._by_doc: dict[str, list[int]] = {}
        for i, c in enumerate(self.chunks):
            self._by_doc.setdefault(c.doc_id, []).append(i)

    def search(self, queries: Sequence[Query], depth: int, allowed: np.ndarray | None = None) -> Run:
        depth = check_depth(depth)
        allowed = check_mask(allowed, len(self.chunks))
        out: dict[str, list[Hit]] = {}
        for q in queries:
            pos = self.qrels.positives(q.qid, self.min_grade)
            ordered = sorted(pos.items(), key=lambda kv: (-kv[1], kv[0]))
            picked: list[tuple[int, int]] = []  # (grade, chunk index) in oracle order
            for uid, grade in ordered:
                idxs = self._by_doc.get(uid, []) if self.qrels.unit == "doc" else [self._index[uid]]
                picked.extend((grade, i) for i in idxs if allowed is None or allowed[i])
            # score = grade, made strictly decreasing inside a grade so that the order above is the ranking (the
            # offsets count over the whole list, so a shallower search returns a prefix of a deeper one)
            n = len(picked)
            picked = picked[:depth]
            out[q.qid] = [
                Hit(
                    self.chunks[i].chunk_id,
                    self.chunks[i].doc_id,
                    float(g) + (n - r) / (n + 1) * 1e-3,
                    self.chunks[i].version,
                )
                for r, (g, i) in enumerate(picked)
            ]
        return Run(self.name, out, {"oracle.tie_rule": TIE_RULE})


class OracleRetriever:
    """The oracle stage (``conf/retrievers/oracle.yaml``): reads the labels of the split it is bound to."""

    kind: ClassVar[str] = "retriever"
    cacheable: ClassVar[bool] = False  # it reads the labels; storing its lists would only copy them

    def __init__(self, name: str = "oracle", min_grade: int = 1) -> None:
        self.name = name
        self.min_grade = check_int(f"{name}.min_grade", min_grade, 1)
        self.stats: dict[str, float] = {}
        self._qrels: Qrels | None = None
        self._index: OracleIndex | None = None

    def params(self) -> dict[str, Any]:
        return {"min_grade": self.min_grade}

    def fingerprint(self) -> Fingerprint:
        res: dict[str, Any] = {"tie_rule": TIE_RULE}
        if self._qrels is not None:
            res["qrels"] = self._qrels.content_hash()
        return fingerprint_of(self, self.params(), resources=res)

    def bind(self, snapshot: Snapshot, split: str) -> OracleRetriever:
        bound = type(self)(self.name, self.min_grade)
        bound._qrels = snapshot.split_qrels(split)
        return bound

    def prepare(self, context: StageContext) -> None:
        if self._qrels is None:
            raise RuntimeError(f"stage {self.name}: bind() to a split before prepare()")
        self._index = OracleIndex(context.snapshot.chunks, self._qrels, self.min_grade)

    def search(self, queries: Sequence[Query], depth: int, allowed: np.ndarray | None = None) -> Run:
        if self._index is None:
            raise RuntimeError(f"stage {self.name}: prepare() before search()")
        run = self._index.search(queries, depth, allowed)
        run.name = self.name
        return run
