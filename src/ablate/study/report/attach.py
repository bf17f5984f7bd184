"""A report of tracked runs, attached where a reader finds it: fetch the runs (:mod:`ablate.study.fetch`), build the
report (:func:`.render.build_report`), write its files to a folder of its own, log them to the sweep's parent run
and print the narrow table. The only part of the report that reads or writes the store."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import IO

import pandas as pd

from ablate import record as R
from ablate.errors import ConfigError
from ablate.safenames import inside
from ablate.study.clusters import check_cluster, with_clusters
from ablate.study.fetch import Source, fetch_runs
from ablate.study.options import CORRECTIONS, ReportRequest
from ablate.study.report.compute import TESTS, check_metrics
from ablate.study.report.render import Report, build_report
from ablate.tracking import Tracker


def default_out(source: Source) -> Path:
    """The sweep's own folder (``<sweep>/report``) when the parent's ``ablate.sweep`` tag names a folder that holds
    this parent's id (a tag is data read from the store: it never sends a report elsewhere), else
    ``./reports/<parent run id or experiment>`` (one folder inside ``./reports``)."""
    if (
        source.sweep_dir
        and source.parent_run_id
        and _is_sweep_folder(Path(source.sweep_dir), source.parent_run_id)
    ):
        return Path(source.sweep_dir) / R.REPORT_DIR
    safe = "".join(
        c if c.isalnum() or c in "._-" else "_" for c in (source.parent_run_id or source.experiment)
    ).lstrip(".")
    return inside(Path.cwd() / "reports", safe or "_")


def _is_sweep_folder(folder: Path, parent_run_id: str) -> bool:
    try:
        return (folder / R.SWEEP_PARENT_FILE).read_text().strip() == parent_run_id
    except (OSError, UnicodeDecodeError):
        return False


def fresh_folder(path: Path) -> Path:
    """``path`` if it does not exist yet, else ``path-2``, ``path-3``, ...: a report never overwrites an earlier
    one (a re-baselined report sits beside the first)."""
    if not path.exists():
        return path
    n = 2
    while path.with_name(f"{path.name}-{n}").exists():
        n += 1
    return path.with_name(f"{path.name}-{n}")


def _artifact_folder(tracker: Tracker, run_id: str) -> str:
    """``report``, or ``report-2``, ... when the parent run already holds a report. Asks the store whether each
    folder's ``ablation.md`` is there (nothing is downloaded); a store that cannot answer raises
    (:class:`ablate.tracking.StoreError`): a report is never written over one the store could not show."""
    folder, n = R.REPORT_DIR, 1
    while tracker.has_artifact(run_id, f"{folder}/ablation.md"):
        n += 1
        folder = f"{R.REPORT_DIR}-{n}"
    return folder


def attach_report(tracker: Tracker, request: ReportRequest, stream: IO[str] | None = None) -> Report:
    """Fetch the runs, build the report, write it to ``request.out`` (default: ``<sweep dir>/report``), log it to
    the parent run under ``report/`` (a new ``report-<n>`` folder when one exists: a report never overwrites an
    earlier one) and print the narrow table (``request.full``: the whole Markdown table) to ``stream`` (stdout)."""
    options = request.options
    if options.test not in TESTS:  # fail before downloading anything
        raise ConfigError("--test", options.test, "options: " + ", ".join(TESTS))
    if options.correction not in CORRECTIONS:
        raise ConfigError("--correction", options.correction, "options: " + ", ".join(CORRECTIONS))
    check_metrics(options.metrics)
    check_cluster(options.cluster)
    records, source = fetch_runs(tracker, request.parent_run_id, request.experiment)
    if (
        options.cluster != "none"
    ):  # runs logged before ablate recorded their clusters: given again, if they can be
        records = with_clusters(records, request.recompute)
    report = build_report(
        records,
        options,
        swept=source.swept,
        title=source.title,
        skipped=source.skipped,
        cache=request.cache,
        names=source.names,
        ppi=request.ppi,
    )
    out_dir = fresh_folder(Path(request.out) if request.out is not None else default_out(source))
    report.write(out_dir)
    for name, text in request.extra_files.items():
        (out_dir / name).write_text(text, encoding="utf-8")
    where = ""
    if request.log and source.parent_run_id:
        folder = _artifact_folder(tracker, source.parent_run_id)
        files = {**report.files(), **request.extra_files}
        tracker.log_files(source.parent_run_id, {f"{folder}/{k}": v for k, v in files.items()})
        tracker.set_tags(
            source.parent_run_id,
            {R.T_REPORT_BASELINE: report.baseline, R.T_REPORT_CORRECTION: options.correction},
        )
        where = f"; logged to MLflow run {source.parent_run_id} under {folder}/"
    if request.log:
        log_mdes(tracker, report)
    stream = stream or sys.stdout
    print(report.markdown if request.full else report.console, file=stream)
    print(f"full report (all metrics, flags, slices, plots): {out_dir}/ablation.md{where}", file=stream)
    for name in request.extra_files:
        print(f"  and {out_dir / name}", file=stream)
    return report


def log_mdes(tracker: Tracker, report: Report) -> None:
    """Log on each run compared with the baseline its minimum detectable effect per metric (``mde_ndcg_at_10``),
    tagged with the baseline's run id (``ablate.mde_baseline``); a later report against another baseline replaces
    both. Nothing for the baseline, nor for a metric whose MDE is undefined."""
    table = report.table
    for _, row in table[table["run_id"] != report.baseline].iterrows():
        values = {
            R.MDE_PREFIX + R.metric_key(m): float(row[f"{m}_mde"])
            for m in report.metrics
            if f"{m}_mde" in row and pd.notna(row[f"{m}_mde"])
        }
        if values:
            tracker.log_metrics(str(row["run_id"]), values)
            tracker.set_tags(str(row["run_id"]), {R.T_MDE_BASELINE: report.baseline})
