"""The report's "Labels" section: how much of each run's top K the labels judge, and the warning for a run whose top
K lies mostly outside them (:mod:`ablate.evaluation.judged`).

Read from each run's own ``per_query.csv`` (``judged@K``: the share of the question's first K units the labels
judge), averaged over the run's questions; K is the cut-off of the report's first metric (``ndcg@10`` -> 10), or
10 where the runs logged no ``judged@`` column at that K.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ablate import record as R
from ablate.evaluation.judged import MIN_JUDGED_SHARE, mostly_unjudged, summary
from ablate.study.fetch import RunRecord
from ablate.tables import fmt, format_table

DEFAULT_K = 10


@dataclass
class LabelsNote:
    """``k``, each run's mean ``judged@k`` (run id -> share; NaN when its table has no such column), the Markdown
    section and the warning (one line for every run under :data:`MIN_JUDGED_SHARE`: a sweep of sixteen cells on
    thin labels gets one line, not sixteen)."""

    k: int
    shares: dict[str, float]
    markdown: str
    warnings: list[str]


def judged_k(runs: Sequence[RunRecord], metrics: Sequence[str]) -> int:
    """The report's K: the cut-off of its first metric when every run has ``judged@K``, else :data:`DEFAULT_K`."""
    m = re.search(r"@(\d+)$", metrics[0]) if metrics else None
    k = int(m.group(1)) if m else DEFAULT_K
    return k if all(f"judged@{k}" in r.per_query.columns for r in runs) else DEFAULT_K


def labels_note(runs: Sequence[RunRecord], shown: Mapping[str, str], metrics: Sequence[str]) -> LabelsNote:
    """The section over ``runs`` (in table order; ``shown``: run id -> row label)."""
    k = judged_k(runs, metrics)
    col = f"judged@{k}"
    shares = {
        r.run_id: float(r.per_query[col].mean()) if col in r.per_query.columns else math.nan for r in runs
    }
    parents = {r.tags.get(R.T_PARENT) for r in runs}
    parent = parents.pop() if len(parents) == 1 else None
    which = f"--parent {parent}" if parent else "--runs " + ",".join(r.run_id for r in runs)
    then = f"pool its unjudged results and judge them: python -m ablate.label pool {which} --depth {k}"
    low = [(shown[rid], s) for rid, s in shares.items() if mostly_unjudged(s)]
    warnings = [summary(low, k, then, len(shares))] if low else []
    rows = [
        {
            "run": shown[rid],
            col: "-" if math.isnan(s) else fmt(s),
            "note": f"under {MIN_JUDGED_SHARE:.0%}: see the warning" if mostly_unjudged(s) else "-",
        }
        for rid, s in shares.items()
    ]
    text = [
        f"Labels: {col}, the share of each run's top {k} the labels judge (mean over its questions; an unjudged "
        "result is unknown, whatever eval.unjudged scores it as):",
        "",
        format_table(rows, ["run", col, "note"]),
    ]
    if warnings:
        text += ["", *(f"- WARNING: {w}" for w in warnings)]
    return LabelsNote(k, shares, "\n".join(text), warnings)
