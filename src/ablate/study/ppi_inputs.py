"""What the report's prediction-powered figures (:mod:`ablate.study.report.ppi`) need besides its runs, as plain
values: the app edge of ``python -m ablate.report --labels`` reads them from the label version and the runs
(:mod:`ablate.app.report_ppi`) and hands them in with the report's request (:class:`ablate.study.options.ReportRequest`).
Kept apart so the request can name it without importing the report's modules."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class PPIInputs:
    """What the report needs besides its runs for its prediction-powered figures, as plain values.

    ``version``: the label version's name. ``assessor``: report run id -> its per-query table (index qid) re-scored
    on the version's assessor view; ``checked``: the checked questions of the version's random sample; ``seed``: the
    sample's seed. ``answer_y``: run id -> the people's correctness of its answers to the questions of the random
    answer sample whose answers people graded in full (index qid: those are its checked questions);
    ``answer_seed``: that sample's seed. ``notes``: one line each for a figure that gets no PPI and why."""

    version: str
    assessor: Mapping[str, pd.DataFrame] = field(default_factory=dict)
    checked: frozenset[str] = frozenset()
    seed: int | None = None
    answer_y: Mapping[str, pd.Series] = field(default_factory=dict)
    answer_seed: int | None = None
    notes: tuple[str, ...] = ()
