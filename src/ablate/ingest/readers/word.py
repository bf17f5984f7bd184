"""Word (``.docx``) with python-docx: paragraphs and tables in document order; a paragraph in a Heading style
(``Heading 1``-``Heading 9``, or a localised ``标题 1``) is a heading, a ``Title`` paragraph the title (as is the
file's Title property). Numbers that Word draws itself (automatic heading numbering) are not in the text, so such
headings get ids from their words; type the number (``4.2 Transport``) to get ``4.2``."""

from __future__ import annotations

import re
from pathlib import Path

import docx
from docx.opc.exceptions import PackageNotFoundError
from docx.table import Table as DocxTable

from ablate.ingest.blocks import Block, Heading, Paragraph, Parsed, Table, Unreadable

_HEADING = re.compile(r"^(?:heading|标题|標題|überschrift|titre)\s*(\d)$", re.I)


def _cells(table: DocxTable) -> tuple[tuple[str, ...], ...]:
    rows = []
    for row in table.rows:
        cells, seen = [], set()
        for cell in row.cells:  # a merged cell is returned once per grid column it spans: keep it once
            if id(cell._tc) in seen:
                continue
            seen.add(id(cell._tc))
            cells.append(cell.text.strip())
        rows.append(tuple(cells))
    return tuple(rows)


def read_docx(path: Path) -> Parsed:
    if path.stat().st_size == 0:
        raise Unreadable("empty file")
    try:
        document = docx.Document(str(path))
    except PackageNotFoundError:
        raise Unreadable("not a .docx file (not a Word package)") from None
    except Exception as e:  # a damaged zip or XML: python-docx raises what its zip and XML libraries raise
        raise Unreadable(f"not a readable .docx file ({e.__class__.__name__}: {e})") from None
    title = (document.core_properties.title or "").strip()
    blocks: list[Block] = []
    for item in document.iter_inner_content():
        if isinstance(item, DocxTable):
            blocks.append(Table(_cells(item)))
            continue
        text = item.text.strip()
        if not text:
            continue
        style = (item.style.name if item.style is not None else "") or ""
        m = _HEADING.match(style.strip())
        if style.strip().lower() == "title":
            title = title or text
        elif m:
            blocks.append(Heading(int(m.group(1)), text))
        else:
            blocks.append(Paragraph(text))
    if not blocks:
        raise Unreadable("no text in the document")
    return Parsed(tuple(blocks), title=title)
