"""Evaluation of ranked runs against graded qrels, by declared rules (see :mod:`ablate.evaluation.core`).

* :func:`evaluate` / :class:`EvalSettings` / :class:`EvalResult`: units and budgets (chunk -> doc, dedup), hit, recall,
  RR, nDCG, judged share, completeness and unjudged counts per query and K; query accounting; the unjudged export.
* :mod:`~ablate.evaluation.slices`: means per question-type tag.
* :mod:`~ablate.evaluation.abstention`: no-answer questions scored apart (refusals, thresholds).
* :mod:`~ablate.evaluation.io`: TREC runs (qrels: :mod:`ablate.data.qrels`).
* :mod:`~ablate.evaluation.stats`: bootstrap intervals over queries, paired tests, Holm.
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
    from ablate.evaluation.core import (
        CATEGORIES,
        DEFAULT_SETTINGS,
        METRICS,
        RULES,
        STATUSES,
        EvalResult,
        EvalSettings,
        applied_rules,
        evaluate,
        mean_key,
        means_of,
    )
    from ablate.evaluation.io import TIE_RULES, read_qrels, read_trec_run
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
    "CATEGORIES": "core",
    "DEFAULT_SETTINGS": "core",
    "METRICS": "core",
    "RULES": "core",
    "STATUSES": "core",
    "EvalResult": "core",
    "EvalSettings": "core",
    "applied_rules": "core",
    "evaluate": "core",
    "mean_key": "core",
    "means_of": "core",
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
