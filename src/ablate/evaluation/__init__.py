"""Evaluation of ranked runs against graded qrels, by declared rules (see :mod:`ablate.evaluation.core`).

* :func:`evaluate` / :class:`EvalSettings` / :class:`EvalResult`: units and budgets (chunk -> doc, dedup), hit, recall,
  RR, nDCG, judged share, completeness and unjudged counts per query and K; query accounting; the unjudged export.
* :mod:`~ablate.evaluation.slices`: means per question-type tag.
* :mod:`~ablate.evaluation.abstention`: no-answer questions scored apart (refusals, thresholds).
* :mod:`~ablate.evaluation.io`: TREC runs (qrels: :mod:`ablate.data.qrels`).
* :mod:`~ablate.evaluation.stats`: bootstrap intervals over queries, paired tests, Holm.
"""

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
