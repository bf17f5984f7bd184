"""BM25 over chunks, with permission filtering inside retrieval.

Scoring (Robertson & Zaragoza 2009, "The Probabilistic Relevance Framework: BM25 and Beyond", FnTIR 3(4)), for a
query ``q``, a chunk ``d`` of length ``|d|`` (in terms), average length ``avgdl``, ``N`` chunks and ``df(t)`` chunks
containing ``t``::

    score(q, d) = sum over query terms t (repeats count) of  idf(t) * tf(t,d) / (tf(t,d) + k1 * (1 - b + b * |d|/avgdl))

``method`` chooses the idf (the variants compared by Kamphuis, de Vries, Boytsov & Lin 2020, "Which BM25 Do You Mean?
A Large-Scale Reproducibility Study of Scoring Variants", ECIR):

* ``lucene`` (default): ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``, always > 0. This is Lucene's BM25Similarity
  (Lucene >= 8 dropped the constant ``(k1 + 1)`` numerator factor, which does not change rankings) and what Anserini
  uses for the BEIR BM25 baselines, with ``k1 = 0.9, b = 0.4``.
* ``robertson``: ``idf = ln((N - df + 0.5) / (df + 0.5))`` floored at 0 (a term in more than half of the chunks
  would get a negative weight).
* ``atire``: ``idf = ln(N / df)`` (Trotman et al. 2014).

Both backends compute the same numbers: ``bm25s`` (Lù 2024, eager sparse scores; fast batch retrieval) and
``rank_bm25`` (a plain reference implementation, used for differential tests). ``rank_bm25.BM25Okapi`` multiplies by
``(k1 + 1)`` and floors negative idfs at ``epsilon * mean idf``; we build it with ``epsilon = 0`` (so the floor is 0,
as in bm25s' ``robertson``), set Lucene's idf when ``method = "lucene"``, and divide its scores by ``(k1 + 1)``.

**Zero-score rule.** A chunk whose score is 0 is not a result: under ``lucene`` that means it shares no term with
the query; under ``robertson``/``atire`` it may also share only terms whose idf is 0 (terms in at least half /
all of the chunks). A run can therefore hold fewer than ``depth`` hits, and a query that tokenizes to nothing (or
to terms absent from the index) gets an empty list. Padding with arbitrary zero-score chunks would only add noise
that looks like retrieval.

**Permission mask.** ``allowed`` (boolean, one per chunk, in ``chunks`` order) is applied to the score vector before
top-k selection (bm25s ``weight_mask``; a masked score vector for rank_bm25), so a masked chunk never takes a slot.

**Reference.** The defaults (``lucene``, k1 0.9, b 0.4, Lucene's 33 stopwords, Porter stemming, one chunk per
document = title + " " + text) are Pyserini's BEIR "flat" BM25, the like-for-like published figure; BEIR's own BM25
is a "multifield" index (title and body scored as separate fields), which a single chunk text cannot reproduce. The
figures per stemmer beside the published ones: ``experiments/README.md`` ("Why SciFact's A is 0.675").

**Index cache.** Given a :class:`~ablate.cache.Cache`, the built index is stored under the kind ``bm25-index``,
keyed by :meth:`BM25Index.index_key`: everything that determines it (``CODE_VERSION``, backend and its version,
``method``, ``k1``, ``b``, the tokenizer's fingerprint, and the ids and texts of the chunks in order). For ``bm25s``
the entry is the sparse score matrix (CSC ``data`` / ``indices`` / ``indptr``) and the vocabulary; for ``rank_bm25``
it is the tokenised corpus (token ids, offsets, vocabulary), from which ``BM25Okapi`` is rebuilt without
tokenising. One ``.npz`` file (``allow_pickle=False``) plus a JSON header inside it, written atomically; a corrupt,
truncated or inconsistent entry is a miss (a warning on stderr) and is rebuilt. A warm build tokenises no chunk
(``stats["chunks_tokenized"]`` is 0, ``stats["index_cache_hits"]`` 1). bm25s' own ``save``/``load`` is not used: it
writes several files non-atomically (its arrays are plain ``np.save(allow_pickle=False)`` and JSON, no pickle).

**Ties.** Hits are ordered by :func:`ablate.types.rank_hits` (score desc, chunk id asc). When the score at the
cut-off is tied with the next one, the query's full score vector is ranked exactly, so which of the tied chunks
make the cut follows the tie rule too, not the order inside a top-k heap.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ablate.cache import Cache, key_of
from ablate.data.types import TIE_RULE, Chunk, IdTable, Query, Run
from ablate.errors import ConfigError
from ablate.stages.base import (
    Fingerprint,
    StageContext,
    check_bool,
    check_choice,
    check_float,
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
from ablate.stages.text.tokenize import Tokenizer

if TYPE_CHECKING:
    from ablate.data.snapshot import Snapshot

#: Bump when the scoring or tie rules of this module change (part of the stage fingerprint).
CODE_VERSION = "ablate-bm25/2"

#: method -> backends that implement it (with identical scores).
METHODS: dict[str, tuple[str, ...]] = {
    "lucene": ("bm25s", "rank_bm25"),
    "robertson": ("bm25s", "rank_bm25"),
    "atire": ("bm25s",),
}
IMPLS = ("bm25s", "rank_bm25")
#: Cache kind and entry format of a stored index (bump the format when the stored layout changes).
CACHE_KIND = "bm25-index"
CACHE_FORMAT = "ablate-bm25-index/1"


def check_settings(
    name: str, impl: object, method: object, k1: object, b: object
) -> tuple[str, str, float, float]:
    """The BM25 settings, checked (the one place): ``(impl, method, k1, b)``; a ConfigError names ``<name>.<key>``."""
    impl = check_choice(f"{name}.impl", impl, IMPLS)
    method = check_choice(f"{name}.method", method, tuple(METHODS))
    if impl not in METHODS[method]:
        ok = [m for m, impls in METHODS.items() if impl in impls]
        raise ConfigError(f"{name}.method", method, f"impl {impl} supports: {', '.join(ok)}")
    k1 = check_float(f"{name}.k1", k1, 0.0, hint=" (Anserini's default is 0.9)")
    b = check_float(f"{name}.b", b, 0.0, 1.0, hint=" (Anserini's default is 0.4)")
    return impl, method, k1, b


class BM25Index:
    """Okapi BM25 over ``chunks`` (see the module docstring for formulas and rules). The index is built once here.

    ``n_threads`` is handed to bm25s' batch ``retrieve`` (0 = in the calling thread). Its numpy backend holds the GIL
    for most of the work, so threads rarely help; batching all queries into one call is what makes search fast.
    ``cache``: where the built index is stored and looked up (see "Index cache" in the module docstring).
    ``self.stats`` holds ``tokenize_seconds``, ``index_seconds`` (tokenizing or cache loading included),
    ``n_chunks``, ``vocab_size``, ``chunks_tokenized``, ``index_cache_hits`` and the cumulative ``search_seconds``.
    """

    name = "bm25"

    def __init__(
        self,
        chunks: Sequence[Chunk],
        tokenizer: Tokenizer,
        k1: float = 0.9,
        b: float = 0.4,
        impl: str = "bm25s",
        method: str = "lucene",
        n_threads: int = 0,
        cache: Cache | None = None,
        ids: IdTable | None = None,
    ) -> None:
        self.impl, self.method, self.k1, self.b = check_settings("bm25", impl, method, k1, b)
        self.chunks = list(chunks)
        self.tokenizer = tokenizer
        self.n_threads = n_threads
        self.stats: dict[str, float] = {}
        table = ChunkTable.of(self.chunks, ids)
        self._chunks_sha256, self._id_order = table.sha256, table.id_order
        self._ids = table.ids

        self._vocab: dict[str, Any] = {}
        self._bm25: Any = None
        self._rb: Any = None
        t0 = time.perf_counter()
        hit = cache is not None and self._load(cache)
        t1 = time.perf_counter()
        if not hit:
            corpus_tokens = tokenizer.tokenize_many(c.text for c in self.chunks)
            t1 = time.perf_counter()
            if any(corpus_tokens):  # an index needs at least one term; otherwise every search is empty
                if self.impl == "bm25s":
                    self._build_bm25s(corpus_tokens)
                else:
                    self._build_rank_bm25(corpus_tokens)
                if cache is not None:
                    self._save(cache, corpus_tokens)
        t2 = time.perf_counter()
        self.stats.update(
            tokenize_seconds=0.0 if hit else t1 - t0,
            index_seconds=t2 - t0,
            n_chunks=len(self.chunks),
            vocab_size=len(self._vocab),
            chunks_tokenized=0 if hit else len(self.chunks),
            index_cache_hits=1 if hit else 0,
            search_seconds=0.0,
        )

    def index_key(self) -> str:
        """The cache key of this index: everything that determines its content (see the module docstring)."""
        lib = "bm25s" if self.impl == "bm25s" else "rank-bm25"
        return key_of(
            CACHE_KIND,
            {
                "format": CACHE_FORMAT,
                "code_version": CODE_VERSION,
                "impl": self.impl,
                "libraries": library_versions(lib),
                "method": self.method,
                "k1": self.k1,
                "b": self.b,
                "tokenizer": self.tokenizer.fingerprint(),
                "chunks_sha256": self._chunks_sha256,
            },
        )

    # -- building ----------------------------------------------------------------------------------------------------
    def _build_bm25s(self, corpus_tokens: list[list[str]]) -> None:
        bm25s = import_bm25s()

        bm = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
        bm.index(corpus_tokens, show_progress=False)
        self._bm25 = bm
        self._vocab = {t: i for t, i in bm.vocab_dict.items() if t != ""}

    def _build_rank_bm25(self, corpus_tokens: list[list[str]]) -> None:
        from rank_bm25 import BM25Okapi

        # rank_bm25 divides by the mean document length: an all-empty corpus was excluded by the caller.
        rb = BM25Okapi(corpus_tokens, k1=self.k1, b=self.b, epsilon=0.0)
        if self.method == "lucene":
            n = rb.corpus_size
            df: dict[str, int] = {}
            for freqs in rb.doc_freqs:
                for t in freqs:
                    df[t] = df.get(t, 0) + 1
            rb.idf = {t: math.log(1.0 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self._rb = rb
        self._vocab = {t: i for i, t in enumerate(sorted(rb.idf))}

    # -- the index cache ---------------------------------------------------------------------------------------------
    def _save(self, cache: Cache, corpus_tokens: list[list[str]]) -> None:
        header: dict[str, Any] = {
            "format": CACHE_FORMAT,
            "impl": self.impl,
            "n_chunks": len(self.chunks),
            "chunks_sha256": self._chunks_sha256,
        }
        if self.impl == "bm25s":
            sc = self._bm25.scores
            terms = list(self._bm25.vocab_dict)
            arrays = {
                "data": sc["data"],
                "indices": sc["indices"],
                "indptr": sc["indptr"],
                "term_ids": np.fromiter(self._bm25.vocab_dict.values(), dtype=np.int64, count=len(terms)),
            }
            header.update(terms=terms, num_docs=int(sc["num_docs"]))
        else:
            terms = sorted({t for doc in corpus_tokens for t in doc})
            ids = {t: i for i, t in enumerate(terms)}
            flat = np.fromiter((ids[t] for doc in corpus_tokens for t in doc), dtype=np.int64)
            offsets = np.zeros(len(corpus_tokens) + 1, dtype=np.int64)
            np.cumsum([len(doc) for doc in corpus_tokens], out=offsets[1:])
            arrays = {"tokens": flat, "offsets": offsets}
            header.update(terms=terms)
        cache.save_arrays(CACHE_KIND, self.index_key(), arrays, header)

    def _check_entry(self, arrays: dict[str, np.ndarray], header: Any) -> None:
        """Raise ValueError unless the entry is a whole index of this impl over these chunks."""
        n = len(self.chunks)
        if (
            not isinstance(header, dict)
            or header.get("format") != CACHE_FORMAT
            or header.get("impl") != self.impl
        ):
            raise ValueError("not an index of this format and backend")
        if header.get("n_chunks") != n or header.get("chunks_sha256") != self._chunks_sha256:
            raise ValueError("built over other chunks")
        terms = header.get("terms")
        if not isinstance(terms, list):
            raise ValueError("no vocabulary")
        if self.impl == "bm25s":
            data, indices, indptr, ids = (arrays[k] for k in ("data", "indices", "indptr", "term_ids"))
            ok = (
                header.get("num_docs") == n
                and ids.shape == (len(terms),)
                and indptr.ndim == 1
                and 1 <= indptr.size <= len(terms) + 1
                and int(indptr[0]) == 0
                and int(indptr[-1]) == data.size == indices.size
                and bool(np.all(np.diff(indptr) >= 0))
                and (indices.size == 0 or 0 <= int(indices.min()) <= int(indices.max()) < n)
            )
        else:
            tokens, offsets = arrays["tokens"], arrays["offsets"]
            ok = (
                offsets.shape == (n + 1,)
                and int(offsets[0]) == 0
                and int(offsets[-1]) == tokens.size
                and bool(np.all(np.diff(offsets) >= 0))
                and (tokens.size == 0 or 0 <= int(tokens.min()) <= int(tokens.max()) < len(terms))
            )
        if not ok:
            raise ValueError("inconsistent arrays")

    def _load(self, cache: Cache) -> bool:
        """Restore the index from ``cache``; False on a miss (absent or unusable entry)."""
        got = cache.load_arrays(CACHE_KIND, self.index_key(), check=self._check_entry)
        if got is None:
            return False
        arrays, header = got
        terms: list[str] = header["terms"]
        if self.impl == "bm25s":
            bm25s = import_bm25s()

            bm = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
            bm.scores = {
                "data": arrays["data"],
                "indices": arrays["indices"],
                "indptr": arrays["indptr"],
                "num_docs": int(header["num_docs"]),
            }
            bm.vocab_dict = dict(zip(terms, arrays["term_ids"].tolist(), strict=True))
            bm.unique_token_ids_set = set(bm.vocab_dict.values())
            bm.nonoccurrence_array = None  # only bm25l / bm25+ use one; METHODS has neither
            self._bm25 = bm
            self._vocab = {t: i for t, i in bm.vocab_dict.items() if t != ""}
        else:
            tokens = arrays["tokens"].tolist()
            offsets = arrays["offsets"].tolist()
            corpus_tokens = [
                [terms[i] for i in tokens[a:b]] for a, b in zip(offsets, offsets[1:], strict=False)
            ]
            self._build_rank_bm25(corpus_tokens)
        return True

    # -- protocol ----------------------------------------------------------------------------------------------------
    def search(self, queries: Sequence[Query], depth: int, allowed: np.ndarray | None = None) -> Run:
        """Top-``depth`` chunks per query (see the module docstring: zero scores dropped, mask applied inside)."""
        depth = check_depth(depth)
        mask = check_mask(allowed, len(self.chunks))
        t0 = time.perf_counter()
        qids = list(dict.fromkeys(q.qid for q in queries))
        found: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        # Terms absent from the index can never score; a query left with none has no results.
        q_terms = [[t for t in self.tokenizer.tokenize(q.text) if t in self._vocab] for q in queries]
        todo = [i for i, terms in enumerate(q_terms) if terms]
        if todo and (mask is None or mask.any()):
            if self.impl == "bm25s":
                ranked = self._search_bm25s([q_terms[i] for i in todo], depth, mask)
            else:
                ranked = self._search_rank_bm25([q_terms[i] for i in todo], depth, mask)
            for i, (idx, sc) in zip(todo, ranked, strict=True):
                found[queries[i].qid] = (idx, sc)
        self.stats["search_seconds"] = self.stats.get("search_seconds", 0.0) + time.perf_counter() - t0
        meta = {
            "retriever": self.name,
            "tie_rule": TIE_RULE,
            "depth": depth,
            "chunks_sha256": self._chunks_sha256,
        }
        return coded_run(self.name, self._ids, qids, found, meta)

    # -- searching ---------------------------------------------------------------------------------------------------
    def _search_bm25s(
        self, q_terms: list[list[str]], depth: int, mask: np.ndarray | None
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        n = len(self.chunks)
        k = min(depth + 1, n)  # one extra to see whether the cut-off falls inside a tie
        weight = None if mask is None else mask.astype(self._bm25.dtype)
        docs, scores = self._bm25.retrieve(
            q_terms, k=k, sorted=True, show_progress=False, n_threads=self.n_threads, weight_mask=weight
        )
        out = []
        for terms, d_row, s_row in zip(q_terms, docs, scores, strict=True):
            if k > depth and s_row[depth - 1] > 0 and s_row[depth - 1] == s_row[depth]:
                full = self._bm25.get_scores(terms, weight_mask=weight)
                idx = top_by_tie_rule(full, depth, self._id_order, full > 0)
                out.append((idx, full[idx]))
                continue
            keep = s_row > 0
            d_row, s_row = d_row[keep], s_row[keep]
            order = np.lexsort((self._id_order[d_row], -s_row.astype(np.float64)))[:depth]
            out.append((d_row[order], s_row[order]))
        return out

    def _search_rank_bm25(
        self, q_terms: list[list[str]], depth: int, mask: np.ndarray | None
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        out = []
        for terms in q_terms:
            full = np.asarray(self._rb.get_scores(terms), dtype=np.float64) / (self.k1 + 1.0)
            keep = full > 0
            if mask is not None:
                keep &= mask
            idx = top_by_tie_rule(full, depth, self._id_order, keep)
            out.append((idx, full[idx]))
        return out


def import_bm25s() -> Any:
    """The bm25s module, its logger at WARNING: the library sets it to DEBUG when imported, so each index built
    would print "Building index from tokens" on the console."""
    import logging

    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)
    return bm25s


class BM25Retriever:
    """The BM25 retriever stage (``conf/retrievers/bm25.yaml``): backend ``impl``, ``k1``, ``b``, idf ``method``, and
    the tokenizer's ``stopwords`` / ``stemmer`` / ``language`` (``null`` = the corpus's language). Parameters are
    checked here; the index is built in :meth:`prepare`."""

    kind: ClassVar[str] = "retriever"
    cacheable: ClassVar[bool] = True

    def __init__(
        self,
        name: str = "bm25",
        impl: str = "bm25s",
        k1: float = 0.9,
        b: float = 0.4,
        method: str = "lucene",
        stopwords: bool = True,
        stemmer: str | None = "porter",
        language: str | None = None,
        jieba_mode: str = "search",
    ) -> None:
        self.name = name
        self.impl, self.method, self.k1, self.b = check_settings(name, impl, method, k1, b)
        self.stopwords = check_bool(f"{name}.stopwords", stopwords)
        self.stemmer = None if stemmer in (None, "", "null", "none") else str(stemmer)
        self.language = None if language in (None, "", "null", "auto") else str(language)
        self.jieba_mode = jieba_mode
        self.tokenizer = self._tokenizer(self.language or "en")  # checks stemmer/language/jieba_mode now
        self.stats: dict[str, float] = {}
        self._index: BM25Index | None = None
        self._prepared_for: str | None = None

    def _tokenizer(self, language: str) -> Tokenizer:
        try:
            return Tokenizer(
                language=language,  # type: ignore[arg-type]
                stopwords=self.stopwords,
                stemmer=self.stemmer,
                jieba_mode=self.jieba_mode,  # type: ignore[arg-type]
            )
        except ConfigError as e:
            raise ConfigError(
                f"{self.name}.{e.key.split('.')[-1]}", e.value, str(e).split("; ", 1)[-1]
            ) from None

    def params(self) -> dict[str, Any]:
        return {
            "impl": self.impl,
            "k1": self.k1,
            "b": self.b,
            "method": self.method,
            "stopwords": self.stopwords,
            "stemmer": self.stemmer,
            "language": self.language,
            "jieba_mode": self.jieba_mode,
        }

    def fingerprint(self) -> Fingerprint:
        lib = "bm25s" if self.impl == "bm25s" else "rank-bm25"
        return fingerprint_of(
            self,
            self.params(),
            libraries=(lib,),
            resources={"tokenizer": self.tokenizer.fingerprint(), "zero_score_rule": "drop"},
        )

    def bind(self, snapshot: Snapshot, split: str) -> BM25Retriever:
        """This stage with the tokenizer's language resolved to the corpus's when it was left unset."""
        if self.language is not None:
            return self
        p = self.params()
        p["language"] = snapshot.language
        return type(self)(name=self.name, **p)

    def prepare(self, context: StageContext) -> None:
        if self._prepared_for == context.snapshot.fingerprint:
            return
        self._index = BM25Index(
            context.snapshot.chunks,
            self.tokenizer,
            k1=self.k1,
            b=self.b,
            impl=self.impl,
            method=self.method,
            cache=context.cache,
            ids=context.snapshot.id_table,
        )
        self._prepared_for = context.snapshot.fingerprint
        self.stats.update(self._index.stats)

    def search(self, queries: Sequence[Query], depth: int, allowed: np.ndarray | None = None) -> Run:
        if self._index is None:
            raise RuntimeError(f"stage {self.name}: prepare() before search()")
        run = self._index.search(queries, depth, allowed)
        run.name = self.name
        self.stats.update(self._index.stats)
        return run
