"""Benchmark: the dense retriever's FAISS index kinds (flat, hnsw, ivf_pq) on SciFact's real MiniLM vectors.

    ABLATE_CACHE_DIR=/tmp/i13cache python experiments/bench_index.py
    python experiments/bench_index.py --cache-dir /tmp/i13cache --repeat 5 --build-repeat 2

Vectors: all-MiniLM-L6-v2 embeddings of SciFact's 5,183 chunks (title + " " + text) and its 300 test queries, read
from the embedding cache (``--cache-dir``, default ``$ABLATE_CACHE_DIR``). The script refuses to encode: a cold
SciFact encoding takes tens of minutes on this machine, so run any SciFact dense job first to fill the cache.

Each kind is built with the defaults of ``conf/retrievers/dense.yaml`` (hnsw m 32, ef_construction 40, ef_search
64; ivf_pq nlist auto, nprobe 16, m 48, nbits 8) by :func:`ablate.stages.retrievers.faiss_index.build_index`:

* **Build**: wall seconds of train + add, in rounds of alternating order (``--build-repeat``); index size =
  ``faiss.serialize_index`` bytes.
* **Query throughput**: one batched FAISS search of all test queries at k = 100 (vectors precomputed, so query
  encoding is not timed), ``--repeat`` rounds of alternating order; q/s and the ratio to flat.
* **Recall against flat**: raw index results at k = 10 and k = 100 against flat's; and ablate's ``DenseIndex.search``
  at depth 100 (candidates re-scored with exact cosines), whose top 10 is what a run ranks.
* **Quality**: nDCG@10 and recall@100 of ablate's search by pytrec_eval over the 300 test queries.
* **Index cache**: ``DenseIndex`` construction with an empty index cache (build + store) vs with the entry present
  (load + validate), alternating rounds; the embeddings come from the embedding cache in both.
* **Selective filters**: share of queries answered by the exact fallback when only a random 10% / 1% / 0.2% of the
  chunks are allowed (see "A very selective filter" in ``src/ablate/stages/retrievers/dense.py``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
from _common import Report, Timings, dataset_path, interleaved, machine_facts, say

from ablate.cache import Cache, default_cache_dir
from ablate.data.corpus import load_corpus
from ablate.stages.retrievers.dense import DenseIndex
from ablate.stages.retrievers.faiss_index import (
    INDEX_KINDS,
    build_index,
    check_index,
    factory_string,
    search_parameters,
)
from ablate.stages.text.encoders import SentenceTransformerEncoder


def recall(approx: np.ndarray, exact: np.ndarray) -> float:
    """Mean over queries of |approx row ∩ exact row| / |exact row| (-1 = no result)."""
    out = []
    for a, e in zip(approx, exact, strict=True):
        e_set = {int(i) for i in e if i >= 0}
        out.append(len(e_set & {int(i) for i in a if i >= 0}) / max(1, len(e_set)))
    return float(np.mean(out))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="scifact")
    ap.add_argument("--split", default="test")
    ap.add_argument("--cache-dir", default=None, help="embedding cache (default $ABLATE_CACHE_DIR)")
    ap.add_argument("--repeat", type=int, default=5, help="search rounds per kind (5)")
    ap.add_argument("--build-repeat", type=int, default=2, help="builds per kind (2)")
    ap.add_argument("--cache-repeat", type=int, default=3, help="cold/warm DenseIndex rounds per kind (3)")
    ap.add_argument(
        "--out", default=None, help="Markdown output (default experiments/results/bench_index.md)"
    )
    args = ap.parse_args(argv)

    import faiss

    facts = machine_facts(["faiss-cpu", "sentence-transformers"])
    snap = load_corpus(dataset_path(args.dataset))
    qids = snap.split_qids(args.split)
    queries = [snap.queries[q] for q in qids]
    emb_cache = Cache(args.cache_dir or default_cache_dir())
    enc = SentenceTransformerEncoder(cache=emb_cache)

    def refuse() -> None:
        raise SystemExit(
            f"the {args.dataset} embeddings are not in {emb_cache.root}: run a dense job there first"
        )

    enc._load_model = refuse  # type: ignore[method-assign,assignment]  # never encode here (see the docstring)
    emb = enc.encode_passages([c.text for c in snap.chunks])
    qemb = enc.encode_queries([q.text for q in queries])
    n, dim = emb.shape
    say(f"{snap.name}: {n:,} x {dim} passage vectors, {len(queries)} queries, faiss {faiss.__version__}")

    kinds = list(INDEX_KINDS)
    params = {k: check_index(k)[1] for k in kinds}
    factories = {k: factory_string(k, params[k], n, dim) for k in kinds}
    built: dict[str, object] = {}

    def keep(name: str, _r: int, value: object) -> None:
        built[name] = value

    say(f"building each kind {args.build_repeat}x")
    build_t = interleaved(
        {k: (lambda k=k: build_index(k, params[k], emb)) for k in kinds},
        args.build_repeat,
        on_value=keep,
        log=say,
    )
    sizes = {k: int(faiss.serialize_index(built[k]).size) for k in kinds}

    def search(kind: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        return built[kind].search(qemb, k, params=search_parameters(kind, params[kind]))  # type: ignore[attr-defined]

    say(f"searching {len(queries)} queries at k=100, {args.repeat} rounds")
    search_t = interleaved({k: (lambda k=k: search(k, 100)) for k in kinds}, args.repeat, log=say)
    exact10, exact100 = search("flat", 10)[1], search("flat", 100)[1]

    # ablate's search (re-scored candidates) and its quality
    from bench_bm25 import trec_quality

    qrels = snap.split_qrels(args.split).judgements
    dense = {k: DenseIndex(snap.chunks, enc, index=k, index_params=params[k]) for k in kinds}
    runs = {k: dense[k].search(queries, 100) for k in kinds}
    pos = {c.chunk_id: i for i, c in enumerate(snap.chunks)}
    top10 = {k: np.array([[pos[h.chunk_id] for h in runs[k].get(q)[:10]] for q in qids]) for k in kinds}
    quality = {k: trec_quality(runs[k], qrels, qids, 100) for k in kinds}

    # index cache: cold (empty index cache) vs warm (entry present)
    root = Path(tempfile.mkdtemp(prefix="bench-index-cache-"))
    cache_t: dict[str, Timings] = {}
    for k in kinds[1:]:
        warm_dir = root / f"warm-{k}"
        DenseIndex(snap.chunks, enc, index=k, index_params=params[k], cache=Cache(warm_dir))

        def cold(k: str = k) -> DenseIndex:
            d = Path(tempfile.mkdtemp(dir=root))
            try:
                return DenseIndex(snap.chunks, enc, index=k, index_params=params[k], cache=Cache(d))
            finally:
                shutil.rmtree(d)

        def warm(k: str = k, warm_dir: Path = warm_dir) -> DenseIndex:
            idx = DenseIndex(snap.chunks, enc, index=k, index_params=params[k], cache=Cache(warm_dir))
            assert idx.stats["index_cache_hits"] == 1
            return idx

        say(f"[{k}] cold build vs warm load, {args.cache_repeat} rounds")
        cache_t[k] = interleaved({"cold": cold, "warm": warm}, args.cache_repeat, log=say)
    shutil.rmtree(root)

    # selective filters
    rng = np.random.default_rng(0)
    filter_rows = []
    for share in (0.1, 0.01, 0.002):
        allowed = np.zeros(n, dtype=bool)
        allowed[rng.choice(n, size=max(1, round(share * n)), replace=False)] = True
        row: list[object] = [f"{share:.1%}", int(allowed.sum())]
        for k in kinds[1:]:
            before = dense[k].stats["exact_fallback_queries"]
            dense[k].search(queries, 100, allowed)
            row.append(f"{(dense[k].stats['exact_fallback_queries'] - before) / len(queries):.0%}")
        filter_rows.append(row)

    rep = Report(
        "index",
        "Dense index kinds: flat vs hnsw vs ivf_pq on SciFact's MiniLM vectors",
        f"{snap.name}: {n:,} passage vectors ({dim} dims, all-MiniLM-L6-v2, from the embedding cache) and its "
        f"{len(queries)} {args.split} queries. Defaults of conf/retrievers/dense.yaml. Timed side by side in one "
        "process, in rounds of alternating order, on a shared machine: compare the ratios, not the absolute seconds.",
    )
    rep.heading("Machine")
    rep.facts({**facts, "load average (at end)": " / ".join(f"{x:.2f}" for x in os.getloadavg())})
    rep.heading("Build, size and query throughput")
    rep.para(
        "Build = train + add (best / median of the builds). Search = one batched FAISS search of all queries at "
        "k = 100, vectors precomputed; q/s from the best round; speed-up = flat's best time / this kind's."
    )
    rows = []
    for k in kinds:
        rows.append(
            [
                k,
                f"`{factories[k]}`",
                build_t.best(k),
                build_t.median(k),
                f"{sizes[k] / 1e6:.2f}",
                search_t.best(k),
                search_t.median(k),
                len(queries) / search_t.best(k),
                f"{search_t.best('flat') / search_t.best(k):.2f}x",
            ]
        )
    rep.table(
        [
            "index",
            "factory",
            "build best s",
            "build median s",
            "size MB",
            "search best s",
            "search median s",
            "q/s",
            "speed-up vs flat",
        ],
        rows,
    )
    rep.heading("Recall against flat, and quality")
    rep.para(
        "Raw: the index's own top-k against flat's top-k. ablate@10: the top 10 of ablate's `DenseIndex.search` at "
        "depth 100 (approximate candidates re-scored with exact cosines) against flat's top 10. nDCG@10 / recall@100 "
        "by pytrec_eval over the qrels."
    )
    rep.table(
        ["index", "raw recall@10", "raw recall@100", "ablate recall@10 (depth 100)", "nDCG@10", "recall@100"],
        [
            [
                k,
                f"{recall(search(k, 10)[1], exact10):.4f}",
                f"{recall(search(k, 100)[1], exact100):.4f}",
                f"{recall(top10[k], top10['flat']):.4f}",
                f"{quality[k]['ndcg@10']:.4f}",
                f"{quality[k]['recall@100']:.4f}",
            ]
            for k in kinds
        ],
    )
    rep.heading("Index cache: cold build vs warm load")
    rep.para(
        "Whole `DenseIndex` constructor; the embeddings come from the embedding cache in both. Cold = an empty index "
        "cache (build + store the serialized index); warm = the entry present (load, validate). Flat is never "
        "stored (adding the vectors is all it costs)."
    )
    crow = []
    for k, t in cache_t.items():
        crow.append(
            [
                k,
                t.n("cold"),
                t.best("cold"),
                t.median("cold"),
                t.best("warm"),
                t.median("warm"),
                f"{t.best('cold') / t.best('warm'):.1f}x",
            ]
        )
    rep.table(
        ["index", "rounds", "cold best s", "cold median s", "warm best s", "warm median s", "ratio (best)"],
        crow,
    )
    rep.heading("Selective filters")
    rep.para(
        "Share of the queries (depth 100) that the approximate index could not fill with allowed chunks and that "
        "were answered by exact search over the allowed chunks instead; no disallowed chunk is returned either way."
    )
    rep.table(["allowed", "chunks"] + [f"{k}: exact fallback" for k in kinds[1:]], filter_rows)
    rep.emit(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
