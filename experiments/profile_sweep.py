"""Where a warm sweep's time goes: ``python -m ablate`` in-process under cProfile with a CPU-time clock (robust to
other jobs sharing the machine), broken down by section.

    python experiments/profile_sweep.py [--corpus scifact] [--split train] [--single] [--out prof.pstats]
    python experiments/profile_sweep.py --from sweep.prof   # the same breakdown of an existing profile, e.g. of
        python -m cProfile -o sweep.prof -m ablate -m corpus=scifact corpus.split=train variant=C \
            rrf.k=1,10,60,100 retrieval.window=20,50,100 tracking.uri=sqlite:////tmp/x/mlflow.db progress=false

Runs the 12-cell C sweep of experiments/bench_sweep.py (or one C run with ``--single``) against a throwaway MLflow
store, with the cache of ``$ABLATE_CACHE_DIR`` (warm it first: candidates and embeddings are not what this measures).
Prints CPU seconds per section (cumulative, so nested rows are part of the row above them) and the call counts.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time

#: (label, file suffix, function name): cumulative CPU time of every function matching is summed.
SECTIONS: list[tuple[str, str, str]] = [
    ("entry point (everything)", "app/cli.py", "main"),
    ("ablate's command-line check (composes every cell)", "app/precheck.py", "check_command_line"),
    ("  corpus load (first job's inputs)", "runner/inputs.py", "check_inputs"),
    ("Hydra sweeper check (composes every cell again)", "plugins/sweeper.py", "validate_batch_is_legal"),
    ("Hydra launcher: compose each job", "config_loader_impl.py", "load_sweep_config"),
    ("jobs (run_job)", "runner/job.py", "run_job"),
    ("  pipeline (run_pipeline)", "runner/pipeline.py", "run_pipeline"),
    ("    candidates + fusion (_rank)", "runner/pipeline.py", "_rank"),
    ("    evaluation (_score)", "runner/pipeline.py", "_score"),
    ("  bootstrap intervals (headline_cis)", "runner/emit.py", "headline_cis"),
    ("  artifacts (artifacts_for)", "runner/emit.py", "artifacts_for"),
    ("  MLflow log_batch (log_run)", "ablate/tracking.py", "log_run"),
    ("  MLflow params (log_params, before log_run)", "ablate/tracking.py", "log_params"),
    ("  MLflow metrics (log_metrics, before log_run)", "ablate/tracking.py", "log_metrics"),
    ("  MLflow tags (set_tags)", "ablate/tracking.py", "set_tags"),
    ("  MLflow artifacts (log_files)", "ablate/tracking.py", "log_files"),
    ("  MLflow run start + end", "ablate/tracking.py", "start|end"),
    ("end of sweep (callback)", "app/callbacks.py", "on_multirun_end"),
    ("  read runs + per_query.csv (fetch_runs)", "study/fetch.py", "fetch_runs"),
    ("  report (build_report)", "study/report.py", "build_report"),
    ("    paired tests (_paired)", "study/report.py", "_paired"),
    ("    figures (_figures)", "study/report.py", "_figures"),
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="scifact")
    ap.add_argument("--split", default="train")
    ap.add_argument("--single", action="store_true", help="profile one C run instead of the 12-cell sweep")
    ap.add_argument("--out", default="", help="also write the raw profile here (pstats)")
    ap.add_argument(
        "--from", dest="source", default="", help="print the breakdown of this profile dump and exit"
    )
    a = ap.parse_args(argv)
    if a.source:
        for label, ct, n in breakdown(pstats.Stats(a.source)):
            print(f"{label:52s} {ct:8.2f} s  ({n} calls)")
        return 0
    store = tempfile.mkdtemp(prefix="profile-sweep-")
    args = [
        f"corpus={a.corpus}",
        f"corpus.split={a.split}",
        "variant=C",
        f"tracking.uri=sqlite:///{store}/mlflow.db",
        "progress=false",
    ]
    if not a.single:
        args = ["-m", *args, "rrf.k=1,10,60,100", "retrieval.window=20,50,100"]
    sys.argv = ["ablate", *args]
    from ablate.app.cli import main as ablate_main

    prof = cProfile.Profile(time.process_time)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    prof.enable()
    try:
        ablate_main()
    except SystemExit as e:
        if e.code not in (None, 0):
            raise
    finally:
        prof.disable()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    if a.out:
        prof.dump_stats(a.out)
    print(
        f"\n{'single run' if a.single else '12-cell sweep'}: {cpu:.1f} CPU s ({wall:.1f} wall s) under cProfile"
    )
    for label, ct, n in breakdown(pstats.Stats(prof)):
        print(f"{label:52s} {ct:8.2f} CPU s  ({n} calls)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
