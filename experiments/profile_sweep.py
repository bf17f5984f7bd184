"""Where a warm sweep's time goes: ``python -m ablate`` in-process, broken down by section.

    python experiments/profile_sweep.py [--corpus scifact] [--split train] [--single] [--store DIR] [--no-reuse]
    python experiments/profile_sweep.py --cprofile [--out prof.pstats]   # under cProfile, CPU clock
    python experiments/profile_sweep.py --from sweep.prof   # the cProfile breakdown of an existing profile, e.g. of
        python -m cProfile -o sweep.prof -m ablate -m corpus=scifact corpus.split=train variant=C \
            rrf.k=1,10,60,100 retrieval.window=20,50,100 tracking.uri=sqlite:////tmp/x/mlflow.db progress=false

Runs the 12-cell C sweep of experiments/bench_sweep.py (or one C run with ``--single``) against a throwaway MLflow
store (or ``--store DIR``), with the cache of ``$ABLATE_CACHE_DIR`` (warm it first: candidates and embeddings are
not what this measures).

The default mode wraps the functions of each section with a wall clock (no profiler: cProfile slows Python-heavy
code several times and unevenly) and prints seconds and calls per section, and per job. ``--cprofile`` runs under
cProfile with a CPU-time clock instead (robust to other jobs sharing the machine; nested rows are part of the row
above them). :func:`wall_sections` is what ``bench_sweep.py --breakdown`` embeds in its results page.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import importlib
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

#: (label, file suffix, function name): cumulative CPU time of every function matching is summed (``--cprofile``).
SECTIONS: list[tuple[str, str, str]] = [
    ("entry point (everything)", "app/cli.py", "main"),
    (
        "ablate's command-line check (composes every cell)",
        "app/precheck.py",
        "check_settings|check_inputs_of",
    ),
    ("  corpus load (first job's inputs)", "runner/inputs.py", "check_inputs"),
    ("Hydra launcher: compose each job", "config_loader_impl.py", "load_sweep_config"),
    ("jobs (run_job)", "runner/job.py", "run_job"),
    ("  pipeline (run_pipeline)", "runner/pipeline.py", "run_pipeline"),
    ("    candidates + fusion (_rank)", "runner/pipeline.py", "_rank"),
    ("    evaluation (_score)", "runner/pipeline.py", "_score"),
    ("  bootstrap intervals (headline_cis)", "runner/emit/metrics.py", "headline_cis"),
    ("  artifacts (artifacts_for)", "runner/emit/artifacts.py", "artifacts_for"),
    ("  MLflow log_batch (log_run)", "tracking/tracker.py", "log_run"),
    ("  MLflow artifacts (log_files)", "tracking/artifacts.py", "log_files"),
    ("  MLflow run start + end", "tracking/tracker.py", "start|end"),
    ("end of sweep (callback)", "app/callbacks.py", "on_multirun_end"),
    ("  read runs + per_query.csv (fetch_runs)", "study/fetch.py", "fetch_runs"),
    ("  report (build_report)", "study/report/render.py", "build_report"),
]

#: (label, module, attribute path) wrapped with a wall clock in the default mode. Indented rows run inside the
#: row above them.
WALL: list[tuple[str, str, str]] = [
    ("ablate's command-line check: every cell's settings", "ablate.app.precheck", "check_settings"),
    ("  Hydra: compose a set of config-group choices (the plan)", "ablate.app.compose", "compose_whole"),
    ("ablate's command-line check: the inputs (loads the corpus)", "ablate.app.precheck", "check_inputs_of"),
    ("  reuse plan: key and look-up per cell", "ablate.app.reuse_plan", "look_up"),
    ("    check a source's record digest (plan or job)", "ablate.runner.reuse", "check_record"),
    ("reuse: record the planned cells (sweeper)", "ablate.app.reuse_plan", "run_cells"),
    ("  copy one finished run", "ablate.app.reuse_plan", "record_planned"),
    (
        "Hydra: compose a launched job's config (its launcher)",
        "hydra._internal.config_loader_impl",
        "ConfigLoaderImpl.load_sweep_config",
    ),
    ("Hydra: write a job's .hydra/*.yaml", "hydra.core.utils", "_save_config"),
    ("job (Command.run: the planned JobSpec -> run_job)", "ablate.app.command", "Command.run"),
    (
        "config -> JobSpec, stages built (once per cell, in the check)",
        "ablate.app.config",
        "job_from_config",
    ),
    ("  reuse: plan the components (stages bound)", "ablate.runner.job", "planned_components"),
    ("  reuse: cell key", "ablate.runner.job", "cell_key"),
    ("  reuse: find a finished run with the key", "ablate.runner.job", "find_reusable"),
    ("  reuse: record the reused run (copy)", "ablate.runner.job", "record_reuse"),
    ("  candidates from the session + RRF", "ablate.runner.pipeline", "_rank"),
    ("    RRF", "ablate.stages.fusion.rrf", "RRF.fuse"),
    ("  evaluation", "ablate.runner.pipeline", "score_run"),
    ("  metrics + bootstrap intervals (cached by content)", "ablate.runner.job", "metrics_for"),
    ("  artifacts: build the 9 files' text", "ablate.runner.job", "artifacts_for"),
    ("    run.trec text", "ablate.data.types", "Run.to_trec"),
    ("    unjudged.csv text (rows and text)", "ablate.evaluation.result", "EvalResult.unjudged_csv"),
    ("  MLflow: create run", "ablate.tracking", "Tracker.start"),
    ("  MLflow: one log_batch", "ablate.tracking", "Tracker.log_run"),
    ("  MLflow: log the artifacts", "ablate.tracking", "Tracker.log_files"),
    ("  seal the record (read back, hash, log the digest)", "ablate.runner.job", "seal"),
    ("  MLflow: end run", "ablate.tracking", "Tracker.end"),
    ("  MLflow: copy a run's artifacts (reuse)", "ablate.tracking", "Tracker.copy_artifacts"),
    ("end of sweep: summary, report, outcome", "ablate.app.callbacks", "SweepCallback.on_multirun_end"),
    ("  read the runs and per_query.csv", "ablate.study.report.attach", "fetch_runs"),
    ("  build the report (tests, figures cached)", "ablate.study.report.attach", "build_report"),
]


def breakdown(stats: pstats.Stats) -> list[tuple[str, float, int]]:
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, object]] = stats.stats  # type: ignore[attr-defined]
    out = []
    for label, suffix, names in SECTIONS:
        wanted = set(names.split("|"))
        hits = [v for (f, _, fn), v in raw.items() if f.endswith(suffix) and fn in wanted]
        ct, n = sum(v[3] for v in hits), sum(v[1] for v in hits)
        out.append((label, ct, n))
    return out


def _wrap(totals: dict[str, list[float]], label: str, module: str, path: str) -> Callable[[], None]:
    """Wrap ``module.path`` with a wall clock adding into ``totals[label]``; returns the undo. A section whose
    function has moved is said on stderr and left out (its row reads 0)."""
    owner: Any = importlib.import_module(module)
    *parents, name = path.split(".")
    try:
        for p in parents:
            owner = getattr(owner, p)
        fn = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    except (AttributeError, KeyError):
        print(
            f"profile_sweep: {module}.{path} not found; section {label.strip()!r} not timed", file=sys.stderr
        )
        return lambda: None

    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            row = totals.setdefault(label, [0.0, 0.0])
            row[0] += time.perf_counter() - t0
            row[1] += 1

    setattr(owner, name, timed)
    return lambda: setattr(owner, name, fn)


def run_ablate(args: list[str]) -> None:
    """``python -m ablate <args>`` in this process; a clean exit is not an error."""
    from ablate.app.cli import main as ablate_main

    sys.argv = ["ablate", *args]
    try:
        ablate_main()
    except SystemExit as e:
        if e.code not in (None, 0):
            raise


def wall_sections(args: list[str]) -> tuple[float, list[tuple[str, float, int]]]:
    """Run ``python -m ablate <args>`` in this process with the :data:`WALL` sections timed. Returns the total wall
    seconds and (label, seconds, calls) per section."""
    totals: dict[str, list[float]] = {}
    # each name is wrapped where its caller looks it up at call time (a module that imported it by value)
    undo = [_wrap(totals, label, module, path) for label, module, path in WALL]
    t0 = time.perf_counter()
    try:
        run_ablate(args)
    finally:
        total = time.perf_counter() - t0
        for u in reversed(undo):
            u()
    return total, [(label, *totals.get(label, [0.0, 0.0])) for label, _, _ in WALL]  # type: ignore[misc]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="scifact")
    ap.add_argument("--split", default="train")
    ap.add_argument("--single", action="store_true", help="profile one C run instead of the 12-cell sweep")
    ap.add_argument("--store", default="", help="MLflow store folder (default: a new temporary one)")
    ap.add_argument(
        "--no-reuse",
        dest="reuse",
        action="store_false",
        help="tracking.reuse=false: every cell runs, none reuses a finished run of the store",
    )
    ap.add_argument(
        "--cprofile", action="store_true", help="run under cProfile (CPU clock) instead of wall clocks"
    )
    ap.add_argument("--out", default="", help="with --cprofile: also write the raw profile here (pstats)")
    ap.add_argument(
        "--from", dest="source", default="", help="print the cProfile breakdown of this profile dump and exit"
    )
    a = ap.parse_args(argv)
    if a.source:
        for label, ct, n in breakdown(pstats.Stats(a.source)):
            print(f"{label:52s} {ct:8.2f} s  ({n} calls)")
        return 0
    store = a.store or tempfile.mkdtemp(prefix="profile-sweep-")
    args = [
        f"corpus={a.corpus}",
        f"corpus.split={a.split}",
        "variant=C",
        f"tracking.uri=sqlite:///{store}/mlflow.db",
        "progress=false",
        *([] if a.reuse else ["tracking.reuse=false"]),
    ]
    if not a.single:
        args = ["-m", *args, "rrf.k=1,10,60,100", "retrieval.window=20,50,100"]
    what = "single run" if a.single else "12-cell sweep"
    if not a.cprofile:
        total, rows = wall_sections(args)
        jobs = 1 if a.single else 12
        print(f"\n{what}: {total:.2f} wall s in-process (no profiler)")
        print(f"{'section':72s} {'seconds':>8s} {'calls':>6s} {'s/job':>7s}")
        for label, sec, n in rows:
            print(f"{label:72s} {sec:8.2f} {n:6.0f} {sec / jobs:7.3f}")
        return 0
    prof = cProfile.Profile(time.process_time)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    prof.enable()
    try:
        run_ablate(args)
    finally:
        prof.disable()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    if a.out:
        prof.dump_stats(a.out)
    print(f"\n{what}: {cpu:.1f} CPU s ({wall:.1f} wall s) under cProfile")
    for label, ct, n in breakdown(pstats.Stats(prof)):
        print(f"{label:52s} {ct:8.2f} CPU s  ({n} calls)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
