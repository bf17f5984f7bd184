"""Chunkers: how documents become the chunks retrievers index (ids and texts are deterministic).

* ``none``: one chunk per document, ``chunk_id == doc_id``, text = ``title + " " + text`` (as BEIR/MTEB encode).
* ``clause``: one chunk per section, ``chunk_id = f"{doc_id}#{section_id}"``; documents without sections fall back to
  paragraphs.
* ``paragraph``: split on blank lines, ``f"{doc_id}#p{i}"`` (i from 0).
* ``tokens``: windows of ``size`` tokens (words; characters for Chinese) with ``overlap``, ``f"{doc_id}#t{i}"``.

Chunk text is prefixed with the document title (and the section title) so a chunk is readable alone; every chunk keeps
its ``doc_id``, ``version`` and ``acl`` (the chunk->doc mapping is explicit, never parsed back out of an id).
"""

from __future__ import annotations

import re
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


def _window_tokens(text: str, cjk: bool) -> list[str]:
    if cjk:
        # Chinese: characters (keeping runs of ASCII letters/digits whole) so windows never split inside a word code.
        return re.findall(r"[A-Za-z0-9][A-Za-z0-9._/-]*|\S", text)
    return text.split()


def chunk_document(doc: Document, spec: ChunkerSpec) -> list[Chunk]:
    def mk(local: str | None, pos: int, body: str, heading: str = "") -> Chunk:
        head = doc.title
        if heading:
            head = f"{head} — {heading}" if head else heading
        text = f"{head} {body}".strip() if spec.title_prefix and head else body
        cid = doc.doc_id if local is None else f"{doc.doc_id}#{local}"
        return Chunk(
            chunk_id=cid, doc_id=doc.doc_id, text=text, version=doc.version, position=pos, acl=doc.acl
        )

    if spec.kind == "none":
        return [mk(None, 0, doc.text)]
    if spec.kind == "clause" and doc.sections:
        return [
            mk(s.sid, i, s.text, f"{s.sid} {s.title}".strip() if s.title else s.sid)
            for i, s in enumerate(doc.sections)
        ]
    if spec.kind in ("paragraph", "clause"):
        paras = [p.strip() for p in re.split(r"\n\s*\n", doc.text) if p.strip()] or [doc.text]
        return [mk(f"p{i}", i, p) for i, p in enumerate(paras)]
    # fixed token windows with overlap
    cjk = han_share(doc.text) > ZH_SHARE
    toks = _window_tokens(doc.text, cjk)
    stride = spec.size - spec.overlap
    out = []
    for i, start in enumerate(range(0, max(1, len(toks) - spec.overlap), stride)):
        piece = toks[start : start + spec.size]
        if not piece:
            break
        out.append(mk(f"t{i}", i, ("" if cjk else " ").join(piece)))
        if start + spec.size >= len(toks):
            break
    return out or [mk("t0", 0, doc.text)]


def chunk_corpus(docs: dict[str, Document], spec: ChunkerSpec) -> list[Chunk]:
    chunks: list[Chunk] = []
    for doc in docs.values():
        chunks.extend(chunk_document(doc, spec))
    return chunks
