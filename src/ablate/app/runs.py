"""``python -m ablate.runs clean [--tracking-uri URI]``: close the runs a killed process left RUNNING.

A run whose owning process (``ablate.host``/``ablate.pid``/``ablate.pid_start`` tags) no longer exists on this host
is marked FAILED with the reason "process ended without closing the run" (:mod:`ablate.runner.orphans`). Every
``python -m ablate`` command does the same for its store before it starts.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ablate.errors import AblateError


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m ablate.runs",
        description="Close the runs a killed process left RUNNING: python -m ablate.runs clean [--tracking-uri URI].",
    )
    sub = ap.add_subparsers(dest="command", required=True)
    clean = sub.add_parser("clean", help="mark runs whose process is gone FAILED")
    clean.add_argument(
        "--tracking-uri", help="MLflow store (default: $MLFLOW_TRACKING_URI, else ./mlflow.db)"
    )
    args = ap.parse_args(argv)
    from ablate.runner.orphans import clean_orphans  # MLflow and pandas: not for --help
    from ablate.study.fetch import check_store
    from ablate.tracking import Tracker, check_uri, resolve_tracking_uri

    try:
        uri = resolve_tracking_uri(args.tracking_uri)
        check_uri(uri, "--tracking-uri")
        check_store(uri)
        report = clean_orphans(Tracker(uri))
    except AblateError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for run in report.closed:
        print(f"closed {run.run_id} ({run.name}): FAILED, process ended without closing the run")
    print(
        f"{len(report.closed)} run(s) closed; {report.alive} still running here; "
        f"{report.other_hosts} running on other hosts (not checked)"
    )
    return 0
