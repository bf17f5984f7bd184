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


def text_csv(df: Any) -> str:
    """``df.to_csv(index=False)``, the same text, faster (``experiments/results/bench_design.md``) for a frame of string and integer
    columns whose fields need no quoting (the unjudged export once its frame is built; before that,
    ``EvalResult.unjudged_csv`` writes straight from the rows). Anything else (floats, missing values, a field with a
    comma, quote or line break) is left to pandas."""
    kinds = [df[c].dtype.kind for c in df.columns]
    if df.empty or any(k not in "iuO" for k in kinds) or not all(isinstance(c, str) for c in df.columns):
        return str(df.to_csv(index=False))
    cols = [df[c].tolist() for c in df.columns]
    if any(k == "O" and not all(type(v) is str for v in col) for k, col in zip(kinds, cols, strict=True)):
        return str(df.to_csv(index=False))
    cols = [col if k == "O" else list(map(str, col)) for k, col in zip(kinds, cols, strict=True)]
    text = ",".join(df.columns) + "\n" + "\n".join(map(",".join, zip(*cols, strict=True))) + "\n"
    n_rows, n_cols = len(df), len(df.columns)
    plain = unquoted_csv(text, n_rows, n_cols) and (n_cols > 1 or not any(v == "" for v in cols[0]))
    return text if plain else str(df.to_csv(index=False))


def unquoted_csv(text: str, n_rows: int, n_cols: int) -> bool:
    """Whether no field of CSV ``text`` (a header line and ``n_rows`` lines of ``n_cols`` fields, each line ending in
    a line break) holds a comma, a quote or a line break, so pandas' ``to_csv`` would quote nothing. With one column
    the caller must also rule out empty fields, which pandas quotes when alone on a line."""
    return (
        text.count(",") == (n_rows + 1) * (n_cols - 1)
        and text.count("\n") == n_rows + 1
        and '"' not in text
        and "\r" not in text
    )
