"""Plain-text tables and number formatting shared by console summaries and reports."""

from __future__ import annotations

import math
from typing import Any


def as_number(v: Any) -> float | None:
    """``v`` as a float (numbers and numeric strings such as MLflow's param values), or None when it is not a
    number or is NaN."""
    if isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def format_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """A plain fixed-width table (also valid Markdown)."""
    cells = [[str(r.get(c, "")) for c in columns] for r in rows]
    widths = [
        max(len(c), *(len(row[i]) for row in cells)) if cells else len(c) for i, c in enumerate(columns)
    ]
    line = "| " + " | ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = ["| " + " | ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) + " |" for row in cells]
    return "\n".join([line, sep, *body])


def fmt(v: Any, digits: int = 3) -> str:
    f = as_number(v)
    return "-" if f is None else f"{f:.{digits}f}"
