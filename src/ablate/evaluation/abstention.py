"""No-answer questions, scored apart (seed 000: "这类题单独统计'正确拒答'和'错误作答'两个数").

A retrieval system *refuses* a query when it returned nothing (an empty result, or the query is missing from the run)
or, given a threshold, when its top score is below it: ``refused = top is None or (threshold is not None and top <
threshold)``. Scores only order results; a threshold on them is a tuned decision rule, chosen on a dev split
(:func:`choose_threshold`) and then applied unchanged to the test split.

* On no-answer queries (categories ``no_answer`` and ``idcg_zero`` of :func:`ablate.evaluation.evaluate`):
  ``correct_refusal_rate`` = refused / n, ``wrong_answer_count`` = queries answered anyway.
* On answerable queries: ``false_refusal_rate`` = refused / n.
* With ``threshold=None`` nothing with a result is refused: the refusal rate counts only empty and missing results,
  and every no-answer query that got results is a wrong answer.
* Rates over zero queries are NaN (undefined), never 0 or 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ablate.data.types import Run
from ablate.errors import ConfigError, InputError

NO_ANSWER_CATEGORIES = ("no_answer", "idcg_zero")

RULE = (
    "refused = no result (empty or missing from the run) or (threshold set and top score < threshold); "
    "no-answer = categories no_answer and idcg_zero; threshold None refuses nothing that has a result"
)


def top_scores(run: Run, qids: Iterable[str]) -> dict[str, float | None]:
    """``qid -> score of the first result`` for the declared queries; ``None`` when there is no result."""
    out: dict[str, float | None] = {}
    for q in qids:
        hits = run.results.get(q)
        out[q] = float(hits[0].score) if hits else None
    return out


@dataclass(frozen=True)
class AbstentionReport:
    threshold: float | None
    n_no_answer: int
    correct_refusals: int
    wrong_answer_count: int
    correct_refusal_rate: float
    n_answerable: int
    false_refusals: int
    false_refusal_rate: float
    balanced_accuracy: float  # (correct_refusal_rate + 1 - false_refusal_rate) / 2
    accuracy: float  # share of all queries with the right decision (refuse no-answer, answer answerable)
    rule: str = RULE

    def as_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}


def _split(top: Mapping[str, float | None], categories: Mapping[str, str]) -> tuple[np.ndarray, np.ndarray]:
    """Top scores (NaN = no result) and a no-answer mask, over the queries in ``categories``."""
    qids = list(categories)
    missing = [q for q in qids if q not in top]
    if missing:
        raise InputError(
            "abstention",
            f"{len(missing)} queries have a category but no top-score entry (e.g. {missing[0]!r})",
            "build top scores with top_scores(run, qids) over the same query set",
        )
    scores = np.array([np.nan if top[q] is None else float(top[q]) for q in qids], dtype=np.float64)  # type: ignore[arg-type]
    no_answer = np.array([categories[q] in NO_ANSWER_CATEGORIES for q in qids], dtype=bool)
    return scores, no_answer


def _report(scores: np.ndarray, no_answer: np.ndarray, threshold: float | None) -> AbstentionReport:
    refused = np.isnan(scores)
    if threshold is not None:
        refused = refused | (np.nan_to_num(scores, nan=np.inf) < threshold)
    n_na = int(no_answer.sum())
    n_ans = int((~no_answer).sum())
    cr = int((refused & no_answer).sum())
    fr = int((refused & ~no_answer).sum())
    crr = cr / n_na if n_na else float("nan")
    frr = fr / n_ans if n_ans else float("nan")
    total = n_na + n_ans
    return AbstentionReport(
        threshold=threshold,
        n_no_answer=n_na,
        correct_refusals=cr,
        wrong_answer_count=n_na - cr,
        correct_refusal_rate=crr,
        n_answerable=n_ans,
        false_refusals=fr,
        false_refusal_rate=frr,
        balanced_accuracy=(crr + 1.0 - frr) / 2.0,
        accuracy=(cr + n_ans - fr) / total if total else float("nan"),
    )


def score_abstention(
    top: Mapping[str, float | None], categories: Mapping[str, str], threshold: float | None = None
) -> AbstentionReport:
    """Refusal statistics of one run. ``top``: :func:`top_scores`; ``categories``: ``qid -> category`` (e.g.
    ``result.per_query["category"]``); ``threshold``: refuse below it (``None``: refuse only empty results)."""
    if threshold is not None and not math.isfinite(float(threshold)):
        raise ConfigError("abstention.threshold", threshold, "give a finite number or None")
    scores, no_answer = _split(top, dict(categories))
    return _report(scores, no_answer, None if threshold is None else float(threshold))


def abstention_report(result: Any, run: Run, threshold: float | None = None) -> AbstentionReport:
    """:func:`score_abstention` over an :class:`~ablate.evaluation.EvalResult`'s declared queries and their run."""
    cats = result.per_query["category"].to_dict()
    return score_abstention(top_scores(run, cats), cats, threshold)


#: The same function under its module-level name (``from ablate.evaluation.abstention import abstention``, as the
#: pipeline imports it). The package exports it as ``abstention_report`` so it does not shadow this module.
abstention = abstention_report


def _balanced_accuracy(cr: np.ndarray, fr: np.ndarray, n_na: int, n_ans: int) -> np.ndarray:
    return (cr / n_na + 1.0 - fr / n_ans) / 2.0


def _accuracy(cr: np.ndarray, fr: np.ndarray, n_na: int, n_ans: int) -> np.ndarray:
    return (cr + n_ans - fr) / (n_na + n_ans)


#: Objectives for :func:`choose_threshold`, as functions of (correct refusals, false refusals, n no-answer,
#: n answerable) evaluated for every candidate threshold at once.
OBJECTIVES: dict[str, Callable[[np.ndarray, np.ndarray, int, int], np.ndarray]] = {
    "balanced_accuracy": _balanced_accuracy,
    "accuracy": _accuracy,
}


@dataclass(frozen=True)
class ThresholdChoice:
    threshold: float | None
    objective: str
    value: float
    report: AbstentionReport  # on the split it was chosen on
    rule: str = (
        "candidates: every distinct top score s (answer when top >= s) and one above the maximum (refuse all); the "
        "objective's maximum wins, ties go to the smallest threshold (fewest refusals); a winner that refuses no "
        "query with a result is returned as None"
    )


def choose_threshold(
    top: Mapping[str, float | None], categories: Mapping[str, str], objective: str = "balanced_accuracy"
) -> ThresholdChoice:
    """Pick the refusal threshold on a dev split that maximises ``objective`` (default balanced accuracy =
    (correct refusal rate + 1 - false refusal rate) / 2, which weighs the two kinds of question equally however
    few no-answer questions there are)."""
    if objective not in OBJECTIVES:
        raise ConfigError("abstention.objective", objective, f"valid options: {', '.join(OBJECTIVES)}")
    scores, no_answer = _split(top, dict(categories))
    if not no_answer.any() or no_answer.all():
        raise InputError(
            "abstention dev split",
            f"needs both no-answer and answerable queries to choose a threshold (has {int(no_answer.sum())} "
            f"no-answer of {len(no_answer)})",
            "choose the threshold on a split that has both kinds of question, or use threshold=None",
        )
    finite = np.unique(scores[~np.isnan(scores)])
    # Candidate t refuses every query with top < t: t = each distinct score, plus one above the maximum.
    cands = np.append(finite, np.nextafter(finite[-1], np.inf)) if finite.size else np.array([np.inf])
    na_sorted = np.sort(scores[no_answer & ~np.isnan(scores)])
    ans_sorted = np.sort(scores[~no_answer & ~np.isnan(scores)])
    cr = int(np.isnan(scores[no_answer]).sum()) + np.searchsorted(na_sorted, cands, side="left")
    fr = int(np.isnan(scores[~no_answer]).sum()) + np.searchsorted(ans_sorted, cands, side="left")
    values = OBJECTIVES[objective](
        cr.astype(float), fr.astype(float), int(no_answer.sum()), int((~no_answer).sum())
    )
    # first maximum = smallest threshold; "equal" up to float rounding (2/3 + 1 and 1 + 1 - 1/3 must tie)
    best = int(np.argmax(values >= values.max() - 1e-12))
    thr: float | None = float(cands[best])
    if best == 0 or not finite.size:  # refuses no query that has a result
        thr = None
    return ThresholdChoice(
        threshold=thr, objective=objective, value=float(values[best]), report=_report(scores, no_answer, thr)
    )
