"""Markdown (``.md``) with markdown-it-py (CommonMark plus GitHub tables): ``#`` headings, paragraphs (their line
breaks kept, so a clause can start a line), list items, code blocks and tables. Inline markup is dropped (``**x**``
-> ``x``; a link keeps its text). A YAML front matter between ``---`` lines is returned for
:mod:`ablate.ingest.metadata`. Ordered-list numbers are list numbers, not clauses: write clauses as headings or
as ``4.2 ...`` lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

from ablate.ingest.blocks import Block, Heading, Paragraph, Parsed, Table, Unreadable
from ablate.ingest.metadata import load_yaml, split_front_matter
from ablate.ingest.readers.text import decode


def _inline(token: Any) -> str:
    out = []
    for child in token.children or []:
        if child.type in ("text", "code_inline"):
            out.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            out.append("\n")
        elif child.type == "image":
            out.append(child.content)
        elif child.type == "html_inline" and child.content.lower().startswith("<br"):
            out.append("\n")
    return "".join(out)


def blocks_of(text: str) -> list[Block]:
    """The blocks of Markdown ``text`` in reading order."""
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    blocks: list[Block] = []
    rows: list[list[str]] | None = None
    lists: list[str] = []  # bullet or ordered, for the item's marker
    heading_level = 0
    for i, t in enumerate(tokens):
        if t.type == "heading_open":
            heading_level = int(t.tag[1])
        elif t.type == "heading_close":
            heading_level = 0
        elif t.type == "table_open":
            rows = []
        elif t.type == "table_close" and rows is not None:
            blocks.append(Table(tuple(tuple(r) for r in rows)))
            rows = None
        elif t.type == "tr_open" and rows is not None:
            rows.append([])
        elif t.type in ("bullet_list_open", "ordered_list_open"):
            lists.append(t.type)
        elif t.type in ("bullet_list_close", "ordered_list_close"):
            lists.pop()
        elif t.type == "inline":
            content = _inline(t)
            if rows is not None:
                rows[-1].append(content)
            elif heading_level:
                blocks.append(Heading(heading_level, content))
            elif content.strip():
                prev = tokens[i - 2] if i >= 2 else None
                if lists and prev is not None and prev.type == "list_item_open":
                    marker = f"{prev.info}{prev.markup}" if lists[-1] == "ordered_list_open" else "-"
                    blocks.append(Paragraph(f"{marker} {content}", clauses=False))
                    continue
                blocks.append(Paragraph(content))
        elif t.type in ("fence", "code_block") and t.content.strip():
            blocks.append(Paragraph(t.content.rstrip("\n")))
    return blocks


def read_markdown(path: Path) -> Parsed:
    text, notes = decode(path)
    front, body, first_line = split_front_matter(text)
    meta = load_yaml(front, f"{path} (front matter)", 2) if front is not None else None
    blocks = blocks_of(body)
    if not blocks:
        raise Unreadable("no text (only front matter)" if front is not None else "empty file")
    return Parsed(tuple(blocks), front_matter=meta, notes=notes)
