"""Benchmark: wall time of ``python -m <entry point> --help`` for every entry point, and what the heavy libraries cost
to import (what lazy imports keep out of ``--help``).

    python experiments/bench_startup.py                      # this checkout, 5 runs each
    python experiments/bench_startup.py --before 4efd8de     # side by side with the source tree of a git revision
    python experiments/bench_startup.py --runs 9 --no-libraries

Each measurement is a fresh interpreter (``subprocess.run``, output discarded), so it includes Python's own start-up;
``python -c pass`` is measured in the same rounds as the floor. Contenders run interleaved in rounds whose order
alternates (``experiments/_common.py``), and the table gives the median and best wall seconds. ``--before REV``
extracts ``src/`` of that revision (``git archive``) into a temporary folder and runs it with the same interpreter and
``conf/`` beside it, so "before" and "after" share the machine's load; the ratio is before / after.

The heavy-module table imports each library alone (``python -c "import X"``) and reports its median wall time minus
the ``python -c pass`` floor, and whether each entry point's ``--help`` imports it (checked in ``sys.modules`` after
the help path ran, as ``tests/test_startup.py`` does).

``ablate.train_reranker --help`` still imports numpy and the reranker's stage modules (its defaults live in
``ablate.stages.rerank.training``), but not torch or sentence-transformers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from _common import REPO, Report, Timings, interleaved, machine_facts

ENTRY_POINTS = (
    "ablate",
    "ablate.evaluate",
    "ablate.report",
    "ablate.split",
    "ablate.train_reranker",
    "ablate.runs",
)
HEAVY = (
    "torch",
    "sentence_transformers",
    "transformers",
    "faiss",
    "mlflow",
    "hydra",
    "matplotlib.pyplot",
    "scipy.stats",
    "pandas",
    "numpy",
)
MODULES_OF_HELP = """
import contextlib, io, json, runpy, sys
sys.argv = [sys.argv[1], "--help"]
with contextlib.redirect_stdout(io.StringIO()):
    try:
        runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)))
"""


def env_for(src: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(src),
        "OMP_WAIT_POLICY": "PASSIVE",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }


def runner(args: list[str], env: dict[str, str]):
    def run() -> None:
        proc = subprocess.run([sys.executable, *args], env=env, capture_output=True, timeout=600)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.decode()[-500:]}")

    return run


def extract_src(rev: str, into: Path) -> Path:
    """``src/`` and ``conf/`` of git revision ``rev`` under ``into`` (conf beside src, as the package expects)."""
    archive = into / "rev.tar"
    with archive.open("wb") as f:
        subprocess.run(["git", "-C", str(REPO), "archive", rev, "src", "conf"], stdout=f, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def help_modules(module: str, env: dict[str, str]) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-c", MODULES_OF_HELP, module], env=env, capture_output=True, text=True, check=True
    )
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--runs", type=int, default=5, help="rounds (fresh interpreters per contender; default 5)"
    )
    ap.add_argument("--before", metavar="REV", help="also time the entry points of this git revision's src/")
    ap.add_argument("--no-libraries", action="store_true", help="skip the heavy-module import times")
    ap.add_argument(
        "--library-runs", type=int, default=None, help="rounds of the library imports (default --runs)"
    )
    ap.add_argument("--out", help="Markdown output (default experiments/results/bench_startup.md)")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench_startup_"))
    try:
        after_env = env_for(REPO / "src")
        jobs = {"python -c pass": runner(["-c", "pass"], after_env)}
        for m in ENTRY_POINTS:
            jobs[f"{m} --help"] = runner(["-m", m, "--help"], after_env)
        before_env = None
        if args.before:
            before_env = env_for(extract_src(args.before, tmp))
            for m in ENTRY_POINTS:
                jobs[f"{m} --help (before)"] = runner(["-m", m, "--help"], before_env)
        print(f"timing {len(jobs)} commands x {args.runs} rounds ...", file=sys.stderr)
        t = interleaved(jobs, args.runs, log=lambda s: print(s, file=sys.stderr))
        floor = t.median("python -c pass")

        lib_t = Timings()
        if not args.no_libraries:
            lib_jobs = {"python -c pass": runner(["-c", "pass"], after_env)}
            lib_jobs |= {m: runner(["-c", f"import {m}"], after_env) for m in HEAVY}
            print(
                f"timing {len(lib_jobs)} imports x {args.library_runs or args.runs} rounds ...",
                file=sys.stderr,
            )
            interleaved(
                lib_jobs, args.library_runs or args.runs, lib_t, log=lambda s: print(s, file=sys.stderr)
            )

        loaded = {m: help_modules(m, after_env) for m in ENTRY_POINTS}
        loaded_before = {m: help_modules(m, before_env) for m in ENTRY_POINTS} if before_env else {}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def heavy_in(mods: set[str]) -> str:
        found = [h.split(".")[0] for h in HEAVY if h in mods or h.split(".")[0] in mods]
        return ", ".join(dict.fromkeys(found)) or "none"

    report = Report(
        "startup",
        "Start-up: `--help` of every entry point, and the import cost of the heavy libraries",
        __doc__.split("\n\n", 2)[2],
    )
    report.heading("Machine")
    report.facts(
        machine_facts(["sentence-transformers", "mlflow", "hydra-core", "faiss-cpu", "pandas", "scipy"])
    )
    report.heading(f"`python -m <entry point> --help`, wall seconds over {args.runs} fresh interpreters")
    headers = ["command", "median s", "best s", "heavy libraries imported"]
    if args.before:
        headers += [f"before ({args.before}) median s", "before: heavy libraries", "before / after"]
    rows = [["python -c pass (floor)", f"{floor:.3f}", f"{t.best('python -c pass'):.3f}", "none"]]
    rows[0] += ["", "", ""] if args.before else []
    for m in ENTRY_POINTS:
        med = t.median(f"{m} --help")
        row = [f"python -m {m} --help", f"{med:.3f}", f"{t.best(f'{m} --help'):.3f}", heavy_in(loaded[m])]
        if args.before:
            b = t.median(f"{m} --help (before)")
            row += [f"{b:.3f}", heavy_in(loaded_before[m]), f"{b / med:.2f}x"]
        rows.append(row)
    report.table(headers, rows, "lrrl" + ("rlr" if args.before else ""))
    if not args.no_libraries:
        lib_floor = lib_t.median("python -c pass")
        n_lib = args.library_runs or args.runs
        report.heading(f"Importing one library alone, median wall seconds over {n_lib} fresh interpreters")
        report.para(
            f"Floor (`python -c pass`, same rounds): {lib_floor:.3f} s; the last column subtracts it."
        )
        report.table(
            ["import", "median s", "best s", "median - floor s"],
            [
                [
                    f"import {m}",
                    f"{lib_t.median(m):.3f}",
                    f"{lib_t.best(m):.3f}",
                    f"{lib_t.median(m) - lib_floor:.3f}",
                ]
                for m in HEAVY
            ],
            "lrrr",
        )
    report.emit(args.out)


if __name__ == "__main__":
    main()
