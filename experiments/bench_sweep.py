"""Warm sweep vs one warm run, side by side: what a 12-cell C sweep costs once candidates and embeddings are cached.

    python experiments/bench_sweep.py [--corpus scifact] [--split train] [--rounds 2]

Runs, through the real entry point and a throwaway MLflow store, alternating order per round:
  single: python -m ablate corpus=<c> corpus.split=<s> variant=C
  sweep:  python -m ablate -m corpus=<c> corpus.split=<s> variant=C rrf.k=1,10,60,100 retrieval.window=20,50,100
          (with --confirm-test when <s> is the held-out split test)
after one warm-up sweep that fills the cache. Prints wall seconds (median over rounds) and the ratio sweep / single,
and also the in-process pipeline seconds per job (fusion + evaluation + logging), and writes
experiments/results/bench_sweep.md.

The warm-up also stores what a sweep computes from per-query scores (bootstrap intervals, paired tests, report
figures; kept by content in the cache), so the timed sweeps repeat a sweep whose runs did not change. To show what a
sweep with new settings pays, one more sweep with rrf.k values not run before (same windows: candidates still cached,
statistics and figures computed afresh) is timed once at the end (``--fresh-k``).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def timed(args: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "ablate", *args],
        cwd=REPO,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="scifact")
    ap.add_argument("--split", default="train")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=str(HERE / "results" / "bench_sweep.md"))
    ap.add_argument(
        "--no-breakdown",
        dest="breakdown",
        action="store_false",
        help="skip the per-section timing of one more sweep",
    )
    ap.add_argument(
        "--fresh-k", default="2,11,61,101", help="rrf.k values of the fresh-settings sweep ('' = skip)"
    )
    a = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    common = [
        f"corpus={a.corpus}",
        f"corpus.split={a.split}",
        "variant=C",
        f"tracking.uri=sqlite:///{tmp}/mlflow.db",
        "progress=false",
    ]
    single = common
    sweep = ["-m", *common, "rrf.k=1,10,60,100", "retrieval.window=20,50,100"]
    # a timing benchmark, not tuning; an unconfirmed sweep on the held-out split is refused
    if a.split == "test":
        sweep.append("--confirm-test")
    load0 = os.getloadavg()[0]
    print("warm-up (fills the candidate and embedding caches, creates the store) ...", flush=True)
    warm = timed(sweep, env)
    times: dict[str, list[float]] = {"single": [], "sweep": []}
    for r in range(a.rounds):
        order = ["single", "sweep"] if r % 2 == 0 else ["sweep", "single"]
        for name in order:
            times[name].append(timed(single if name == "single" else sweep, env))
            print(f"round {r + 1}: {name} {times[name][-1]:.1f} s", flush=True)
    s, w = statistics.median(times["single"]), statistics.median(times["sweep"])
    fresh = None
    if a.fresh_k:
        fresh = timed([*sweep[: len(common) + 1], f"rrf.k={a.fresh_k}", *sweep[len(common) + 2 :]], env)
        print(f"fresh-settings sweep (rrf.k={a.fresh_k}): {fresh:.1f} s", flush=True)

    breakdown: list[str] = []
    if a.breakdown:  # one more warm sweep, in its own process, with wall clocks around each section
        out = subprocess.run(
            [
                sys.executable,
                str(HERE / "profile_sweep.py"),
                f"--corpus={a.corpus}",
                f"--split={a.split}",
                "--store",
                str(tmp),
            ],
            cwd=REPO,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        table = out[out.index("12-cell sweep:") :].splitlines()
        breakdown = ["```", *table, "```", ""]
        print("\n".join(table), flush=True)

    from ablate.record import ROLE_SWEEP_PARENT, T_ROLE
    from ablate.tracking import Tracker

    t = Tracker(f"sqlite:///{tmp}/mlflow.db")
    exp = t.experiment_id(a.corpus, create=False)
    if exp is None:
        raise SystemExit(f"error: no experiment {a.corpus!r} in sqlite:///{tmp}/mlflow.db")
    runs = [
        r
        for r in t.find_runs([exp], max_results=2000, newest_first=True)
        if r.tags.get(T_ROLE) != ROLE_SWEEP_PARENT
    ]
    per_job = [r.metrics["time_total_seconds"] for r in runs if "time_total_seconds" in r.metrics]
    last_sweep = [r for r in runs if r.parent][:12]
    enc = sum(r.metrics.get("dense_passages_encoded", 0) for r in last_sweep)
    hits = sum(r.metrics.get("candidate_cache_hits", 0) for r in last_sweep)
    lines = [
        "# Warm sweep vs one warm run",
        "",
        f"Corpus `{a.corpus}`, split `{a.split}`; variant C; sweep = 12 cells (rrf.k 1,10,60,100 × window 20,50,100).",
        f"Measured {time.strftime('%Y-%m-%d %H:%M')} on {os.cpu_count()} cores (load average {load0:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end), Python "
        f"{platform.python_version()}; medians of {a.rounds} alternating rounds after a warm-up sweep of {warm:.0f} s.",
        "",
        "| command | wall seconds (median) | all rounds |",
        "|---|---|---|",
        f"| one warm C run | {s:.1f} | {', '.join(f'{x:.1f}' for x in times['single'])} |",
        f"| warm 12-run sweep | {w:.1f} | {', '.join(f'{x:.1f}' for x in times['sweep'])} |",
        "",
        f"**Ratio sweep / single: {w / s:.2f}×** (12 runs; the goal is ≤ 1.3×).",
        "",
        *(
            [
                f"A sweep with rrf.k values not run before ({a.fresh_k}; windows as above, so candidates come from "
                f"the cache while every run's statistics, the paired tests and the figures are computed afresh), "
                f"timed once: {fresh:.1f} s, {fresh / s:.2f}× the single run.",
                "",
            ]
            if fresh is not None
            else []
        ),
        f"In-process pipeline seconds per job (candidates from cache, fusion, evaluation): median "
        f"{statistics.median(per_job):.2f} s over {len(per_job)} jobs. The last sweep's 12 jobs encoded {enc:.0f} "
        f"passages and served {hits:.0f} candidate lists from the cache.",
        "",
        "Where one more warm sweep's time goes (`python experiments/profile_sweep.py`: the same sweep in-process, "
        "wall clocks around each section, no profiler; indented rows are inside the row above):",
        "",
        *breakdown,
        f"Reproduce: `python experiments/bench_sweep.py --corpus {a.corpus} --split {a.split} --rounds {a.rounds}`",
        "",
    ]
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
