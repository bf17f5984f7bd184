"""The questions and labels a new study starts from (``python -m ablate.init``): one template question of each kind
the spec names, pointing at the corpus's real documents or sections, and one example label row per question.

Template questions carry the tag ``template`` (:data:`TEMPLATE_TAG`); :func:`ablate.data.corpus_files.load_queries`
refuses a corpus that still holds one, naming its line, so a template can never be scored as if it were a question.
The kinds: single-hop, multi-hop (sub-questions with their evidence, two different units), no-answer (see
:data:`NO_ANSWER_RULE`), version conflict (two versions of one ``series`` when the corpus has them),
table (a section that reads as a table row) and cross-permission (evidence only some identities see).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ablate.data.types import Chunk, Document

#: The tag that marks a question ``ablate.init`` wrote and the user has not filled in yet.
TEMPLATE_TAG = "template"
#: The labels file ``ablate.init`` writes (any one labels file makes an exploratory pilot).
LABELS_FILE = "qrels/labels.tsv"
#: How a question the documents do not answer is labelled, as the scorer reads it (:mod:`ablate.evaluation.rules`,
#: categories ``no_answer`` and ``idcg_zero``): it is scored apart, where refusing is right.
NO_ANSWER_RULE = (
    "a question with no row of grade >= 1 is a no-answer question, scored apart (refusing it is right): give it "
    "grade-0 rows only (at least one, e.g. the unit that looks closest; a question with no row at all is in no "
    "split and never runs) and leave its answers empty"
)


@dataclass(frozen=True)
class StudyTemplate:
    """``queries``: the template questions as ``queries.jsonl`` objects; ``labels``: (query id, unit id, grade) rows
    for the labels file, at the corpus's unit (document ids or chunk ids)."""

    queries: list[dict[str, Any]]
    labels: list[tuple[str, str, int]]


def _unit(chunk: Chunk, unit: str) -> str:
    return chunk.chunk_id if unit == "chunk" else chunk.doc_id


def _pick(chunks: Sequence[Chunk], i: int) -> Chunk:
    return chunks[i % len(chunks)]


def _versioned(docs: Mapping[str, Document]) -> list[Document]:
    """Two documents of one ``series`` (older first), or none."""
    by: dict[str, list[Document]] = {}
    for d in docs.values():
        if d.series:
            by.setdefault(d.series, []).append(d)
    for versions in by.values():
        if len(versions) > 1:
            return sorted(versions, key=lambda d: (d.effective_date or "", d.version or ""))[:2]
    return []


def _table_chunk(chunks: Sequence[Chunk]) -> Chunk | None:
    for c in chunks:
        if "row" in c.chunk_id.split("#", 1)[-1].lower() or c.text.count("|") >= 2:
            return c
    return None


def _distinct(b: _Builder, chunks: Sequence[Chunk], start: int, n: int) -> list[Chunk]:
    """Up to ``n`` of ``chunks`` from position ``start`` on (going round) whose units all differ: two chunks of one
    document are one unit when labels name documents."""
    out: list[Chunk] = []
    seen: set[str] = set()
    for i in range(len(chunks)):
        c = chunks[(start + i) % len(chunks)]
        if b.id(c) not in seen:
            seen.add(b.id(c))
            out.append(c)
            if len(out) == n:
                break
    return out


class _Builder:
    """Collects template questions and their label rows (ids ``t01-<kind>``, ``t02-<kind>``, ...)."""

    def __init__(self, unit: str, persona: str | None) -> None:
        self.unit, self.persona = unit, persona
        self.queries: list[dict[str, Any]] = []
        self.labels: list[tuple[str, str, int]] = []

    def id(self, chunk: Chunk) -> str:
        return _unit(chunk, self.unit)

    def add(self, kind: str, text: str, gold: Sequence[Chunk], grade: int = 2, **extra: Any) -> None:
        qid = f"t{len(self.queries) + 1:02d}-{kind}"
        q: dict[str, Any] = {"_id": qid, "text": text, "tags": [TEMPLATE_TAG, kind], "answers": ["..."]}
        if self.persona:
            q["persona"] = self.persona
        q.update(extra)
        self.queries.append(q)
        self.labels.extend((qid, self.id(c), grade) for c in gold)


def _conflict(b: _Builder, docs: Mapping[str, Document], chunks: Sequence[Chunk], plain: list[Chunk]) -> None:
    """Two versions of one series when the corpus has them, else a question saying how to date documents."""
    first = {c.doc_id: c for c in reversed(chunks)}  # each document's first chunk
    old_new = _versioned(docs)
    if old_new:
        old, new = first[old_new[0].doc_id], first[old_new[1].doc_id]
        date = old_new[1].effective_date or "2026-01-01"
        text = f"TEMPLATE: ask what {new.doc_id} says on {date}, where {old.doc_id} (an older version) says otherwise"
        b.add("conflict", text, [new, old], as_of=date)
        return
    c = _pick(plain, 4)
    b.add(
        "conflict",
        f"TEMPLATE: ask something two versions of a document answer differently (here {b.id(c)}; give the "
        'documents a common "series" and "effective_date" to date them)',
        [c],
        as_of="2026-01-01",
    )


def _permission(
    b: _Builder, chunks: Sequence[Chunk], plain: list[Chunk], identities: Mapping[str, Sequence[str]]
) -> None:
    """A question asked by an identity that may not see its evidence, when some document has an ACL."""
    restricted = next((c for c in chunks if c.acl), None)
    if restricted is None:
        c = _pick(plain, 6)
        b.add(
            "permission",
            f'TEMPLATE: ask what {b.id(c)} says as someone who may not see it (give its document an "acl" and '
            "declare identities in corpus.yaml)",
            [c],
        )
        return
    outsider = next((p for p, g in identities.items() if not set(g) & set(restricted.acl)), None)
    extra: dict[str, Any] = {"persona": outsider} if outsider else {}
    b.add(
        "permission",
        f"TEMPLATE: ask, as someone outside {'/'.join(restricted.acl)}, what {b.id(restricted)} says (its ACL "
        "hides it from them)",
        [restricted],
        **extra,
    )


def _multi_hop(b: _Builder, plain: Sequence[Chunk]) -> None:
    """A question that needs two different units (two documents when labels name documents); a corpus with one unit
    gets a question on two parts of it."""
    parts = _distinct(b, plain, 1, 2)
    if len(parts) < 2:
        (x,) = parts
        b.add("multi-hop", f"TEMPLATE: ask something that needs two parts of {b.id(x)} together", [x])
        return
    x, y = parts
    b.add(
        "multi-hop",
        f"TEMPLATE: ask something that needs both {b.id(x)} and {b.id(y)}",
        [x, y],
        subquestions=[
            {"id": "part1", "text": f"TEMPLATE: the part {b.id(x)} answers", "evidence": [b.id(x)]},
            {"id": "part2", "text": f"TEMPLATE: the part {b.id(y)} answers", "evidence": [b.id(y)]},
        ],
    )


def build_template(
    docs: Mapping[str, Document], chunks: Sequence[Chunk], unit: str, identities: Mapping[str, Sequence[str]]
) -> StudyTemplate:
    """The template for a corpus of ``docs`` chunked into ``chunks``, labelled at ``unit`` (``doc`` or ``chunk``),
    whose manifest declares ``identities`` (persona -> groups; empty when it declares none)."""
    plain = [c for c in chunks if not c.acl] or list(chunks)
    b = _Builder(unit, next(iter(identities), None))
    one = _pick(plain, 0)
    b.add("single-hop", f"TEMPLATE: ask something that {b.id(one)} answers on its own", [one])
    _multi_hop(b, plain)
    b.add(
        "no-answer",
        f"TEMPLATE: ask something the documents do not answer ({NO_ANSWER_RULE})",
        [_pick(plain, 3)],
        grade=0,
        answers=[],
    )
    _conflict(b, docs, chunks, plain)
    row = _table_chunk(chunks) or _pick(plain, 5)
    b.add("table", f"TEMPLATE: ask for one cell of the table row {b.id(row)}", [row])
    _permission(b, chunks, plain, identities)
    return StudyTemplate(b.queries, b.labels)
