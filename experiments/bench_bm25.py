"""Benchmark: BM25 query throughput of ablate's BM25Index, impl="bm25s" vs impl="rank_bm25", beside quality.

    /work/venv/bin/python experiments/bench_bm25.py                      # SciFact + a 50,000-chunk synthetic set
    /work/venv/bin/python experiments/bench_bm25.py --skip-large         # SciFact only (about 2 minutes)
    /work/venv/bin/python experiments/bench_bm25.py --large-size 100000 --sample-large 20

``BM25Index`` is the index engine behind the ``bm25`` retriever stage (``BM25Retriever``). Both backends get the same
chunks, the same ablate Tokenizer (built as the stage builds it: the corpus language, Lucene's 33 stopwords; no
stemming unless ``--stemmer``, while the stage's default is porter), the same k1/b/method and depth (top-100). Timed
side by side in one process, in rounds of alternating order; the report gives best and median wall seconds, queries/s
and the ratio.

Two sizes:

* **SciFact** (5,183 documents, one chunk each = title + " " + text; its 300 test queries). nDCG@10 and recall@100
  of both backends by pytrec_eval, over all 300 test queries (queries a backend returns nothing for score 0).
* **Large** (``--large-size`` chunks, default 50,000), *synthesized by replication*: the SciFact and Vaswani chunks
  pooled (16,612), then copied round after round until the size is reached. Copy 0 is the original text; copy r >= 1
  gets the id ``<source>-<doc id>-r<r>`` and drops each word with probability ``--drop`` (default 0.1, seeded), so
  copies are near-duplicates that do not tie exactly (exact duplicates would send most queries down the tie-resolution
  path and time that instead). Queries: SciFact's test queries. rank_bm25 scores every chunk in Python per query term,
  so at this size it is timed on a seeded sample of ``--sample-large`` queries (default 30) and bm25s is timed on the
  same sample (the ratio) and on all 300 (its batch throughput).

Index cache (SciFact, bm25s, the tokenizer above): a **cold** build (tokenise, index, store the entry in an empty
cache folder) against a **warm** build (the same constructor finding the entry: load and validate, tokenise nothing),
in alternating rounds (``--cache-repeat``, default 3); the report gives both and their ratio, and the chunks each
tokenised (the index's ``chunks_tokenized`` counter).

Agreement: the two backends should give the same rankings (ablate sets rank_bm25's idf to Lucene's and divides its
scores by k1 + 1; see src/ablate/stages/retrievers/bm25.py), so the report shows overlap@10, the share of identical
top-1 and of identical top-10 lists, and the largest score difference on shared top-10 hits (bm25s computes in
float32).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
from _common import Report, Timings, dataset_path, interleaved, machine_facts, say, timed

from ablate.cache import Cache
from ablate.data.corpus import load_corpus
from ablate.data.types import Chunk, Query, Run
from ablate.stages.retrievers.bm25 import BM25Index, BM25Retriever
from ablate.stages.text.tokenize import Tokenizer

IMPLS = ("bm25s", "rank_bm25")


def synthesize(sources: dict[str, list[Chunk]], size: int, drop: float, seed: int) -> list[Chunk]:
    """``size`` chunks: the sources' chunks pooled, copy 0 as is, later copies with words dropped (see the docstring)."""
    pool = [(src, c) for src, chunks in sources.items() for c in chunks]
    rng = np.random.default_rng(seed)
    out: list[Chunk] = []
    r = 0
    while len(out) < size:
        for src, c in pool:
            if len(out) >= size:
                break
            text = c.text
            if r > 0:
                words = text.split()
                keep = rng.random(len(words)) >= drop
                text = " ".join(w for w, k in zip(words, keep, strict=True) if k) or text
            cid = f"{src}-{c.chunk_id}-r{r}"
            out.append(Chunk(chunk_id=cid, doc_id=cid, text=text))
        r += 1
    return out


def sample_queries(queries: list[Query], n: int, seed: int) -> list[Query]:
    """A seeded sample of ``n`` queries in their original order (``n`` <= 0 or >= len: all)."""
    if n <= 0 or n >= len(queries):
        return list(queries)
    idx = np.sort(np.random.default_rng(seed).choice(len(queries), size=n, replace=False))
    return [queries[i] for i in idx]


def agreement(a: Run, b: Run, qids: list[str], k: int = 10) -> dict[str, float]:
    """overlap@k (shared ids / the longer list, 1 when both are empty), identical top-1, identical top-k list, and
    the largest |score difference| over ids in both top-k lists."""
    overlaps, top1, same_list, max_diff = [], [], [], 0.0
    for q in qids:
        ha, hb = a.get(q)[:k], b.get(q)[:k]
        ia, ib = [h.chunk_id for h in ha], [h.chunk_id for h in hb]
        longest = max(len(ia), len(ib))
        overlaps.append(len(set(ia) & set(ib)) / longest if longest else 1.0)
        top1.append(ia[:1] == ib[:1])
        same_list.append(ia == ib)
        sb = {h.chunk_id: h.score for h in hb}
        for h in ha:
            if h.chunk_id in sb:
                max_diff = max(max_diff, abs(h.score - sb[h.chunk_id]))
    return {
        f"overlap@{k}": float(np.mean(overlaps)),
        "top1_identical": float(np.mean(top1)),
        f"top{k}_identical": float(np.mean(same_list)),
        "max_abs_score_diff": max_diff,
        "hits_a": float(np.mean([len(a.get(q)) for q in qids])),
        "hits_b": float(np.mean([len(b.get(q)) for q in qids])),
    }


def trec_quality(run: Run, qrels: dict[str, dict[str, int]], qids: list[str], depth: int) -> dict[str, float]:
    """nDCG@10 and recall@100 by pytrec_eval, averaged over ``qids`` (a query without results scores 0).

    pytrec_eval gets rank-derived scores (depth - rank) so its order is ours: trec_eval would otherwise re-sort by
    score and break ties by document id descending, not by ablate's tie rule."""
    import pytrec_eval

    trec_run = {
        q: {h.doc_id: float(depth - i) for i, h in enumerate(run.get(q)[:depth])} for q in qids if run.get(q)
    }
    ev = pytrec_eval.RelevanceEvaluator({q: qrels[q] for q in qids}, {"ndcg_cut.10", "recall.100"})
    res = ev.evaluate(trec_run)
    return {
        "ndcg@10": float(np.mean([res.get(q, {}).get("ndcg_cut_10", 0.0) for q in qids])),
        "recall@100": float(np.mean([res.get(q, {}).get("recall_100", 0.0) for q in qids])),
    }


def bench_scale(
    label: str,
    chunks: list[Chunk],
    tok: Tokenizer,
    queries_all: list[Query],
    queries_rb: list[Query],
    args: argparse.Namespace,
) -> dict[str, object]:
    """Builds and searches of both backends at one size; returns the figures and the runs."""
    say(f"[{label}] {len(chunks):,} chunks; building each backend {args.build_repeat}x (interleaved)")
    built: dict[str, BM25Index] = {}
    build_stats: dict[str, list[dict[str, float]]] = {i: [] for i in IMPLS}

    def keep(name: str, _r: int, value: BM25Index) -> None:
        built.pop(name, None)  # free the previous copy before holding the new one
        built[name] = value
        build_stats[name].append(dict(value.stats))

    def make(impl: str):
        return lambda: BM25Index(chunks, tok, k1=args.k1, b=args.b, impl=impl, method=args.method)

    build_t = interleaved({i: make(i) for i in IMPLS}, args.build_repeat, on_value=keep, log=say)

    n_all, n_rb = len(queries_all), len(queries_rb)
    jobs = {
        "bm25s": lambda: built["bm25s"].search(queries_rb, args.depth),
        "rank_bm25": lambda: built["rank_bm25"].search(queries_rb, args.depth),
    }
    if n_rb < n_all:
        jobs[f"bm25s, all {n_all}"] = lambda: built["bm25s"].search(queries_all, args.depth)
    runs: dict[str, Run] = {}

    def keep_run(name: str, r: int, value: Run) -> None:
        if r == 0:
            runs[name] = value

    extra = f" (+ bm25s on all {n_all})" if n_rb < n_all else ""
    say(f"[{label}] searching: {n_rb} queries each{extra}, {args.repeat} rounds")
    search_t = interleaved(jobs, args.repeat, on_value=keep_run, log=say)
    qids_rb = [q.qid for q in queries_rb]
    agree = agreement(runs["bm25s"], runs["rank_bm25"], qids_rb)
    return {
        "label": label,
        "n_chunks": len(chunks),
        "build_t": build_t,
        "build_stats": build_stats,
        "vocab": {i: int(built[i].stats["vocab_size"]) for i in IMPLS},
        "search_t": search_t,
        "n_all": n_all,
        "n_rb": n_rb,
        "agree": agree,
        "runs": runs,
    }


def bench_cache(chunks: list[Chunk], tok: Tokenizer, args: argparse.Namespace) -> dict[str, object]:
    """Cold (empty cache folder) vs warm (entry present) builds of the bm25s index, in alternating rounds."""
    root = Path(tempfile.mkdtemp(prefix="bench-bm25-cache-"))
    warm_dir = root / "warm"

    def build(cache_dir: Path) -> BM25Index:
        return BM25Index(
            chunks, tok, k1=args.k1, b=args.b, impl="bm25s", method=args.method, cache=Cache(cache_dir)
        )

    def cold() -> BM25Index:
        d = Path(tempfile.mkdtemp(dir=root))  # a fresh, empty folder each round
        try:
            return build(d)
        finally:
            shutil.rmtree(d)

    entry_bytes = build(warm_dir)  # fills the warm folder (not timed)
    size = sum(p.stat().st_size for p in warm_dir.rglob("*.npz"))
    del entry_bytes
    stats: dict[str, dict[str, float]] = {}

    def keep(name: str, _r: int, value: BM25Index) -> None:
        stats[name] = dict(value.stats)

    say(f"[cache] cold build vs warm load, {args.cache_repeat} rounds")
    t = interleaved(
        {"cold": cold, "warm": lambda: build(warm_dir)}, args.cache_repeat, on_value=keep, log=say
    )
    shutil.rmtree(root)
    return {"t": t, "stats": stats, "entry_bytes": size}


def report_rows(res: dict[str, object]) -> tuple[list[list[object]], list[list[object]], list[object]]:
    label, n_chunks = res["label"], res["n_chunks"]
    bt: Timings = res["build_t"]  # type: ignore[assignment]
    st: Timings = res["search_t"]  # type: ignore[assignment]
    bstats: dict[str, list[dict[str, float]]] = res["build_stats"]  # type: ignore[assignment]
    build_rows = []
    for impl in IMPLS:
        tok_s = min(s["tokenize_seconds"] for s in bstats[impl])
        backend_s = min(s["index_seconds"] - s["tokenize_seconds"] for s in bstats[impl])
        build_rows.append(
            [
                label,
                impl,
                n_chunks,
                bt.n(impl),
                bt.best(impl),
                bt.median(impl),
                tok_s,
                backend_s,
                res["vocab"][impl],
            ]  # type: ignore[index]
        )
    search_rows = []
    for name in st.wall:
        nq = res["n_all"] if name.startswith("bm25s, all") else res["n_rb"]
        search_rows.append(
            [
                label,
                name,
                nq,
                st.n(name),
                st.best(name),
                st.median(name),
                nq / st.best(name),
                nq / st.best_cpu(name),
            ]
        )
    ratio = [
        label,
        res["n_rb"],
        f"{st.best('rank_bm25') / st.best('bm25s'):.1f}x",
        f"{st.median('rank_bm25') / st.median('bm25s'):.1f}x",
        f"{st.best_cpu('rank_bm25') / st.best_cpu('bm25s'):.1f}x",
        f"{bt.best('rank_bm25') / bt.best('bm25s'):.2f}x",
    ]
    return build_rows, search_rows, ratio


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="BM25 throughput: ablate BM25Index impl=bm25s vs impl=rank_bm25 (see the module docstring).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__,
    )
    ap.add_argument(
        "--dataset", default="scifact", help="BEIR folder or name under the datasets folder (scifact)"
    )
    ap.add_argument("--split", default="test")
    ap.add_argument("--large-sources", default="scifact,vaswani", help="datasets pooled for the large set")
    ap.add_argument(
        "--large-size", type=int, default=50_000, help="chunks in the synthetic large set (50,000)"
    )
    ap.add_argument("--drop", type=float, default=0.1, help="word-drop probability of copies r >= 1 (0.1)")
    ap.add_argument("--skip-large", action="store_true", help="only the SciFact size")
    ap.add_argument(
        "--sample-small", type=int, default=0, help="queries for rank_bm25 at SciFact size (0 = all)"
    )
    ap.add_argument(
        "--sample-large", type=int, default=30, help="queries for rank_bm25 at the large size (30)"
    )
    ap.add_argument(
        "--repeat", type=int, default=3, help="search rounds per contender, alternating order (3)"
    )
    ap.add_argument("--build-repeat", type=int, default=2, help="index builds per backend and size (2)")
    ap.add_argument("--cache-repeat", type=int, default=3, help="cold/warm index-cache rounds (3)")
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--k1", type=float, default=0.9)
    ap.add_argument("--b", type=float, default=0.4)
    ap.add_argument("--method", default="lucene", choices=("lucene", "robertson"))
    ap.add_argument(
        "--stemmer",
        default=None,
        help="PyStemmer algorithm (e.g. porter); default none (the pipeline's bm25 stage uses porter)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="Markdown output (default experiments/results/bench_bm25.md)")
    args = ap.parse_args(argv)

    facts = machine_facts(["bm25s", "rank-bm25", "PyStemmer", "pytrec-eval-terrier"])
    say(f"loading {args.dataset}")
    snap = load_corpus(dataset_path(args.dataset))
    # The tokenizer the bm25 stage builds for this corpus (language resolved by bind), with --stemmer.
    tok = BM25Retriever(stopwords=True, stemmer=args.stemmer).bind(snap, args.split).tokenizer
    qids = snap.split_qids(args.split)
    queries = [snap.queries[q] for q in qids]
    qrels = snap.split_qrels(args.split).judgements

    results = []
    small = bench_scale(
        snap.name, snap.chunks, tok, queries, sample_queries(queries, args.sample_small, args.seed), args
    )
    results.append(small)
    quality = {}
    small_runs: dict[str, Run] = small["runs"]  # type: ignore[assignment]
    eval_qids = [q.qid for q in sample_queries(queries, args.sample_small, args.seed)]
    for impl in IMPLS:
        quality[impl] = trec_quality(small_runs[impl], qrels, eval_qids, args.depth)
    del small["runs"]
    cache_res = bench_cache(snap.chunks, tok, args)

    large_note = ""
    if not args.skip_large:
        names = [s.strip() for s in args.large_sources.split(",") if s.strip()]
        sources = {}
        for n in names:
            s = snap if dataset_path(n) == dataset_path(args.dataset) else load_corpus(dataset_path(n))
            sources[n] = s.chunks
        wall, _, big = timed(lambda: synthesize(sources, args.large_size, args.drop, args.seed))
        pooled = sum(len(c) for c in sources.values())
        large_note = (
            f"Large set: {len(big):,} chunks synthesized by replication of {pooled:,} pooled chunks "
            f"({' + '.join(f'{n} {len(c):,}' for n, c in sources.items())}); copy 0 verbatim, copies r >= 1 with "
            f"ids `<source>-<id>-r<r>` and each word dropped with probability {args.drop} (seed {args.seed}); "
            f"built in {wall:.1f}s. Mean words per chunk: "
            f"{np.mean([len(c.text.split()) for c in big]):.0f}."
        )
        results.append(
            bench_scale(
                f"synthetic {len(big) // 1000}k",
                big,
                tok,
                queries,
                sample_queries(queries, args.sample_large, args.seed),
                args,
            )
        )
        del big

    rep = Report(
        "bm25",
        "BM25 throughput: bm25s vs rank_bm25 behind ablate's BM25Index",
        "Both backends behind the same `BM25Index` (same chunks, tokenizer, "
        f"k1={args.k1}, b={args.b}, method={args.method}, depth {args.depth}). Timed side by side in one process, "
        "in rounds of alternating order, on a shared machine: compare the ratios, not the absolute seconds. "
        "Search time covers the whole `search()` call (query tokenization, scoring, top-k, tie rule, Hit objects).",
    )
    rep.heading("Machine")
    rep.facts(
        {
            **facts,
            "tokenizer": f"language={snap.language}, stopwords=Lucene 33, stemmer={args.stemmer}",
            "load average (at end)": " / ".join(f"{x:.2f}" for x in os.getloadavg()),
        }
    )
    build_rows, search_rows, ratio_rows = [], [], []
    for res in results:
        b, s, r = report_rows(res)
        build_rows += b
        search_rows += s
        ratio_rows.append(r)
    rep.heading("Index build")
    rep.para(
        "Wall seconds of the whole constructor (best and median of the builds); `tokenize s` and `backend s` are the "
        "best of the index's own `stats` (tokenizing the chunks, and the backend's index build after it)."
    )
    rep.table(
        ["corpus", "impl", "chunks", "builds", "best s", "median s", "tokenize s", "backend s", "vocab"],
        build_rows,
    )
    rep.heading("Index cache: cold build vs warm load (bm25s)")
    ct: Timings = cache_res["t"]  # type: ignore[assignment]
    cs: dict[str, dict[str, float]] = cache_res["stats"]  # type: ignore[assignment]
    rep.para(
        f"{snap.name}, {len(snap.chunks):,} chunks. Cold = tokenise + index + store the entry in an empty cache "
        "folder; warm = the same constructor finding the entry (load, validate, rebuild the bm25s object). "
        f"Entry size {int(cache_res['entry_bytes']) / 1e6:.1f} MB (one .npz, no pickle)."  # type: ignore[call-overload]
    )
    rep.table(
        ["build", "rounds", "best s", "median s", "best CPU s", "chunks tokenised"],
        [
            [n, ct.n(n), ct.best(n), ct.median(n), ct.best_cpu(n), int(cs[n]["chunks_tokenized"])]
            for n in ("cold", "warm")
        ],
    )
    rep.para(
        f"Ratio cold / warm: {ct.best('cold') / ct.best('warm'):.1f}x (best), "
        f"{ct.median('cold') / ct.median('warm'):.1f}x (median), {ct.best_cpu('cold') / ct.best_cpu('warm'):.1f}x "
        "(CPU)."
    )
    rep.heading("Query throughput")
    if large_note:
        rep.para(large_note)
    rep.para(
        f"rank_bm25 queries: {'all' if results[0]['n_rb'] == results[0]['n_all'] else results[0]['n_rb']} of the "
        f"{results[0]['n_all']} SciFact test queries at SciFact size"
        + (
            f"; a seeded sample of {results[1]['n_rb']} at the large size (bm25s timed on the same sample and on all "
            f"{results[1]['n_all']})"
            if len(results) > 1
            else ""
        )
        + ". q/s = queries / best wall seconds; the CPU column uses this process's CPU seconds (less sensitive to "
        "other load)."
    )
    rep.table(
        ["corpus", "contender", "queries", "rounds", "best s", "median s", "q/s", "q/s (CPU)"], search_rows
    )
    rep.heading("Speed ratio (rank_bm25 time / bm25s time, same queries)")
    rep.table(
        ["corpus", "queries", "search, best", "search, median", "search, CPU", "index build, best"],
        ratio_rows,
    )
    rep.heading("Agreement between the backends (top-10)")
    agree_rows = []
    for res in results:
        a = res["agree"]
        agree_rows.append(
            [
                res["label"],
                res["n_rb"],
                f"{a['overlap@10']:.4f}",
                f"{a['top1_identical']:.4f}",
                f"{a['top10_identical']:.4f}",
                f"{a['max_abs_score_diff']:.2g}",
                f"{a['hits_a']:.1f}",
                f"{a['hits_b']:.1f}",
            ]  # type: ignore[index]
        )
    rep.table(
        [
            "corpus",
            "queries",
            "overlap@10",
            "identical top-1",
            "identical top-10",
            "max abs score diff",
            "hits/query bm25s",
            "hits/query rank_bm25",
        ],
        agree_rows,
    )
    rep.heading(f"Quality on {snap.name} ({args.split}, pytrec_eval)")
    rep.para(
        f"Over {len(eval_qids)} queries (a query without results counts 0). pytrec_eval is given rank-derived scores "
        "so that it keeps ablate's order (trec_eval would break score ties by document id descending)."
    )
    rep.table(
        ["impl", "nDCG@10", "recall@100"],
        [[i, f"{quality[i]['ndcg@10']:.4f}", f"{quality[i]['recall@100']:.4f}"] for i in IMPLS],
    )
    rep.emit(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
