"""What every reader hands on: a document as a flat sequence of blocks (headings, paragraphs, tables) in reading
order, plus what the file itself says about its title and front matter. Sections are found from these blocks by
:mod:`ablate.ingest.sections`, whatever the format was."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Heading:
    """A heading the format marks as one (Markdown ``#``, HTML ``h1``-``h6``, a Word Heading style); level 1 is the
    top."""

    level: int
    text: str


@dataclass(frozen=True)
class Paragraph:
    """Running text; its lines matter (a numbered clause starts at a line start) unless ``clauses`` is false (a
    list item: its number is the list's, not a clause's)."""

    text: str
    clauses: bool = True


@dataclass(frozen=True)
class Table:
    """A table's cells as text, row by row (the first row is read as the header); ``caption`` may be empty."""

    rows: tuple[tuple[str, ...], ...]
    caption: str = ""


Block = Heading | Paragraph | Table


@dataclass(frozen=True)
class Parsed:
    """One file read: its blocks, the title the file declares (HTML ``<title>``, Word's Title property or style),
    the Markdown front matter (a mapping, with the line it starts on for error messages) and notes for the report
    (e.g. pages without text, a non-UTF-8 encoding)."""

    blocks: tuple[Block, ...]
    title: str = ""
    front_matter: dict[str, Any] | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: the title is a line of running text (plain text, PDF): the first short line, when it reads as a title
    title_from_first_line: bool = False


class Unreadable(Exception):
    """A file that cannot be read as a document (empty, scanned, encrypted, damaged): skipped and reported, never
    fatal. ``str()`` is the reason shown in the report."""
