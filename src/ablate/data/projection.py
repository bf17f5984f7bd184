"""Labels that follow the chunks: chunk-level labels made on one chunking, projected onto another by character spans.

Chunk-level labels (qrels and sub-question evidence) name the chunks of the chunking they were made on, the corpus's
own (``corpus.yaml``'s ``chunker``). Re-chunking makes new ids; each new chunk covers characters of its document
(:attr:`ablate.data.types.Chunk.span`, one coordinate system per document: :mod:`ablate.data.chunking`), and so did
every labelled chunk. The rule (:data:`RULE`), for one question:

* a new chunk N **takes** a labelled span L of the same document when they share ``o > 0`` characters and
  ``o >= min_overlap * len(L)`` (N covers that share of the label) **or** ``o >= min_overlap * len(N)`` (the label
  fills that share of N). Both sides count, so a small chunk inside a long clause and a long window around a short
  clause both take it; exactly at the threshold counts;
* N's grade is the **best** (highest) grade among the spans it takes. A grade 0 (judged non-relevant) or negative
  label projects too: N stays judged. A chunk that takes no labelled span stays **unjudged**;
* a label taken by no new chunk is **lost** (also when its span could not be located); taken by two or more, it is
  **split**; a new chunk taking two or more labels of one question **merges** them.

Sub-question evidence (any one unit covers the sub-question) follows by the same rule: the new evidence is every new
chunk that takes one of the old evidence spans. Pure functions over plain spans; :mod:`ablate.data.corpus` applies
them when a corpus with chunk-level labels is loaded with another chunker than its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ablate.errors import ConfigError

#: The rule's name as runs log it (``labels.projection.rule``).
RULE = "span-overlap/1: best grade of the labelled spans a chunk shares >= min_overlap of (label or chunk)"
#: The default share (``eval.projection.min_overlap``).
DEFAULT_MIN_OVERLAP = 0.5


@dataclass(frozen=True)
class Span:
    """Characters ``[start, end)`` of document ``doc_id`` that unit ``unit_id`` covers."""

    unit_id: str
    doc_id: str
    start: int
    end: int

    def __len__(self) -> int:
        return max(0, self.end - self.start)


@dataclass
class Counts:
    """What a projection did, over every (question, label) pair: ``labels`` in, ``projected`` (taken by at least one
    new chunk), ``split`` (taken by two or more), ``lost`` (taken by none), ``merged`` (new chunks that took two or
    more labels of one question), ``judged`` (new (question, chunk) judgements out); the same for sub-question
    evidence (``evidence``, ``evidence_lost``) and the sub-questions left without any evidence."""

    labels: int = 0
    projected: int = 0
    split: int = 0
    lost: int = 0
    merged: int = 0
    judged: int = 0
    evidence: int = 0
    evidence_lost: int = 0
    subquestions_without_evidence: int = 0

    def add(self, other: Counts) -> None:
        for k, v in other.as_dict().items():
            setattr(self, k, getattr(self, k) + v)

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class Projection:
    """Projected judgements ``qid -> {new chunk id: grade}`` and the counts."""

    judgements: dict[str, dict[str, int]]
    counts: Counts = field(default_factory=Counts)


def check_min_overlap(value: object, key: str = "eval.projection.min_overlap") -> float:
    """The share as a float in ``(0, 1]``, else :class:`ConfigError` naming ``key``."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 < float(value) <= 1
    if not ok:
        raise ConfigError(key, value, "give a share of characters in (0, 1], e.g. 0.5")
    return float(value)  # type: ignore[arg-type]


def overlap(a: Span, b: Span) -> int:
    """Characters two spans of one document share (0 for different documents)."""
    if a.doc_id != b.doc_id:
        return 0
    return max(0, min(a.end, b.end) - max(a.start, b.start))


def takes(new: Span, label: Span, min_overlap: float) -> bool:
    """Does ``new`` take ``label`` (module docstring)?"""
    o = overlap(new, label)
    return o > 0 and (o >= min_overlap * len(label) or o >= min_overlap * len(new))


class SpanIndex:
    """The new chunks' spans by document, so each label is checked against its own document's chunks only."""

    def __init__(self, spans: Iterable[Span]) -> None:
        self.by_doc: dict[str, list[Span]] = {}
        for s in spans:
            self.by_doc.setdefault(s.doc_id, []).append(s)

    def taking(self, label: Span | None, min_overlap: float) -> list[str]:
        """Ids of the new chunks that take ``label`` (in chunk order); none for an unlocated label."""
        if label is None or len(label) == 0:
            return []
        return [n.unit_id for n in self.by_doc.get(label.doc_id, ()) if takes(n, label, min_overlap)]


def project_judgements(
    judgements: Mapping[str, Mapping[str, int]],
    old: Mapping[str, Span | None],
    new: SpanIndex,
    min_overlap: float,
) -> Projection:
    """``judgements`` (``qid -> {old unit id: grade}``) onto the new chunks by :data:`RULE`. ``old``: each labelled
    unit's span (``None``: not located, so lost)."""
    out: dict[str, dict[str, int]] = {}
    counts = Counts()
    for qid, judged in judgements.items():
        grades: dict[str, int] = {}
        taken_by: dict[str, int] = {}
        for uid, grade in judged.items():
            counts.labels += 1
            got = new.taking(old.get(uid), min_overlap)
            if not got:
                counts.lost += 1
                continue
            counts.projected += 1
            counts.split += len(got) > 1
            for cid in got:
                taken_by[cid] = taken_by.get(cid, 0) + 1
                if cid not in grades or grades[cid] < grade:
                    grades[cid] = grade
        counts.merged += sum(1 for n in taken_by.values() if n > 1)
        counts.judged += len(grades)
        out[qid] = grades
    return Projection(out, counts)


def project_evidence(
    evidence: Sequence[str],
    old: Mapping[str, Span | None],
    new: SpanIndex,
    min_overlap: float,
    counts: Counts,
) -> tuple[str, ...]:
    """A sub-question's evidence ids onto the new chunks (any one covers it); counts what was lost."""
    got: dict[str, None] = {}
    for uid in evidence:
        counts.evidence += 1
        ids = new.taking(old.get(uid), min_overlap)
        counts.evidence_lost += not ids
        got.update(dict.fromkeys(ids))
    counts.subquestions_without_evidence += not got
    return tuple(got)
