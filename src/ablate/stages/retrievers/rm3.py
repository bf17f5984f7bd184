"""BM25 + RM3 pseudo-relevance feedback: the standard query-expansion baseline of Anserini and PyTerrier.

RM3 (Abdul-Jaleel et al. 2004, "UMass at TREC 2004: Novelty and HARD", the interpolated form of Lavrenko & Croft's
2001 relevance model), as Anserini's ``Rm3Reranker`` computes it:

1. **First pass**: BM25 (the same tokenizer, ``k1``, ``b`` and idf as :class:`~ablate.stages.retrievers.bm25
   .BM25Retriever`) ranks the chunks the identity may see; the top ``fb_docs`` are the feedback set F.
2. **Relevance model**: for each feedback chunk d, its term counts tf(w, d) over *feedback terms* (terms in at most
   10% of the chunks, as Anserini filters; single Latin letters dropped), scaled to sum 1; then
   ``rm(w) = sum over d in F of tf(w, d) / |d| * score_1(d)``, cut to the ``fb_terms`` heaviest terms (ties by term)
   and scaled to sum 1.
3. **Interpolation**: the query's own term counts scaled to sum 1, ``q(w)``; the expanded query weighs each term
   ``weight(w) = original_query_weight * q(w) + (1 - original_query_weight) * rm(w)``.
4. **Second pass**: ``score(d) = sum over w of weight(w) * bm25(w, d)`` over the whole snapshot (permission mask
   applied inside), zero scores dropped, ties by chunk id (``TIE_RULE``). With ``original_query_weight = 1`` the
   ranking is BM25's.

Defaults are Anserini's (``fb_docs = 10``, ``fb_terms = 10``, ``original_query_weight = 0.5``). Only the ``bm25s``
backend is supported (its per-term score vectors make the weighted second pass exact and fast). A plugin in the
sense of the stage architecture: this module, ``conf/retrievers/rm3.yaml`` and ``tests/test_rm3.py`` are all of it.
Use it as ``python -m ablate retrievers=[rm3] variant.name=RM3``, or fused: ``retrievers=[rm3,dense] fusion=rrf``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from ablate.data.types import TIE_RULE, Query, Run
from ablate.errors import ConfigError
from ablate.stages.base import Fingerprint, StageContext, check_float, check_int, fingerprint_of
from ablate.stages.retrievers.base import ChunkTable, check_depth, check_mask, coded_run, top_by_tie_rule
from ablate.stages.retrievers.bm25 import BM25Retriever, import_bm25s

#: Bump when the feedback or scoring rules of this module change (part of the stage fingerprint).
CODE_VERSION = "ablate-rm3/1"
#: Anserini's feedback-term filter: terms in more than this share of the chunks carry no feedback.
MAX_DF_RATIO = 0.1


class RM3Retriever(BM25Retriever):
    """BM25 + RM3 (see the module docstring). Parameters: those of BM25 plus ``fb_docs``, ``fb_terms`` and
    ``original_query_weight``."""

    def __init__(
        self,
        name: str = "rm3",
        fb_docs: int = 10,
        fb_terms: int = 10,
        original_query_weight: float = 0.5,
        **bm25: Any,
    ) -> None:
        super().__init__(name=name, **bm25)
        if self.impl != "bm25s":
            raise ConfigError(f"{name}.impl", self.impl, "RM3 runs on the bm25s backend only; use impl=bm25s")
        self.fb_docs = check_int(f"{name}.fb_docs", fb_docs, 1)
        self.fb_terms = check_int(f"{name}.fb_terms", fb_terms, 1)
        self.original_query_weight = check_float(
            f"{name}.original_query_weight", original_query_weight, 0.0, 1.0
        )
        self._bm25: Any = None
        self._doc_terms: list[Counter[str]] = []
        self._feedback_vocab: set[str] = set()
        self._table: ChunkTable | None = None
        self._n = 0

    def params(self) -> dict[str, Any]:
        return {
            **super().params(),
            "fb_docs": self.fb_docs,
            "fb_terms": self.fb_terms,
            "original_query_weight": self.original_query_weight,
        }

    def fingerprint(self) -> Fingerprint:
        return fingerprint_of(
            self,
            self.params(),
            libraries=("bm25s",),
            resources={"tokenizer": self.tokenizer.fingerprint(), "max_df_ratio": MAX_DF_RATIO},
        )

    def prepare(self, context: StageContext) -> None:
        if self._prepared_for == context.snapshot.fingerprint:
            return
        bm25s = import_bm25s()

        t0 = time.perf_counter()
        chunks = context.snapshot.chunks
        tokens = self.tokenizer.tokenize_many(c.text for c in chunks)
        self._table = ChunkTable.of(chunks, context.snapshot.id_table)
        self._n = len(chunks)
        self._doc_terms = [Counter(t) for t in tokens]
        df: Counter[str] = Counter()
        for counts in self._doc_terms:
            df.update(counts.keys())
        limit = MAX_DF_RATIO * max(1, self._n)
        self._feedback_vocab = {w for w, n in df.items() if n <= limit and (len(w) > 1 or not w.isascii())}
        self._bm25 = None
        if any(tokens):
            bm = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
            bm.index(tokens, show_progress=False)
            self._bm25 = bm
        self._prepared_for = context.snapshot.fingerprint
        self.stats["index_seconds"] = time.perf_counter() - t0

    # -- searching --------------------------------------------------------------------------------------------------
    def _term_scores(self, weights: dict[str, float], mask: np.ndarray | None) -> np.ndarray:
        total = np.zeros(self._n, dtype=np.float64)
        weight_mask = None if mask is None else mask.astype(np.float32)
        for term, w in sorted(weights.items()):
            total += w * self._bm25.get_scores([term], weight_mask=weight_mask).astype(np.float64)
        return total

    def expansion(self, terms: list[str], first: np.ndarray, feedback: np.ndarray) -> dict[str, float]:
        """The expanded query's term weights from the first-pass scores of the feedback chunks."""
        rm: Counter[str] = Counter()
        for d in feedback.tolist():
            counts = {w: c for w, c in self._doc_terms[d].items() if w in self._feedback_vocab}
            length = sum(counts.values())
            if length == 0:
                continue
            for w, c in counts.items():
                rm[w] += c / length * float(first[d])
        top = sorted(rm.items(), key=lambda kv: (-kv[1], kv[0]))[: self.fb_terms]
        rm_total = sum(v for _, v in top)
        q = Counter(terms)
        weights: dict[str, float] = {}
        alpha = self.original_query_weight
        for w, c in q.items():
            weights[w] = weights.get(w, 0.0) + alpha * c / len(terms)
        if rm_total > 0:
            for w, v in top:
                weights[w] = weights.get(w, 0.0) + (1 - alpha) * v / rm_total
        return {w: v for w, v in weights.items() if v > 0 and w in self._bm25.vocab_dict}

    def search(self, queries: Sequence[Query], depth: int, allowed: np.ndarray | None = None) -> Run:
        if self._table is None:
            raise RuntimeError(f"stage {self.name}: prepare() before search()")
        depth = check_depth(depth)
        mask = check_mask(allowed, self._n)
        t0 = time.perf_counter()
        qids = list(dict.fromkeys(q.qid for q in queries))
        found: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        id_order = self._table.id_order
        if self._bm25 is not None and (mask is None or mask.any()):
            vocab = self._bm25.vocab_dict
            for q in queries:
                terms = [t for t in self.tokenizer.tokenize(q.text) if t in vocab and t != ""]
                if not terms:
                    continue
                first = self._term_scores(dict(Counter(terms)), mask)
                feedback = top_by_tie_rule(first, self.fb_docs, id_order, first > 0)
                if feedback.size == 0:
                    continue
                final = self._term_scores(self.expansion(terms, first, feedback), mask)
                keep = final > 0 if mask is None else (final > 0) & mask
                top = top_by_tie_rule(final, depth, id_order, keep)
                found[q.qid] = (top, final[top])
        self.stats["search_seconds"] = self.stats.get("search_seconds", 0.0) + time.perf_counter() - t0
        meta = {"retriever": self.name, "tie_rule": TIE_RULE, "depth": depth}
        return coded_run(self.name, self._table.ids, qids, found, meta)
