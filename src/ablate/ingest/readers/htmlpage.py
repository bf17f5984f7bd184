"""HTML (``.html``, ``.htm``) with Beautiful Soup on lxml: ``h1``-``h6`` are headings, tables are tables (``th`` or
``td`` cells, the ``caption`` kept), every other block of text (``p``, ``li``, ``pre``, ``div`` text ...) is a
paragraph; ``<br>`` is a line break, other white space is collapsed as a browser does. Scripts, styles, ``nav``,
``header`` and ``footer`` are left out. The page's ``<title>`` is its title. The encoding is the page's (its
``meta charset``, else detected)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bs4 import BeautifulSoup, NavigableString, Tag

from ablate.ingest.blocks import Block, Heading, Paragraph, Parsed, Table, Unreadable

_SKIP = {
    "script",
    "style",
    "noscript",
    "template",
    "head",
    "nav",
    "header",
    "footer",
    "svg",
    "button",
    "form",
}
_HEADINGS = {f"h{i}": i for i in range(1, 7)}
_BREAK = "\u2028"  # stands for <br> until white space is collapsed


def _text(node: Any) -> str:
    raw = node.get_text() if isinstance(node, Tag) else str(node)
    lines = [re.sub(r"\s+", " ", part).strip() for part in raw.split(_BREAK)]
    return "\n".join(x for x in lines if x)


def _table(tag: Tag) -> Table:
    rows = []
    for tr in tag.find_all("tr"):
        if tr.find_parent("table") is not tag:
            continue  # a nested table's row: its text stays in its cell
        rows.append(tuple(_text(c).replace("\n", " ") for c in tr.find_all(["th", "td"], recursive=False)))
    caption = tag.find("caption")
    return Table(tuple(rows), _text(caption) if caption else "")


def _walk(node: Tag, out: list[Block]) -> None:
    pending: list[str] = []  # loose text and inline elements between blocks

    def flush() -> None:
        text = "\n".join(x for x in (_text(p) for p in ["".join(pending)]) if x)
        if text:
            out.append(Paragraph(text))
        pending.clear()

    for child in node.children:
        if isinstance(child, NavigableString):
            if type(child) is NavigableString:  # not a comment, CDATA or doctype
                pending.append(str(child))
            continue
        if not isinstance(child, Tag) or child.name in _SKIP:
            continue
        if child.name in _HEADINGS:
            flush()
            out.append(Heading(_HEADINGS[child.name], _text(child).replace("\n", " ")))
        elif child.name == "table":
            flush()
            out.append(_table(child))
        elif child.find(
            list(_HEADINGS) + ["table", "p", "div", "li", "section", "article", "ul", "ol", "pre"]
        ):
            flush()
            _walk(child, out)
        elif child.name in (
            "p",
            "li",
            "pre",
            "div",
            "dd",
            "dt",
            "blockquote",
            "section",
            "article",
            "address",
        ):
            flush()
            text = _text(child)
            if text:
                out.append(Paragraph(f"- {text}" if child.name == "li" else text, clauses=child.name != "li"))
        else:
            pending.append(child.get_text())
    flush()


def read_html(path: Path) -> Parsed:
    data = path.read_bytes()
    if not data.strip():
        raise Unreadable("empty file")
    soup = BeautifulSoup(data, "lxml")
    for br in soup.find_all("br"):
        br.replace_with(_BREAK)
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    blocks: list[Block] = []
    _walk(soup.body or soup, blocks)
    if not blocks:
        raise Unreadable("no text in the page")
    return Parsed(tuple(blocks), title=title)
