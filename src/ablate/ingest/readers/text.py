"""Plain text (``.txt``): paragraphs split on blank lines; the encoding is UTF-8 (a BOM is fine), UTF-16 with a
BOM, or GBK/GB18030 (read, with a note in the report); anything else is skipped with the ``iconv`` fix."""

from __future__ import annotations

import re
from pathlib import Path

from ablate.data.qrels import guess_encoding
from ablate.ingest.blocks import Paragraph, Parsed, Unreadable


def decode(path: Path) -> tuple[str, tuple[str, ...]]:
    """The text of ``path`` and notes for the report (how it was decoded when not UTF-8)."""
    data = path.read_bytes()
    if not data.strip():
        raise Unreadable("empty file")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16"), ("read as UTF-16",)
    try:
        return data.decode("utf-8-sig"), ()
    except UnicodeDecodeError:
        pass
    enc = guess_encoding(data)
    if enc == "GBK":
        return data.decode("gb18030"), ("not UTF-8: read as GBK (GB18030)",)
    raise Unreadable(
        f"not UTF-8 (it looks like {enc}): re-encode it, e.g. iconv -f {enc} -t UTF-8 {path.name} > {path.stem}.utf8{path.suffix}"
    )


def paragraphs(text: str) -> tuple[Paragraph, ...]:
    """Blank-line separated paragraphs (their lines kept)."""
    parts = re.split(r"\n[ \t\u3000]*\n", text.replace("\r\n", "\n").replace("\r", "\n"))
    return tuple(Paragraph(p.strip("\n")) for p in parts if p.strip())


def read_text(path: Path) -> Parsed:
    text, notes = decode(path)
    blocks = paragraphs(text)
    if not blocks:
        raise Unreadable("empty file")
    return Parsed(blocks, notes=notes, title_from_first_line=True)
