"""Query accounting: where every query of the declared set went (its category by its judgements, its status in the
run) and the counts a tracked run reports beside its metrics, with the rules applied."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ablate.evaluation.rules import applied_rules
from ablate.evaluation.settings import EvalSettings

#: What a query's judgements make it (index = the code :func:`~ablate.evaluation.ideal.ideal_lists` returns).
CATEGORIES: tuple[str, ...] = ("answerable", "no_answer", "idcg_zero")
#: What the run holds for a query (index = the code :func:`query_status` returns).
STATUSES: tuple[str, ...] = ("ok", "fewer_than_k", "empty_result", "missing_from_run")


def query_status(
    missing: np.ndarray, n_results: np.ndarray, n_units: np.ndarray, settings: EvalSettings
) -> np.ndarray:
    """Each query's code in :data:`STATUSES`: missing from the run, an empty result, fewer than max K in the
    budget's unit (results for ``budget=chunks``, deduplicated units for ``budget=docs``), else ok."""
    counted = n_results if settings.budget == "chunks" else n_units
    return np.where(
        missing,
        3,
        np.where(n_results == 0, 2, np.where(counted < settings.max_k, 1, 0)),
    )


def query_accounting(
    category: np.ndarray,
    status: np.ndarray,
    excluded: np.ndarray,
    per_query: pd.DataFrame,
    outside: tuple[int, int],
    settings: EvalSettings,
    unit: str,
    qrels_unit: str,
    tie_rule: str,
) -> dict[str, Any]:
    """Where every query of the set went (the accounting rules of :mod:`ablate.evaluation.rules`): counts per category and status.
    ``outside``: how many of the run's queries and of the judged queries are not in the declared set."""
    nq = len(category)
    answerable = category == 0
    depth = settings.max_k
    by_category = {
        cat: {st: int(np.sum((category == ci) & (status == si))) for si, st in enumerate(STATUSES)}
        for ci, cat in enumerate(CATEGORIES)
    }
    accounting: dict[str, Any] = {
        "total": nq,
        "answerable": int(answerable.sum()),
        "no_answer": int((category == 1).sum()),
        "idcg_zero": int((category == 2).sum()),
        "scored": int((answerable & ~excluded).sum()),
        "empty_result": int((status == 2).sum()),
        "fewer_than_k": int((status == 1).sum()),
        "missing_from_run": int((status == 3).sum()),
        "excluded_missing": int((answerable & excluded).sum()),
        "not_in_query_set": outside[0],
        "qrels_not_in_query_set": outside[1],
        "unjudged_results": int(per_query[f"unjudged@{depth}"].fillna(0).sum()),
        "by_category": by_category,
        "rules": applied_rules(settings, unit, qrels_unit, tie_rule),
    }
    return accounting
