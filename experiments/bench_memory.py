"""Benchmark: peak memory (RSS high-water mark) of each pipeline stage on SciFact, one fresh subprocess per stage.

    /work/venv/bin/python experiments/bench_memory.py                   # about 3 minutes when the machine is shared
    /work/venv/bin/python experiments/bench_memory.py --dense-sample 500
    /work/venv/bin/python experiments/bench_memory.py --stages corpus,bm25s,rrf

Each stage runs in its own Python process, so no stage inherits another's allocations or imported libraries. Inside
a stage the work is split into steps (load the inputs, import the libraries, build, search, ...). Before each step
the process's peak RSS is reset (``/proc/self/clear_refs`` = 5, Linux >= 4.0) so each step gets its own high-water
mark (``VmHWM``); where the reset is refused the step shows the process-wide ``ru_maxrss`` instead (marked *).

Columns: RSS before the step, peak RSS during it, ``peak - before`` (what the step needed on top of what the process
already held), RSS after it (what it kept), seconds. Caveat: memory an earlier step freed but the allocator kept can
be reused without raising RSS, so a step's delta can understate its own need; the stage's process peak is exact.

Stages (SciFact, 5,183 one-chunk documents, 300 test queries, depth 100):

* ``baseline``: the interpreter with numpy and ablate imported.
* ``corpus``: ``load_corpus`` (read, validate, chunk, fingerprint).
* ``bm25s`` / ``rank_bm25``: index build, then search of all test queries.
* ``dense-model``: import torch/sentence-transformers, load all-MiniLM-L6-v2 and encode one query.
* ``dense``: ``DenseIndex`` (the dense stage's engine) over ``--dense-sample`` chunks with a
  ``SentenceTransformerEncoder`` (model load + encode + FAISS IndexFlatIP; no cache),
  then search of all test queries (query encoding + FAISS).
* ``rrf``: RRF (k=60, window=100) of two BM25 runs of all test queries at depth 100 (bm25s without stemming and with
  Porter; prepared by an unmeasured helper process and read from JSON, as a stand-in for BM25 + dense — fusion only
  sees ranked ids).
* ``eval`` / ``pytrec_eval``: ``ablate.evaluation.evaluate`` (default settings) / pytrec_eval (ndcg_cut, recall,
  recip_rank) of that BM25 run.
* ``rerank`` (only if ``ablate.stages.rerank.cross_encoder`` imports): ``CrossEncoderScorer`` (the rerank stage's
  engine) scoring ``--rerank-queries`` x
  ``--rerank-depth`` pairs at max_length 256, no cache. No real cross-encoder is available offline, so the helper
  process saves the bundled MiniLM with a fresh 1-logit classification head (random: the scores mean nothing; the
  architecture and size match a MiniLM-L6 cross-encoder, which is what memory depends on).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _common import Report, dataset_path, machine_facts, reset_peak, say, status_kb

STAGES = (
    "baseline",
    "corpus",
    "bm25s",
    "rank_bm25",
    "dense-model",
    "dense",
    "rrf",
    "eval",
    "pytrec_eval",
    "rerank",
)


# --------------------------------------------------------------------------------------------------------------------
# Inside a stage process


class Marks:
    """Per-step RSS figures (KiB) of this process."""

    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []
        self.process_peak_kb = status_kb("VmHWM")
        self.startup_kb = status_kb("VmHWM")  # interpreter + top-level imports

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        gc.collect()
        before = status_kb("VmRSS")
        self.process_peak_kb = max(self.process_peak_kb, status_kb("VmHWM"))
        exact = reset_peak()
        t0 = time.perf_counter()
        yield
        seconds = time.perf_counter() - t0
        peak = status_kb("VmHWM") if exact else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        gc.collect()
        after = status_kb("VmRSS")
        self.process_peak_kb = max(self.process_peak_kb, peak)
        self.steps.append(
            {
                "step": name,
                "before_kb": before,
                "peak_kb": peak,
                "after_kb": after,
                "seconds": seconds,
                "exact": exact,
            }
        )


def _snapshot(args: argparse.Namespace):
    from ablate.data.corpus import load_corpus

    return load_corpus(dataset_path(args.dataset))


def _queries(snap, args: argparse.Namespace):
    return [snap.queries[q] for q in snap.split_qids(args.split)]


def _read_run(path: Path, name: str):
    from ablate.data.types import Hit, Run

    data = json.loads(path.read_text())
    return Run(name, {q: [Hit(c, d, s) for c, d, s in hits] for q, hits in data.items()}, {})


def run_stage(stage: str, args: argparse.Namespace, prep: Path) -> dict[str, Any]:
    import numpy as np  # noqa: F401  (part of the baseline every stage shares)

    import ablate  # noqa: F401

    m = Marks()
    info: dict[str, Any] = {}
    if stage == "baseline":
        pass
    elif stage == "corpus":
        with m.step("load_corpus (read, validate, chunk none, fingerprint)"):
            snap = _snapshot(args)
        info["chunks"] = len(snap.chunks)
    elif stage in ("bm25s", "rank_bm25"):
        from ablate.stages.retrievers.bm25 import BM25Index
        from ablate.stages.text.tokenize import Tokenizer

        with m.step("load_corpus"):
            snap = _snapshot(args)
            queries = _queries(snap, args)
        with m.step(f"import {stage}"):
            __import__(stage)
        with m.step(f"index build ({len(snap.chunks):,} chunks, tokenizing included)"):
            r = BM25Index(snap.chunks, Tokenizer(language=snap.language), impl=stage)
        with m.step(f"search {len(queries)} queries x {args.depth}"):
            r.search(queries, args.depth)
        info["vocab"] = r.stats["vocab_size"]
    elif stage == "dense-model":
        with m.step("import torch, sentence_transformers, faiss"):
            import faiss  # noqa: F401
            import sentence_transformers  # noqa: F401
            import torch  # noqa: F401
        from ablate.stages.text.encoders import SentenceTransformerEncoder

        with m.step("load all-MiniLM-L6-v2 + encode 1 query"):
            SentenceTransformerEncoder(model=args.model, cache=None).encode_queries(
                ["what causes memory use?"]
            )
    elif stage == "dense":
        with m.step("load_corpus"):
            snap = _snapshot(args)
            queries = _queries(snap, args)
            n = len(snap.chunks) if args.dense_sample <= 0 else min(args.dense_sample, len(snap.chunks))
            chunks = snap.chunks[:: max(1, len(snap.chunks) // n)][:n]
        with m.step("import torch, sentence_transformers, faiss"):
            import faiss  # noqa: F401
            import sentence_transformers  # noqa: F401
            import torch  # noqa: F401
        from ablate.stages.retrievers.dense import DenseIndex
        from ablate.stages.text.encoders import SentenceTransformerEncoder

        with m.step(f"DenseIndex build: model load + encode {n} chunks + IndexFlatIP (no cache)"):
            enc = SentenceTransformerEncoder(model=args.model, cache=None, max_seq_length=args.max_seq_length)
            r = DenseIndex(chunks, enc)
        with m.step(f"search {len(queries)} queries x {args.depth} (query encoding + FAISS)"):
            r.search(queries, args.depth)
        info["torch_threads"] = torch.get_num_threads()
    elif stage == "rrf":
        from ablate.stages.fusion.rrf import rrf

        with m.step("read 2 runs from JSON"):
            runs = [
                _read_run(prep / "run_plain.json", "bm25"),
                _read_run(prep / "run_porter.json", "bm25-porter"),
            ]
        with m.step(f"rrf k=60 window=100 ({len(runs[0])} queries, 2 runs)"):
            fused = rrf(runs, k=60.0, window=100)
        info["fused_hits_per_query"] = sum(len(h) for h in fused.results.values()) / max(1, len(fused))
    elif stage in ("eval", "pytrec_eval"):
        with m.step("load_corpus + read 1 run from JSON"):
            snap = _snapshot(args)
            run = _read_run(prep / "run_plain.json", "bm25")
            qrels = snap.split_qrels(args.split)
            qids = snap.split_qids(args.split)
        if stage == "eval":
            with m.step("import ablate.evaluation (pandas, ...)"):
                from ablate.evaluation import evaluate

            with m.step(f"ablate evaluate (default settings, {len(qids)} queries x {args.depth})"):
                res = evaluate(run, qrels, qids, chunk_to_doc=snap.chunk_to_doc)
            info["ndcg@10"] = float(res.per_query["ndcg@10"].mean())
        else:
            with m.step("import pytrec_eval"):
                import pytrec_eval

            with m.step(f"pytrec_eval ndcg_cut/recall/recip_rank ({len(qids)} queries x {args.depth})"):
                trec_run = {
                    q: {h.doc_id: float(args.depth - i) for i, h in enumerate(hs)}
                    for q, hs in run.results.items()
                }
                ev = pytrec_eval.RelevanceEvaluator(
                    {q: qrels.judgements[q] for q in qids}, {"ndcg_cut.10,100", "recall.10,100", "recip_rank"}
                )
                ev.evaluate(trec_run)
    elif stage == "rerank":
        with m.step("load_corpus + read 1 run from JSON"):
            snap = _snapshot(args)
            run = _read_run(prep / "run_plain.json", "bm25")
            qids = snap.split_qids(args.split)[: args.rerank_queries]
            run.results = {q: run.results[q] for q in qids}
        with m.step("import torch, sentence_transformers"):
            import sentence_transformers  # noqa: F401
            import torch  # noqa: F401
        from ablate.stages.rerank.cross_encoder import CrossEncoderScorer

        with m.step(f"rerank {len(qids)} queries x top {args.rerank_depth} (model load included, no cache)"):
            rr = CrossEncoderScorer(str(prep / "cross-encoder"), cache=None, max_length=256)
            rr.rerank(run, {q: snap.queries[q].text for q in qids}, snap.chunk_text, args.rerank_depth)
        info["pairs_scored"] = rr.stats["pairs_scored"]
    else:
        raise SystemExit(f"error: unknown stage {stage!r}; valid: {', '.join(STAGES)}")
    return {
        "stage": stage,
        "startup_kb": m.startup_kb,
        "process_peak_kb": m.process_peak_kb,
        "steps": m.steps,
        "info": info,
    }


def prepare(args: argparse.Namespace, prep: Path, need_rerank: bool) -> None:
    """Unmeasured helper process: the BM25 runs that rrf/eval/rerank read, and the cross-encoder checkpoint."""
    from ablate.stages.retrievers.bm25 import BM25Index
    from ablate.stages.text.tokenize import Tokenizer

    snap = _snapshot(args)
    queries = _queries(snap, args)
    for name, stemmer in (("run_plain.json", None), ("run_porter.json", "porter")):
        r = BM25Index(snap.chunks, Tokenizer(language=snap.language, stemmer=stemmer))
        run = r.search(queries, args.depth)
        (prep / name).write_text(
            json.dumps({q: [[h.chunk_id, h.doc_id, h.score] for h in hs] for q, hs in run.results.items()})
        )
    if need_rerank:
        import torch
        from sentence_transformers import CrossEncoder

        from ablate.stages.text.models import resolve_model

        torch.manual_seed(0)
        base = resolve_model(args.model, kind="encoder").path
        ce = CrossEncoder(base, num_labels=1, device="cpu")  # random 1-logit head: for memory figures only
        ce.save(str(prep / "cross-encoder"))


# --------------------------------------------------------------------------------------------------------------------
# The driver


def _child(args: argparse.Namespace, extra: list[str]) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        *extra,
        "--dataset",
        args.dataset,
        "--split",
        args.split,
        "--model",
        args.model,
        "--depth",
        str(args.depth),
        "--dense-sample",
        str(args.dense_sample),
        "--max-seq-length",
        str(args.max_seq_length),
        "--rerank-queries",
        str(args.rerank_queries),
        "--rerank-depth",
        str(args.rerank_depth),
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Peak RSS per pipeline stage, one subprocess per stage (see the module docstring).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__,
    )
    ap.add_argument("--dataset", default="scifact")
    ap.add_argument("--split", default="test")
    ap.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated, from: {', '.join(STAGES)}")
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument(
        "--dense-sample", type=int, default=128, help="chunks encoded by the dense stage (0 = all)"
    )
    ap.add_argument("--max-seq-length", type=int, default=256)
    ap.add_argument("--rerank-queries", type=int, default=10)
    ap.add_argument("--rerank-depth", type=int, default=10)
    ap.add_argument(
        "--out", default=None, help="Markdown output (default experiments/results/bench_memory.md)"
    )
    ap.add_argument("--_stage", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--_prep", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--_prep-rerank", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args._stage:  # inside a stage process: one JSON line on stdout
        print(json.dumps(run_stage(args._stage, args, Path(args._prep))))
        return 0
    if args._prep and not args._stage:
        prepare(args, Path(args._prep), args._prep_rerank)
        return 0

    stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    bad = [s for s in stages if s not in STAGES]
    if bad:
        print(f"error: unknown stage(s) {', '.join(bad)}; valid: {', '.join(STAGES)}", file=sys.stderr)
        return 2
    notes: list[str] = []
    if "rerank" in stages:
        try:
            import ablate.stages.rerank.cross_encoder  # noqa: F401
        except Exception as e:  # the module is optional for this benchmark
            stages.remove("rerank")
            notes.append(
                f"rerank stage skipped: `import ablate.stages.rerank.cross_encoder` failed ({type(e).__name__}: {e})."
            )
    facts = machine_facts(["sentence-transformers", "faiss-cpu", "bm25s", "rank-bm25", "pytrec-eval-terrier"])

    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ablate-bench-memory-") as tmp:
        if {"rrf", "eval", "pytrec_eval", "rerank"} & set(stages):
            say(
                "preparing inputs (BM25 runs" + (", cross-encoder checkpoint)" if "rerank" in stages else ")")
            )
            p = _child(args, ["--_prep", tmp] + (["--_prep-rerank"] if "rerank" in stages else []))
            if p.returncode != 0:
                print(p.stderr[-3000:], file=sys.stderr)
                return 1
        for stage in stages:
            say(f"stage {stage} ...")
            t0 = time.perf_counter()
            p = _child(args, ["--_stage", stage, "--_prep", tmp])
            if p.returncode != 0:
                print(p.stderr[-3000:], file=sys.stderr)
                notes.append(f"stage {stage} failed (exit {p.returncode}); see stderr.")
                continue
            res = json.loads(p.stdout.strip().splitlines()[-1])
            res["wall"] = time.perf_counter() - t0
            results.append(res)
            say(f"  process peak {res['process_peak_kb'] / 1024:.0f} MB in {res['wall']:.1f}s")

    def mb(kb: float) -> str:
        return f"{kb / 1024:.1f}"

    summary, detail = [], []
    for res in results:
        steps = res["steps"]
        top = max(steps, key=lambda s: s["peak_kb"] - s["before_kb"]) if steps else None
        summary.append(
            [
                res["stage"],
                mb(res["startup_kb"]),
                mb(res["process_peak_kb"]),
                mb(res["process_peak_kb"] - res["startup_kb"]),
                top["step"] if top else "(imports only)",
                mb(top["peak_kb"] - top["before_kb"]) if top else "",
                f"{res['wall']:.1f}",
            ]
        )
        for s in steps:
            detail.append(
                [
                    res["stage"],
                    s["step"] + ("" if s["exact"] else " *"),
                    mb(s["before_kb"]),
                    mb(s["peak_kb"]),
                    mb(s["peak_kb"] - s["before_kb"]),
                    mb(s["after_kb"]),
                    f"{s['seconds']:.2f}",
                ]
            )
    rep = Report(
        "memory",
        "Peak memory per pipeline stage (RSS high-water marks, one subprocess per stage)",
        f"Dataset {args.dataset} ({args.split} queries, depth {args.depth}); dense stage over "
        f"{args.dense_sample if args.dense_sample > 0 else 'all'} chunks at max_seq_length {args.max_seq_length}. "
        "MB = MiB. RSS is not shared with other processes' load, so these figures do not drift like timings do.",
    )
    rep.heading("Machine")
    rep.facts(facts)
    rep.heading("Per stage")
    rep.para(
        "`startup` = the stage process after importing numpy and ablate (before any step); `process peak` = its "
        "highest RSS; `peak - startup` = what the stage added; `largest step` = the step with the largest "
        "peak - before."
    )
    rep.table(
        [
            "stage",
            "startup MB",
            "process peak MB",
            "peak - startup MB",
            "largest step",
            "step delta MB",
            "wall s",
        ],
        summary,
        "lrrrlrr",
    )
    rep.heading("Per step (peak reset before each step)")
    rep.table(
        ["stage", "step", "before MB", "peak MB", "peak - before MB", "after MB", "s"], detail, "llrrrrr"
    )
    info_lines = [
        f"{r['stage']}: " + ", ".join(f"{k}={v}" for k, v in r["info"].items()) for r in results if r["info"]
    ]
    if info_lines:
        rep.para("Stage facts: " + "; ".join(info_lines) + ".")
    for n in notes:
        rep.para(n)
    rep.emit(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
