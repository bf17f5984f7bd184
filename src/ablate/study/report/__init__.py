"""The ablation report: one row per tracked run against a baseline, paired tests over queries, slices and plots.

What the numbers are (measured, never pre-filled):

* A run's cell: the mean of a per-query metric over its *scored answerable* queries (``category == "answerable"``
  and the metric defined: the rule of ``EvalResult.means``), with a 95% percentile bootstrap CI over queries
  (:func:`ablate.evaluation.stats.bootstrap_cis`, ``bootstrap`` resamples, ``seed``).
* Δ: ``mean(run - baseline)`` over the queries scored answerable in *both* runs (paired; ``n`` is reported), with a
  bootstrap CI of the mean difference and a two-sided paired p-value: Fisher's randomization test (default) or the
  studentized paired bootstrap (:mod:`ablate.evaluation.stats`), 10,000 resamples, seed 0.
* The correction: the p-values of every (run x metric) comparison in the table form one family, adjusted by
  ``options.correction`` (Holm by default, Benjamini-Hochberg or none: :func:`ablate.evaluation.stats.adjust`).
* MDE: the minimum detectable effect of each comparison, 80% power at alpha 0.05, from the spread of the same
  paired per-query differences (:func:`ablate.evaluation.stats.mde`); logged on each compared run as
  ``mde_<metric>`` when the report is logged.
* Clusters (``options.cluster``, :mod:`ablate.study.clusters`): where questions share their evidence (two or more
  in one cluster), the intervals resample clusters, the paired tests flip or draw clusters, the MDE carries the
  design effect and the table says G beside n; with every question alone all of the above is as written.
* Flags: :func:`ablate.study.compare.check_comparison` (one factor per row; same labels, documents and split).
* Held-out marking (:func:`heldout_marking`): a row on a held-out split is *test-tuned* when its run carries
  ``ablate.test_reuse=true`` (its configuration was changed after the test split had been seen in the study), else
  *dev-tuned*; a row on any other split is a *dev-split* row. A table that mixes dev-tuned and test-tuned rows, or
  dev-split rows with held-out rows, gets a ``HELD-OUT MIX`` line above it naming the rows and why; test-tuned rows
  are marked ``†`` (always) and dev-split rows ``‡`` (in a table with held-out rows).

The package, by concept: :mod:`.rows` (which runs, in what order, the baseline), :mod:`.compute` (the numbers), :mod:`.heldout` (the held-out marking, one rule),
:mod:`.render` (text, tables and figures; :func:`build_report` is the whole pure report over
:class:`~ablate.study.fetch.RunRecord` s, no MLflow), :mod:`.as_json` (the table's rows as JSON, ``--json``, with the
prediction-powered figures a caller hands in) and :mod:`.attach` (fetch the runs, write the files, log them to the
sweep's parent: :func:`attach_report`).
"""

from __future__ import annotations

from ablate.study.fetch import ReportError, RunRecord
from ablate.study.options import DEFAULT_METRICS, ReportOptions, ReportRequest
from ablate.study.report.attach import attach_report, default_out, fresh_folder
from ablate.study.report.compute import (
    BATCH_TESTS,
    REPORT_CI_KIND,
    TESTS,
    TESTS_KIND,
    check_metrics,
    pq_column,
)
from ablate.study.report.heldout import (
    DEV_SPLIT,
    DEV_SPLIT_MARK,
    DEV_TUNED,
    TEST_TUNED,
    TEST_TUNED_MARK,
    HeldOutMarking,
    heldout_marking,
    is_held_out,
    split_warnings,
    tuning_of,
)
from ablate.study.report.render import TEST_NAMES, Report, build_report
from ablate.study.report.rows import run_labels

__all__ = [
    "BATCH_TESTS",
    "DEFAULT_METRICS",
    "DEV_SPLIT",
    "DEV_SPLIT_MARK",
    "DEV_TUNED",
    "REPORT_CI_KIND",
    "TESTS",
    "TESTS_KIND",
    "TEST_NAMES",
    "TEST_TUNED",
    "TEST_TUNED_MARK",
    "HeldOutMarking",
    "Report",
    "ReportError",
    "ReportOptions",
    "ReportRequest",
    "RunRecord",
    "attach_report",
    "build_report",
    "check_metrics",
    "default_out",
    "fresh_folder",
    "heldout_marking",
    "is_held_out",
    "pq_column",
    "run_labels",
    "split_warnings",
    "tuning_of",
]
