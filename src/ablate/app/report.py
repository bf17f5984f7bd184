"""``python -m ablate.report [--parent RUN_ID | --experiment NAME] [--tracking-uri URI] [--baseline A]
[--metrics ndcg@10,recall@10,mrr@10,hit@10] [--test randomization|bootstrap] [--out DIR] [--force]``

Without ``--parent`` / ``--experiment`` it reports the latest sweep parent run in the store (tag
``ablate.role=sweep-parent``). It reads the runs' ``per_query.csv`` artifacts, writes ``ablation.md/.csv``,
``slices.md/.csv`` and PNG plots to ``--out`` and logs them to the parent run under ``report/``
(:mod:`ablate.study.report` computes them).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ablate.errors import AblateError, ConfigError
from ablate.study.options import DEFAULT_CONTRAST, DEFAULT_METRICS, PAIRED_TESTS


def _contrast(text: str) -> tuple[str, str] | None:
    if text.strip().lower() in ("", "none"):
        return None
    parts = [t.strip() for t in text.split(",") if t.strip()]
    if len(parts) != 2:
        raise ConfigError(
            "--contrast", text, "give two question tags separated by a comma, e.g. exact-id,paraphrase"
        )
    return parts[0], parts[1]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m ablate.report",
        description="Ablation table, slices and plots from tracked runs, logged to the sweep's parent run.",
    )
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--parent", help="sweep parent run id (default: the latest sweep parent in the store)")
    src.add_argument("--experiment", help="report every run of this experiment (no parent to log to)")
    ap.add_argument("--tracking-uri", help="MLflow store (default: $MLFLOW_TRACKING_URI, else ./mlflow.db)")
    ap.add_argument("--baseline", help="run id, name or variant (default: A, or the sweep's first cell)")
    ap.add_argument(
        "--metrics",
        default=",".join(DEFAULT_METRICS),
        help="comma-separated, e.g. ndcg@10,mrr@10 (default %(default)s)",
    )
    ap.add_argument(
        "--test",
        default="randomization",
        help="paired test: " + " | ".join(PAIRED_TESTS) + " (default %(default)s)",
    )
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
        "--contrast",
        default=",".join(DEFAULT_CONTRAST),
        help="two question tags compared side by side in the slices (default exact-id,paraphrase; 'none' for no contrast)",
    )
    args = ap.parse_args(argv)
    # Imported once the arguments are read: the report's modules import MLflow, pandas, scipy and matplotlib.
    from ablate.study.fetch import check_store
    from ablate.study.report import ReportOptions, ReportRequest, attach_report
    from ablate.tracking import Tracker, check_uri, resolve_tracking_uri

    try:
        uri = resolve_tracking_uri(args.tracking_uri)
        check_store(
            uri
        )  # a missing sqlite store is "no MLflow store here" (never created), before its folder
        check_uri(uri, "--tracking-uri")
        options = ReportOptions(
            baseline=args.baseline,
            metrics=args.metrics.split(","),
            test=args.test,
            n_resamples=args.resamples,
            seed=args.seed,
            force=args.force,
            contrast=_contrast(args.contrast),
        )
        request = ReportRequest(
            args.parent, args.experiment, args.out, options, log=not args.no_log, full=args.full
        )
        attach_report(Tracker(uri), request)
    except AblateError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - one line, like the CLI
        if os.environ.get("ABLATE_DEBUG"):
            raise
        print(
            f"error: unexpected {type(e).__name__}: {e} (set ABLATE_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return 1
    return 0
