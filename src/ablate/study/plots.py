"""The report's plots: each run's headline metrics with 95% intervals, and metric-vs-parameter curves for sweeps.

matplotlib's object API on the Agg canvas (no pyplot state, no backend switch); PNG bytes out, no files written here.
Each figure is drawn from a plain *spec* (the labels and numbers it shows). Given a :class:`~ablate.cache.Cache`,
a figure is stored by content (kind ``report-plots``, keyed by the spec, this module's source and matplotlib's
version), so a report whose runs did not change draws nothing again; a changed run redraws only its own figures.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Callable
from functools import cache as memoize
from pathlib import Path
from typing import Any

import numpy as np

from ablate.cache import Cache, key_of
from ablate.record import metric_key, parse_funnel, parse_funnel_head
from ablate.study.fetch import RunRecord
from ablate.tables import as_number

PLOTS_KIND = "report-plots"
Spec = dict[str, Any]


@memoize
def _code_version() -> str:
    """This module's source and matplotlib's version: a figure drawn by other code is never served."""
    import matplotlib

    src = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    return f"{src}:{matplotlib.__version__}"


def _render(cache: Cache | None, draw: Callable[[Spec], bytes], spec: Spec) -> bytes:
    """``draw(spec)``, or the PNG a previous call with the same spec stored in ``cache``."""
    if cache is None:
        return draw(spec)
    key = key_of(draw.__name__, _code_version(), spec)
    png = cache.load_bytes(PLOTS_KIND, key, "png")
    if png is None:
        png = draw(spec)
        cache.save_bytes(PLOTS_KIND, key, "png", png)
    return png


def _floats(values: Any) -> list[float]:
    return [float(v) for v in values]


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
    cache: Cache | None = None,
) -> dict[str, bytes]:
    """``metrics_bars.png`` (every run, every metric, with its interval; the baseline in orange) and, for a sweep
    over numeric params, ``sweep_<metric>_vs_<param>.png`` (one line per combination of the other swept values)."""
    out = {"metrics_bars.png": _bars(ordered, cis, metrics, cols, labels, base, cache)}
    out.update(_sweep_curves(ordered, cis, metrics, cols, swept, cache))
    return out


def _bars(
    ordered: list[RunRecord],
    cis: CIs,
    metrics: list[str],
    cols: list[str],
    labels: dict[str, str],
    base: RunRecord,
    cache: Cache | None = None,
) -> bytes:
    spec: Spec = {
        "names": [labels[r.run_id] for r in ordered],
        "colors": ["#4c72b0" if r.run_id != base.run_id else "#dd8452" for r in ordered],
        "metrics": list(metrics),
        "cis": [
            [_floats(cis[r.run_id][c]) for r in ordered] for c in cols
        ],  # metric -> run -> (mean, lo, hi)
    }
    return _render(cache, _draw_bars, spec)


def _draw_bars(spec: Spec) -> bytes:
    from matplotlib.figure import Figure

    names, metrics = spec["names"], spec["metrics"]
    n = len(names)
    label_in = 0.2 + 0.065 * max(len(s) for s in names)  # inches for the run labels at fontsize 8
    width = label_in + 2.5 * len(metrics) + 0.3
    height = 1.3 + 0.32 * n
    fig = Figure(figsize=(width, height))
    axes = fig.subplots(1, len(metrics), squeeze=False, sharey=True)[0]
    y = np.arange(n)
    for ax, m, rows in zip(axes, metrics, spec["cis"], strict=True):
        means = np.array([row[0] for row in rows], dtype=float)
        lo = np.array([row[1] for row in rows], dtype=float)
        hi = np.array([row[2] for row in rows], dtype=float)
        err = np.vstack([np.nan_to_num(means - lo), np.nan_to_num(hi - means)])
        ax.barh(y, np.nan_to_num(means), xerr=err, capsize=3, color=spec["colors"], height=0.7)
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
    ordered: list[RunRecord],
    cis: CIs,
    metrics: list[str],
    cols: list[str],
    swept: list[str],
    cache: Cache | None = None,
) -> dict[str, bytes]:
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
            curves = []
            for key, rs in lines.items():
                rs = sorted(rs, key=lambda r: as_number(r.params.get(p)) or 0.0)
                curves.append(
                    {
                        "label": key,
                        "x": _floats(as_number(r.params.get(p)) for r in rs),
                        "ci": [_floats(cis[r.run_id][c]) for r in rs],
                    }
                )
            spec: Spec = {"param": p, "metric": m, "curves": curves, "legend": len(lines) > 1 or bool(others)}
            out[f"sweep_{_safe(metric_key(m))}_vs_{_safe(p)}.png"] = _render(cache, _draw_curve, spec)
    return out


def _draw_curve(spec: Spec) -> bytes:
    from matplotlib.figure import Figure

    p, m = spec["param"], spec["metric"]
    fig = Figure(figsize=(6.4, 4.2))
    ax = fig.subplots()
    for curve in spec["curves"]:
        xs = np.array(curve["x"], dtype=float)
        ys = np.array([row[0] for row in curve["ci"]], dtype=float)
        lo = np.array([row[1] for row in curve["ci"]], dtype=float)
        hi = np.array([row[2] for row in curve["ci"]], dtype=float)
        ax.errorbar(
            xs,
            ys,
            yerr=np.vstack([np.nan_to_num(ys - lo), np.nan_to_num(hi - ys)]),
            marker="o",
            capsize=3,
            label=curve["label"],
        )
    ax.set_xlabel(p)
    ax.set_ylabel(m)
    ax.set_title(f"{m} vs {p} (95% bootstrap CI)")
    fig.subplots_adjust(bottom=0.13)
    ax.grid(alpha=0.3)
    if spec["legend"]:
        ax.legend(fontsize=8)
    return _png(fig)


def _value(r: RunRecord, key: str) -> str:
    return r.variant if key == "variant" else str(r.params.get(key, ""))


def funnel_plots(
    ordered: list[RunRecord], labels: dict[str, str], cache: Cache | None = None
) -> dict[str, bytes]:
    """``funnel_<run>.png`` per run that logged a funnel: recall of the gold evidence after each stage (each
    retriever's candidates, the fused list, the reranked list, the final ranking, the generator's context), at the
    list's full depth and in its first ``topk`` results (the context size), so a drop shows where evidence is lost."""
    out: dict[str, bytes] = {}
    for r in ordered:
        stages = parse_funnel(r.metrics)
        if not stages:
            continue
        heads = {s: (v, k) for s, v, k in parse_funnel_head(r.metrics)}
        names = [s for s, _, _ in stages]
        topk = next((k for _, k in heads.values() if k == k), None)
        spec: Spec = {
            "names": names,
            "full": _floats(v for _, v, _ in stages),
            "head": _floats(heads.get(s, (np.nan, np.nan))[0] for s in names),
            "topk": None if topk is None else float(topk),
            "depth": _floats(d for _, _, d in stages),
            "title": f"stage funnel: {labels.get(r.run_id, r.name)}",
        }
        out[f"funnel_{_safe(labels.get(r.run_id, r.name))}.png"] = _render(cache, _draw_funnel, spec)
    return out


def _draw_funnel(spec: Spec) -> bytes:
    from matplotlib.figure import Figure

    names, depth, topk = spec["names"], spec["depth"], spec["topk"]
    full = np.array(spec["full"], dtype=float)
    head = np.array(spec["head"], dtype=float)
    fig = Figure(figsize=(1.6 + 1.2 * len(names), 3.8))
    ax = fig.subplots()
    x = np.arange(len(names), dtype=float)
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
    ax.set_title(spec["title"], fontsize=9, loc="left")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, ncol=2, loc="lower right", bbox_to_anchor=(1.0, 1.0), frameon=False)
    fig.subplots_adjust(bottom=0.2)
    return _png(fig)


def interaction_plots(
    pairs: list[tuple[str, str]],
    means: Callable[[str, str], dict[str, list[tuple[str, float, float, float]]]],
    metric: str,
    cache: Cache | None = None,
) -> dict[str, bytes]:
    """``interaction_<a>_<b>.png`` per pair of factors (the significant interactions of
    :mod:`ablate.study.factorial`): the mean metric per level of ``a`` (x), one line per level of ``b``, with 95%
    t intervals over the questions; lines that are not parallel are the interaction. ``means(a, b)``: level of ``b``
    -> ``(level of a, mean, ci_low, ci_high)`` (:func:`ablate.study.factorial.cell_means`)."""
    out: dict[str, bytes] = {}
    for a, b in pairs:
        lines = [
            {"label": f"{b}={lb}", "x": [p[0] for p in pts], "ci": [_floats(p[1:]) for p in pts]}
            for lb, pts in means(a, b).items()
        ]
        spec: Spec = {"a": a, "b": b, "metric": metric, "lines": lines}
        out[interaction_name(a, b)] = _render(cache, _draw_interaction, spec)
    return out


def interaction_name(a: str, b: str) -> str:
    """The file name of the interaction plot of factors ``a`` and ``b``."""
    return f"interaction_{_safe(a)}_{_safe(b)}.png"


def _draw_interaction(spec: Spec) -> bytes:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.2))
    ax = fig.subplots()
    for line in spec["lines"]:
        xs = np.arange(len(line["x"]), dtype=float)
        ys = np.array([row[0] for row in line["ci"]], dtype=float)
        lo = np.array([row[1] for row in line["ci"]], dtype=float)
        hi = np.array([row[2] for row in line["ci"]], dtype=float)
        err = np.vstack([np.nan_to_num(ys - lo), np.nan_to_num(hi - ys)])
        ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=line["label"])
        ax.set_xticks(xs, line["x"])
    ax.set_xlabel(spec["a"])
    ax.set_ylabel(spec["metric"])
    ax.set_title(
        f"{spec['metric']}: {spec['a']} × {spec['b']} (mean over questions, 95% t interval)", fontsize=9
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.subplots_adjust(bottom=0.13)
    return _png(fig)
