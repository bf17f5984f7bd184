"""Evaluation of ranked runs against graded qrels, by declared rules (:mod:`ablate.evaluation.rules`).

* :func:`evaluate` (:mod:`~ablate.evaluation.retrieval`) / :class:`EvalSettings` (:mod:`~ablate.evaluation.settings`)
  / :class:`EvalResult` (:mod:`~ablate.evaluation.result`): units and budgets (chunk -> doc, dedup), hit, recall, RR,
  nDCG, judged share, completeness and unjudged counts per query and K (:mod:`~ablate.evaluation.metrics`); query
  accounting (:mod:`~ablate.evaluation.accounting`); the unjudged export.
* :mod:`~ablate.evaluation.scoring`: :func:`~ablate.evaluation.scoring.score_run`, the one scoring entry point.
* :mod:`~ablate.evaluation.slices`: means per question-type tag.
* :mod:`~ablate.evaluation.abstention`: no-answer questions scored apart (refusals, thresholds).
* :mod:`~ablate.evaluation.io`: TREC runs (qrels: :mod:`ablate.data.qrels`).
* :mod:`~ablate.evaluation.stats`: bootstrap intervals over queries, paired tests, Holm, Wilson.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ablate.evaluation.abstention import (
        AbstentionReport,
        ThresholdChoice,
        abstention_report,
        choose_threshold,
        score_abstention,
        top_scores,
    )
    from ablate.evaluation.accounting import CATEGORIES, STATUSES
    from ablate.evaluation.io import TIE_RULES, read_qrels, read_trec_run
    from ablate.evaluation.metrics import METRICS, mean_key, means_of
    from ablate.evaluation.result import EvalResult
    from ablate.evaluation.retrieval import evaluate
    from ablate.evaluation.rules import RULES, applied_rules
    from ablate.evaluation.settings import DEFAULT_SETTINGS, EvalSettings
    from ablate.evaluation.slices import slice_means
    from ablate.evaluation.units import judgements_at, ranked_units, resolve_unit

#: Public name -> the submodule defining it. Loaded on first use (PEP 562), so importing a light submodule
#: (``ablate.evaluation.io`` for the tie rules an entry point's ``--help`` lists) does not import pandas.
_EXPORTS: dict[str, str] = {
    "AbstentionReport": "abstention",
    "ThresholdChoice": "abstention",
    "abstention_report": "abstention",
    "choose_threshold": "abstention",
    "score_abstention": "abstention",
    "top_scores": "abstention",
    "CATEGORIES": "accounting",
    "STATUSES": "accounting",
    "DEFAULT_SETTINGS": "settings",
    "EvalSettings": "settings",
    "METRICS": "metrics",
    "mean_key": "metrics",
    "means_of": "metrics",
    "RULES": "rules",
    "applied_rules": "rules",
    "EvalResult": "result",
    "evaluate": "retrieval",
    "TIE_RULES": "io",
    "read_qrels": "io",
    "read_trec_run": "io",
    "slice_means": "slices",
    "judgements_at": "units",
    "ranked_units": "units",
    "resolve_unit": "units",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__all__ = [
    "CATEGORIES",
    "DEFAULT_SETTINGS",
    "METRICS",
    "RULES",
    "STATUSES",
    "TIE_RULES",
    "AbstentionReport",
    "EvalResult",
    "EvalSettings",
    "ThresholdChoice",
    "abstention_report",
    "applied_rules",
    "choose_threshold",
    "evaluate",
    "judgements_at",
    "mean_key",
    "means_of",
    "ranked_units",
    "read_qrels",
    "read_trec_run",
    "resolve_unit",
    "score_abstention",
    "slice_means",
    "top_scores",
]
