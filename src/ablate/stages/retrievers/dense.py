"""Dense retrieval: a text encoder and an exact FAISS inner-product index.

Chunks and queries are encoded to L2-normalised float32 vectors (:mod:`ablate.stages.text.encoders`), so the inner
product is the cosine similarity::

    score(q, d) = <e(q_prefix + q), e(p_prefix + d)> / (|e(q_prefix + q)| * |e(p_prefix + d)|)

(Reimers & Gurevych 2019, "Sentence-BERT", EMNLP). ``faiss.IndexFlatIP`` searches exhaustively (Johnson, Douze &
Jégou 2019, "Billion-scale similarity search with GPUs"), so there is no approximation error to ablate away.

:class:`DenseIndex` is the engine (chunks + encoder -> FAISS index, search); :class:`DenseRetriever` is the stage a
config builds (``conf/retrievers/dense.yaml``): it validates its parameters at construction, resolves the model
offline (a missing model fails before any work), and builds a :class:`DenseIndex` in ``prepare``. Embeddings are
cached by the encoder's fingerprint, so a warm run never loads the model.

**Mask** and **ties** follow the BM25 retriever: ``allowed`` becomes a FAISS ``IDSelectorBitmap`` inside the search,
so a masked chunk never takes a slot; hits are ordered by ``data.types.rank_hits``, and a tie at the cut-off is
resolved exactly over the full score vector. Unlike BM25 there is no zero-score rule: every allowed chunk has a cosine.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ablate.data.types import TIE_RULE, Chunk, Hit, Query, Run
from ablate.stages.base import Fingerprint, StageContext, check_int, fingerprint_of
from ablate.stages.retrievers.base import (
    ChunkTable,
    check_depth,
    check_mask,
    hits_of,
    top_by_tie_rule,
)
from ablate.stages.text.e5 import default_prefixes
from ablate.stages.text.encoders import SentenceTransformerEncoder, make_encoder

if TYPE_CHECKING:
    from ablate.data.corpus import Snapshot

#: Bump when this module's search rules change (part of the stage fingerprint).
CODE_VERSION = "ablate-dense/2"
_NOTED: set[tuple[str, tuple[str, ...]]] = set()  # prefix notes already printed by this process


class DenseIndex:
    """Exact cosine search over ``chunks`` with an encoder (an object with ``encode_queries``/``encode_passages``
    returning unit-norm float32 rows)."""

    name = "dense"

    def __init__(self, chunks: Sequence[Chunk], encoder: SentenceTransformerEncoder) -> None:
        self.chunks = list(chunks)
        self.encoder = encoder
        self.stats: dict[str, float] = {"index_seconds": 0.0, "search_seconds": 0.0}
        table = ChunkTable.of(self.chunks)
        self._chunks_sha256, self._meta, self._id_order = table.sha256, table.meta, table.id_order
        t0 = time.perf_counter()
        self._emb = encoder.encode_passages([c.text for c in self.chunks])
        self._emb.setflags(write=False)
        self._index: Any = None
        if len(self.chunks):
            import faiss

            self._index = faiss.IndexFlatIP(self._emb.shape[1])
            self._index.add(self._emb)
        self.stats["index_seconds"] = time.perf_counter() - t0

    @property
    def embeddings(self) -> np.ndarray:
        """The chunks' unit-norm float32 embeddings, one row per chunk in ``chunks`` order (read-only)."""
        return self._emb

    @property
    def dim(self) -> int:
        emb = self._emb
        return int(emb.shape[1]) if emb.ndim == 2 and emb.shape[0] else 0

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.encoder.encode_queries(texts)

    def search(self, queries: Sequence[Query], depth: int, allowed: np.ndarray | None = None) -> Run:
        """Top-``depth`` chunks per query by cosine; chunks where ``allowed`` is False are excluded inside FAISS."""
        depth = check_depth(depth)
        n = len(self.chunks)
        mask = check_mask(allowed, n)
        t0 = time.perf_counter()
        results: dict[str, list[Hit]] = {q.qid: [] for q in queries}
        if queries and n and (mask is None or mask.any()):
            qemb = self.encode_queries([q.text for q in queries])
            import faiss

            k = min(depth + 1, n)  # one extra to see whether the cut-off falls inside a tie
            params = bits = sel = None
            if mask is not None and not mask.all():
                # bit i of the bitmap = chunk i (faiss reads the least significant bit first)
                bits = np.packbits(mask, bitorder="little")
                sel = faiss.IDSelectorBitmap(n, faiss.swig_ptr(bits))
                params = faiss.SearchParameters()
                params.sel = sel
            scores, idx = self._index.search(qemb, k, params=params)
            del bits, sel  # the C++ selector points into both: kept alive until the search returned
            keep_all = mask if mask is not None else np.ones(n, dtype=bool)
            for qi, q in enumerate(queries):
                s_row, i_row = scores[qi], idx[qi]
                valid = i_row >= 0
                if k > depth and valid[depth] and s_row[depth - 1] == s_row[depth]:
                    full = self._emb @ qemb[qi]
                    top = top_by_tie_rule(full, depth, self._id_order, keep_all)
                    results[q.qid] = hits_of(self._meta, top, full[top])
                else:
                    i_row, s_row = i_row[valid], s_row[valid]
                    order = np.lexsort((self._id_order[i_row], -s_row.astype(np.float64)))[:depth]
                    results[q.qid] = hits_of(self._meta, i_row[order], s_row[order])
        self.stats["search_seconds"] += time.perf_counter() - t0
        meta = {
            "retriever": self.name,
            "tie_rule": TIE_RULE,
            "depth": depth,
            "chunks_sha256": self._chunks_sha256,
        }
        return Run(self.name, results, meta)


class DenseRetriever:
    """The dense retriever stage: ``dense.model`` (any sentence-transformers name in the offline cache, a local
    folder, or ``multilingual-e5-small``), ``batch_size``, ``max_seq_length``, ``query_prefix`` / ``passage_prefix``,
    ``precision`` (``fp32`` | ``bf16``) and ``num_threads`` (``None`` = torch's default): see
    :mod:`ablate.stages.text.compute`. ``num_threads`` is logged (``dense.num_threads``) but left out of the
    fingerprint, since it does not change a vector: a sweep over it reuses the cached embeddings and candidates.

    A prefix left ``None`` (``null`` in the config) is the model's own: ``"query: "`` / ``"passage: "`` for an e5
    model (:func:`ablate.stages.text.e5.default_prefixes`), none otherwise; ``""`` means none. ``params()`` holds
    the prefixes as they run, so they are logged (``dense.query_prefix``) and part of the fingerprint, and a note
    on stderr says when they were chosen for the model."""

    kind: ClassVar[str] = "retriever"
    cacheable: ClassVar[bool] = True

    def __init__(
        self,
        name: str = "dense",
        model: str = "all-MiniLM-L6-v2",
        batch_size: int = 32,
        max_seq_length: int = 256,
        query_prefix: str | None = None,
        passage_prefix: str | None = None,
        precision: str = "fp32",
        num_threads: int | None = None,
    ) -> None:
        self.name = name
        self.model = str(model)
        self.batch_size = check_int(f"{name}.batch_size", batch_size, 1)
        self.max_seq_length = check_int(f"{name}.max_seq_length", max_seq_length, 1, 8192)
        auto_q, auto_p = default_prefixes(self.model)
        self.query_prefix = auto_q if query_prefix is None else str(query_prefix)
        self.passage_prefix = auto_p if passage_prefix is None else str(passage_prefix)
        chosen = [
            f"{name}.{k}={v!r}"
            for k, v, given in (
                ("query_prefix", auto_q, query_prefix),
                ("passage_prefix", auto_p, passage_prefix),
            )
            if given is None and v
        ]
        if chosen and (self.model, tuple(chosen)) not in _NOTED:
            _NOTED.add((self.model, tuple(chosen)))
            print(f"note: {self.model} is an e5 model, so {' and '.join(chosen)}", file=sys.stderr)
        self.encoder = make_encoder(
            self.model,
            batch_size=self.batch_size,
            max_seq_length=self.max_seq_length,
            query_prefix=self.query_prefix,
            passage_prefix=self.passage_prefix,
            setting=name,
            precision=precision,
            num_threads=num_threads,
        )  # resolves the model offline: fails here, before any work, when it is not available
        self.stats: dict[str, float] = dict(self.encoder.stats)
        self._index: DenseIndex | None = None
        self._prepared_for: str | None = None

    def params(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "batch_size": self.batch_size,
            "max_seq_length": self.max_seq_length,
            "query_prefix": self.query_prefix,
            "passage_prefix": self.passage_prefix,
            **self.encoder.compute.log_params(),
        }

    def fingerprint(self) -> Fingerprint:
        return fingerprint_of(
            self,
            {k: v for k, v in self.params().items() if k != "num_threads"},  # threads change no vector
            libraries=("faiss-cpu",),
            resources={"encoder": self.encoder.fingerprint("passage"), "index": "faiss.IndexFlatIP"},
        )

    def bind(self, snapshot: Snapshot, split: str) -> DenseRetriever:
        return self

    def prepare(self, context: StageContext) -> None:
        if self._prepared_for == context.snapshot.fingerprint:
            return
        self.encoder.cache = context.cache
        self.encoder.show_progress = context.show_progress
        self._index = DenseIndex(context.snapshot.chunks, self.encoder)
        self._prepared_for = context.snapshot.fingerprint
        self._sync_stats()

    def search(self, queries: Sequence[Query], depth: int, allowed: np.ndarray | None = None) -> Run:
        if self._index is None:
            raise RuntimeError(f"stage {self.name}: prepare() before search()")
        run = self._index.search(queries, depth, allowed)
        run.name = self.name
        self._sync_stats()
        return run

    def _sync_stats(self) -> None:
        self.stats.update(self.encoder.stats)
        if self._index is not None:
            self.stats.update(self._index.stats)
