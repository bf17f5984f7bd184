"""``python -m ablate.report [--parent RUN_ID | --experiment NAME] [--tracking-uri URI] [--baseline A]
[--metrics ndcg@10,recall@10,mrr@10,hit@10] [--test randomization|bootstrap] [--correction holm|bh|none] [--out DIR]
[--force] [--factorial] [--cluster evidence|group|none] [--json]``

Without ``--parent`` / ``--experiment`` it reports the latest sweep in the store (:mod:`ablate.study.latest`:
refused, with the candidates listed, when other sweeps overlap it in time). It reads the runs' ``per_query.csv``
artifacts, writes ``ablation.md/.csv``, ``slices.md/.csv``, ``factorial.csv`` (a grid's factorial analysis) and PNG
plots to ``--out`` and logs them to the parent run under ``report/`` (:mod:`ablate.study.report` computes them).
``--json`` prints the table's rows as JSON on stdout (:mod:`ablate.study.report.as_json`) and everything else on
stderr. ``--labels V`` re-scores the sweep on a label version, with the prediction-powered figures of a version
whose assessor's labels people checked on a random sample (:mod:`ablate.app.report_ppi`).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from typing import Any

from ablate.app.entry import say_unexpected
from ablate.errors import AblateError, ConfigError
from ablate.study.options import (
    CLUSTER_HELP,
    CLUSTERS,
    CORRECTIONS,
    DEFAULT_CONTRAST,
    DEFAULT_METRICS,
    PAIRED_TESTS,
    PARENT_HELP,
)


def _contrast(text: str) -> tuple[str, str] | None:
    if text.strip().lower() in ("", "none"):
        return None
    parts = [t.strip() for t in text.split(",") if t.strip()]
    if len(parts) != 2:
        raise ConfigError(
            "--contrast", text, "give two question tags separated by a comma, e.g. exact-id,paraphrase"
        )
    return parts[0], parts[1]


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m ablate.report",
        description="Ablation table, slices and plots from tracked runs, logged to the sweep's parent run.",
    )
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--parent", help=PARENT_HELP)
    src.add_argument("--experiment", help="report every run of this experiment (no parent to log to)")
    ap.add_argument("--tracking-uri", help="MLflow store (default: $MLFLOW_TRACKING_URI, else ./mlflow.db)")
    ap.add_argument("--baseline", help="run id, name or variant (default: A, or the sweep's first cell)")
    for flag, default, what in (  # the options with a default value, said in their help
        ("--metrics", ",".join(DEFAULT_METRICS), "comma-separated, e.g. ndcg@10,mrr@10"),
        ("--test", "randomization", "paired test: " + " | ".join(PAIRED_TESTS)),
        (
            "--correction",
            "holm",
            "adjustment of the p-values: " + " | ".join(CORRECTIONS) + " (bh: Benjamini-Hochberg)",
        ),
        (
            "--contrast",
            ",".join(DEFAULT_CONTRAST),
            "two question tags side by side in the slices ('none': no contrast)",
        ),
    ):
        ap.add_argument(flag, default=default, help=f"{what} (default %(default)s)")
    ap.add_argument("--cluster", default="evidence", help=" | ".join(CLUSTERS) + ": " + CLUSTER_HELP)
    ap.add_argument(
        "--resamples", type=int, default=10000, help="resamples of the paired test (default 10000)"
    )
    ap.add_argument("--seed", type=int, default=0, help="seed of the paired test's resamples (default 0)")
    ap.add_argument("--out", help="folder for the report files (default: <sweep dir>/report)")
    ap.add_argument(
        "--force", action="store_true", help="report runs on different labels/documents (flagged)"
    )
    ap.add_argument("--no-log", action="store_true", help="do not log the report to the parent run")
    ap.add_argument(
        "--full", action="store_true", help="print the whole table (every metric) instead of the narrow one"
    )
    ap.add_argument(
        "--factorial",
        action="store_true",
        help="the factorial analysis of the runs' grid (main effects and two-way interactions of the swept factors, "
        "Type II ANOVA with the question as block; factorial.csv); a note when they are no full grid over two or more "
        "factors (default: only when they are one)",
    )
    ap.add_argument(
        "--labels",
        help="re-score every run of the sweep (--parent) on this label version (python -m ablate.label commit): "
        "logged as new runs under a new sweep parent, the old runs untouched, and both versions side by side; a "
        "version whose LLM assessor's labels people checked on a random sample (python -m ablate.label sample) "
        "adds the prediction-powered estimate and interval beside each figure",
    )
    ap.add_argument(
        "--json",
        action="store_true",
        help="print the report's rows as JSON on stdout (one object per run and metric, one per comparison with "
        "the baseline; the table and notes go to stderr); the files are written and logged as without it",
    )
    ap.add_argument(
        "--labels-dir",
        default="labels",
        help="where --labels NAME is looked up: <labels-dir>/<corpus>/versions/NAME (default ./labels)",
    )
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    stdout = sys.stdout
    # --json: stdout holds the JSON alone; the table, the notes and anything a library prints go to stderr
    quiet = contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()
    try:
        with quiet:
            report = _report(args)
        if args.json:
            from ablate.study.report.as_json import report_json

            print(report_json(report, report.ppi), file=stdout)
    except AblateError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - one line, like the CLI
        say_unexpected(e)
        return 1
    return 0


def _report(args: argparse.Namespace) -> Any:
    """The report the arguments ask for (:class:`ablate.study.report.Report`), written, logged and printed."""
    # Imported once the arguments are read: the report's modules import MLflow, pandas, scipy and matplotlib.
    from ablate.app.recorded_clusters import recompute
    from ablate.study.clusters import check_cluster
    from ablate.study.fetch import check_store
    from ablate.study.report import ReportOptions, ReportRequest, attach_report
    from ablate.tracking import Tracker, check_uri, resolve_tracking_uri

    uri = resolve_tracking_uri(args.tracking_uri)
    check_store(uri)  # a missing sqlite store is "no MLflow store here" (never created), before its folder
    check_uri(uri, "--tracking-uri")
    options = ReportOptions(
        baseline=args.baseline,
        metrics=args.metrics.split(","),
        test=args.test,
        n_resamples=args.resamples,
        seed=args.seed,
        force=args.force,
        contrast=_contrast(args.contrast),
        correction=args.correction,
        factorial=True if args.factorial else None,
        cluster=args.cluster,
    )
    check_cluster(options.cluster)
    tracker = Tracker(uri)
    if args.labels is not None:
        return _relabel(tracker, args, options)
    request = ReportRequest(
        args.parent,
        args.experiment,
        args.out,
        options,
        log=not args.no_log,
        full=args.full,
        recompute=recompute(tracker),
    )
    return attach_report(tracker, request)


def _relabel(tracker: Any, args: argparse.Namespace, options: Any) -> Any:
    """``--parent ID --labels NAME``: re-score the sweep on the label version (:mod:`ablate.runner.relabel`), report
    the new sweep like any other, with both versions side by side beside it
    (:mod:`ablate.study.report.relabelled`) and, for a version whose assessor's labels people checked on a random
    sample, the prediction-powered figures (:mod:`ablate.app.report_ppi`)."""
    from ablate.app.recorded_clusters import recompute
    from ablate.app.report_ppi import check_views, ppi_inputs
    from ablate.runner.relabel import relabel_sweep, resolve_target
    from ablate.study.fetch import fetch_runs
    from ablate.study.report import ReportRequest, attach_report
    from ablate.study.report.compute import check_metrics
    from ablate.study.report.relabelled import side_by_side

    if args.parent is None:
        raise ConfigError(
            "--labels",
            args.labels,
            "name the sweep to re-score with --parent SWEEP_RUN_ID (--experiment is not one)",
        )
    check_metrics(options.metrics)
    target = resolve_target(tracker, args.parent, args.labels, args.labels_dir)
    views = check_views(target)  # every file of the version, both views, checked before anything is logged
    done = relabel_sweep(tracker, target)
    old, _ = fetch_runs(tracker, target.parent.run_id)
    new, source = fetch_runs(tracker, done.parent)
    side = side_by_side(old, new, list(options.metrics), source.title)
    request = ReportRequest(
        done.parent,
        None,
        args.out,
        options,
        log=not args.no_log,
        full=args.full,
        extra_files=side.files(),
        recompute=recompute(tracker),  # re-scores logged before clusters were recorded, reused
        ppi=ppi_inputs(tracker, target, views, done, new),
    )
    report = attach_report(tracker, request)
    print(side.console)
    return report
