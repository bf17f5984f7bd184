"""A document's sections from its blocks: headings and numbered clauses open sections, tables become sections (or
one per row), and text before the first of them is the ``preamble``.

* A heading's id is its clause id when its text starts with a clause (``## 4.2 Transport`` -> ``4.2``,
  ``第三章 报销标准`` -> ``ch-3``; :mod:`ablate.ingest.clauses`), else a slug of its text (``## Purpose`` ->
  ``purpose``).
* Inside running text, a line that starts with a clause opens a section at that line. When the rest of the line is
  short and reads as a title (``4.2 Intra-city transport``) it is the section's title and the body follows; otherwise
  the rest of the line is the body's first line and the title is the marker (``第十二条``).
* A heading or clause with no text of its own (``第三章 报销标准`` followed at once by ``第十二条``) is not a section;
  its label heads the titles of the sections under it (``第三章 报销标准 › 第十二条``), as every open ancestor's
  does.
* Ids are unique in a document: a repeat gets ``-2``, ``-3`` in document order (:class:`UniqueIds`).

Wrapped lines are joined (:func:`join_lines`: directly in Chinese text and after a word's hyphen, else with a
space), so a PDF's line breaks do not split words or numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ablate.data.language import HAN_CHAR_RE, ZH_SHARE, han_share
from ablate.data.types import Section
from ablate.ingest.blocks import Block, Heading, Paragraph, Table
from ablate.ingest.clauses import Clause, find_clause, heading_like
from ablate.ingest.names import UniqueIds, slug
from ablate.ingest.tables import table_pieces

PREAMBLE = "preamble"
#: clause lines inside running text sit below every real heading level
_TEXT_LEVEL = 10
CRUMB = " › "


@dataclass
class _Draft:
    base_id: str
    label: str  # the heading as written, for the breadcrumb of the sections under it
    title: str
    level: int
    crumbs: tuple[str, ...]
    lines: list[str] = field(default_factory=list)
    table_rows: int = 0


@dataclass(frozen=True)
class Sectioned:
    """The sections found (empty when the document has no heading, clause or table: it is then one text), the whole
    text, and counts for the report."""

    sections: tuple[Section, ...]
    text: str
    tables: int
    table_rows: int


def join_lines(lines: list[str]) -> str:
    """Lines of one paragraph as one text, undoing line wrapping: in Chinese text (more than a fifth Han characters)
    lines are joined directly, since a wrap falls anywhere (``2`` / ``,200元``); elsewhere with a space, but
    directly after a hyphen that ends a word (``one-`` / ``way`` -> ``one-way``) and between two Han characters."""
    parts = [x.strip() for x in lines if x.strip()]
    if han_share("".join(parts)) > ZH_SHARE:
        return "".join(parts)
    out = ""
    for line in parts:
        glue = " "
        if not out or (HAN_CHAR_RE.match(out[-1]) and HAN_CHAR_RE.match(line[0])):
            glue = ""
        elif out.endswith("-") and len(out) > 1 and out[-2].isalpha() and line[0].isalpha():
            glue = ""
        out += glue + line
    return out


class _Builder:
    """Walks the blocks, keeping the open headings (for breadcrumbs) and the section text goes to."""

    def __init__(self, tables_mode: str) -> None:
        self.tables_mode = tables_mode
        self.drafts: list[_Draft] = [_Draft(PREAMBLE, "", "", 0, ())]
        self.current = self.drafts[0]
        self.stack: list[tuple[int, str, str | None]] = []  # (level, label, numbered id) of the open headings
        self.tables = 0
        self.structured = False

    def _open(self, base_id: str, label: str, title: str, level: int, numbered: str | None = None) -> _Draft:
        """Open a section; ``numbered`` is the id of a numbered clause (``4.2``), whose ancestors among numbered
        clauses are only those its id extends (``4`` for ``4.2``, ``4.2`` for ``4.2-a``)."""
        while self.stack and (
            self.stack[-1][0] >= level or self._unrelated(self.stack[-1][2], numbered, level)
        ):
            self.stack.pop()
        d = _Draft(base_id, label, title, level, tuple(lbl for _, lbl, _ in self.stack))
        self.stack.append((level, label, numbered))
        self.drafts.append(d)
        self.current = d
        self.structured = True
        return d

    @staticmethod
    def _unrelated(open_id: str | None, new_id: str | None, level: int) -> bool:
        """An open numbered clause in running text is no ancestor of a clause whose id does not extend its id."""
        if open_id is None or level < _TEXT_LEVEL:
            return False
        return new_id is None or not new_id.startswith((open_id + ".", open_id + "-"))

    def heading(self, h: Heading) -> None:
        text = " ".join(h.text.split())
        if not text:
            return
        c = find_clause(text)
        if c is not None:
            self._open(c.sid, text, _title(c, c.rest), h.level)
        else:
            self._open(slug(text), text, text, h.level)

    def paragraph(self, p: Paragraph) -> None:
        para: list[str] = []
        for line in p.text.splitlines():
            c = find_clause(line) if p.clauses else None
            if c is None:
                para.append(line)
                continue
            self._flush(para)
            para = []
            numbered = c.sid if c.sid[:1].isdigit() else None
            if heading_like(c.rest):
                self._open(c.sid, line.strip(), _title(c, c.rest), _TEXT_LEVEL + c.level, numbered)
            else:
                self._open(c.sid, c.marker, _title(c, ""), _TEXT_LEVEL + c.level, numbered)
                para.append(c.rest)
        self._flush(para)

    def _flush(self, para: list[str]) -> None:
        text = join_lines(para)
        if text:
            self.current.lines.append(text)

    def table(self, t: Table) -> None:
        self.tables += 1
        crumbs = tuple(lbl for _, lbl, _ in self.stack)
        for piece in table_pieces(t, self.tables, self.tables_mode):
            d = _Draft(piece.base_id, piece.title, piece.title, self.current.level + 1, crumbs, [piece.text])
            d.table_rows = piece.rows
            self.drafts.append(d)  # text after the table still belongs to the section it is in
            self.structured = True

    def result(self) -> Sectioned:
        ids = UniqueIds()
        sections: list[Section] = []
        whole: list[str] = []
        rows = 0
        for d in self.drafts:
            body = "\n\n".join(d.lines).strip()
            if not body:
                continue
            title = CRUMB.join([*d.crumbs, d.title] if d.title else d.crumbs)
            sections.append(Section(sid=ids.take(d.base_id), text=body, title=title))
            whole.append(f"{d.label}\n{body}" if d.label else body)
            rows += d.table_rows
        if not self.structured:
            return Sectioned((), "\n\n".join(whole), 0, 0)
        return Sectioned(tuple(sections), "\n\n".join(whole), self.tables, rows)


def _title(c: Clause, rest: str) -> str:
    """The title of a clause's section: the rest of its line when that is a title, led by the marker unless the
    marker is the id itself (``4.2 Transport`` -> ``Transport``; ``Article 3 Scope`` -> ``Article 3 Scope``)."""
    marker = c.marker.rstrip(".、)")
    if marker == c.sid:
        return rest.strip()
    return f"{c.marker}{'' if c.marker.endswith('、') else ' '}{rest}".strip()


def find_sections(blocks: tuple[Block, ...] | list[Block], tables_mode: str = "auto") -> Sectioned:
    """Sections of a document from its blocks (see the module docstring)."""
    b = _Builder(tables_mode)
    for block in blocks:
        if isinstance(block, Heading):
            b.heading(block)
        elif isinstance(block, Paragraph):
            b.paragraph(block)
        else:
            b.table(block)
    return b.result()
