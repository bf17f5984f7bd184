"""PDF with pypdf: the text layer of every page, line by line (clauses are found at line starts). A page number on
a line of its own (``3``, ``- 3 -``, ``Page 3 of 9``, ``第 3 页``) is dropped. Tables are read as their text (no table
structure). Skipped, with the reason: a PDF with no text layer at all (a scan: run OCR first, e.g. ``ocrmypdf``),
an encrypted PDF that needs a password, a damaged file. A PDF with some pages without text is read and the pages
are named in the report."""

from __future__ import annotations

import re
from pathlib import Path

import pypdf
from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError

from ablate.ingest.blocks import Block, Paragraph, Parsed, Unreadable

_PAGE_NUMBER = re.compile(
    r"^\s*(?:[-–—]?\s*\d{1,4}\s*[-–—]?|page\s+\d+(?:\s+of\s+\d+)?|第\s*\d+\s*页(?:\s*共\s*\d+\s*页)?|\d+\s*/\s*\d+)\s*$",
    re.I,
)


def read_pdf(path: Path) -> Parsed:
    if path.stat().st_size == 0:
        raise Unreadable("empty file")
    try:
        reader = pypdf.PdfReader(str(path))
        if reader.is_encrypted and not reader.decrypt(""):
            raise Unreadable("encrypted PDF that needs a password: save an unencrypted copy")
        pages = [page.extract_text() or "" for page in reader.pages]
    except Unreadable:
        raise
    except (FileNotDecryptedError, DependencyError) as e:
        raise Unreadable(f"encrypted PDF that cannot be opened ({e})") from None
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as e:
        raise Unreadable(f"not a readable PDF ({e.__class__.__name__}: {e})") from None
    blocks: list[Block] = []
    empty: list[int] = []
    for n, text in enumerate(pages, start=1):
        lines = [x for x in text.splitlines() if x.strip() and not _PAGE_NUMBER.match(x)]
        if lines:
            blocks.append(Paragraph("\n".join(lines)))
        else:
            empty.append(n)
    if not blocks:
        raise Unreadable(
            f"no text layer on any of its {len(pages)} page(s) (a scanned PDF?): run OCR first, e.g. ocrmypdf"
        )
    notes = (f"no text on page(s) {', '.join(map(str, empty))} of {len(pages)}",) if empty else ()
    return Parsed(tuple(blocks), notes=notes, title_from_first_line=True)
