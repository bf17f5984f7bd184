"""What a run of a corpus split is scored against, built one way for the pipeline and for every re-score.

:func:`scoring_inputs` turns a snapshot, a split and an :class:`~ablate.runner.access.Access` (who asks, when, which
version policy) into the labels as each asker sees them on its date, the question set and the
:class:`~ablate.evaluation.scoring.ScoringContext` that :func:`ablate.evaluation.scoring.score_run` needs. The
pipeline scores its final ranking with it; ``python -m ablate.evaluate --corpus`` / ``--from-run`` score a run file
with it. Both then call the same :func:`~ablate.evaluation.scoring.score_run`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ablate.data.snapshot import Snapshot
from ablate.data.types import Qrels
from ablate.evaluation.answer_scores import Answered
from ablate.evaluation.scoring import ScoringContext
from ablate.runner.access import Access, Resolver, access_rules


@dataclass
class ScoringInputs:
    """``labels``: as the askers see them on their dates; ``raw_labels``: before the identity and date rules;
    ``permissions``: what the rules changed (:meth:`ablate.runner.access.Resolver.labels`)."""

    qids: list[str]
    labels: Qrels
    raw_labels: Qrels
    context: ScoringContext
    permissions: dict[str, Any] = field(default_factory=dict)


def scoring_inputs(
    snapshot: Snapshot,
    split: str,
    access: Access,
    *,
    raw_labels: Qrels | None = None,
    abstain_threshold: float | None = None,
    answers: Mapping[str, Answered] | None = None,
    resolver: Resolver | None = None,
) -> ScoringInputs:
    """See the module docstring. ``raw_labels``: other labels than the split's own (``--qrels`` of
    ``python -m ablate.evaluate``), at the corpus's unit."""
    resolver = resolver if resolver is not None else Resolver(snapshot, access)
    qids = snapshot.split_qids(split)
    raw = raw_labels if raw_labels is not None else snapshot.split_qrels(split)
    labels, permissions = resolver.labels(raw, qids)
    dated = access.as_of is not None
    context = ScoringContext(
        chunk_to_doc=snapshot.chunk_to_doc,
        labels_unit=snapshot.qrels_unit,
        queries=snapshot.queries,
        chunk_text=snapshot.chunk_text,
        raw_labels=raw if dated else None,
        out_of_force={q: resolver.out_of_force(q) for q in qids} if dated else None,
        rules=access_rules(access),
        abstain_threshold=abstain_threshold,
        personas=access.per_query_identity,
        answers=answers,
    )
    return ScoringInputs(list(qids), labels, raw, context, permissions)
