"""Two label versions side by side: a sweep's runs scored on the old labels and their re-scores on new ones
(:mod:`ablate.runner.relabel`), read back from the store. Pure: plain records in, text and a table out.

For each run: each metric under the old and the new labels and the difference, ``judged@K`` before and after (the
share of the top K the labels judge: what the new labels added), and each run's place in the order of the main
metric under each version; for the sweep: whether that order changed, and Kendall's τ (tau-b) between the two
orders' metric values. Also the line a report's header carries when some of its labels are LLM-made
(:func:`llm_made_line`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from ablate import record as R
from ablate.record import RecordedRun

FILE_MD, FILE_CSV = "labels_compare.md", "labels_compare.csv"


@dataclass(frozen=True)
class SideBySide:
    """The comparison: ``table`` (one row per run), ``order_changed``, ``tau`` (NaN for fewer than two runs or a
    constant metric), the Markdown file and the console text."""

    table: pd.DataFrame
    order_changed: bool
    tau: float
    markdown: str
    console: str

    def files(self) -> dict[str, str]:
        return {FILE_MD: self.markdown, FILE_CSV: self.table.to_csv(index=False)}


def _k(metric: str) -> str:
    m = re.search(r"@(\d+)$", metric)
    return m.group(1) if m else "10"


def _value(run: RecordedRun, metric: str) -> float:
    v = run.metric(metric)
    return float("nan") if v is None else float(v)


def _order(names: Sequence[str], values: Sequence[float]) -> list[str]:
    """Names from best to worst (NaN last; ties keep the given order)."""
    keyed = sorted(
        range(len(names)),
        key=lambda i: (math.isnan(values[i]), -values[i] if not math.isnan(values[i]) else 0),
    )
    return [names[i] for i in keyed]


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float:
    """Kendall's tau-b between two lists of values (NaN when it is undefined)."""
    from scipy.stats import kendalltau

    pairs = [(x, y) for x, y in zip(a, b, strict=True) if not (math.isnan(x) or math.isnan(y))]
    if len(pairs) < 2:
        return float("nan")
    res = kendalltau([p[0] for p in pairs], [p[1] for p in pairs])
    return float(res.statistic)


def _fmt(v: float) -> str:
    return "-" if math.isnan(v) else f"{v:.3f}"


def _delta(v: float) -> str:
    return "-" if math.isnan(v) else f"{v:+.3f}"


def side_by_side(
    old: Sequence[RecordedRun],
    new: Sequence[RecordedRun],
    metrics: Sequence[str],
    title: str = "",
) -> SideBySide:
    """Pair each run of ``new`` with the run of ``old`` it re-scores (tag ``ablate.rescored_from``) and compare them
    by ``metrics`` (the first is the main metric the order is read by)."""
    by_id = {r.run_id: r for r in old}
    pairs = [
        (by_id[str(n.tags.get(R.T_RESCORED_FROM))], n) for n in new if n.tags.get(R.T_RESCORED_FROM) in by_id
    ]
    judged = f"judged@{_k(metrics[0])}"
    rows = []
    for o, n in pairs:
        row: dict[str, object] = {"run": n.name, "run_id_old": o.run_id, "run_id_new": n.run_id}
        for m in metrics:
            a, b = _value(o, m), _value(n, m)
            row[f"{m} old"], row[f"{m} new"], row[f"Δ {m}"] = a, b, b - a
        row[f"{judged} old"], row[f"{judged} new"] = _value(o, judged), _value(n, judged)
        rows.append(row)
    main = metrics[0]
    names = [str(r["run"]) for r in rows]
    before = [float(r[f"{main} old"]) for r in rows]  # type: ignore[arg-type]
    after = [float(r[f"{main} new"]) for r in rows]  # type: ignore[arg-type]
    order_old, order_new = _order(names, before), _order(names, after)
    for r, x in zip(rows, names, strict=True):
        r["rank old"], r["rank new"] = order_old.index(x) + 1, order_new.index(x) + 1
    table = pd.DataFrame(rows)
    tau = kendall_tau(before, after)
    changed = order_old != order_new
    old_version = _distinct([o.tags.get(R.T_LABEL_VERSION) for o, _ in pairs])
    new_version = _distinct([n.tags.get(R.T_LABEL_VERSION) for _, n in pairs])
    order_line = (
        f"order by {main}: {'CHANGED' if changed else 'unchanged'} ({' > '.join(order_old)}"
        + (f" -> {' > '.join(order_new)}" if changed else "")
        + f"); Kendall's tau-b between the two = {_fmt(tau)} (n={len(rows)})"
    )
    llm = llm_made_line([n for _, n in pairs])
    head = [
        f"# Labels side by side{': ' + title if title else ''}",
        "",
        f"- labels: {old_version} -> {new_version}; every run re-scored from its logged run.trec (nothing retrieved "
        "again), the old runs untouched",
        *([f"- {llm}"] if llm else []),
        f"- {judged}: the share of each run's top {_k(main)} the labels judge, before and after",
        f"- {order_line}",
    ]
    md_table = _markdown(rows, metrics, judged)
    console = "\n".join(
        [f"labels {old_version} -> {new_version}: {order_line}", _markdown(rows, metrics[:1], judged)]
    )
    return SideBySide(table, changed, tau, "\n".join(head) + "\n\n" + md_table + "\n", console)


def _markdown(rows: Sequence[dict[str, object]], metrics: Sequence[str], judged: str) -> str:
    cols = ["run"]
    for m in metrics:
        cols += [f"{m} old", f"{m} new", f"Δ {m}"]
    cols += [f"{judged} old", f"{judged} new", "rank old", "rank new"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [str(r["run"])]
        for m in metrics:
            cells += [_fmt(float(r[f"{m} old"])), _fmt(float(r[f"{m} new"])), _delta(float(r[f"Δ {m}"]))]  # type: ignore[arg-type]
        cells += [_fmt(float(r[f"{judged} old"])), _fmt(float(r[f"{judged} new"]))]  # type: ignore[arg-type]
        cells += [str(r.get("rank old", "")), str(r.get("rank new", ""))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _distinct(values: Sequence[str | None]) -> str:
    seen = sorted({v or "unversioned" for v in values})
    return ", ".join(seen) if seen else "-"


def llm_made_line(runs: Sequence[RecordedRun]) -> str:
    """``labels: N LLM-made (label version V)`` when some run's labels hold LLM-made labels
    (param ``labels.llm_made``), else ``""``."""
    made: dict[str, int] = {}
    for r in runs:
        try:
            n = int(float(r.params.get(R.P_LABELS_LLM_MADE, 0) or 0))
        except ValueError:
            continue
        if n > 0:
            made[str(r.tags.get(R.T_LABEL_VERSION) or "?")] = n
    if not made:
        return ""
    return "labels: " + "; ".join(
        f"{n} of the labels of version {v} are LLM-made (by a validated assessor; see its version.json)"
        for v, n in sorted(made.items())
    )
