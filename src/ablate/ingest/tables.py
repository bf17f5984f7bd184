"""Tables as sections: one section per table, or one per row rendered ``header: value; header: value`` so a row is
retrievable on its own (``row-shanghai`` -> ``City: Shanghai; Staff: 650 yuan; Manager: 850 yuan``).

``auto`` (the default of ``--tables``) makes rows when the first column looks like a key (every data row has a
first cell, all distinct, none longer than 60 characters), else one section for the table. The first row is the
header; an empty header cell is named ``column N``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ablate.ingest.blocks import Table
from ablate.ingest.names import slug

TABLE_MODES = ("auto", "rows", "sections")
KEY_MAX = 60


@dataclass(frozen=True)
class TablePiece:
    """A section made from a table: a base id (made unique later), its title and its text."""

    base_id: str
    title: str
    text: str
    rows: int


def _clean(cell: str) -> str:
    return re.sub(r"\s+", " ", cell).strip()


def _grid(table: Table) -> list[list[str]]:
    rows = [[_clean(c) for c in r] for r in table.rows]
    return [r for r in rows if any(r)]


def key_like(data: list[list[str]]) -> bool:
    """Whether the first column of ``data`` (rows without the header) reads as a key for each row."""
    keys = [r[0] if r else "" for r in data]
    return bool(keys) and all(keys) and len(set(keys)) == len(keys) and max(map(len, keys)) <= KEY_MAX


def render_row(header: list[str], row: list[str]) -> str:
    """``header: value; header: value`` for the non-empty cells of ``row``."""
    out = []
    for i, value in enumerate(row):
        if not value:
            continue
        name = header[i] if i < len(header) and header[i] else f"column {i + 1}"
        out.append(value if name == value else f"{name}: {value}")
    return "; ".join(out)


def table_pieces(table: Table, number: int, mode: str) -> list[TablePiece]:
    """The sections of the ``number``-th table of a document (from 1) under ``mode`` (:data:`TABLE_MODES`)."""
    grid = _grid(table)
    if not grid:
        return []
    name = table.caption or f"Table {number}"
    if len(grid) == 1:
        return [TablePiece(f"table-{number}", name, " | ".join(c for c in grid[0] if c), 1)]
    header, data = grid[0], grid[1:]
    keyed = key_like(data)
    if mode == "sections" or (mode == "auto" and not keyed):
        lines = [render_row(header, r) for r in data]
        text = "\n".join(x for x in lines if x)
        return [TablePiece(f"table-{number}", name, text, len(data))]
    pieces = []
    for i, row in enumerate(data, start=1):
        text = render_row(header, row)
        if not text:
            continue
        if keyed:
            pieces.append(TablePiece(f"row-{slug(row[0], 'row')}", row[0], text, 1))
        else:
            pieces.append(TablePiece(f"table-{number}-r{i}", f"{name}, row {i}", text, 1))
    return pieces
