"""A documents folder to corpus records, in two steps so every refusal comes before any work:

1. :func:`plan_ingest`: list the files (:mod:`ablate.ingest.scan`), check their parsers are installed, read and
   validate every front matter and sidecar (:mod:`ablate.ingest.metadata`) and settle the document ids
   (:mod:`ablate.ingest.ids`). Problems here are errors (one line, exit 2).
2. :func:`read_documents`: read each file (:mod:`ablate.ingest.readers`) and find its sections
   (:mod:`ablate.ingest.sections`). A file that cannot be read is skipped and reported, never fatal.

The title of a document is, in order: ``title`` in its metadata; the file's own (HTML ``<title>``, Word's Title);
the first heading when it is the only heading of the top level (it is then not a section, whatever the title); for plain text and PDF
the first line when it is short and reads as a title; else the file name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablate.data.language import LanguageMix, detect_language, language_mix
from ablate.ingest.blocks import Block, Heading, Paragraph, Parsed, Unreadable
from ablate.ingest.clauses import find_clause
from ablate.ingest.ids import check_unique, doc_id_of
from ablate.ingest.metadata import (
    SIDECAR,
    DocMeta,
    check_meta,
    load_yaml,
    merge,
    read_sidecar,
    split_front_matter,
)
from ablate.ingest.readers import check_parsers, reader
from ablate.ingest.readers.text import decode
from ablate.ingest.scan import Skipped, Source, scan
from ablate.ingest.sections import find_sections

TITLE_MAX = 80
_SENTENCE_END = tuple(".。;；:：!！?？,，")


@dataclass(frozen=True)
class Planned:
    """A file to read with its settled id and metadata."""

    source: Source
    doc_id: str
    meta: DocMeta


@dataclass(frozen=True)
class Plan:
    docs: Path
    files: tuple[Planned, ...]
    skipped: tuple[Skipped, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Ingested:
    """One document read: its ``corpus.jsonl`` record and what the report says about it."""

    record: dict[str, Any]
    file: str
    fmt: str
    sections: int
    tables: int
    table_rows: int
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Result:
    docs: Path
    documents: tuple[Ingested, ...]
    skipped: tuple[Skipped, ...]
    notes: tuple[str, ...]
    language: str
    chunker: dict[str, Any] = field(default_factory=dict)
    #: the documents' languages, counted one by one (:func:`~ablate.data.language.language_mix`)
    mix: LanguageMix | None = None


def _front_matter(src: Source) -> DocMeta | None:
    if src.fmt != "markdown":
        return None
    try:
        text, _ = decode(src.path)
    except (Unreadable, OSError):
        return None  # reported when the file is read
    front, _, _ = split_front_matter(text)
    if front is None:
        return None
    where = f"{src.path} (front matter)"
    return check_meta(load_yaml(front, where, 2), where)


def plan_ingest(docs: Path, exclude: Path | None = None) -> Plan:
    """Step 1 (see the module docstring): every error a user must fix before anything is read or written."""
    sources, skipped, notes = scan(docs, exclude)
    check_parsers(s.fmt for s in sources)
    metas = {s.rel: merge(_front_matter(s), read_sidecar(s.path)) for s in sources}
    ids = {str(s.rel): metas[s.rel].id or doc_id_of(s.rel) for s in sources}
    origin = {
        str(s.rel): f"id in {s.rel.name}{SIDECAR} or its front matter"
        if metas[s.rel].id
        else "from the file name"
        for s in sources
    }
    check_unique(ids, origin)
    planned = tuple(Planned(s, ids[str(s.rel)], metas[s.rel]) for s in sources)
    return Plan(docs, planned, tuple(skipped), tuple(notes))


def _title_from_heading(blocks: list[Block], title: str) -> tuple[str, list[Block]]:
    """The first block as the title when it is the one heading of the top level (see the module docstring)."""
    headings = [b for b in blocks if isinstance(b, Heading)]
    if not blocks or not isinstance(blocks[0], Heading):
        return title, blocks
    first = blocks[0]
    top = min(h.level for h in headings)
    alone = first.level == top and sum(h.level == top for h in headings) == 1
    if (alone and find_clause(first.text) is None) or " ".join(first.text.split()) == title:
        return title or " ".join(first.text.split()), blocks[1:]
    return title, blocks


def _title_from_line(blocks: list[Block], title: str) -> tuple[str, list[Block]]:
    """The first line of plain text or a PDF as the title when it reads as one (short, no clause, no sentence)."""
    if not blocks or not isinstance(blocks[0], Paragraph):
        return title, blocks
    lines = blocks[0].text.splitlines()
    first = lines[0].strip() if lines else ""
    if not first or find_clause(first) is not None:
        return title, blocks
    if (not title and len(first) <= TITLE_MAX and not first.endswith(_SENTENCE_END)) or first == title:
        rest = "\n".join(lines[1:])
        tail: list[Block] = [Paragraph(rest)] if rest.strip() else []
        return title or first, tail + blocks[1:]
    return title, blocks


def document(p: Planned, parsed: Parsed, tables_mode: str) -> Ingested:
    """The ``corpus.jsonl`` record of one file read."""
    meta = p.meta
    title = meta.title or parsed.title.strip()
    blocks = list(parsed.blocks)
    if parsed.title_from_first_line:
        title, blocks = _title_from_line(blocks, title)
    else:
        title, blocks = _title_from_heading(blocks, title)
    found = find_sections(blocks, tables_mode)
    if not found.text.strip():
        raise Unreadable("no text besides its title")
    record: dict[str, Any] = {"_id": p.doc_id, "title": title or p.source.path.stem, "text": found.text}
    if found.sections:
        record["sections"] = [{"id": s.sid, "title": s.title, "text": s.text} for s in found.sections]
    for key in ("version", "effective_date", "series"):
        if getattr(meta, key) is not None:
            record[key] = getattr(meta, key)
    if meta.acl:
        record["acl"] = list(meta.acl)
    lang = meta.lang or detect_language(found.text)
    record["metadata"] = {"source": str(p.source.rel), "format": p.source.fmt, "lang": lang, **meta.extra}
    return Ingested(
        record,
        str(p.source.rel),
        p.source.fmt,
        len(found.sections),
        found.tables,
        found.table_rows,
        parsed.notes,
    )


def _chunker(documents: list[Ingested]) -> dict[str, Any]:
    """``clause`` when any document has sections (documents without fall back to paragraphs), else token windows
    when any document is longer than one window (200 tokens: characters in a Chinese document, words elsewhere),
    else whole documents."""
    if any(d.sections for d in documents):
        return {"kind": "clause"}

    def tokens(d: Ingested) -> int:
        text = str(d.record["text"])
        return len(text.replace(" ", "")) if _lang(d) == "zh" else len(text.split())

    longest = max(map(tokens, documents), default=0)
    return {"kind": "tokens", "size": 200, "overlap": 40} if longest > 200 else {"kind": "none"}


def _lang(d: Ingested) -> str:
    """A document's language: declared in its metadata, else detected from its text (:func:`document`)."""
    return str(d.record["metadata"]["lang"])


def read_documents(
    plan: Plan, tables_mode: str = "auto", on_file: Callable[[], None] | None = None
) -> Result:
    """Step 2 (see the module docstring): read every planned file; unreadable ones are skipped with the reason."""
    documents: list[Ingested] = []
    skipped = list(plan.skipped)
    for p in plan.files:
        try:
            documents.append(document(p, reader(p.source.fmt)(p.source.path), tables_mode))
        except Unreadable as e:
            skipped.append(Skipped(str(p.source.rel), str(e)))
        except OSError as e:
            skipped.append(Skipped(str(p.source.rel), f"cannot be read ({e.strerror or e})"))
        if on_file is not None:
            on_file()
    mix = language_mix(map(_lang, documents))  # per document: a mixed folder is seen as one (LanguageMix)
    skipped.sort(key=lambda s: s.file)
    return Result(
        plan.docs, tuple(documents), tuple(skipped), plan.notes, mix.language, _chunker(documents), mix
    )
