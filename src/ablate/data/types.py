"""The data types every stage speaks: documents, chunks, queries, qrels and runs.

Conventions (see docs/architecture.md):

* A **document** is one line of ``corpus.jsonl``; ``doc_id`` is unique in a snapshot. Two versions of one policy are
  two documents (``POL-TRAVEL-2025``, ``POL-TRAVEL-2026``) that share a ``series`` and differ in ``version``.
* A **chunk** is the unit retrievers index and return. Its id is ``doc_id`` when the document is indexed whole, else
  ``f"{doc_id}#{local}"`` (``POL-TRAVEL-2026#4.2-a``, ``DOC#p3``, ``DOC#t0``). Every chunk keeps its ``doc_id`` and
  ``version``: the chunk->doc mapping is explicit, never parsed back out of the id.
* A **run** maps a query id to its ranked hits; ranks are 1-based and implied by list position. Ties in score are
  broken by a declared rule (:data:`TIE_RULE`) before a run is built, so a run's order is its ranking.
* A run may also carry its results as **integer codes** (:class:`RunCodes`): positions in the snapshot's chunk table
  (:class:`IdTable`). Producers that already work on positions (BM25, dense, the candidate cache) hand them on, so
  evaluation can score a run without reading an id string per result; the Hit lists stay the run's meaning.
* **Qrels** are graded judgements ``qid -> {unit_id: grade}`` with a declared ``unit`` (``doc`` or ``chunk``). A
  judged grade of 0 means *judged non-relevant*; an id absent from a query's judgements is *unjudged* (unknown).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

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
    #: ``[start, end)`` of the document text this chunk covers, in characters of ``Document.text``
    #: (:mod:`ablate.data.chunking`); ``None`` when it could not be located (or the chunk was built by hand)
    span: tuple[int, int] | None = None

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
    candidates: tuple[
        str, ...
    ] = ()  # the choices a comparison question offers (the answer rule's candidates)


@dataclass(slots=True, unsafe_hash=True)
class Hit:
    """One ranked result. ``score`` only orders results; it is not a probability of anything.

    A value: never changed after it is made (make a new one, ``dataclasses.replace``). Not ``frozen``, because a
    frozen dataclass builds several times slower (``experiments/results/bench_design.md``), and runs are made of
    millions of hits."""

    chunk_id: str
    doc_id: str
    score: float
    version: str | None = None


class IdTable:
    """A snapshot's chunk table: position = **code**. Holds each chunk's id, document id and version, and derives
    (once, cached) the ``chunk id -> code`` dict and the per-unit code arrays a coded run is scored with.

    Runs that share a table can be compared code for code; the table is never changed after it is built (a rebuilt
    snapshot builds a new table)."""

    def __init__(
        self, chunk_ids: Sequence[str], doc_ids: Sequence[str], versions: Sequence[str | None]
    ) -> None:
        if not len(chunk_ids) == len(doc_ids) == len(versions):
            raise ValueError("IdTable: chunk_ids, doc_ids and versions differ in length")
        self.chunk_ids: list[str] = list(chunk_ids)
        self.doc_ids: list[str] = list(doc_ids)
        self.versions: list[str | None] = list(versions)
        self._index: dict[str, int] | None = None
        self._units: dict[str, tuple[np.ndarray, list[str]]] = {}
        self._memo: dict[object, Any] = {}

    @classmethod
    def of(cls, chunks: Sequence[Chunk]) -> IdTable:
        return cls([c.chunk_id for c in chunks], [c.doc_id for c in chunks], [c.version for c in chunks])

    def __len__(self) -> int:
        return len(self.chunk_ids)

    def __repr__(self) -> str:
        return f"IdTable({len(self)} chunks)"

    @property
    def index(self) -> dict[str, int]:
        """``chunk id -> code`` (built on first use). Chunk ids are unique in a table; a repeat is refused."""
        if self._index is None:
            index = {c: i for i, c in enumerate(self.chunk_ids)}
            if len(index) != len(self.chunk_ids):
                raise ValueError("IdTable: a chunk id occurs twice")
            self._index = index
        return self._index

    def unit_codes(self, unit: str) -> tuple[np.ndarray, list[str]]:
        """``(codes, ids)`` of ``unit`` (``doc`` or ``chunk``): ``codes[c]`` is chunk c's unit code (int64) and
        ``ids[u]`` the id of unit code u, the distinct ids numbered in order of first appearance. For ``chunk`` this
        is ``arange`` (chunk ids are unique in a snapshot; a table that repeats one still gets one code per id).
        Built once per unit and cached."""
        got = self._units.get(unit)
        if got is None:
            if unit not in UNITS:
                raise ValueError(f"IdTable.unit_codes: unknown unit {unit!r}")
            first: dict[str, int] = {}
            ids = self.doc_ids if unit == "doc" else self.chunk_ids
            codes = np.fromiter(
                (first.setdefault(i, len(first)) for i in ids), dtype=np.int64, count=len(self)
            )
            got = (codes, list(first))
            got[0].setflags(write=False)
            self._units[unit] = got
        return got

    def memo(self, key: object, build: Callable[[], Any]) -> Any:
        """A value derived from this table, built once by ``build`` and kept for the table's lifetime (an index a
        consumer such as evaluation needs over the table's ids; the table stays free of what consumers derive)."""
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]

    def id_order(self) -> np.ndarray:
        """Each code's rank when the chunk ids are sorted in plain string order (the tie rule's "id asc"), int64,
        built once: what retrievers and RRF break ties with."""

        def build() -> np.ndarray:
            order = np.empty(len(self), dtype=np.int64)
            order[np.argsort(np.array(self.chunk_ids, dtype=object), kind="stable")] = np.arange(len(self))
            order.setflags(write=False)
            return order

        got: np.ndarray = self.memo("id-order", build)
        return got


@dataclass(frozen=True, eq=False)
class RunCodes:
    """A run's results as integers over an :class:`IdTable`: query ``qids[i]``'s results are
    ``codes[offsets[i]:offsets[i + 1]]`` in rank order, with ``scores`` aligned. Never changed once built."""

    table: IdTable
    qids: list[str]
    offsets: np.ndarray  # int64, len(qids) + 1, offsets[0] == 0, non-decreasing
    codes: np.ndarray  # int64 chunk codes, rank order within each query
    scores: np.ndarray  # float64

    def __post_init__(self) -> None:
        offsets = np.asarray(self.offsets, dtype=np.int64)
        codes = np.asarray(self.codes, dtype=np.int64)
        scores = np.asarray(self.scores, dtype=np.float64)
        if offsets.shape != (len(self.qids) + 1,) or offsets[0] != 0 or (np.diff(offsets) < 0).any():
            raise ValueError("RunCodes: offsets must have len(qids) + 1 non-decreasing entries from 0")
        if codes.shape != (int(offsets[-1]),) or scores.shape != codes.shape:
            raise ValueError("RunCodes: codes and scores must have offsets[-1] entries")
        if len(codes) and (int(codes.min()) < 0 or int(codes.max()) >= len(self.table)):
            raise ValueError("RunCodes: a code is outside the table")
        if len(set(self.qids)) != len(self.qids):
            raise ValueError("RunCodes: a query id occurs twice")
        for a in (offsets, codes, scores):
            a.setflags(write=False)
        object.__setattr__(self, "qids", list(self.qids))
        object.__setattr__(self, "offsets", offsets)
        object.__setattr__(self, "codes", codes)
        object.__setattr__(self, "scores", scores)

    @classmethod
    def from_lists(
        cls, table: IdTable, qids: Sequence[str], codes: Sequence[Any], scores: Sequence[Any]
    ) -> RunCodes:
        """From one code sequence and one score sequence per query (aligned with ``qids``)."""
        lens = np.fromiter(map(len, codes), dtype=np.int64, count=len(qids))
        offsets = np.zeros(len(qids) + 1, dtype=np.int64)
        np.cumsum(lens, out=offsets[1:])
        flat_c = np.zeros(0, dtype=np.int64)
        flat_s = np.zeros(0, dtype=np.float64)
        if len(codes):
            flat_c = np.concatenate([np.asarray(c, dtype=np.int64).reshape(-1) for c in codes])
            flat_s = np.concatenate([np.asarray(x, dtype=np.float64).reshape(-1) for x in scores])
        return cls(table, list(qids), offsets, flat_c, flat_s)

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def truncated(self, depth: int) -> RunCodes:
        """The first ``depth`` results of every query (what :meth:`Run.truncated` keeps)."""
        lens = self.lengths()
        if not len(lens) or int(lens.max()) <= depth:
            return self
        rank = np.arange(len(self.codes)) - np.repeat(self.offsets[:-1], lens)
        keep = rank < depth
        offsets = np.zeros_like(self.offsets)
        np.cumsum(np.minimum(lens, depth), out=offsets[1:])
        return RunCodes(self.table, self.qids, offsets, self.codes[keep], self.scores[keep])

    def results(self) -> dict[str, list[Hit]]:
        """The Hit lists these codes describe, query by query."""
        t = self.table
        cids, dids, vers = t.chunk_ids, t.doc_ids, t.versions
        codes, scores, off = self.codes.tolist(), self.scores.tolist(), self.offsets.tolist()
        return {
            q: [Hit(cids[c], dids[c], s, vers[c]) for c, s in zip(codes[a:b], scores[a:b], strict=True)]
            for q, a, b in zip(self.qids, off[:-1], off[1:], strict=True)
        }


@dataclass
class Run:
    """Ranked hits per query. ``name`` says which system produced it; ``meta`` carries its fingerprints.

    ``codes``, when set, describes exactly the same results as integers (same queries in the same order, same
    chunks, same scores; see :meth:`from_codes`), so evaluation can skip reading the ids. Runs are never mutated once
    built; anything that builds a new run from Hit lists leaves ``codes`` unset."""

    name: str
    results: dict[str, list[Hit]]
    meta: dict[str, object] = field(default_factory=dict)
    codes: RunCodes | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_codes(cls, name: str, codes: RunCodes, meta: dict[str, object] | None = None) -> Run:
        """A run whose Hit lists are built from ``codes`` (so every consumer of ``results`` works unchanged) and
        which carries the codes."""
        return cls(name, codes.results(), dict(meta or {}), codes)

    def __iter__(self) -> Iterator[str]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def get(self, qid: str) -> list[Hit]:
        return self.results.get(qid, [])

    def truncated(self, depth: int) -> Run:
        codes = None if self.codes is None else self.codes.truncated(depth)
        return Run(self.name, {q: hits[:depth] for q, hits in self.results.items()}, dict(self.meta), codes)

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
