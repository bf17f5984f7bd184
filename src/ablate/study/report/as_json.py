"""The report's rows as JSON (``python -m ablate.report --json``): the numbers of its table (:mod:`.render`'s CSV
rows, so they cannot differ from what the table shows), for a script or a CI step to read instead of the text.

One object per run and metric, ``{"kind": "run", "run", "run_id", "metric", "value", "low", "high", ...}``
(``value`` the mean over the run's scored questions, ``low``/``high`` its 95% bootstrap interval), and one per
comparison of a run with the baseline, ``{"kind": "comparison", "baseline", "baseline_id", "run", "run_id",
"metric", "delta", "low", "high", "p", "p_raw", "correction", "n", "clusters", "mde", ...}`` (``delta`` =
mean(run - baseline) over the ``n`` questions both scored, in ``clusters`` clusters of shared evidence (``n`` when
every question is alone; intervals and tests resample them: :mod:`ablate.study.clusters`), ``p`` adjusted by the
report's correction as the table shows it, ``p_raw`` before). Runs with a generator add the same two kinds for their answer correctness (metric
:data:`ANSWER_METRIC`, its own baseline and family of comparisons, as in the report's Answers section). Every
object has ``"ppi"``: the prediction-powered estimate of the same figure (:class:`~ablate.evaluation.stats.PPIResult`
as ``{"estimate", "low", "high", "n_checked", "n_unchecked"}``) when one was computed for it, else ``null``.
The report computes them itself for ``--labels`` (:mod:`.ppi`,
:attr:`.render.Report.ppi`). Undefined figures are ``null`` (JSON has no NaN). Fields may be added; none is renamed or removed."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ablate.study.options import P_COLUMNS
from ablate.study.report.ppi import ANSWER_METRIC, DELTA, PPIKey
from ablate.study.report.render import Report

if TYPE_CHECKING:
    from ablate.evaluation.stats import PPIResult


def _plain(v: Any) -> Any:
    """A JSON value: numpy scalars as Python numbers, NaN and missing as null."""
    if isinstance(v, np.generic):
        v = v.item()
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return v


def _ppi(ppi: Mapping[PPIKey, PPIResult], key: PPIKey) -> dict[str, Any] | None:
    got = ppi.get(key)
    return None if got is None else {k: _plain(v) for k, v in got.as_dict().items()}


def _run_row(row: pd.Series, metric: str, value: str, low: str, high: str) -> dict[str, Any]:
    return {
        "kind": "run",
        "run": _plain(row["run"]),
        "run_id": _plain(row["run_id"]),
        "metric": metric,
        "value": _plain(row[value]),
        "low": _plain(row[low]),
        "high": _plain(row[high]),
    }


def _retrieval_rows(report: Report, correction: str, ppi: Mapping[PPIKey, PPIResult]) -> list[dict[str, Any]]:
    table = report.table
    base = table[table["run_id"] == report.baseline].iloc[0]
    runs: list[dict[str, Any]] = []
    comparisons: list[dict[str, Any]] = []
    for _, row in table.iterrows():
        rid = str(row["run_id"])
        for m in report.metrics:
            runs.append(
                _run_row(row, m, m, f"{m}_ci_low", f"{m}_ci_high")
                | {"split": _plain(row.get("split")), "ppi": _ppi(ppi, (rid, m))}
            )
            if rid == report.baseline:
                continue
            comparisons.append(
                {
                    "kind": "comparison",
                    "baseline": _plain(base["run"]),
                    "baseline_id": report.baseline,
                    "run": _plain(row["run"]),
                    "run_id": rid,
                    "metric": m,
                    "delta": _plain(row[f"{m}_delta"]),
                    "low": _plain(row[f"{m}_delta_ci_low"]),
                    "high": _plain(row[f"{m}_delta_ci_high"]),
                    "p": _plain(row[f"{m}_{P_COLUMNS[correction]}"]),
                    "p_raw": _plain(row[f"{m}_p"]),
                    "correction": correction,
                    "n": _plain(row["n"]),
                    "clusters": _plain(row["clusters"] if "clusters" in row else row["n"]),
                    "mde": _plain(row[f"{m}_mde"]),
                    "flags": _plain(row["flags"]) or "",
                    "ppi": _ppi(ppi, (rid, m, DELTA)),
                }
            )
    return runs + comparisons


def _answer_rows(report: Report, correction: str, ppi: Mapping[PPIKey, PPIResult]) -> list[dict[str, Any]]:
    if report.answers is None:
        return []
    table = report.answers.table
    base = table[table["role"] == "baseline"].iloc[0]
    m, p_col = ANSWER_METRIC, "correct_" + P_COLUMNS[correction]
    runs: list[dict[str, Any]] = []
    comparisons: list[dict[str, Any]] = []
    for _, row in table.iterrows():
        rid = str(row["run_id"])
        runs.append(
            _run_row(row, m, "correct", "correct_ci_low", "correct_ci_high")
            | {"judge": _plain(row["judge"]), "ppi": _ppi(ppi, (rid, m))}
        )
        if row["role"] == "baseline":
            continue
        comparisons.append(
            {
                "kind": "comparison",
                "baseline": _plain(base["run"]),
                "baseline_id": _plain(base["run_id"]),
                "run": _plain(row["run"]),
                "run_id": rid,
                "metric": m,
                "delta": _plain(row["correct_delta"]),
                "low": _plain(row["correct_delta_ci_low"]),
                "high": _plain(row["correct_delta_ci_high"]),
                "p": _plain(row[p_col]),
                "p_raw": _plain(row["correct_p"]),
                "correction": correction,
                "n": _plain(row["paired_n"]),
                "mde": _plain(row["correct_mde"]),
                "ppi": _ppi(ppi, (rid, m, DELTA)),
            }
        )
    return runs + comparisons


def correction_of(report: Report) -> str:
    """How the report's p-values were adjusted: the correction whose column its table holds (``ndcg@10_p_holm``)."""
    first = report.metrics[0]
    return next(c for c, col in P_COLUMNS.items() if f"{first}_{col}" in report.table.columns)


def report_rows(report: Report, ppi: Mapping[PPIKey, PPIResult] | None = None) -> list[dict[str, Any]]:
    """The report's rows (see the module docstring): every run and metric, then every comparison, retrieval metrics
    first, then answer correctness. ``ppi``: the prediction-powered figures, keyed ``(run_id, metric)`` and
    ``(run_id, metric, "delta")`` (metric as reported, e.g. ``ndcg@10``, or :data:`ANSWER_METRIC`); a row without
    one gets ``"ppi": null``."""
    found, correction = ppi or {}, correction_of(report)
    return _retrieval_rows(report, correction, found) + _answer_rows(report, correction, found)


def report_json(report: Report, ppi: Mapping[PPIKey, PPIResult] | None = None) -> str:
    """:func:`report_rows` as a JSON array (indented; strict JSON: no NaN)."""
    return json.dumps(report_rows(report, ppi), indent=2, allow_nan=False)
