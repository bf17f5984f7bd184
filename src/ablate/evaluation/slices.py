"""Means per question type (``Query.tags``: ``exact-id``, ``paraphrase``, ``multi-hop``, ``no-answer``, ...).

Rules: a query with several tags is in several slices; a query without tags is in the slice ``"(untagged)"``; each
slice's means follow the same rule as :attr:`EvalResult.means` (scored answerable queries only, every query weighing
the same), so a slice of no-answer questions has NaN means and is read from its counts (and scored apart by
:mod:`ablate.evaluation.abstention`). Queries of the result missing from ``queries`` are in ``"(untagged)"`` too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pandas as pd

from ablate.data.types import Query
from ablate.evaluation.metrics import means_of
from ablate.evaluation.result import EvalResult

UNTAGGED = "(untagged)"
PERSONA_PREFIX = "persona:"


def slice_members(
    qids: Iterable[str], queries: Mapping[str, Query], personas: bool = False
) -> dict[str, list[str]]:
    """``tag -> question ids`` (a question with several tags is in each; untagged ones under ``"(untagged)"``), tags
    sorted with ``"(untagged)"`` last. ``personas``: also a slice ``persona:<name>`` per asking persona (when each
    question runs as its own persona)."""
    members: dict[str, list[str]] = {}
    for qid in qids:
        q = queries.get(qid)
        tags = tuple(dict.fromkeys(q.tags)) if q is not None and q.tags else (UNTAGGED,)
        if personas and q is not None and q.persona:
            tags = (*tags, f"{PERSONA_PREFIX}{q.persona}")
        for t in tags:
            members.setdefault(t, []).append(qid)
    return {t: members[t] for t in sorted(members, key=lambda t: (t == UNTAGGED, t))}


def _subquestion_means(sub: pd.DataFrame, answerable: pd.Series) -> dict[str, float]:
    """The slice's sub-question coverage means (:mod:`ablate.evaluation.subquestions`; same rule as the run's: scored
    answerable questions with sub-questions) and ``n_with_subquestions``; empty when the run has no such columns."""
    if "n_subq" not in sub:
        return {}
    cols = [c for c in sub.columns if str(c).startswith("subq_") and "@" in str(c)]
    scored = sub[answerable & (sub["n_subq"] > 0) & sub[cols[0]].notna()] if cols else sub.iloc[:0]
    out = {c: float(scored[c].mean()) if len(scored) else float("nan") for c in cols}
    out["n_with_subquestions"] = int((sub["n_subq"] > 0).sum())
    return out


def slice_means(
    result: EvalResult, queries: Mapping[str, Query], personas: bool = False
) -> dict[str, dict[str, float]]:
    """``tag -> {metric key: mean, ..., "n": queries, "n_answerable": .., "n_scored": .., "n_no_answer": ..,
    "n_idcg_zero": .., "n_missing_from_run": ..}`` (plus ``subq_coverage@K``, ``subq_all@K`` and
    ``n_with_subquestions`` when the run has sub-question coverage), tags in sorted order (``"(untagged)"`` last)."""
    pq = result.per_query
    members = slice_members(pq.index, queries, personas)
    out: dict[str, dict[str, float]] = {}
    first_k = result.settings.ks[0]
    for tag in sorted(members, key=lambda t: (t == UNTAGGED, t)):
        sub = pq.loc[members[tag]]
        row: dict[str, float] = dict(means_of(sub, result.settings.ks))
        answerable = sub["category"] == "answerable"
        row.update(_subquestion_means(sub, answerable))
        row.update(
            {
                "n": len(sub),
                "n_answerable": int(answerable.sum()),
                "n_scored": int((answerable & sub[f"hit@{first_k}"].notna()).sum()),
                "n_no_answer": int((sub["category"] == "no_answer").sum()),
                "n_idcg_zero": int((sub["category"] == "idcg_zero").sum()),
                "n_missing_from_run": int((sub["status"] == "missing_from_run").sum()),
            }
        )
        out[tag] = row
    return out
