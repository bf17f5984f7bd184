"""Dense retrieval: a text encoder and a FAISS inner-product index (exact by default, HNSW or IVF-PQ on request).

Chunks and queries are encoded to L2-normalised float32 vectors (:mod:`ablate.stages.text.encoders`), so the inner
product is the cosine similarity::

    score(q, d) = <e(q_prefix + q), e(p_prefix + d)> / (|e(q_prefix + q)| * |e(p_prefix + d)|)

(Reimers & Gurevych 2019, "Sentence-BERT", EMNLP). The default ``index="flat"`` searches exhaustively (Johnson,
Douze & Jégou 2019, "Billion-scale similarity search with GPUs"), so there is no approximation error to ablate away.
``index="hnsw"`` / ``"ivf_pq"`` are approximate indexes for big corpora (:mod:`ablate.stages.retrievers.faiss_index`
has their factory strings and parameters); their parameters join the fingerprint, and the built index is cached
(kind ``faiss-index``, keyed by the factory string, parameters, FAISS version and the sha256 of the vectors; stored
with ``faiss.serialize_index`` in an ``.npz`` entry, atomically, no pickle), so a warm run does not rebuild it.
An approximate index only proposes candidates: they are re-scored with the exact cosines and ranked by the tie rule,
so scores mean the same for every kind (a tie at the cut-off is resolved among the candidates the index returned).

:class:`DenseIndex` is the engine (chunks + encoder -> FAISS index, search); :class:`DenseRetriever` is the stage a
config builds (``conf/retrievers/dense.yaml``): it validates its parameters at construction, resolves the model
offline (a missing model fails before any work), and builds a :class:`DenseIndex` in ``prepare``. Embeddings are
cached by the encoder's fingerprint, so a warm run never loads the model.

**Mask** and **ties** follow the BM25 retriever: ``allowed`` becomes a FAISS ``IDSelectorBitmap`` inside the search
(``SearchParametersHNSW`` / ``SearchParametersIVF`` carry it for the approximate kinds), so a masked chunk never takes
a slot; hits are ordered by ``data.types.rank_hits``, and (flat) a tie at the cut-off is resolved exactly over the
full score vector. Unlike BM25 there is no zero-score rule: every allowed chunk has a cosine.

**A very selective filter** starves an approximate index: HNSW's graph walk visits at most about ``ef_search``
allowed nodes and IVF scans only ``nprobe`` lists, so a query may get back fewer than ``depth`` allowed chunks even
though more exist (FAISS pads with -1). When that happens (fewer hits than ``min(depth, allowed chunks)``), that query
is answered by exact search over the allowed chunks instead (``stats["exact_fallback_queries"]`` counts them), so
filtering costs no slots for any kind; the price is an exhaustive scan, which is cheap exactly when few chunks are
allowed. A disallowed chunk is never returned either way.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ablate.cache import Cache, key_of
from ablate.data.types import TIE_RULE, Chunk, IdTable, Query, Run
from ablate.stages.base import (
    Fingerprint,
    StageContext,
    check_int,
    check_str,
    fingerprint_of,
    library_versions,
)
from ablate.stages.retrievers.base import (
    ChunkTable,
    check_depth,
    check_mask,
    coded_run,
    top_by_tie_rule,
)
from ablate.stages.retrievers.faiss_index import (
    build_index,
    check_index,
    check_params,
    factory_string,
    search_parameters,
)
from ablate.stages.text.compute import resolve_compute
from ablate.stages.text.defaults import SETTING, encoder_choice
from ablate.stages.text.e5 import default_prefixes
from ablate.stages.text.encoders import STAT_KEYS as ENCODER_STAT_KEYS
from ablate.stages.text.encoders import SentenceTransformerEncoder, make_encoder

if TYPE_CHECKING:
    from ablate.data.snapshot import Snapshot

#: Bump when this module's search rules change (part of the stage fingerprint).
CODE_VERSION = "ablate-dense/2"
_NOTED: set[tuple[str, tuple[str, ...]]] = set()  # prefix notes already printed by this process
#: Cache kind and entry format of a stored approximate index.
INDEX_CACHE_KIND = "faiss-index"
INDEX_CACHE_FORMAT = "ablate-faiss-index/1"


class DenseIndex:
    """Cosine search over ``chunks`` with an encoder (an object with ``encode_queries``/``encode_passages``
    returning unit-norm float32 rows) and a FAISS index of kind ``index`` (``flat`` | ``hnsw`` | ``ivf_pq``) with
    ``index_params`` (that kind's block; defaults in :data:`ablate.stages.retrievers.faiss_index.DEFAULTS`).
    ``cache`` stores a built approximate index (a flat one is rebuilt: adding vectors is all it costs)."""

    name = "dense"

    def __init__(
        self,
        chunks: Sequence[Chunk],
        encoder: SentenceTransformerEncoder,
        index: str = "flat",
        index_params: dict[str, Any] | None = None,
        cache: Cache | None = None,
        ids: IdTable | None = None,
    ) -> None:
        self.chunks = list(chunks)
        self.encoder = encoder
        self.kind, self.index_params = check_index(index, index_params)
        self.stats: dict[str, float] = {
            "index_seconds": 0.0,
            "search_seconds": 0.0,
            "index_cache_hits": 0.0,
            "exact_fallback_queries": 0.0,
        }
        table = ChunkTable.of(self.chunks, ids)
        self._chunks_sha256, self._id_order = table.sha256, table.id_order
        self._ids = table.ids
        t0 = time.perf_counter()
        self._emb = encoder.encode_passages([c.text for c in self.chunks])
        self._emb.setflags(write=False)
        t1 = time.perf_counter()
        self._index: Any = None
        self._index_key: str | None = None
        self.factory = ""
        if len(self.chunks):
            self.factory = factory_string(self.kind, self.index_params, *self._emb.shape)
            if self.kind == "flat":
                import faiss

                self._index = faiss.IndexFlatIP(self._emb.shape[1])
                self._index.add(self._emb)
            else:
                if cache is not None:
                    self._index = self._load(cache)
                self.stats["index_cache_hits"] = float(self._index is not None)
                if self._index is None:
                    self._index = build_index(self.kind, self.index_params, self._emb)
                    if cache is not None:
                        self._save(cache)
        self.stats["index_seconds"] = time.perf_counter() - t0
        self.stats["index_build_seconds"] = time.perf_counter() - t1

    # -- the index cache (approximate kinds) -------------------------------------------------------------------------
    def index_key(self) -> str:
        """Cache key of the built index: factory string, parameters, FAISS version, code version, vectors' sha256."""
        import hashlib

        if self._index_key is not None:
            return self._index_key
        self._index_key = key_of(
            INDEX_CACHE_KIND,
            {
                "format": INDEX_CACHE_FORMAT,
                "code_version": CODE_VERSION,
                "factory": self.factory,
                "params": self.index_params,
                "libraries": library_versions("faiss-cpu"),
                "vectors_sha256": hashlib.sha256(np.ascontiguousarray(self._emb).data).hexdigest(),
                "shape": list(self._emb.shape),
            },
        )
        return self._index_key

    def _save(self, cache: Cache) -> None:
        import faiss

        header = {"format": INDEX_CACHE_FORMAT, "factory": self.factory, "ntotal": int(self._emb.shape[0])}
        cache.save_arrays(
            INDEX_CACHE_KIND, self.index_key(), {"index": faiss.serialize_index(self._index)}, header
        )

    def _load(self, cache: Cache) -> Any:
        import faiss

        n, dim = self._emb.shape
        loaded: list[Any] = []

        def check(arrays: dict[str, np.ndarray], header: Any) -> None:
            if not isinstance(header, dict) or header.get("format") != INDEX_CACHE_FORMAT:
                raise ValueError("not an index of this format")
            if header.get("factory") != self.factory or header.get("ntotal") != n:
                raise ValueError("built with other settings or vectors")
            try:
                index = faiss.deserialize_index(arrays["index"])
            except RuntimeError as e:
                raise ValueError(f"FAISS cannot read it: {str(e).splitlines()[0]}") from None
            if index.ntotal != n or index.d != dim or index.metric_type != faiss.METRIC_INNER_PRODUCT:
                raise ValueError("inconsistent index")
            loaded.append(index)

        if cache.load_arrays(INDEX_CACHE_KIND, self.index_key(), check=check) is None:
            return None
        return loaded[0]

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
        qids = list(dict.fromkeys(q.qid for q in queries))
        ranked: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        if queries and n and (mask is None or mask.any()):
            qemb = self.encode_queries([q.text for q in queries])
            import faiss

            exact = self.kind == "flat"
            k = min(depth + 1, n) if exact else min(depth, n)  # flat: one extra to see a tie at the cut-off
            bits = sel = None
            if mask is not None and not mask.all():
                # bit i of the bitmap = chunk i (faiss reads the least significant bit first)
                bits = np.packbits(mask, bitorder="little")
                sel = faiss.IDSelectorBitmap(n, faiss.swig_ptr(bits))
            params = search_parameters(self.kind, self.index_params, sel)
            scores, idx = self._index.search(qemb, k, params=params)
            del params, bits, sel  # the C++ selector points into both: kept alive until the search returned
            keep_all = mask if mask is not None else np.ones(n, dtype=bool)
            want = min(depth, int(keep_all.sum()))
            for qi, q in enumerate(queries):
                s_row, i_row = scores[qi], idx[qi]
                valid = i_row >= 0
                if exact and k > depth and valid[depth] and s_row[depth - 1] == s_row[depth]:
                    full = self._emb @ qemb[qi]
                    top = top_by_tie_rule(full, depth, self._id_order, keep_all)
                    ranked[q.qid] = (top, full[top])
                elif not exact and int(valid.sum()) < want:  # a selective filter starved the index
                    full = self._emb @ qemb[qi]
                    top = top_by_tie_rule(full, depth, self._id_order, keep_all)
                    ranked[q.qid] = (top, full[top])
                    self.stats["exact_fallback_queries"] += 1
                else:
                    i_row, s_row = i_row[valid], s_row[valid]
                    if not exact:  # candidates re-scored with the exact cosines
                        s_row = self._emb[i_row] @ qemb[qi]
                    order = np.lexsort((self._id_order[i_row], -s_row.astype(np.float64)))[:depth]
                    ranked[q.qid] = (i_row[order], s_row[order])
        self.stats["search_seconds"] += time.perf_counter() - t0
        meta = {
            "retriever": self.name,
            "tie_rule": TIE_RULE,
            "depth": depth,
            "chunks_sha256": self._chunks_sha256,
        }
        return coded_run(self.name, self._ids, qids, ranked, meta)


class DenseRetriever:
    """The dense retriever stage: ``dense.model`` (any sentence-transformers name in the offline cache, a local
    folder, or ``multilingual-e5-small``; ``None`` = the corpus language's default), ``batch_size``,
    ``max_seq_length``, ``query_prefix`` / ``passage_prefix``, and the FAISS ``index`` (``flat`` | ``hnsw`` |
    ``ivf_pq``) with the ``hnsw`` / ``ivf_pq`` parameter blocks.

    **The model.** A model the user names is resolved offline at construction (a missing one fails before any work).
    Left ``None``, it follows the corpus language (:mod:`ablate.stages.text.defaults`: ``multilingual-e5-small`` for
    ``zh``, else ``all-MiniLM-L6-v2``), which is known in :meth:`bind`: the bound stage is the one with that model,
    resolved there (the command line binds every job before anything runs, so a missing default model is refused
    before anything runs too). ``params()`` logs the model that runs and ``model_source`` (``setting`` /
    ``language:<code>``); the source is left out of the fingerprint, so a default-resolved model and the same model
    named explicitly share the embeddings, candidate lists and the one-factor check's component. An unbound stage
    whose model follows the language has no fingerprint: bind it first.

    ``params()`` always holds ``index`` (logged as ``dense.index``) and, for an approximate kind, that kind's block
    (``dense.hnsw.m``, ...). The fingerprint leaves ``index`` out when it is ``flat``, so the default's fingerprint,
    and every cache keyed by it, is what it was before index kinds existed.

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
        model: str | None = None,
        batch_size: int = 32,
        max_seq_length: int = 256,
        query_prefix: str | None = None,
        passage_prefix: str | None = None,
        index: str = "flat",
        hnsw: Mapping[str, Any] | None = None,
        ivf_pq: Mapping[str, Any] | None = None,
        precision: str = "fp32",
        num_threads: int | None = None,
    ) -> None:
        self.name = name
        self.index, _ = check_index(index, None, name)
        # both blocks are checked (a typo in the one not in use is still a typo); only the chosen one runs
        self.index_blocks = {
            "hnsw": check_params("hnsw", _plain(hnsw), name),
            "ivf_pq": check_params("ivf_pq", _plain(ivf_pq), name),
        }
        self.batch_size = check_int(f"{name}.batch_size", batch_size, 1)
        self.max_seq_length = check_int(f"{name}.max_seq_length", max_seq_length, 1, 8192)
        self.compute = resolve_compute(
            f"{name}.precision", precision, f"{name}.num_threads", num_threads, "encode"
        )  # checked now, also when the model waits for the corpus
        self._given_prefixes = (query_prefix, passage_prefix)
        self.model: str | None = None if model is None else str(check_str(f"{name}.model", model))
        self.model_source: str | None = SETTING if self.model is not None else None
        self.query_prefix: str | None = None
        self.passage_prefix: str | None = None
        self.encoder: SentenceTransformerEncoder | None = None
        self.stats: dict[str, float] = dict.fromkeys(ENCODER_STAT_KEYS, 0.0)
        self._index: DenseIndex | None = None
        self._prepared_for: str | None = None
        if self.model is not None:
            self._resolve(self.model)

    def _resolve(self, model: str) -> None:
        """Choose the prefixes for ``model`` and resolve it offline (fails here, before any work, when it is not
        available)."""
        name = self.name
        self.model = model
        query_prefix, passage_prefix = self._given_prefixes
        auto_q, auto_p = default_prefixes(model)
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
        if chosen and (model, tuple(chosen)) not in _NOTED:
            _NOTED.add((model, tuple(chosen)))
            print(f"note: {model} is an e5 model, so {' and '.join(chosen)}", file=sys.stderr)
        self.encoder = make_encoder(
            model,
            batch_size=self.batch_size,
            max_seq_length=self.max_seq_length,
            query_prefix=self.query_prefix,
            passage_prefix=self.passage_prefix,
            setting=name,
            precision=self.compute.precision,
            num_threads=self.compute.num_threads,
        )
        self.stats = dict(self.encoder.stats)

    def require_encoder(self) -> SentenceTransformerEncoder:
        """The encoder of the model that runs (a stage whose model follows the corpus language has one once bound)."""
        if self.encoder is None:
            raise RuntimeError(
                f"stage {self.name}: its model follows the corpus language; bind(snapshot, split) first"
            )
        return self.encoder

    def params(self) -> dict[str, Any]:
        compute = self.encoder.compute if self.encoder is not None else self.compute
        return {
            "model": self.model,
            "model_source": self.model_source,
            "batch_size": self.batch_size,
            "max_seq_length": self.max_seq_length,
            "query_prefix": self.query_prefix,
            "passage_prefix": self.passage_prefix,
            "index": self.index,
            **({self.index: dict(self.index_blocks[self.index])} if self.index != "flat" else {}),
            **compute.log_params(),
        }

    def fingerprint(self) -> Fingerprint:
        encoder = self.require_encoder()
        params = self.params()
        del params["model_source"]  # where the name came from: the same model is the same vectors
        del params[
            "num_threads"
        ]  # threads change no vector: a sweep over them reuses embeddings and candidates
        if params.get("precision") == "fp32":
            del params["precision"]  # the default adds nothing: an fp32 key is the key without the option
        if self.index == "flat":
            del params["index"]  # the default adds nothing: a flat index's key is the key without the option
            index = "faiss.IndexFlatIP"
        else:
            index = (
                f"faiss.index_factory:{self.index}"  # the exact string depends on N (nlist): in the cache key
            )
        return fingerprint_of(
            self,
            params,
            libraries=("faiss-cpu",),
            resources={"encoder": encoder.fingerprint("passage"), "index": index},
        )

    def bind(self, snapshot: Snapshot, split: str) -> DenseRetriever:
        """This stage when its model was named; else the stage with the corpus language's default model."""
        if self.model_source == SETTING:
            return self
        model, source = encoder_choice(None, snapshot.language)
        if self.model == model and self.model_source == source:
            return self
        query_prefix, passage_prefix = self._given_prefixes
        bound = type(self)(
            name=self.name,
            model=model,
            batch_size=self.batch_size,
            max_seq_length=self.max_seq_length,
            query_prefix=query_prefix,
            passage_prefix=passage_prefix,
            index=self.index,
            hnsw=self.index_blocks["hnsw"],
            ivf_pq=self.index_blocks["ivf_pq"],
            precision=self.compute.precision,
            num_threads=self.compute.num_threads,
        )
        bound.model_source = source
        return bound

    def prepare(self, context: StageContext) -> None:
        if self._prepared_for == context.snapshot.fingerprint:
            return
        encoder = self.require_encoder()
        encoder.cache = context.cache
        encoder.show_progress = context.show_progress
        self._index = DenseIndex(
            context.snapshot.chunks,
            encoder,
            index=self.index,
            index_params=self.index_blocks.get(self.index),
            cache=context.cache,
            ids=context.snapshot.id_table,
        )
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
        if self.encoder is not None:
            self.stats.update(self.encoder.stats)
        if self._index is not None:
            self.stats.update(self._index.stats)


def _plain(block: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A parameter block (any mapping: the config edge hands plain dicts) as a dict of its own."""
    return None if block is None else {str(k): block[k] for k in block}
