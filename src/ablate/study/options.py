"""The report's defaults and choices that an entry point's ``--help`` shows, kept apart from the modules that compute
the report (they import pandas and scipy): :mod:`ablate.study.report` and :mod:`ablate.study.slices` import them
from here, so the help cannot drift from what runs. The options of one report are a :class:`ReportOptions`, what
to report and where a :class:`ReportRequest`."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ablate.cache import Cache
    from ablate.study.ppi_inputs import PPIInputs

#: Metrics of the narrow ablation table (``--metrics``).
DEFAULT_METRICS: tuple[str, ...] = ("ndcg@10", "recall@10", "mrr@10", "hit@10")
#: Names of the paired tests selectable with ``--test`` (:data:`ablate.study.report.TESTS` maps them to functions).
PAIRED_TESTS: tuple[str, ...] = ("randomization", "bootstrap")
#: Corrections of the report's family of comparisons (``--correction``, ``stats.correction``;
#: :data:`ablate.evaluation.stats.CORRECTIONS`): Holm (family-wise error), Benjamini-Hochberg (false discovery rate).
CORRECTIONS: tuple[str, ...] = ("holm", "bh", "none")
#: Each correction's column suffix (``ndcg@10_p_holm``, ``correct_p_bh``) and its mark beside a p-value's header.
P_COLUMNS: dict[str, str] = {"holm": "p_holm", "bh": "p_bh", "none": "p_none"}
P_HEADS: dict[str, str] = {"holm": " (Holm)", "bh": " (BH)", "none": ""}
#: ``--parent`` of the study commands (report, plan): what they read without it (:mod:`ablate.study.latest`).
PARENT_HELP = (
    "sweep parent run id (default: the latest sweep; sweeps that overlap it in time are listed, not guessed)"
)
#: ``--cluster`` of the study commands (report, plan): which questions move together (:mod:`ablate.study.clusters`).
CLUSTERS: tuple[str, ...] = ("evidence", "group", "none")
CLUSTER_HELP = (
    "which questions move together, resampled as one: evidence (default): questions that share gold evidence, a "
    "declared group or their text; group: the queries' declared group only; none: every question alone"
)
#: The two question tags the slices compare side by side (``--contrast``).
DEFAULT_CONTRAST: tuple[str, str] = ("exact-id", "paraphrase")


@dataclass(frozen=True)
class ReportOptions:
    """How a report compares runs (:func:`ablate.study.report.build_report`).

    ``baseline``: a run id (or a prefix of >= 6 characters), row label, run name or variant; None: the first variant of
    the ablation order (``variant.order``: A) when the runs differ in variant, else the sweep's first cell.
    ``metrics``: ``<metric>@<k>`` columns of ``per_query.csv``. ``test``: a paired test of :data:`PAIRED_TESTS` with
    ``n_resamples`` resamples; ``bootstrap`` resamples and ``seed`` for the intervals (a sweep's end passes its
    ``stats.bootstrap`` / ``stats.seed`` so they match the logged ones). ``force``: report runs scored on different
    labels or documents (flagged) instead of refusing them. ``correction``: how the family's p-values are adjusted
    (:data:`CORRECTIONS`; a sweep's end passes its ``stats.correction``). ``plots``: draw the figures. ``contrast``: the two
    question tags compared side by side in the slices. ``factorial``: the factorial analysis of the runs' grid
    (:mod:`ablate.study.factorial`): None when the runs are a full grid over two or more swept factors (else none),
    True always (a note when they are no such grid), False never. ``cluster``: which questions move together
    (:data:`CLUSTERS`, :mod:`ablate.study.clusters`): intervals, paired tests and MDEs resample those clusters when
    some hold two or more questions."""

    baseline: str | None = None
    metrics: Sequence[str] = DEFAULT_METRICS
    test: str = "randomization"
    n_resamples: int = 10000
    seed: int = 0
    bootstrap: int = 1000
    force: bool = False
    plots: bool = True
    contrast: tuple[str, str] | None = DEFAULT_CONTRAST
    correction: str = "holm"
    factorial: bool | None = None
    cluster: str = "evidence"


@dataclass(frozen=True)
class ReportRequest:
    """Which runs to report and where the report goes (:func:`ablate.study.report.attach_report`).

    The runs: the children of ``parent_run_id``, or the runs of ``experiment``, or (neither) the children of the
    latest sweep parent. ``out``: the folder (default ``<sweep dir>/report``, else ``./reports/<parent>``; never an
    earlier report's folder). ``log``: also log the files to the parent run (``report/``, or ``report-<n>`` beside an
    earlier one). ``full``: print the whole Markdown table instead of the narrow one. ``cache``: where figures and
    paired tests are kept by content. ``extra_files``: more files (name -> text) written and logged beside the
    report's (the label versions side by side of ``--labels``). ``recompute``: gives the question clusters of a run
    logged before ablate recorded them (:data:`ablate.study.clusters.Recompute`; None: such runs' questions count as
    independent, said in one warning line). ``ppi``: what the prediction-powered figures of ``--labels`` need
    (:mod:`ablate.study.ppi_inputs`); None: none."""

    parent_run_id: str | None = None
    experiment: str | None = None
    out: str | os.PathLike[str] | None = None
    options: ReportOptions = field(default_factory=ReportOptions)
    log: bool = True
    full: bool = False
    cache: Cache | None = None
    extra_files: Mapping[str, str] = field(default_factory=dict)
    recompute: Callable[..., Any] | None = None
    ppi: PPIInputs | None = None
