"""The report's plots: each run's headline metrics with 95% intervals, and metric-vs-parameter curves for sweeps.

matplotlib's object API on the Agg canvas (no pyplot state, no backend switch); PNG bytes out, no files written here.
"""

from __future__ import annotations

import io
import re
from typing import Any

import numpy as np

from ablate.record import metric_key, parse_funnel, parse_funnel_head
from ablate.study.fetch import RunRecord
from ablate.tables import as_number


def _png(fig: Any) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    return buf.getvalue()


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


CIs = dict[str, dict[str, tuple[float, float, float]]]


def plots(
    ordered: list[RunRecord],
    cis: CIs,
    metrics: list[str],
    cols: list[str],
    labels: dict[str, str],
    base: RunRecord,
    swept: list[str],
) -> dict[str, bytes]:
    """``metrics_bars.png`` (every run, every metric, with its interval; the baseline in orange) and, for a sweep
    over numeric params, ``sweep_<metric>_vs_<param>.png`` (one line per combination of the other swept values)."""
    out = {"metrics_bars.png": _bars(ordered, cis, metrics, cols, labels, base)}
    out.update(_sweep_curves(ordered, cis, metrics, cols, swept))
    return out


def _bars(
    ordered: list[RunRecord],
    cis: CIs,
    metrics: list[str],
    cols: list[str],
    labels: dict[str, str],
    base: RunRecord,
) -> bytes:
    from matplotlib.figure import Figure

    n = len(ordered)
    names = [labels[r.run_id] for r in ordered]
    label_in = 0.2 + 0.065 * max(len(s) for s in names)  # inches for the run labels at fontsize 8
    width = label_in + 2.5 * len(metrics) + 0.3
    height = 1.3 + 0.32 * n
    fig = Figure(figsize=(width, height))
    axes = fig.subplots(1, len(metrics), squeeze=False, sharey=True)[0]
    y = np.arange(n)
    colors = ["#4c72b0" if r.run_id != base.run_id else "#dd8452" for r in ordered]
    for ax, m, c in zip(axes, metrics, cols, strict=True):
        means = np.array([cis[r.run_id][c][0] for r in ordered], dtype=float)
        lo = np.array([cis[r.run_id][c][1] for r in ordered], dtype=float)
        hi = np.array([cis[r.run_id][c][2] for r in ordered], dtype=float)
        err = np.vstack([np.nan_to_num(means - lo), np.nan_to_num(hi - means)])
        ax.barh(y, np.nan_to_num(means), xerr=err, capsize=3, color=colors, height=0.7)
        ax.set_title(m, fontsize=10)
        ax.set_xlim(0, max(1.0, float(np.nanmax(hi)) if np.isfinite(hi).any() else 1.0) * 1.05)
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(axis="x", labelsize=8)
    axes[0].set_yticks(y, names, fontsize=8)
    axes[0].invert_yaxis()  # table order, top to bottom
    fig.suptitle("mean over answerable queries, 95% bootstrap CI (baseline in orange)", fontsize=9)
    fig.subplots_adjust(
        left=label_in / width, right=1 - 0.2 / width, bottom=0.5 / height, top=1 - 0.7 / height, wspace=0.12
    )
    return _png(fig)


def _sweep_curves(
    ordered: list[RunRecord], cis: CIs, metrics: list[str], cols: list[str], swept: list[str]
) -> dict[str, bytes]:
    from matplotlib.figure import Figure

    out: dict[str, bytes] = {}
    params = [p for p in swept if p != "variant"]  # plots only along what the sweep varied
    numeric = [
        p
        for p in params
        if all(as_number(r.params.get(p)) is not None for r in ordered)
        and len({as_number(r.params.get(p)) for r in ordered}) > 1
    ]
    if not numeric:
        return out
    groupers = list(swept)
    for p in numeric:
        others = [q for q in groupers if q != p and len({str(_value(r, q)) for r in ordered}) > 1]
        lines: dict[str, list[RunRecord]] = {}
        for r in ordered:
            key = ", ".join(f"{q}={_value(r, q)}" for q in others) or "all runs"
            lines.setdefault(key, []).append(r)
        for m, c in zip(metrics, cols, strict=True):
            fig = Figure(figsize=(6.4, 4.2))
            ax = fig.subplots()
            for key, rs in lines.items():
                rs = sorted(rs, key=lambda r: as_number(r.params.get(p)) or 0.0)
                xs = np.array([as_number(r.params.get(p)) for r in rs], dtype=float)
                ys = np.array([cis[r.run_id][c][0] for r in rs], dtype=float)
                lo = np.array([cis[r.run_id][c][1] for r in rs], dtype=float)
                hi = np.array([cis[r.run_id][c][2] for r in rs], dtype=float)
                ax.errorbar(
                    xs,
                    ys,
                    yerr=np.vstack([np.nan_to_num(ys - lo), np.nan_to_num(hi - ys)]),
                    marker="o",
                    capsize=3,
                    label=key,
                )
            ax.set_xlabel(p)
            ax.set_ylabel(m)
            ax.set_title(f"{m} vs {p} (95% bootstrap CI)")
            fig.subplots_adjust(bottom=0.13)
            ax.grid(alpha=0.3)
            if len(lines) > 1 or others:
                ax.legend(fontsize=8)
            out[f"sweep_{_safe(metric_key(m))}_vs_{_safe(p)}.png"] = _png(fig)
    return out


def _value(r: RunRecord, key: str) -> str:
    return r.variant if key == "variant" else str(r.params.get(key, ""))


def funnel_plots(ordered: list[RunRecord], labels: dict[str, str]) -> dict[str, bytes]:
    """``funnel_<run>.png`` per run that logged a funnel: recall of the gold evidence after each stage (each
    retriever's candidates, the fused list, the reranked list, the final ranking, the generator's context), at the
    list's full depth and in its first ``topk`` results (the context size), so a drop shows where evidence is lost."""
    from matplotlib.figure import Figure

    out: dict[str, bytes] = {}
    for r in ordered:
        stages = parse_funnel(r.metrics)
        if not stages:
            continue
        heads = {s: (v, k) for s, v, k in parse_funnel_head(r.metrics)}
        names = [s for s, _, _ in stages]
        full = np.array([v for _, v, _ in stages], dtype=float)
        head = np.array([heads.get(s, (np.nan, np.nan))[0] for s in names], dtype=float)
        topk = next((k for _, k in heads.values() if k == k), None)
        depth = [d for _, _, d in stages]
        fig = Figure(figsize=(1.6 + 1.2 * len(stages), 3.8))
        ax = fig.subplots()
        x = np.arange(len(stages), dtype=float)
        series = [(full, -0.2, "#4c72b0", "whole list")]
        if topk is not None:
            series.append((head, 0.2, "#dd8452", f"first {int(topk)}"))
        width = 0.38 if topk is not None else 0.6
        for values, shift, color, label in series:
            xs = x + (shift if topk is not None else 0.0)
            ax.bar(xs, np.nan_to_num(values), color=color, width=width, label=label)
            for xi, v in zip(xs, values, strict=True):
                ax.text(
                    float(xi),
                    (0 if np.isnan(v) else v) + 0.02,
                    "-" if np.isnan(v) else f"{v:.2f}",
                    ha="center",
                    fontsize=7,
                )
        ax.set_xticks(
            x, [f"{n}\n@{int(d)}" if d == d else n for n, d in zip(names, depth, strict=True)], fontsize=8
        )
        ax.set_ylim(0, 1.15)
        ax.set_ylabel("recall of gold evidence")
        ax.set_title(f"stage funnel: {labels.get(r.run_id, r.name)}", fontsize=9, loc="left")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, ncol=2, loc="lower right", bbox_to_anchor=(1.0, 1.0), frameon=False)
        fig.subplots_adjust(bottom=0.2)
        out[f"funnel_{_safe(labels.get(r.run_id, r.name))}.png"] = _png(fig)
    return out
