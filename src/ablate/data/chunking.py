"""Chunkers: how documents become the chunks retrievers index (ids and texts are deterministic).

* ``none``: one chunk per document, ``chunk_id == doc_id``, text = ``title + " " + text`` (as BEIR/MTEB encode).
* ``clause``: one chunk per section, ``chunk_id = f"{doc_id}#{section_id}"``; documents without sections fall back to
  paragraphs.
* ``paragraph``: split on blank lines, ``f"{doc_id}#p{i}"`` (i from 0).
* ``tokens``: windows of ``size`` tokens (words; characters for Chinese) with ``overlap``, ``f"{doc_id}#t{i}"``.

Chunk text is prefixed with the document title (and the section title) so a chunk is readable alone; every chunk keeps
its ``doc_id``, ``version`` and ``acl`` (the chunk->doc mapping is explicit, never parsed back out of an id).

**Spans.** Every chunk also knows the characters of its document it covers (``Chunk.span``, ``[start, end)``), all in
one coordinate system per document, ``Document.text``, whatever the chunker, so labels made on one chunking can follow
another (:mod:`ablate.data.projection`). When a document gives ``sections`` and no ``text``, its text is the sections
joined by a blank line, each written ``"<id> <title>: <text>"`` (``"<id> <text>"`` without a title;
:mod:`ablate.data.corpus_files`), and a clause chunk's span is its whole block. When a document gives both, a clause
chunk's span is where its section's text first occurs in ``text`` after the previous section (``None`` when it does
not occur). A paragraph's span is the stripped paragraph, a token window's runs from its first token's first character
to its last token's last character, ``none``'s is the whole text. The title prefix is not part of any span.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ablate.data.language import ZH_SHARE, han_share
from ablate.data.types import Chunk, Document
from ablate.errors import ConfigError

CHUNKERS = ("none", "paragraph", "clause", "tokens")


@dataclass(frozen=True)
class ChunkerSpec:
    """How documents become chunks. ``size``/``overlap`` count tokens (words; characters for Chinese)."""

    kind: str = "none"
    size: int = 200
    overlap: int = 40
    title_prefix: bool = True

    def __post_init__(self) -> None:
        if self.kind not in CHUNKERS:
            raise ConfigError("chunker.kind", self.kind, f"valid options: {', '.join(CHUNKERS)}")
        if self.kind == "tokens" and not (0 <= self.overlap < self.size):
            raise ConfigError(
                "chunker.overlap", self.overlap, f"it must be >= 0 and smaller than chunker.size={self.size}"
            )

    def params(self) -> dict[str, Any]:
        d = asdict(self)
        if self.kind != "tokens":
            d.pop("size"), d.pop("overlap")
        return d


#: The chunker settings only ``tokens`` reads: under any other kind they change no chunk.
WINDOW_KEYS = ("size", "overlap")
#: Where a command line sets the chunker (``corpus.chunker={kind:clause}``) or one of its settings.
CHUNKER_OVERRIDE = "corpus.chunker"


def _override_key(arg: str) -> str:
    return arg.lstrip("+~").partition("=")[0].removeprefix("override ")


def check_chunker_sweep(cells: Sequence[tuple[Sequence[str], ChunkerSpec | None]]) -> None:
    """Refuse a sweep with two cells that differ only in chunker settings that make the same chunks: ``kind=clause
    size=100,200`` would run one cell twice under two names (``size`` and ``overlap`` count only for ``tokens``).
    ``cells``: each cell's overrides and chunker as the run reads it (``None``: the corpus's own), before anything
    runs."""
    groups: dict[tuple[Any, ...], list[Sequence[str]]] = {}
    for overrides, spec in cells:
        rest = tuple(a for a in overrides if not _override_key(a).startswith(CHUNKER_OVERRIDE))
        same = (rest, tuple(sorted(spec.params().items())) if spec is not None else None)
        groups.setdefault(same, []).append(overrides)
    for (_, params), members in groups.items():
        if len(members) < 2:
            continue
        differ = [a for a in dict.fromkeys(a for m in members for a in m) if not all(a in m for m in members)]
        if not differ:  # the same cell twice (variant=A,A): not a chunker setting's doing
            continue
        keys = dict.fromkeys(_override_key(a) for a in differ)
        key = next(iter(keys), CHUNKER_OVERRIDE)
        values = ",".join(a.partition("=")[2] for a in differ if _override_key(a) == key)
        kind = dict(params)["kind"] if params else "null (the corpus's own chunker)"
        raise ConfigError(
            key,
            values,
            f"under corpus.chunker.kind={kind} it changes no chunk ({' and '.join(WINDOW_KEYS)} count only for "
            f"kind=tokens), so these {len(members)} cells would be one run. Fix: sweep the window with "
            "corpus.chunker.kind=tokens alone, and run the other kind once, in a command of its own",
        )


SECTION_JOIN = "\n\n"


def section_block(sid: str, title: str, text: str) -> str:
    """How a section is written into a document's text built from its sections (joined by :data:`SECTION_JOIN`)."""
    return f"{sid} {title + ': ' if title else ''}{text}"


def section_spans(doc: Document) -> list[tuple[int, int] | None]:
    """Each section's ``[start, end)`` in ``doc.text`` (see the module docstring); ``None``: not found there."""
    blocks = [section_block(s.sid, s.title, s.text) for s in doc.sections]
    spans: list[tuple[int, int] | None] = []
    if SECTION_JOIN.join(blocks) == doc.text:
        pos = 0
        for b in blocks:
            spans.append((pos, pos + len(b)))
            pos += len(b) + len(SECTION_JOIN)
        return spans
    pos = 0
    for s in doc.sections:
        body = s.text.strip()
        at = doc.text.find(body, pos) if body else -1
        if at < 0:
            spans.append(None)
            continue
        spans.append((at, at + len(body)))
        pos = at + len(body)
    return spans


def _paragraph_spans(text: str) -> list[tuple[str, tuple[int, int]]]:
    """Blank-line separated paragraphs of ``text`` (stripped, non-empty) with their spans."""
    out = []
    pos = 0
    for m in re.finditer(r"\n\s*\n", text + "\n\n"):
        raw = text[pos : m.start()]
        stripped = raw.strip()
        if stripped:
            start = pos + (len(raw) - len(raw.lstrip()))
            out.append((stripped, (start, start + len(stripped))))
        pos = m.end()
    return out


_CJK_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*|\S")
_WORD_TOKEN = re.compile(r"\S+")


def chunk_document(doc: Document, spec: ChunkerSpec) -> list[Chunk]:
    def mk(
        local: str | None, pos: int, body: str, heading: str = "", span: tuple[int, int] | None = None
    ) -> Chunk:
        head = doc.title
        if heading:
            head = f"{head} — {heading}" if head else heading
        text = f"{head} {body}".strip() if spec.title_prefix and head else body
        cid = doc.doc_id if local is None else f"{doc.doc_id}#{local}"
        return Chunk(
            chunk_id=cid,
            doc_id=doc.doc_id,
            text=text,
            version=doc.version,
            position=pos,
            acl=doc.acl,
            span=span,
        )

    whole = (0, len(doc.text))
    if spec.kind == "none":
        return [mk(None, 0, doc.text, span=whole)]
    if spec.kind == "clause" and doc.sections:
        return [
            mk(s.sid, i, s.text, f"{s.sid} {s.title}".strip() if s.title else s.sid, span)
            for i, (s, span) in enumerate(zip(doc.sections, section_spans(doc), strict=True))
        ]
    if spec.kind in ("paragraph", "clause"):
        paras = _paragraph_spans(doc.text) or [(doc.text, whole)]
        return [mk(f"p{i}", i, p, span=span) for i, (p, span) in enumerate(paras)]
    # fixed token windows with overlap
    cjk = han_share(doc.text) > ZH_SHARE
    found = list((_CJK_TOKEN if cjk else _WORD_TOKEN).finditer(doc.text))
    toks = [m.group(0) for m in found]
    stride = spec.size - spec.overlap
    out = []
    for i, start in enumerate(range(0, max(1, len(toks) - spec.overlap), stride)):
        piece = toks[start : start + spec.size]
        if not piece:
            break
        last = found[start + len(piece) - 1]
        out.append(mk(f"t{i}", i, ("" if cjk else " ").join(piece), span=(found[start].start(), last.end())))
        if start + spec.size >= len(toks):
            break
    return out or [mk("t0", 0, doc.text, span=whole)]


def chunk_corpus(docs: dict[str, Document], spec: ChunkerSpec) -> list[Chunk]:
    chunks: list[Chunk] = []
    for doc in docs.values():
        chunks.extend(chunk_document(doc, spec))
    return chunks
