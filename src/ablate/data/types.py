"""The data types every stage speaks: documents, chunks, queries, qrels and runs.

Conventions (see docs/architecture.md):

* A **document** is one line of ``corpus.jsonl``; ``doc_id`` is unique in a snapshot. Two versions of one policy are
  two documents (``POL-TRAVEL-2025``, ``POL-TRAVEL-2026``) that share a ``series`` and differ in ``version``.
* A **chunk** is the unit retrievers index and return. Its id is ``doc_id`` when the document is indexed whole, else
  ``f"{doc_id}#{local}"`` (``POL-TRAVEL-2026#4.2-a``, ``DOC#p3``, ``DOC#t0``). Every chunk keeps its ``doc_id`` and
  ``version``: the chunk->doc mapping is explicit, never parsed back out of the id.
* A **run** maps a query id to its ranked hits; ranks are 1-based and implied by list position. Ties in score are
  broken by a declared rule (:data:`TIE_RULE`) before a run is built, so a run's order is its ranking.
* **Qrels** are graded judgements ``qid -> {unit_id: grade}`` with a declared ``unit`` (``doc`` or ``chunk``). A
  judged grade of 0 means *judged non-relevant*; an id absent from a query's judgements is *unjudged* (unknown).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

Unit = Literal["doc", "chunk"]
UNITS: tuple[str, ...] = ("doc", "chunk")

#: The tie rule every stage applies when two results share a score: higher score first, then the smaller
#: chunk id (plain string order). It is logged with every run.
TIE_RULE = "score desc, then id asc"


@dataclass(frozen=True)
class Section:
    """A labelled part of a document (a clause such as ``4.2-a``, a table row group, ...)."""

    sid: str
    text: str
    title: str = ""


@dataclass(frozen=True)
class Document:
    doc_id: str
    title: str
    text: str
    version: str | None = None
    effective_date: str | None = None
    acl: tuple[str, ...] = ()  # groups allowed to see it; empty = everyone
    series: str | None = None  # what versions of one document share
    sections: tuple[Section, ...] = ()
    metadata: Mapping[str, object] = field(default_factory=dict)

    def visible_to(self, groups: Iterable[str] | None) -> bool:
        """True when an identity holding ``groups`` may see this document (``None`` = no filtering)."""
        if groups is None or not self.acl:
            return True
        return bool(set(self.acl) & set(groups))


@dataclass(frozen=True)
class Chunk:
    chunk_id: str
    doc_id: str
    text: str  # the text that is indexed and encoded (title prefix included where the chunker adds it)
    version: str | None = None
    position: int = 0  # order inside its document
    acl: tuple[str, ...] = ()

    def visible_to(self, groups: Iterable[str] | None) -> bool:
        if groups is None or not self.acl:
            return True
        return bool(set(self.acl) & set(groups))


@dataclass(frozen=True)
class SubQuestion:
    """One condition of a multi-condition question (seed 003: "every sub-question has evidence" is not "all relevant
    material found"). It is covered by any ONE of its ``evidence`` units (ids at the labels' unit: doc ids for
    ``qrels_unit: doc``, chunk ids for ``qrels_unit: chunk``; lifted to documents like qrels)."""

    sid: str
    text: str
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Query:
    qid: str
    text: str
    tags: tuple[str, ...] = ()
    persona: str | None = None
    as_of: str | None = None
    answers: tuple[str, ...] = ()
    split: str | None = None
    group: str | None = None  # near-duplicate group (same answer location); keeps splits leakage-safe
    subquestions: tuple[SubQuestion, ...] = ()  # multi-condition questions: what every part needs as evidence
    answer_parts: tuple[
        tuple[str, ...], ...
    ] = ()  # the parts an answer must all contain, each as its aliases
    # (aligned with ``subquestions`` when the question has them)


@dataclass(slots=True, unsafe_hash=True)
class Hit:
    """One ranked result. ``score`` only orders results; it is not a probability of anything.

    A value: never changed after it is made (make a new one, ``dataclasses.replace``). Not ``frozen``, because a
    frozen dataclass builds 3.4x slower here (1.57 vs 0.47 us), and runs are made of millions of hits."""

    chunk_id: str
    doc_id: str
    score: float
    version: str | None = None


@dataclass
class Run:
    """Ranked hits per query. ``name`` says which system produced it; ``meta`` carries its fingerprints."""

    name: str
    results: dict[str, list[Hit]]
    meta: dict[str, object] = field(default_factory=dict)

    def __iter__(self) -> Iterator[str]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def get(self, qid: str) -> list[Hit]:
        return self.results.get(qid, [])

    def truncated(self, depth: int) -> Run:
        return Run(self.name, {q: hits[:depth] for q, hits in self.results.items()}, dict(self.meta))

    def to_trec(self, tag: str | None = None, unit: Unit = "chunk") -> str:
        """TREC run text: ``qid Q0 id rank score tag``, one line per hit, ranks from 1, scores at full precision (so a
        reader that sorts by score, as trec_eval does, gets this order back)."""
        tag = tag or self.name
        lines = []
        for qid, hits in self.results.items():
            for rank, h in enumerate(hits, start=1):
                uid = h.chunk_id if unit == "chunk" else h.doc_id
                lines.append(f"{qid} Q0 {uid} {rank} {h.score!r} {tag}")
        return "\n".join(lines) + ("\n" if lines else "")


def rank_hits(hits: Iterable[Hit]) -> list[Hit]:
    """Sort by :data:`TIE_RULE`."""
    return sorted(hits, key=lambda h: (-h.score, h.chunk_id))


@dataclass
class Qrels:
    """Graded judgements of one split, at a declared unit."""

    judgements: dict[str, dict[str, int]]
    unit: Unit = "doc"
    name: str = ""
    source_sha256: str = ""  # hash of the file(s) they came from; logged as the label version

    def positives(self, qid: str, min_grade: int = 1) -> dict[str, int]:
        return {u: g for u, g in self.judgements.get(qid, {}).items() if g >= min_grade}

    def content_hash(self) -> str:
        """Hash of the judgements themselves (order-independent), independent of file formatting."""
        h = hashlib.sha256(self.unit.encode())
        for qid in sorted(self.judgements):
            for uid, g in sorted(self.judgements[qid].items()):
                h.update(f"\n{qid}\t{uid}\t{g}".encode())
        return h.hexdigest()
