"""Benchmark: ablate.evaluation.evaluate vs pytrec_eval on the same synthetic input, values checked.

    python experiments/bench_eval.py --chunked       # 100k queries x 100 results (results/bench_eval.md)
    python experiments/bench_eval.py --queries 2000  # quick
    python experiments/bench_eval.py --unjudged-export --queries 1000 --depth 100  # the unjudged CSV, two ways

Generates ``--queries`` queries with ``--depth`` distinct documents each (strictly decreasing scores, so no tie rule
is involved) and graded qrels (0-3; some judged documents are not retrieved; every query has a relevant document).
Both evaluators start from the same generated data already in memory, each in the form its API takes, and nothing is
precomputed for either. Timed for pytrec_eval: ``RelevanceEvaluator(qrels_dict, measures)`` (it copies the qrels
into its own structures) + ``.evaluate(run_dict)`` (it copies the run, sorts it by score and scores it), returning a
dict of dicts. Timed for ours: ``evaluate(run, qrels, qids, settings)`` from a coded ``Run`` and ``Qrels`` to the
finished ``EvalResult``. The coded run is the form our retrievers (BM25, dense) and the candidate cache hand runs
over: ``Run.from_codes`` over an ``IdTable`` of the generated documents (position = document number), so it carries
integer codes beside its ``Hit`` lists. Building the table, its cached unit codes and byte index, and the run is not
timed, just as generating pytrec_eval's dicts is not. Timed: checking that the codes describe the run, the unit codes
of every result, mapping every judged id (a string) into the table's code space, the per-query placement, all 7
metrics x K per query, the per-query DataFrame, the means and the accounting. The same evaluation from a run of
plain ``Hit`` objects (no codes: every id is read as bytes) is timed beside it. Measures: ``ndcg_cut``, ``recall`` at
the same cutoffs and ``recip_rank`` (no cutoff in trec_eval; equal to our ``rr@depth`` because every run has exactly
``depth`` results). Ours runs with linear gain (trec_eval's) for the comparison; the default exponential gain and the
plain Python reference placement (``vectorised=False``) are timed too. Memory: the peak of Python and numpy
allocations during one evaluation (tracemalloc, which numpy reports to), divided by the number of queries, and the
evaluate call's largest block of working arrays; measured in a separate, untimed pass.
``--chunked`` also times a chunk-level run (3 chunks per document, evaluated at unit doc, both budgets), which
pytrec_eval cannot express. Prints the ratio, our throughput and the largest absolute difference.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import time
import tracemalloc

import numpy as np

from ablate.data.types import Hit, IdTable, Qrels, Run, RunCodes
from ablate.evaluation import EvalSettings, evaluate

N_DOCS = 1_000_003  # prime, so base + step * j (mod N_DOCS) is distinct for j < depth when 0 < step < N_DOCS


def generate(nq: int, depth: int, judged: int, seed: int):
    rng = np.random.default_rng(seed)
    base = rng.integers(0, N_DOCS, nq)
    step = rng.integers(1, 10_000, nq)
    docs = (
        base[:, None] + step[:, None] * np.arange(depth + 5)[None, :]
    ) % N_DOCS  # +5 judged, never retrieved
    noise = rng.random((nq, depth)) * 0.5
    scores = (depth - np.arange(depth))[None, :] + noise  # strictly decreasing along the list
    jpos = np.argsort(rng.random((nq, depth + 5)), axis=1)[:, :judged]
    grades = rng.integers(0, 4, (nq, judged))
    grades[:, 0] = np.maximum(grades[:, 0], 1)
    qids = [f"q{i}" for i in range(nq)]
    run_results: dict[str, list[Hit]] = {}
    trec_run: dict[str, dict[str, float]] = {}
    judgements: dict[str, dict[str, int]] = {}
    for i, q in enumerate(qids):
        ids = [f"d{d}" for d in docs[i].tolist()]
        sc = scores[i].tolist()
        run_results[q] = [Hit(d, d, s) for d, s in zip(ids[:depth], sc, strict=True)]
        trec_run[q] = dict(zip(ids[:depth], sc, strict=True))
        judgements[q] = {ids[p]: g for p, g in zip(jpos[i].tolist(), grades[i].tolist(), strict=True)}
    return (
        qids,
        Run("synthetic", run_results),
        Qrels(judgements, unit="doc"),
        trec_run,
        judgements,
        docs[:, :depth],
    )


def documents_table(per_doc: int) -> IdTable:
    """The generated corpus as a chunk table: document ``n`` is ``d<n>``; with ``per_doc`` > 1 its chunks
    ``d<n>#p<j>`` sit at positions ``n * per_doc + j``."""
    docs = [f"d{n}" for n in range(N_DOCS)]
    if per_doc == 1:
        return IdTable(docs, docs, [None] * N_DOCS)
    chunk_ids = [f"{d}#p{j}" for d in docs for j in range(per_doc)]
    return IdTable(chunk_ids, [d for d in docs for _ in range(per_doc)], [None] * len(chunk_ids))


def coded(run: Run, table: IdTable, codes: np.ndarray, per_doc: int = 1) -> Run:
    """``run`` as our retrievers hand it over: ``Run.from_codes`` (Hit lists built from the codes), same scores.
    ``codes`` are document numbers (query x rank); a chunk run takes chunk ``j`` of each document as
    :func:`chunked` does."""
    qids = list(run.results)
    n = codes.shape[1]
    if per_doc > 1:
        cols = np.arange(n)
        codes = codes[:, cols // per_doc] * per_doc + cols % per_doc
    scores = np.array([[h.score for h in run.results[q]] for q in qids], dtype=np.float64)
    offsets = np.arange(len(qids) + 1, dtype=np.int64) * n
    return Run.from_codes(
        run.name + "-coded", RunCodes(table, qids, offsets, codes.reshape(-1), scores.reshape(-1))
    )


def chunked(run: Run, per_doc: int = 3) -> Run:
    """Same size, chunk level: each document contributes ``per_doc`` consecutive chunks."""
    out = {}
    for q, hits in run.results.items():
        n = len(hits)
        out[q] = [
            Hit(f"{h.doc_id}#p{j}", h.doc_id, h.score - j * 1e-3)
            for h in hits[: -(-n // per_doc)]
            for j in range(per_doc)
        ][:n]
    return Run("synthetic-chunks", out)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def peak_bytes(fn) -> int:
    """Peak bytes allocated (Python objects and numpy arrays) while ``fn`` runs, above what was allocated before."""
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def timed(fn):
    """(wall seconds, CPU seconds of this process, value). CPU time is the fairer figure on a shared machine."""
    gc.collect()
    t, c = time.perf_counter(), time.process_time()
    value = fn()
    return time.perf_counter() - t, time.process_time() - c, value


def unjudged_export(args: argparse.Namespace) -> int:
    """Time the unjudged export two ways on one evaluation of the generated Hit run: ``EvalResult.unjudged_csv()``
    (the text written straight from the rows) against building the DataFrame and writing it (``tables.text_csv``,
    what ``unjudged_csv`` falls back to when a field needs quoting). Best of ``--repeat``; the texts must be equal."""
    from ablate.tables import text_csv

    qids, run, qrels, *_ = generate(args.queries, args.depth, args.judged, args.seed)
    ks = tuple(int(k) for k in args.ks.split(","))
    res = evaluate(run, qrels, qids, EvalSettings(ks=ks))

    def rows() -> str:
        res._unjudged = None
        return res.unjudged_csv()

    def frame() -> str:
        res._unjudged = None
        return text_csv(res.unjudged)

    best = {"rows": float("inf"), "frame": float("inf")}
    texts = {}
    for _ in range(args.repeat):
        for name, fn in (("rows", rows), ("frame", frame)):
            _, cpu, texts[name] = timed(fn)
            best[name] = min(best[name], cpu)
    assert texts["rows"] == texts["frame"]
    print(
        f"unjudged export, {len(res.unjudged):,} rows ({args.queries} queries x {args.depth} results), CPU s, "
        f"best of {args.repeat}: from the rows {best['rows']:.3f}, DataFrame then text {best['frame']:.3f} "
        f"({best['frame'] / best['rows']:.1f}x); texts equal; load average {os.getloadavg()[0]:.1f}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=100_000)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--judged", type=int, default=20, help="judgements per query (some not retrieved)")
    ap.add_argument("--ks", default="1,3,5,10,20,50,100")
    ap.add_argument("--repeat", type=int, default=3, help="best of N interleaved timings")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--chunked", action="store_true", help="also time a chunk-level run evaluated at unit doc"
    )
    ap.add_argument(
        "--unjudged-export",
        action="store_true",
        help="only time the unjudged export (EvalResult.unjudged_csv) against building a DataFrame",
    )
    args = ap.parse_args(argv)
    if args.unjudged_export:
        return unjudged_export(args)
    import pytrec_eval

    ks = tuple(int(k) for k in args.ks.split(","))
    if max(ks) != args.depth:
        print(
            f"note: max K {max(ks)} != depth {args.depth}; recip_rank is compared with rr@{max(ks)}",
            file=sys.stderr,
        )
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, pytrec_eval "
        f"{getattr(pytrec_eval, '__version__', '?')}, {platform.machine()}, {cpu_model()}, "
        f"{os.cpu_count()} CPUs, load average at start {os.getloadavg()[0]:.1f}"
    )
    t = time.perf_counter()
    qids, run, qrels, trec_run, trec_qrels, doc_codes = generate(
        args.queries, args.depth, args.judged, args.seed
    )
    print(
        f"generated {args.queries} queries x {args.depth} results, {args.judged} judgements/query "
        f"in {time.perf_counter() - t:.1f}s"
    )
    t = time.perf_counter()
    table = documents_table(1)
    crun = coded(run, table, doc_codes)
    warm = evaluate(
        crun, qrels, qids[:10], EvalSettings(ks=ks)
    )  # builds the table's cached unit codes and index
    print(
        f"coded run over a {len(table):,}-document table built in {time.perf_counter() - t:.1f}s (not timed)"
    )
    del warm

    linear = EvalSettings(ks=ks, gain="linear")
    kstr = ",".join(map(str, ks))
    measures = {f"ndcg_cut.{kstr}", f"recall.{kstr}", "recip_rank"}
    jobs = {
        "pytrec_eval (ndcg_cut, recall, recip_rank)": lambda: pytrec_eval.RelevanceEvaluator(
            trec_qrels, measures
        ).evaluate(trec_run),
        "ablate evaluate, coded run, linear gain": lambda: evaluate(crun, qrels, qids, linear),
        "ablate evaluate, coded run, exponential gain": lambda: evaluate(
            crun, qrels, qids, EvalSettings(ks=ks)
        ),
        "ablate evaluate, from Hit objects, linear gain": lambda: evaluate(run, qrels, qids, linear),
        "ablate, Python reference placement": lambda: evaluate(run, qrels, qids, linear, vectorised=False),
    }
    if args.chunked:
        t = time.perf_counter()
        hrun_c = chunked(run)
        ctable = documents_table(3)
        crun_c = coded(run, ctable, doc_codes, per_doc=3)
        evaluate(crun_c, qrels, qids[:10], EvalSettings(ks=ks, unit="doc"))
        print(
            f"chunk runs and a {len(ctable):,}-chunk table built in {time.perf_counter() - t:.1f}s (not timed)"
        )
        for b in ("chunks", "docs"):
            jobs[f"ablate, coded chunk run at unit doc, budget={b}"] = lambda b=b: evaluate(
                crun_c, qrels, qids, EvalSettings(ks=ks, unit="doc", budget=b)
            )
            jobs[f"ablate, Hit chunk run at unit doc, budget={b}"] = lambda b=b: evaluate(
                hrun_c, qrels, qids, EvalSettings(ks=ks, unit="doc", budget=b)
            )
    best: dict[str, tuple[float, float]] = {}
    every: dict[str, list[tuple[float, float]]] = {}
    values: dict[str, object] = {}
    for _ in range(args.repeat):  # interleaved, so both evaluators see the same machine load
        for name, fn in jobs.items():
            wall, cpu, values[name] = timed(fn)
            w0, c0 = best.get(name, (float("inf"), float("inf")))
            best[name] = (min(w0, wall), min(c0, cpu))
            every.setdefault(name, []).append((wall, cpu))

    ref = values["pytrec_eval (ndcg_cut, recall, recip_rank)"]
    pq = values["ablate evaluate, coded run, linear gain"].per_query  # type: ignore[attr-defined]
    worst = 0.0
    for k in ks:
        for ours_col, ref_key in ((f"ndcg@{k}", f"ndcg_cut_{k}"), (f"recall@{k}", f"recall_{k}")):
            a = pq[ours_col].to_numpy()
            b = np.array([ref[q][ref_key] for q in qids])  # type: ignore[index]
            worst = max(worst, float(np.max(np.abs(a - b))))
    a = pq[f"rr@{max(ks)}"].to_numpy()
    b = np.array([ref[q]["recip_rank"] for q in qids])  # type: ignore[index]
    worst = max(worst, float(np.max(np.abs(a - b))))

    n = args.queries
    print(
        f"best of {args.repeat}, interleaved (each column's own best; load average now {os.getloadavg()[0]:.1f})"
    )
    print(f"{'evaluator':<52}{'wall s':>9}{'CPU s':>9}{'queries/s (CPU)':>17}")
    for name, (wall, cpu) in best.items():
        print(f"{name:<52}{wall:>9.2f}{cpu:>9.2f}{n / cpu:>17,.0f}")
    print("all repeats (wall s / CPU s):")
    for name, runs in every.items():
        print(f"  {name:<50}" + "  ".join(f"{w:.2f}/{c:.2f}" for w, c in runs))
    tw, tc = best["pytrec_eval (ndcg_cut, recall, recip_rank)"]
    ow, oc = best["ablate evaluate, coded run, linear gain"]
    ew, ec = best["ablate evaluate, coded run, exponential gain"]
    hw, hc = best["ablate evaluate, from Hit objects, linear gain"]
    print(
        f"pytrec_eval time / ours (coded run): {tc / oc:.2f}x CPU, {tw / ow:.2f}x wall (linear); "
        f"{tc / ec:.2f}x CPU, {tw / ew:.2f}x wall (exponential)"
    )
    print(f"pytrec_eval time / ours (from Hit objects, linear): {tc / hc:.2f}x CPU, {tw / hw:.2f}x wall")
    print(f"throughput (ours, linear, CPU): {n / oc:,.0f} queries/s = {n * args.depth / oc:,.0f} results/s")
    print(f"max |ours - pytrec_eval| over {len(ks) * 2 + 1} measures x {n} queries: {worst:.3g}")
    hit_pq = values["ablate evaluate, from Hit objects, linear gain"].per_query  # type: ignore[attr-defined]
    ref_pq = values["ablate, Python reference placement"].per_query  # type: ignore[attr-defined]
    same = pq.equals(hit_pq) and hit_pq.equals(ref_pq)
    print(
        f"coded run == from Hit objects == Python reference placement (all {pq.shape[1]} columns, "
        f"DataFrame.equals): {same}"
    )
    if args.chunked:
        for b in ("chunks", "docs"):
            a = values[f"ablate, coded chunk run at unit doc, budget={b}"]
            h = values[f"ablate, Hit chunk run at unit doc, budget={b}"]
            same_c = a.per_query.equals(h.per_query) and a.accounting == h.accounting  # type: ignore[attr-defined]
            print(
                f"chunk run, budget={b}: coded == from Hit objects (per-query table and accounting): {same_c}"
            )
            same = same and same_c
    del values, ref, ref_pq, hit_pq, pq
    print("memory (separate untimed pass, tracemalloc peak of one evaluation / queries):")
    mem_jobs = {
        "ablate evaluate, coded run, linear gain": lambda: evaluate(crun, qrels, qids, linear),
        "ablate evaluate, from Hit objects, linear gain": lambda: evaluate(run, qrels, qids, linear),
    }
    if args.chunked:
        mem_jobs["ablate, coded chunk run at unit doc, budget=chunks"] = lambda: evaluate(
            crun_c, qrels, qids, EvalSettings(ks=ks, unit="doc", budget="chunks")
        )
    for name, fn in mem_jobs.items():
        peak = peak_bytes(fn)
        print(f"  {name:<50}{peak / n:>10,.0f} bytes/query (peak {peak / 2**20:,.0f} MiB)")
    ok = worst <= 1e-9 and same
    print("values agree (<= 1e-9)" if ok else "VALUES DISAGREE")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
