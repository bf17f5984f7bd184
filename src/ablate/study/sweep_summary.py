"""The table printed at the end of a ``-m`` sweep: one row per child run, headline metrics with 95% CIs."""

from __future__ import annotations

import sys
from typing import Any

from ablate.runner.emit import HEADLINE, fmt, format_table
from ablate.tracking import metric_key

VARIANT_ORDER = {"A": 0, "B": 1, "C": 2, "D": 3, "oracle": 4}


def child_rows(tracker: Any, parent_run_id: str) -> list[dict[str, Any]]:
    parent = tracker.client.get_run(parent_run_id)
    runs = tracker.search([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent_run_id}'")
    rows = []
    for r in runs:
        m, p = r.data.metrics, r.data.params
        row: dict[str, Any] = {
            "run": r.info.run_name,
            "variant": p.get("variant", r.info.run_name),
            "status": r.info.status,
            "params": p,
            "metrics": m,
            "run_id": r.info.run_id,
            "failure": r.data.tags.get("ablate.failure", ""),
        }
        rows.append(row)
    rows.sort(key=lambda r: (VARIANT_ORDER.get(r["variant"], 9), r["run"], r["run_id"]))
    return rows


def varying_params(rows: list[dict[str, Any]]) -> list[str]:
    keys = sorted({k for r in rows for k in r["params"]})
    skip = {"variant"}
    return [k for k in keys if k not in skip and len({r["params"].get(k) for r in rows}) > 1 and not k.startswith("retrieval.retrievers")
            and not k.startswith(("fusion.", "rerank.enabled", "variant."))]


def summary_table(rows: list[dict[str, Any]]) -> str:
    vary = [k for k in varying_params(rows) if k in ("rrf.k", "retrieval.window", "rerank.depth") or len(rows) <= 30][:4]
    cols = ["variant", *vary, *HEADLINE, "status"]
    out = []
    for r in rows:
        m = r["metrics"]
        row = {"variant": r["variant"], "status": r["status"], **{k: r["params"].get(k, "") for k in vary}}
        for h in HEADLINE:
            key = metric_key(h)
            v = m.get(key)
            lo, hi = m.get(f"{key}_ci_low"), m.get(f"{key}_ci_high")
            row[h] = fmt(v) + (f" [{fmt(lo, 2)},{fmt(hi, 2)}]" if lo is not None and hi is not None and h == "ndcg@10" else "")
        out.append(row)
    return format_table(out, cols)


def summarize_sweep(
    tracker: Any, parent_run_id: str, sweep_dir: str, config: Any, stream=None, quiet: bool = False
) -> str:
    """Attach ``summary.md`` (one row per child, with status) to the parent; print failures (and the table unless
    ``quiet``: the full report prints its own)."""
    stream = stream or sys.stdout
    rows = child_rows(tracker, parent_run_id)
    table = summary_table(rows)
    split = rows[0]["params"].get("corpus.split", "?") if rows else "?"
    header = f"ablation on split {split!r}: {len(rows)} runs (nDCG@10 with its 95% bootstrap CI over queries)"
    if not quiet:
        print("\n" + header + "\n" + table, file=stream)
    failed = [r for r in rows if r["status"] != "FINISHED"]
    for r in failed:
        print(f"  {r['variant']} {r['status']}: {r['failure']}", file=stream)
    tracker.log_files(parent_run_id, {"summary.md": f"# {header}\n\n{table}\n"})
    tracker.set_tags(parent_run_id, {"ablate.children": len(rows), "ablate.failed_children": len(failed)})
    return table
