"""Benchmark: the cost curve of BM25 and of each FAISS index from 10k to 1M chunks, fitted and extrapolated to 10M.

    /work/main/.venv/bin/python experiments/bench_scale.py                       # 10k, 100k, 1M: hours when shared
    /work/main/.venv/bin/python experiments/bench_scale.py --quick               # smoke run at 1k and 5k (minutes)
    /work/main/.venv/bin/python experiments/bench_scale.py --sizes 10000,100000 --kinds bm25s,flat
    /work/main/.venv/bin/python experiments/bench_scale.py --report-only         # rebuild the page from the raw records

Each measurement (one kind at one size) runs in its own Python process, so its peak RSS (``VmHWM``) is its own.
Inside it the input is generated first (not timed); then the peak is reset (``/proc/self/clear_refs``) and the build
and the search are timed (wall and CPU seconds of the process), the peak RSS is read, and the index is saved to a
temporary folder to measure its size on disk. The raw records go to ``experiments/results/bench_scale.jsonl`` (one
JSON object a line; ``--resume`` skips the kind/size pairs already there) and the page to
``experiments/results/bench_scale.md`` with a plot ``bench_scale.png``.

Kinds:

* ``tokenize``: ablate's BM25 tokenizer (``Tokenizer(language="en", stopwords=True, stemmer="porter")``, the bm25
  stage's default for English) over the synthetic chunk texts. It is pure Python, so by default it runs only up to
  ``--tokenize-max`` chunks (100k) and the fit extrapolates beyond.
* ``bm25s``: ``bm25s.BM25(k1=0.9, b=0.4, method="lucene").index(tokens)`` over pre-tokenised chunks (what
  ``BM25Index`` hands bm25s), then one batch ``retrieve`` of the queries at top-100.
* ``rank_bm25``: ``rank_bm25.BM25Okapi`` with Lucene's idf (as ``BM25Index(impl="rank_bm25")`` builds it), only up to
  ``--rank-bm25-max`` chunks (10k) and on ``--rank-bm25-queries`` queries (100): it scores every chunk in Python.
* ``flat`` / ``hnsw`` / ``ivf_pq``: FAISS indexes (inner product) built from the factory strings of the dense stage,
  then one batch search of the queries at top-100; recall@10 of hnsw and ivf_pq against exact search of the same
  vectors.
* ``ivf_pq_np`` (not run by default): ``ivf_pq``'s string with FAISS's ``np`` suffix. ``index_factory`` turns on
  polysemous training for ``IVF...,PQ48x8`` (``do_polysemous_training = True``): an annealing over the 48 codebooks
  that costs minutes whatever N is, and is only used by polysemous search (``polysemous_ht``). The dense stage's
  ``build_index`` (src/ablate/stages/retrievers/faiss_index.py) turns it off, so ``ivf_pq_np`` is what
  ``dense.index=ivf_pq`` builds; the stage also trains on all N vectors, where this script trains on a sample of
  ``max(40 * nlist, 10,000)``.

**BM25 data (synthetic text from a real vocabulary).** The words of SciFact's corpus (title + " " + text, split on
white space, 5,183 documents) give a unigram distribution and a chunk-length distribution (words per document). A
chunk draws its length from the lengths and its words independently from the unigrams (seeded, in blocks of 10k
chunks, so chunk i is the same at every size). For indexing, the tokens of a chunk are the tokens of its words, each
word tokenised once by the tokenizer above; the ``tokenize`` kind checks on its chunks that this equals tokenising
the whole text. Queries: SciFact's real queries (all 1,109), tokenised the same way; terms missing from the index are
dropped (as ``BM25Index.search`` does), queries left empty are skipped, and the first ``--queries`` (1,000) are timed.

**Dense data (synthetic vectors).** 384 dimensions (all-MiniLM-L6-v2's). With ``--base-vectors`` (an ``.npy`` of real
passage embeddings, e.g. SciFact's 5,183 MiniLM vectors from the embedding cache) each point is a seeded random base
vector plus isotropic Gaussian noise of norm about ``--noise`` (0.5), renormalised; queries likewise from
``--query-vectors`` (SciFact's test-query embeddings) with the same noise. Without them the bases are a seeded mixture
of 1,024 random unit centres. Isotropic noise in 384 dimensions makes the points around a base nearly equidistant,
which is harder for approximate search than real text: read the recall figures as a pessimistic bound.

**HNSW and IVF-PQ at large sizes.** Vectors are added in batches of 50k; when the rate so far says the whole build
would take longer than ``--max-build-seconds`` (1,200), adding stops and the build time is extrapolated linearly
from the measured adding rate (IVF-PQ: training is always done in full and only adding is scaled, which is exact
enough since adding is linear; HNSW: a lower bound, insertion cost grows about with log N), the peak memory likewise
(build CPU seconds are scaled as a whole), and the search and recall
figures are those of the partial index. The report marks such rows.

**Fit.** For each kind and figure, a least-squares line through (log N, log y) of the measured sizes: y = a * N^s.
The slope s is how the cost grows (1 = linear); the 10M column is that line at N = 10^7. Peak RSS and disk also get a
straight line y = c + m * N (a fixed part, Python and libraries, plus a cost per chunk), which extrapolates memory
better than the power law when the fixed part dominates the small sizes.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from _common import RESULTS, Report, dataset_path, machine_facts, reset_peak, say, status_kb

from ablate.stages.retrievers import faiss_index

KINDS = ("tokenize", "bm25s", "rank_bm25", "flat", "hnsw", "ivf_pq", "ivf_pq_np")
DEFAULT_KINDS = KINDS[:6]
BM25_KINDS = ("tokenize", "bm25s", "rank_bm25")
DENSE_KINDS = ("flat", "hnsw", "ivf_pq", "ivf_pq_np")
DIM = 384  # all-MiniLM-L6-v2
BLOCK = 10_000  # chunks / vectors generated per seeded block

# The dense stage's index settings, imported from the stage so that what is benchmarked is what it builds.
HNSW_M = faiss_index.DEFAULTS["hnsw"]["m"]
HNSW_EF_CONSTRUCTION = faiss_index.DEFAULTS["hnsw"]["ef_construction"]
HNSW_EF_SEARCH = faiss_index.DEFAULTS["hnsw"]["ef_search"]
IVF_NPROBE = faiss_index.DEFAULTS["ivf_pq"]["nprobe"]
ivf_nlist = faiss_index.auto_nlist  # IVF lists for n vectors when dense.ivf_pq.nlist is null (the default)


def factory_string(kind: str, n: int) -> str:
    """The FAISS index factory string the dense stage builds for ``kind`` over ``n`` vectors with its defaults
    (:func:`ablate.stages.retrievers.faiss_index.factory_string`); ``ivf_pq_np`` adds FAISS's ``np`` suffix."""
    if kind == "ivf_pq_np":  # not a product option: ivf_pq without polysemous training (see the docstring)
        return faiss_index.factory_string("ivf_pq", None, n, DIM) + "np"
    if kind not in faiss_index.INDEX_KINDS:
        raise ValueError(kind)
    return faiss_index.factory_string(kind, None, n, DIM)


def ivf_train_size(n: int) -> int:
    """Training vectors for IVF-PQ: 40 per list, at least 10,000 (PQ's 256 centroids want ~39 points each)."""
    return min(n, max(40 * ivf_nlist(n), 10_000))


# ---------------------------------------------------------------------------------------------------------------------
# Memory


def rss_mb() -> float:
    return status_kb("VmRSS") / 1024


def peak_mb(exact: bool) -> float:
    if exact:
        return status_kb("VmHWM") / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def disk_mb(path: Path) -> float:
    if path.is_file():
        return path.stat().st_size / 1e6
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


class Clock:
    """Wall and CPU seconds (all threads of this process) of a block."""

    def __enter__(self) -> Clock:
        self.w0, self.c0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.w0
        self.cpu = time.process_time() - self.c0


# ---------------------------------------------------------------------------------------------------------------------
# Synthetic text


@dataclass
class TextModel:
    """SciFact's unigram and length distributions, and each word's tokens (tokenised once)."""

    words: list[str]
    cdf: np.ndarray  # cumulative word probabilities
    lengths: np.ndarray  # words per document
    tok_vocab: np.ndarray  # object array of token strings
    word_tok_start: np.ndarray
    word_tok_len: np.ndarray
    word_tok_flat: np.ndarray
    queries: list[str]

    @property
    def mean_length(self) -> float:
        return float(self.lengths.mean())


def the_tokenizer() -> Any:
    from ablate.stages.text.tokenize import Tokenizer

    return Tokenizer(language="en", stopwords=True, stemmer="porter")


@functools.lru_cache(maxsize=2)
def text_model(dataset: Path) -> TextModel:
    counts: Counter[str] = Counter()
    lengths = []
    with open(dataset / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            w = f"{d.get('title', '')} {d.get('text', '')}".split()
            counts.update(w)
            lengths.append(len(w))
    with open(dataset / "queries.jsonl", encoding="utf-8") as fh:
        queries = [json.loads(line)["text"] for line in fh]
    words = sorted(counts)  # sorted: the model does not depend on dict order
    p = np.array([counts[w] for w in words], dtype=np.float64)
    cdf = np.cumsum(p / p.sum())
    cdf[-1] = 1.0
    tok = the_tokenizer()
    ids: dict[str, int] = {}
    starts, lens, flat = [], [], []
    for w in words:
        ts = tok.tokenize(w)
        starts.append(len(flat))
        lens.append(len(ts))
        flat.extend(ids.setdefault(t, len(ids)) for t in ts)
    vocab = np.empty(len(ids), dtype=object)
    for t, i in ids.items():
        vocab[i] = t
    return TextModel(
        words=words,
        cdf=cdf,
        lengths=np.array([n for n in lengths if n > 0], dtype=np.int64),
        tok_vocab=vocab,
        word_tok_start=np.array(starts, dtype=np.int64),
        word_tok_len=np.array(lens, dtype=np.int64),
        word_tok_flat=np.array(flat, dtype=np.int64),
        queries=queries,
    )


def _word_blocks(model: TextModel, n: int, seed: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Per block of chunks: (words per chunk, word ids), seeded by (seed, block) so chunk i never depends on n."""
    for b, start in enumerate(range(0, n, BLOCK)):
        size = min(BLOCK, n - start)
        rng = np.random.default_rng([seed, b])
        lens = rng.choice(model.lengths, BLOCK)[:size]  # draw a full block: chunk i is the same at every n
        u = rng.random(int(lens.sum()))
        wids = np.minimum(np.searchsorted(model.cdf, u, side="right"), len(model.words) - 1)
        yield lens, wids


def synth_texts(model: TextModel, n: int, seed: int = 0) -> list[str]:
    out: list[str] = []
    words = np.array(model.words, dtype=object)
    for lens, wids in _word_blocks(model, n, seed):
        ws = words[wids].tolist()
        ends = np.cumsum(lens).tolist()
        a = 0
        for e in ends:
            out.append(" ".join(ws[a:e]))
            a = e
    return out


def synth_tokens(model: TextModel, n: int, seed: int = 0) -> list[list[str]]:
    """The same chunks as :func:`synth_texts`, as token lists (each word's tokens, concatenated)."""
    out: list[list[str]] = []
    for lens, wids in _word_blocks(model, n, seed):
        cnt = model.word_tok_len[wids]
        starts = model.word_tok_start[wids]
        total = int(cnt.sum())
        first = np.repeat(np.cumsum(cnt) - cnt, cnt)  # position of each token's word's first token
        idx = np.repeat(starts, cnt) + (np.arange(total) - first)
        toks = model.tok_vocab[model.word_tok_flat[idx]].tolist()
        word_end = np.cumsum(lens)
        tok_end = np.concatenate([[0], np.cumsum(cnt)])[word_end].tolist()
        a = 0
        for e in tok_end:
            out.append(toks[a:e])
            a = e
    return out


def query_tokens(model: TextModel, vocab: set[str] | dict[str, Any], n: int) -> list[list[str]]:
    """The first ``n`` real queries with at least one indexed term, terms outside ``vocab`` dropped."""
    tok = the_tokenizer()
    out = []
    for q in model.queries:
        terms = [t for t in tok.tokenize(q) if t in vocab]
        if terms:
            out.append(terms)
        if len(out) == n:
            break
    return out


# ---------------------------------------------------------------------------------------------------------------------
# Synthetic vectors


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _bases(path: Path | None, seed: int) -> np.ndarray:
    if path is not None:
        return _unit(np.load(path).astype(np.float32))
    return _unit(np.random.default_rng([seed, 999]).standard_normal((1024, DIM)).astype(np.float32))


def synth_vectors(n: int, base_path: Path | None, noise: float, seed: int) -> np.ndarray:
    """``n`` unit vectors: a seeded base plus Gaussian noise of norm ~``noise``, in blocks (chunk i is fixed)."""
    bases = _bases(base_path, seed)
    x = np.empty((n, DIM), dtype=np.float32)
    for b, start in enumerate(range(0, n, BLOCK)):
        size = min(BLOCK, n - start)
        rng = np.random.default_rng([seed, 1, b])
        pick = rng.integers(0, len(bases), BLOCK)[:size]
        g = rng.standard_normal((BLOCK, DIM), dtype=np.float32)[:size]
        x[start : start + size] = _unit(bases[pick] + (noise / math.sqrt(DIM)) * g)
    return x


def synth_queries(n: int, query_path: Path | None, noise: float, seed: int) -> np.ndarray:
    bases = _bases(query_path, seed + 7)
    rng = np.random.default_rng([seed, 2])
    pick = np.arange(n) % len(bases)
    g = rng.standard_normal((n, DIM), dtype=np.float32)
    return np.ascontiguousarray(_unit(bases[pick] + (noise / math.sqrt(DIM)) * g))


def exact_top(x: np.ndarray, q: np.ndarray, k: int, block: int = 50_000) -> np.ndarray:
    """Exact top-``k`` ids by inner product (numpy, in blocks of rows), for recall."""
    best_s = np.full((len(q), 0), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(q), 0), dtype=np.int64)
    for a in range(0, len(x), block):
        s = q @ x[a : a + block].T
        kk = min(k, s.shape[1])
        part = np.argpartition(-s, kk - 1, axis=1)[:, :kk]
        cand_s = np.concatenate([best_s, np.take_along_axis(s, part, 1)], axis=1)
        cand_i = np.concatenate([best_i, part + a], axis=1)
        order = np.argsort(-cand_s, axis=1, kind="stable")[:, :k]
        best_s, best_i = np.take_along_axis(cand_s, order, 1), np.take_along_axis(cand_i, order, 1)
    return best_i


def recall_at(found: np.ndarray, truth: np.ndarray, k: int) -> float:
    hits = sum(len(set(f[:k].tolist()) & set(t[:k].tolist())) for f, t in zip(found, truth, strict=True))
    return hits / (len(truth) * k)


# ---------------------------------------------------------------------------------------------------------------------
# One measurement


@dataclass
class Setup:
    dataset: Path = field(default_factory=lambda: dataset_path("scifact"))
    base_vectors: Path | None = None
    query_vectors: Path | None = None
    queries: int = 1000
    depth: int = 100
    seed: int = 0
    noise: float = 0.5
    tokenize_max: int = 100_000
    rank_bm25_max: int = 10_000
    rank_bm25_queries: int = 100
    max_build_seconds: float = 1200.0
    hnsw_batch: int = 50_000

    def to_json(self) -> dict[str, Any]:
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Setup:
        d = dict(d)
        for k in ("dataset", "base_vectors", "query_vectors"):
            d[k] = Path(d[k]) if d.get(k) else None
        return cls(**d)


def applies(kind: str, n: int, setup: Setup) -> bool:
    if kind == "tokenize":
        return n <= setup.tokenize_max
    if kind == "rank_bm25":
        return n <= setup.rank_bm25_max
    return True


def measure(kind: str, n: int, setup: Setup) -> dict[str, Any]:
    """One kind at one size, in this process. Returns the record (see the module docstring)."""
    rec: dict[str, Any] = {"kind": kind, "n": n, "load_before": list(os.getloadavg())}
    t0 = time.perf_counter()
    if kind in BM25_KINDS:
        _measure_bm25(kind, n, setup, rec)
    elif kind in DENSE_KINDS:
        _measure_dense(kind, n, setup, rec)
    else:
        raise ValueError(f"unknown kind {kind!r}; valid: {', '.join(KINDS)}")
    rec["load_after"] = list(os.getloadavg())
    rec["total_seconds"] = time.perf_counter() - t0
    return rec


def _measure_bm25(kind: str, n: int, setup: Setup, rec: dict[str, Any]) -> None:
    model = text_model(setup.dataset)
    if kind == "tokenize":
        tok = the_tokenizer()
        texts = synth_texts(model, n, setup.seed)
        gc.collect()
        rec["rss_before_mb"] = rss_mb()
        exact = reset_peak()
        with Clock() as c:
            tokens = tok.tokenize_many(texts)
        rec.update(build_wall=c.wall, build_cpu=c.cpu, peak_rss_mb=peak_mb(exact), peak_exact=exact)
        rec["chunks_per_s"] = n / c.wall
        rec["tokens"] = sum(map(len, tokens))
        ref = synth_tokens(model, n, setup.seed)
        rec["same_as_per_word"] = sum(a == b for a, b in zip(tokens, ref, strict=True)) / n
        return

    tokens = synth_tokens(model, n, setup.seed)
    rec["tokens"] = sum(map(len, tokens))
    if kind == "bm25s":
        import bm25s

        gc.collect()
        rec["rss_before_mb"] = rss_mb()
        exact = reset_peak()
        with Clock() as c:
            bm = bm25s.BM25(k1=0.9, b=0.4, method="lucene")
            bm.index(tokens, show_progress=False)
        del tokens
        gc.collect()
        rec.update(build_wall=c.wall, build_cpu=c.cpu)
        qs = query_tokens(model, bm.vocab_dict, setup.queries)
        with Clock() as c:
            docs, _ = bm.retrieve(qs, k=min(setup.depth, n), show_progress=False, n_threads=0)
        rec.update(search_wall=c.wall, search_cpu=c.cpu, n_queries=len(qs), qps=len(qs) / c.wall)
        rec.update(peak_rss_mb=peak_mb(exact), peak_exact=exact, rss_after_mb=rss_mb())
        rec["vocab"] = len(bm.vocab_dict)
        with tempfile.TemporaryDirectory(prefix="bench_scale_") as tmp:
            bm.save(tmp)
            rec["disk_mb"] = disk_mb(Path(tmp))
        return

    # rank_bm25, as BM25Index(impl="rank_bm25") builds it: epsilon 0, Lucene's idf.
    from rank_bm25 import BM25Okapi

    gc.collect()
    rec["rss_before_mb"] = rss_mb()
    exact = reset_peak()
    with Clock() as c:
        rb = BM25Okapi(tokens, k1=0.9, b=0.4, epsilon=0.0)
        df: dict[str, int] = {}
        for freqs in rb.doc_freqs:
            for t in freqs:
                df[t] = df.get(t, 0) + 1
        rb.idf = {t: math.log(1.0 + (rb.corpus_size - f + 0.5) / (f + 0.5)) for t, f in df.items()}
    del tokens
    rec.update(build_wall=c.wall, build_cpu=c.cpu)
    qs = query_tokens(model, rb.idf, setup.rank_bm25_queries)
    k = min(setup.depth, n)
    with Clock() as c:
        for terms in qs:
            s = rb.get_scores(terms)
            np.argpartition(-s, k - 1)[:k]
    rec.update(search_wall=c.wall, search_cpu=c.cpu, n_queries=len(qs), qps=len(qs) / c.wall)
    rec.update(peak_rss_mb=peak_mb(exact), peak_exact=exact, rss_after_mb=rss_mb())


def _measure_dense(kind: str, n: int, setup: Setup, rec: dict[str, Any]) -> None:
    import faiss

    x = synth_vectors(n, setup.base_vectors, setup.noise, setup.seed)
    q = synth_queries(setup.queries, setup.query_vectors, setup.noise, setup.seed)
    k = min(setup.depth, n)
    rec["factory"] = factory_string(kind, n)
    rec["vector_bases"] = str(setup.base_vectors) if setup.base_vectors else "random mixture (1,024 centres)"
    rec["faiss_threads"] = faiss.omp_get_max_threads()
    gc.collect()
    rec["rss_before_mb"] = rss_mb()
    exact = reset_peak()
    index = faiss.index_factory(DIM, rec["factory"], faiss.METRIC_INNER_PRODUCT)
    added = n
    with Clock() as c:
        if kind == "hnsw":
            index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
            for a in range(0, n, setup.hnsw_batch):
                index.add(x[a : a + setup.hnsw_batch])
                done = min(n, a + setup.hnsw_batch)
                elapsed = time.perf_counter() - c.w0
                if done < n and elapsed / done * n > setup.max_build_seconds:
                    added = done
                    break
        elif kind.startswith("ivf_pq"):
            rng = np.random.default_rng([setup.seed, 3])
            nt = ivf_train_size(n)
            sample = x[np.sort(rng.choice(n, nt, replace=False))] if nt < n else x
            index.train(sample)
            del sample
            rec["train_vectors"] = nt
            rec["train_wall"] = time.perf_counter() - c.w0
            for a in range(0, n, setup.hnsw_batch):
                index.add(x[a : a + setup.hnsw_batch])
                done = min(n, a + setup.hnsw_batch)
                elapsed = time.perf_counter() - c.w0
                adding = elapsed - rec["train_wall"]
                if done < n and rec["train_wall"] + adding / done * n > setup.max_build_seconds:
                    added = done
                    break
        else:
            index.add(x)
    rec.update(build_wall=c.wall, build_cpu=c.cpu, added=added)
    if kind == "hnsw":
        index.hnsw.efSearch = HNSW_EF_SEARCH
    if kind.startswith("ivf_pq"):
        faiss.extract_index_ivf(index).nprobe = IVF_NPROBE
    with Clock() as c:
        _, found = index.search(q, k)
    rec.update(search_wall=c.wall, search_cpu=c.cpu, n_queries=len(q), qps=len(q) / c.wall)
    rec.update(peak_rss_mb=peak_mb(exact), peak_exact=exact, rss_after_mb=rss_mb())
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as tmp:
        path = Path(tmp) / "index.faiss"
        faiss.write_index(index, str(path))
        rec["disk_mb"] = disk_mb(path)
    del index
    gc.collect()
    if kind != "flat":
        truth = exact_top(x[:added], q, 10)
        rec["recall_at_10"] = recall_at(found, truth, 10)
    if added < n:  # extrapolate the partial HNSW build (see the module docstring)
        f = n / added
        rec["extrapolated"] = True
        rec["build_wall_measured"], rec["build_cpu_measured"] = rec["build_wall"], rec["build_cpu"]
        rec["peak_rss_mb_measured"] = rec["peak_rss_mb"]
        rec["disk_mb_measured"] = rec["disk_mb"]
        fixed = rec.get("train_wall", 0.0)  # IVF training is done in full; only adding is scaled
        rec["build_wall"] = fixed + (rec["build_wall"] - fixed) * f
        rec["build_cpu"] *= f
        rec["disk_mb"] *= f
        # the data (n vectors) were all in memory; only the index's part grows with what was added
        rec["peak_rss_mb"] = rec["rss_before_mb"] + (rec["peak_rss_mb"] - rec["rss_before_mb"]) * f


# ---------------------------------------------------------------------------------------------------------------------
# Fitting


def fit_power(ns: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares line through (log n, log y): returns ``(a, s)`` with y = a * n**s."""
    lx, ly = np.log(np.asarray(ns, float)), np.log(np.asarray(ys, float))
    s, c = np.polyfit(lx, ly, 1)
    return float(math.exp(c)), float(s)


def fit_linear(ns: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares line y = c + m * n (memory and disk: a fixed part plus a cost per chunk)."""
    m, c = np.polyfit(np.asarray(ns, float), np.asarray(ys, float), 1)
    return float(c), float(m)


FIGURES = (
    ("build_wall", "build s (wall)"),
    ("build_cpu", "build CPU s"),
    ("qps", "queries/s"),
    ("qps_cpu", "queries per CPU s"),
    ("peak_rss_mb", "peak RSS MB"),
    ("disk_mb", "disk MB"),
)


def figure(rec: dict[str, Any], key: str) -> float | None:
    """A figure of a record; ``qps_cpu`` (queries per CPU second of search) is derived."""
    if key == "qps_cpu":
        return rec["n_queries"] / rec["search_cpu"] if rec.get("search_cpu") else None
    value = rec.get(key)
    return None if value is None else float(value)


def fits(records: Sequence[dict[str, Any]], at: float = 1e7) -> list[dict[str, Any]]:
    """Per kind and figure: the power-law fit over the measured sizes and its value at ``at``."""
    out = []
    for kind in KINDS:
        rs = sorted((r for r in records if r["kind"] == kind), key=lambda r: r["n"])
        for key, label in FIGURES:
            pts = [(r["n"], y) for r in rs if (y := figure(r, key)) is not None and y > 0]
            if len(pts) < 2:
                continue
            a, s = fit_power([p[0] for p in pts], [p[1] for p in pts])
            c, m = fit_linear([p[0] for p in pts], [p[1] for p in pts])
            out.append(
                {
                    "kind": kind,
                    "figure": key,
                    "label": label,
                    "a": a,
                    "slope": s,
                    "sizes": [p[0] for p in pts],
                    "at": at,
                    "value": a * at**s,
                    "c": c,
                    "m": m,
                    "linear": c + m * at,
                    "last_n": pts[-1][0],
                    "last": pts[-1][1],
                }
            )
    return out


# ---------------------------------------------------------------------------------------------------------------------
# Orchestration


def run_one(kind: str, n: int, setup: Setup, in_process: bool) -> dict[str, Any]:
    if in_process:
        return measure(kind, n, setup)
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        out = Path(fh.name)
    cmd = [sys.executable, __file__, "--_measure", kind, str(n), "--_setup", json.dumps(setup.to_json())]
    cmd += ["--_out", str(out)]
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    subprocess.run(cmd, check=True, env=env)
    rec: dict[str, Any] = json.loads(out.read_text())
    out.unlink()
    return rec


def read_records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_all(
    sizes: Sequence[int],
    kinds: Sequence[str],
    setup: Setup,
    raw: Path | None,
    in_process: bool = False,
    resume: bool = False,
) -> list[dict[str, Any]]:
    """Every applicable (kind, size), smallest size first; each record is appended to ``raw`` as it is made."""
    records = read_records(raw) if (raw is not None and resume) else []
    done = {(r["kind"], r["n"]) for r in records}
    if raw is not None and not resume:
        raw.write_text("")
    for n in sorted(sizes):
        for kind in kinds:
            if not applies(kind, n, setup) or (kind, n) in done:
                continue
            say(f"{kind} at {n:,} chunks (load {os.getloadavg()[0]:.2f})")
            rec = run_one(kind, n, setup, in_process)
            say(
                f"  build {rec['build_wall']:.1f} s, "
                + (f"{rec['qps']:.1f} q/s, " if "qps" in rec else "")
                + f"peak {rec['peak_rss_mb']:.0f} MB"
            )
            records.append(rec)
            if raw is not None:
                with raw.open("a") as fh:
                    fh.write(json.dumps(rec) + "\n")
    return records


# ---------------------------------------------------------------------------------------------------------------------
# Report


def _n(n: float) -> str:
    if n >= 1e6 and n % 1e6 == 0:
        return f"{n / 1e6:g}M"
    if n >= 1e3 and n % 1e3 == 0:
        return f"{n / 1e3:g}k"
    return f"{n:,.0f}"


def _f(x: Any, nd: int = 1) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        if x >= 100:
            return f"{x:,.0f}"
        return f"{x:.{nd}f}" if x >= 1 else f"{x:.{max(nd, 3)}f}"
    return str(x)


def _dur(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    if s < 2 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} days"


def plot(records: Sequence[dict[str, Any]], fitted: Sequence[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    for ax, (key, label) in zip(axes.flat, FIGURES, strict=True):
        for kind in KINDS:
            pts = sorted((r["n"], y) for r in records if r["kind"] == kind and (y := figure(r, key)))
            if not pts:
                continue
            color = f"C{KINDS.index(kind)}"  # one colour per kind in every panel
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=color, label=kind)
            ext = [(r["n"], figure(r, key)) for r in records if r["kind"] == kind and r.get("extrapolated")]
            if ext:  # partial builds: open markers (see the Measurements notes)
                ax.plot([p[0] for p in ext], [p[1] for p in ext], "o", color="white", markeredgecolor=color)
            for f in fitted:
                if f["kind"] == kind and f["figure"] == key:
                    xs = np.array([pts[-1][0], f["at"]])
                    ax.plot(xs, f["a"] * xs ** f["slope"], "--", color=color, alpha=0.6)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("chunks")
        ax.set_title(label + " (dashed: power-law fit, to 10M)")
        ax.grid(True, which="both", alpha=0.3)
    axes.flat[0].legend(title="open marker: partial build, scaled")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def report(
    records: Sequence[dict[str, Any]], setup: Setup, facts: dict[str, str], out: Path, note: str = ""
) -> Path:
    fitted = fits(records)
    r = Report(
        "scale",
        "Cost curve: BM25 and FAISS indexes from 10k to 1M chunks, extrapolated to 10M",
        "Each row is one fresh process (build, then one batch of queries at top-100). Build seconds are wall "
        "(CPU = all threads of the process); peak RSS includes the process's input held in memory (the chunks' "
        "tokens or the float32 vectors) and Python + libraries; `before` is the RSS with the input in hand, before "
        "the build. The machine is shared with other jobs: the load average is given per row. BM25 chunks are "
        "synthetic text drawn from SciFact's vocabulary and length distribution; dense vectors are synthetic "
        + (
            "(SciFact's all-MiniLM-L6-v2 passage/query embeddings plus Gaussian noise"
            if setup.base_vectors
            else "(a seeded mixture of random unit centres plus Gaussian noise"
        )
        + f", noise norm {setup.noise}); see the script's docstring for the data and every rule.",
    )
    if note:
        r.para(note)
    r.heading("Machine")
    r.facts(facts)
    r.heading("Measurements")
    rows = []
    for rec in sorted(records, key=lambda x: (KINDS.index(x["kind"]), x["n"])):
        ext = " *" if rec.get("extrapolated") else ""
        rows.append(
            [
                rec["kind"],
                _n(rec["n"]),
                rec.get("factory", ""),
                _f(rec["build_wall"]) + ext,
                _f(rec["build_cpu"]) + ext,
                _f(rec.get("qps")),
                _f(rec.get("recall_at_10"), 3),
                _f(rec.get("rss_before_mb")),
                _f(rec["peak_rss_mb"]) + ext,
                _f(rec.get("disk_mb")) + (ext if "disk_mb" in rec else ""),
                " / ".join(f"{x:.1f}" for x in rec["load_before"][:1] + rec["load_after"][:1]),
            ]
        )
    r.table(
        [
            "kind",
            "chunks",
            "index",
            "build s",
            "build CPU s",
            "queries/s",
            "recall@10",
            "before MB",
            "peak RSS MB",
            "disk MB",
            "load 1-min (start / end)",
        ],
        rows,
        "llcrrrrrrrr",
    )
    notes = []
    bases = sorted({r["vector_bases"] for r in records if r.get("vector_bases")})
    unrecorded = [
        f"{r['kind']} {_n(r['n'])}" for r in records if r["kind"] in DENSE_KINDS and not r.get("vector_bases")
    ]
    if bases:
        notes.append(
            f"* dense vector bases: {'; '.join(bases)}"
            + (f" (not recorded in the rows {', '.join(unrecorded)})" if unrecorded else "")
            + "."
        )
    for rec in sorted(records, key=lambda x: (KINDS.index(x["kind"]), x["n"])):
        if rec.get("extrapolated"):
            notes.append(
                f"* {rec['kind']} at {_n(rec['n'])}: adding stopped after {rec['added']:,} vectors "
                f"({rec['build_wall_measured']:.0f} s wall, peak {rec['peak_rss_mb_measured']:.0f} MB, "
                f"{rec['disk_mb_measured']:.0f} MB on disk); the starred figures are scaled by n / added; "
                "queries/s and recall are those of the partial index."
            )
        if rec["kind"] == "tokenize":
            notes.append(
                f"* tokenize at {_n(rec['n'])}: {rec['chunks_per_s']:,.0f} chunks/s, {rec['tokens'] / rec['n']:.0f} "
                f"tokens a chunk; {rec['same_as_per_word']:.1%} of chunks tokenise to exactly the per-word tokens "
                "the bm25s rows index."
            )
        if rec["kind"] == "bm25s":
            notes.append(
                f"* bm25s at {_n(rec['n'])}: {rec['tokens']:,} tokens, vocabulary {rec['vocab']:,}, "
                f"{rec['n_queries']} queries."
            )
        if rec["kind"] == "rank_bm25":
            notes.append(f"* rank_bm25 at {_n(rec['n'])}: timed on {rec['n_queries']} queries (not 1,000).")
        if rec["kind"].startswith("ivf_pq"):
            notes.append(
                f"* {rec['kind']} at {_n(rec['n'])}: trained on {rec['train_vectors']:,} vectors "
                f"({rec['train_wall']:.0f} s wall of the build)."
            )
    if notes:
        r.para("\n".join(notes))
    r.para(
        f"Index settings: hnsw efConstruction {HNSW_EF_CONSTRUCTION}, efSearch {HNSW_EF_SEARCH} (FAISS searches "
        f"with max(efSearch, k) = 100 candidates at top-100); ivf_pq nlist = round(4 sqrt N) capped at N // "
        f"{faiss_index.MIN_POINTS_PER_LIST}, nprobe {IVF_NPROBE}. "
        "recall@10 = share of the exact top-10 (numpy inner product over the same vectors) found in the index's "
        "top-10, averaged over the queries."
    )
    r.heading("Fit: y = a * N^s over the measured sizes, and the value at 10M")
    frows = []
    for f in fitted:
        v = f["value"]
        shown = _dur(v) if f["figure"] in ("build_wall", "build_cpu") else _f(v)
        lin = "–"
        if f["figure"] in ("peak_rss_mb", "disk_mb"):
            lin = f"{f['c']:,.0f} + {f['m'] * 1e6:,.0f} per M chunks = {_f(f['linear'])}"
        frows.append(
            [
                f["kind"],
                f["label"],
                ", ".join(_n(n) for n in f["sizes"]),
                f"{f['slope']:.2f}",
                f"{f['last']:.4g} at {_n(f['last_n'])}",
                f"{f['last']:.4g} x (10M/{_n(f['last_n'])})^{f['slope']:.2f}",
                shown,
                lin,
            ]
        )
    r.table(
        [
            "kind",
            "figure",
            "sizes fitted",
            "slope s",
            "last measured",
            "power law",
            "at 10M",
            "linear fit, at 10M",
        ],
        frows,
        "lllrllll",
    )
    png = out.with_suffix(".png")
    plot(records, fitted, png)
    r.para(f"![cost curves]({png.name})")
    return r.emit(out)


# ---------------------------------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000,1000000", help="chunk counts, comma-separated")
    ap.add_argument(
        "--kinds", default=",".join(DEFAULT_KINDS), help=f"comma-separated subset of {','.join(KINDS)}"
    )
    ap.add_argument("--quick", action="store_true", help="smoke run: sizes 1000,5000, 200 queries")
    ap.add_argument("--dataset", default="scifact", help="BEIR folder for the vocabulary and queries")
    ap.add_argument("--base-vectors", type=Path, help=".npy of real passage embeddings (N x 384) as bases")
    ap.add_argument(
        "--query-vectors", type=Path, help=".npy of real query embeddings (N x 384) as query bases"
    )
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--noise", type=float, default=0.5)
    ap.add_argument("--tokenize-max", type=int, default=100_000)
    ap.add_argument("--rank-bm25-max", type=int, default=10_000)
    ap.add_argument("--max-build-seconds", type=float, default=1200.0)
    ap.add_argument("--resume", action="store_true", help="keep the records already in the raw file")
    ap.add_argument("--report-only", action="store_true", help="write the page from the raw records only")
    ap.add_argument(
        "--note", default="", help="a paragraph for the page (e.g. how a run was split); @FILE reads it"
    )
    ap.add_argument(
        "--out", type=Path, help="the page (default experiments/results/bench_scale.md; --quick: a temp dir)"
    )
    ap.add_argument("--_measure", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--_setup", help=argparse.SUPPRESS)
    ap.add_argument("--_out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args._measure:
        rec = measure(args._measure[0], int(args._measure[1]), Setup.from_json(json.loads(args._setup)))
        Path(args._out).write_text(json.dumps(rec))
        return 0

    kinds = [k for k in args.kinds.split(",") if k]
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise SystemExit(f"--kinds: unknown {', '.join(bad)}; valid: {', '.join(KINDS)}")
    sizes = [1000, 5000] if args.quick else [int(s) for s in args.sizes.split(",") if s]
    setup = Setup(
        dataset=dataset_path(args.dataset),
        base_vectors=args.base_vectors,
        query_vectors=args.query_vectors,
        queries=200 if args.quick else args.queries,
        noise=args.noise,
        tokenize_max=args.tokenize_max,
        rank_bm25_max=args.rank_bm25_max,
        max_build_seconds=args.max_build_seconds,
    )
    if args.out is None:
        args.out = Path(tempfile.mkdtemp()) / "bench_scale.md" if args.quick else RESULTS / "bench_scale.md"
    raw = args.out.with_suffix(".jsonl")
    facts = machine_facts(["faiss-cpu", "bm25s", "rank-bm25", "PyStemmer"])
    if args.report_only:
        records = read_records(raw)
    else:
        records = run_all(sizes, kinds, setup, raw, resume=args.resume)
    if args.report_only:  # the facts are of this process; the measurements' loads are in their rows
        facts = {
            (
                "page written (UTC)"
                if k == "date (UTC)"
                else k.replace("at start", "when the page was written")
            ): v
            for k, v in facts.items()
        }
    else:
        facts["load average (1/5/15 min, at end)"] = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    note = Path(args.note[1:]).read_text(encoding="utf-8").strip() if args.note.startswith("@") else args.note
    report(records, setup, facts, args.out, note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
