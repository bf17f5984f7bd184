"""Dense retrieval: a sentence-transformers bi-encoder and an exact FAISS inner-product index.

Chunks and queries are encoded to L2-normalised float32 vectors, so the inner product is the cosine similarity::

    score(q, d) = <e(q_prefix + q), e(p_prefix + d)> / (|e(q_prefix + q)| * |e(p_prefix + d)|)

(Reimers & Gurevych 2019, "Sentence-BERT", EMNLP). ``faiss.IndexFlatIP`` searches exhaustively (Johnson, Douze &
Jégou 2019, "Billion-scale similarity search with GPUs"), so there is no approximation error to ablate away.

**Offline.** The model is resolved with :func:`ablate.models.resolve_model` (a local folder, the bundled
``all-MiniLM-L6-v2``, or the local Hugging Face cache); anything else raises
:class:`~ablate.errors.ModelUnavailableError` before any work is done. Loading passes ``local_files_only=True``.

**Cache** (an :class:`ablate.cache.Cache`; ``None`` = no caching). Two layers, both keyed by content:

* a whole matrix per ordered text list: kind ``dense-passages`` / ``dense-queries``, key over the encoder
  fingerprint (model files, ``max_seq_length``, prefix, normalisation, this module's encoder version) and the sha256
  of the ordered list of per-text sha256s. A warm run reads one ``.npy`` and never loads the model.
* a per-text vector store (kind ``dense-vectors``), consulted only when the matrix misses: the vectors of every text
  ever encoded with this encoder, in 16 bucket files by the first hex digit of the text's sha256 (a structured
  ``.npy``: ``h`` = hex digest, ``v`` = vector). So a corpus edit or a new chunking re-encodes only the texts that are
  new, not the whole corpus. A bucket is rewritten (atomically) when new texts are added; two processes adding to
  the same bucket at once can lose one's additions, which only costs re-encoding later, never a wrong vector.

Everything is ``.npy`` written with ``allow_pickle=False``. Duplicate texts are encoded once.

**Mask** and **ties** follow the BM25 retriever: ``allowed`` becomes a FAISS ``IDSelectorBitmap`` inside the search,
so a masked chunk never takes a slot; hits are ordered by ``types.rank_hits``, and a tie at the cut-off is resolved
exactly over the full score vector. Unlike BM25 there is no zero-score rule: every allowed chunk has a cosine.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ablate.cache import Cache, key_of, sha256_text
from ablate.errors import ConfigError
from ablate.stages.text.models import resolve_model
from ablate.stages.retrievers.base import (
    ChunkTable,
    check_depth,
    check_mask,
    hits_of,
    top_by_tie_rule,
)
from ablate.data.types import TIE_RULE, Chunk, Hit, Query, Run

#: Bump when the encoding procedure changes (it is part of every cache key).
ENCODER_VERSION = "ablate-dense/1"
N_BUCKETS_HEX = 1  # hex digits of the text hash naming a vector-store bucket (16 buckets)


@contextlib.contextmanager
def _quiet_transformers(quiet: bool) -> Iterator[None]:
    """Silence transformers' "Loading weights" bar while loading (restoring the caller's setting afterwards)."""
    if not quiet:
        yield
        return
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


class DenseRetriever:
    """Exact cosine search over ``chunks`` with a sentence-transformers encoder; embeddings cached by content."""

    name = "dense"

    def __init__(
        self,
        chunks: Sequence[Chunk],
        model: str = "all-MiniLM-L6-v2",
        cache: Cache | None = None,
        batch_size: int = 32,
        max_seq_length: int = 256,
        query_prefix: str = "",
        passage_prefix: str = "",
        show_progress: bool = False,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError("dense.batch_size", batch_size, "a positive integer")
        if isinstance(max_seq_length, bool) or not isinstance(max_seq_length, int) or max_seq_length < 1:
            raise ConfigError(
                "dense.max_seq_length", max_seq_length, "a positive integer (tokens; MiniLM allows 512)"
            )
        self.resolved = resolve_model(model, kind="encoder", setting="dense.model")  # fails fast, offline
        self.model_name = model
        self.chunks = list(chunks)
        self.cache = cache
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.show_progress = show_progress
        self._model: Any = None
        self.stats: dict[str, float] = {
            "encode_seconds": 0.0,
            "passages_encoded": 0,
            "queries_encoded": 0,
            "cache_hits": 0,
            "cache_misses": 0,
            "vectors_reused": 0,
            "model_load_seconds": 0.0,
            "model_loaded": 0,
            "search_seconds": 0.0,
        }
        table = ChunkTable.of(self.chunks)
        self._chunks_sha256, self._meta, self._id_order = table.sha256, table.meta, table.id_order

        t0 = time.perf_counter()
        self._emb = self._embed([c.text for c in self.chunks], role="passage")
        self._emb.setflags(write=False)
        self._index: Any = None
        if len(self.chunks):
            import faiss

            self._index = faiss.IndexFlatIP(self._emb.shape[1])
            self._index.add(self._emb)
        self.stats["index_seconds"] = time.perf_counter() - t0

    # -- public ------------------------------------------------------------------------------------------------------
    @property
    def embeddings(self) -> np.ndarray:
        """The chunks' unit-norm float32 embeddings, one row per chunk in ``chunks`` order (read-only)."""
        return self._emb

    @property
    def dim(self) -> int:
        emb = getattr(self, "_emb", None)
        return int(emb.shape[1]) if emb is not None and emb.ndim == 2 and emb.shape[0] else 0

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm float32 query embeddings (``query_prefix`` prepended), cached like the passages."""
        return self._embed(list(texts), role="query")

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm float32 passage embeddings (``passage_prefix`` prepended), cached like the chunks'."""
        return self._embed(list(texts), role="passage")

    def encoder_fingerprint(self, role: str) -> dict[str, object]:
        """What determines one text's vector: model files, truncation, prefix, normalisation, procedure version."""
        return {
            "version": ENCODER_VERSION,
            "model_fingerprint": self.resolved.fingerprint,
            "max_seq_length": self.max_seq_length,
            "prefix": self.query_prefix if role == "query" else self.passage_prefix,
            "normalize": True,
            "dtype": "float32",
        }

    def fingerprint(self) -> dict[str, object]:
        return {
            "name": self.name,
            "version": ENCODER_VERSION,
            "model": self.model_name,
            "model_fingerprint": self.resolved.fingerprint,
            "max_seq_length": self.max_seq_length,
            "query_prefix": self.query_prefix,
            "passage_prefix": self.passage_prefix,
            "normalize": True,
            "index": "faiss.IndexFlatIP",
            "n_chunks": len(self.chunks),
            "chunks_sha256": self._chunks_sha256,
        }

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
            "fingerprint": self.fingerprint(),
            "tie_rule": TIE_RULE,
            "depth": depth,
        }
        return Run(self.name, results, meta)

    # -- internals ---------------------------------------------------------------------------------------------------
    def _load_model(self) -> Any:
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            t0 = time.perf_counter()
            with _quiet_transformers(not self.show_progress):
                m = SentenceTransformer(self.resolved.path, device="cpu", local_files_only=True)
            m.max_seq_length = self.max_seq_length
            self._model = m
            self.stats["model_load_seconds"] += time.perf_counter() - t0
            self.stats["model_loaded"] = 1
        return self._model

    def _encode(self, texts: list[str], role: str) -> np.ndarray:
        model = self._load_model()
        prefix = self.query_prefix if role == "query" else self.passage_prefix
        t0 = time.perf_counter()
        vecs = model.encode(
            [prefix + t for t in texts],
            batch_size=self.batch_size,
            show_progress_bar=self.show_progress,
            convert_to_numpy=True,
            normalize_embeddings=True,
        )
        self.stats["encode_seconds"] += time.perf_counter() - t0
        self.stats["queries_encoded" if role == "query" else "passages_encoded"] += len(texts)
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def _embed(self, texts: list[str], role: str) -> np.ndarray:
        """The matrix for ``texts`` (rows in order): whole-matrix cache, else vector store, else the encoder."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        enc = self.encoder_fingerprint(role)
        hashes = [sha256_text(t) for t in texts]
        kind = "dense-queries" if role == "query" else "dense-passages"
        mkey = key_of(kind, enc, hashlib.sha256("\n".join(hashes).encode()).hexdigest())
        if self.cache is not None:
            arr = self.cache.load_array(kind, mkey)
            if arr is not None and arr.dtype == np.float32 and arr.ndim == 2 and arr.shape[0] == len(texts):
                self.stats["cache_hits"] += 1
                return arr
            self.stats["cache_misses"] += 1

        first: dict[str, int] = {}  # hash -> first position (duplicates are encoded once)
        for i, h in enumerate(hashes):
            first.setdefault(h, i)
        found = self._store_get(enc, set(first)) if self.cache is not None else {}
        self.stats["vectors_reused"] += len(found)
        todo = [h for h in first if h not in found]
        if todo:
            new = self._encode([texts[first[h]] for h in todo], role)
            fresh = dict(zip(todo, new, strict=True))
            if self.cache is not None:
                self._store_put(enc, fresh)
            found.update(fresh)
        mat = np.stack([found[h] for h in hashes]).astype(np.float32, copy=False)
        if self.cache is not None:
            self.cache.save_array(kind, mkey, mat)
        return mat

    # -- per-text vector store ---------------------------------------------------------------------------------------
    @staticmethod
    def _bucket_key(enc: dict[str, object], bucket: str) -> str:
        return key_of("dense-vectors", enc, bucket)

    def _store_get(self, enc: dict[str, object], wanted: set[str]) -> dict[str, np.ndarray]:
        assert self.cache is not None
        out: dict[str, np.ndarray] = {}
        for bucket in sorted({h[:N_BUCKETS_HEX] for h in wanted}):
            arr = self.cache.load_array("dense-vectors", self._bucket_key(enc, bucket))
            if arr is None or arr.dtype.names != ("h", "v"):
                continue
            for h, v in zip(arr["h"], arr["v"], strict=True):
                hs = h.decode("ascii")
                if hs in wanted:
                    out[hs] = np.asarray(v, dtype=np.float32)
        return out

    def _store_put(self, enc: dict[str, object], fresh: dict[str, np.ndarray]) -> None:
        assert self.cache is not None
        by_bucket: dict[str, dict[str, np.ndarray]] = {}
        for h, v in fresh.items():
            by_bucket.setdefault(h[:N_BUCKETS_HEX], {})[h] = v
        for bucket, rows in sorted(by_bucket.items()):
            key = self._bucket_key(enc, bucket)
            old = self.cache.load_array("dense-vectors", key)
            merged: dict[str, np.ndarray] = {}
            dim = next(iter(rows.values())).shape[0]
            if old is not None and old.dtype.names == ("h", "v") and old["v"].shape[1:] == (dim,):
                merged = {h.decode("ascii"): v for h, v in zip(old["h"], old["v"], strict=True)}
            merged.update(rows)
            dt = np.dtype([("h", "S64"), ("v", "<f4", (dim,))])
            arr = np.empty(len(merged), dtype=dt)
            for j, h in enumerate(sorted(merged)):
                arr[j] = (h.encode("ascii"), merged[h])
            self.cache.save_array("dense-vectors", key, arr)
