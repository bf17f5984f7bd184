"""The report's slices: every metric per question type (the queries' tags), and the contrast the spec names.

A query with several tags counts in each; queries without tags form ``(untagged)``. No-answer questions have no
scored rows here: they are scored apart (abstention). The contrast section compares two tags side by side
(default: ``exact-id`` vs ``paraphrase``: identifiers favour lexical matching, paraphrases favour dense retrieval;
docs/concepts.md) and notes every run that is below the baseline on the first tag.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ablate.study.fetch import RunRecord
from ablate.study.options import DEFAULT_CONTRAST
from ablate.tables import fmt, format_table

UNTAGGED = "(untagged)"


def scored_ids(pq: pd.DataFrame, cols: list[str]) -> pd.Index:
    """Query ids scored on every column: answerable and defined (the rule of ``EvalResult.means``)."""
    mask = pq[cols].notna().all(axis=1)
    if "category" in pq.columns:
        mask &= pq["category"].astype(str) == "answerable"
    return pq.index[mask.to_numpy()]


def _tag_members(pq: pd.DataFrame) -> dict[str, np.ndarray]:
    """tag -> row positions of the queries carrying it (``;``-separated tags; none -> ``(untagged)``)."""
    members: dict[str, list[int]] = {}
    tags = pq["tags"].tolist() if "tags" in pq.columns else [""] * len(pq)
    for i, t in enumerate(tags):
        names = [x.strip() for x in ("" if pd.isna(t) else str(t)).split(";") if x.strip()] or [UNTAGGED]
        for name in dict.fromkeys(names):
            members.setdefault(name, []).append(i)
    return {k: np.asarray(v, dtype=np.int64) for k, v in members.items()}


def slices(
    ordered: list[RunRecord],
    tables: dict[str, pd.DataFrame],
    metrics: list[str],
    cols: list[str],
    labels: dict[str, str],
    base: RunRecord,
    contrast: tuple[str, str] | None = DEFAULT_CONTRAST,
) -> tuple[pd.DataFrame, str]:
    """The slices table (one row per tag and run) and its Markdown (one table per metric, then the contrast)."""
    has_tags = any("tags" in tables[r.run_id].columns for r in ordered)
    columns = ["tag", "run_id", "run", "variant", "n_queries", "n_scored", *metrics]
    if not has_tags:
        md = (
            "# Slices by question type\n\nper_query.csv has no `tags` column (question types), so there are no "
            "slices. Runs logged by a version of ablate that writes the column will have them.\n"
        )
        return pd.DataFrame([], columns=columns), md
    rows: list[dict[str, Any]] = []
    for r in ordered:
        pq = tables[r.run_id]
        values = pq[cols].to_numpy(dtype=np.float64)
        scored = pq.index.isin(scored_ids(pq, cols))
        for tag, pos in _tag_members(pq).items():
            ok = pos[scored[pos]]
            row: dict[str, Any] = {
                "tag": tag,
                "run_id": r.run_id,
                "run": labels[r.run_id],
                "variant": r.variant,
                "n_queries": len(pos),
                "n_scored": len(ok),
            }
            for j, m in enumerate(metrics):
                row[m] = float(values[ok, j].mean()) if len(ok) else math.nan
            rows.append(row)
    rows.sort(key=lambda row: (row["tag"] == UNTAGGED, row["tag"]))  # stable: runs stay in table order
    df = pd.DataFrame(rows, columns=columns)
    cell = {(row["tag"], row["run_id"]): row for row in rows}
    tags = list(dict.fromkeys(row["tag"] for row in rows))
    run_labels = [labels[r.run_id] for r in ordered]
    parts = [
        "# Slices by question type",
        "Mean of each metric over the scored answerable queries carrying the tag (a query with several tags counts in "
        "each; no-answer questions have no scored queries: they are scored apart, by abstention). n = queries with "
        "the tag; scored = answerable and scored, in the baseline run (a range when runs differ).",
    ]
    for m in metrics:
        md_rows = []
        for t in tags:
            here = [cell[(t, r.run_id)] for r in ordered if (t, r.run_id) in cell]
            n_s = [c["n_scored"] for c in here]
            b = cell.get((t, base.run_id))
            n_q = b["n_queries"] if b else max(c["n_queries"] for c in here)
            scored_txt = str(b["n_scored"]) if b and min(n_s) == max(n_s) else f"{min(n_s)}-{max(n_s)}"
            row_md = {"tag": t, "n": str(n_q), "scored": scored_txt}
            for c in here:
                row_md[c["run"]] = fmt(c[m])
            md_rows.append(row_md)
        parts.append(f"## {m}\n\n" + format_table(md_rows, ["tag", "n", "scored", *run_labels]))
    if contrast:
        parts.append(_contrast(cell, ordered, labels, metrics, base, contrast))
    return df, "\n\n".join(parts) + "\n"


def _contrast(
    cell: dict[tuple[str, str], dict[str, Any]],
    ordered: list[RunRecord],
    labels: dict[str, str],
    metrics: list[str],
    base: RunRecord,
    pair: tuple[str, str],
) -> str:
    first, second = pair
    head = f"## {first} vs {second}"
    present = {t for t, _ in cell}
    if first not in present or second not in present:
        missing = [t for t in pair if t not in present]
        return f"{head}\n\nNo queries tagged {' or '.join(missing)}: the contrast cannot be measured."

    def val(rid: str, tag: str, key: str) -> float:
        c = cell.get((tag, rid))
        return float(c[key]) if c is not None else math.nan

    rows = []
    for r in ordered:
        row = {"run": labels[r.run_id]}
        for t in pair:
            n = val(r.run_id, t, "n_scored")
            row[f"n {t}"] = str(0 if math.isnan(n) else int(n))
        for m in metrics:
            row[f"{m} {first} / {second}"] = (
                f"{fmt(val(r.run_id, first, m))} / {fmt(val(r.run_id, second, m))}"
            )
        rows.append(row)
    cols = ["run", f"n {first}", f"n {second}", *(f"{m} {first} / {second}" for m in metrics)]
    m = metrics[0]
    b_first, b_second = val(base.run_id, first, m), val(base.run_id, second, m)
    notes = []
    for r in ordered:
        if r.run_id == base.run_id:
            continue
        v_first, v_second = val(r.run_id, first, m), val(r.run_id, second, m)
        note = (
            f"{labels[r.run_id]} vs {labels[base.run_id]} ({m}): {first} {fmt(v_first)} vs {fmt(b_first)}, "
            f"{second} {fmt(v_second)} vs {fmt(b_second)}"
        )
        if not (math.isnan(v_first) or math.isnan(b_first)) and v_first < b_first:
            note += f": lower on {first}; if it fuses lists, revisit rrf.k or retrieval.window on dev"
        notes.append(note + ".")
    lines = [head, "", format_table(rows, cols)]
    if notes:
        lines += ["", *(f"- {n}" for n in notes), "- Slices are small: read per-tag gaps with their n."]
    return "\n".join(lines)
