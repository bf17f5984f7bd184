"""What one run emits, one module each: its params (what ran, :mod:`.params`), its metrics (flat, library keys,
:mod:`.metrics`), its artifact files (:mod:`.artifacts`) and its console summary (:mod:`.summary`). Pure functions of
a :class:`~ablate.runner.pipeline.RunResult`; :mod:`ablate.runner.job` logs them. Every name comes from
:mod:`ablate.record`. The names the runner uses are importable from here.
"""

from __future__ import annotations

from ablate.runner.emit.artifacts import artifacts_for, per_query_frame, question_table, slices_csv
from ablate.runner.emit.metrics import (
    CI_KIND,
    headline_cis,
    metrics_for,
    permission_metrics,
    score_metrics,
    split_defined,
)
from ablate.runner.emit.params import label_params, params_for
from ablate.runner.emit.summary import PROBLEM_COUNTERS, print_accounting, print_run_summary

__all__ = [
    "CI_KIND",
    "PROBLEM_COUNTERS",
    "artifacts_for",
    "headline_cis",
    "label_params",
    "metrics_for",
    "params_for",
    "per_query_frame",
    "permission_metrics",
    "print_accounting",
    "print_run_summary",
    "question_table",
    "score_metrics",
    "slices_csv",
    "split_defined",
]
