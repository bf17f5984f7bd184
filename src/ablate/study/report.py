"""The ablation report: one row per tracked run against a baseline, paired tests over queries, slices and plots.

``python -m ablate.report [--parent RUN_ID | --experiment NAME] [--tracking-uri URI] [--baseline A]
[--metrics ndcg@10,recall@10,mrr@10,hit@10] [--test randomization|bootstrap] [--out DIR] [--force]``

Without ``--parent`` / ``--experiment`` it reports the latest sweep parent run in the store (tag
``ablate.role=sweep-parent``). It reads the runs' ``per_query.csv`` artifacts, writes ``ablation.md/.csv``,
``slices.md/.csv`` and PNG plots to ``--out`` and logs them to the parent run under ``report/``.

What the numbers are (measured, never pre-filled; the spec: "跑出来是多少就写多少"):

* A run's cell: the mean of a per-query metric over its *scored answerable* queries (``category == "answerable"``
  and the metric defined: the rule of ``EvalResult.means``), with a 95% percentile bootstrap CI over queries
  (:func:`ablate.stats.bootstrap_cis`, ``bootstrap`` resamples, ``seed``).
* Δ: ``mean(run - baseline)`` over the queries scored answerable in *both* runs (paired; ``n`` is reported), with a
  bootstrap CI of the mean difference and a two-sided paired p-value: Fisher's randomization test (default) or the
  studentized paired bootstrap (:mod:`ablate.stats`), 10,000 resamples, seed 0.
* Holm: the p-values of every (run x metric) comparison in the table form one family (:func:`ablate.stats.holm`).
* Flags: :func:`ablate.compare.check_comparison` (one factor per row; same labels, documents and split).

The numbers come from :func:`build_report`, a pure function of :class:`RunRecord` s (no MLflow); the functions
below it fetch the records from MLflow through :class:`ablate.tracking.Tracker`.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ablate.evaluation import stats
from ablate.study.compare import (
    VARIANT_AXES,
    VARIANT_ORDER,
    ComparisonCheck,
    RunInfo,
    check_comparison,
    ignored_param,
    norm_value,
)
from ablate.errors import AblateError, ConfigError, InputError
from ablate.runner.emit import fmt, format_table
from ablate.tracking import metric_key

__all__ = [
    "DEFAULT_METRICS",
    "TESTS",
    "Report",
    "RunRecord",
    "attach_report",
    "build_report",
    "fetch_runs",
    "main",
    "swept_from_overrides",
]

DEFAULT_METRICS: tuple[str, ...] = ("ndcg@10", "recall@10", "mrr@10", "hit@10")
#: Paired tests selectable with ``--test``: name -> function(a, b, n_resamples=, seed=) -> PairedResult.
TESTS: dict[str, Callable[..., stats.PairedResult]] = {
    "randomization": stats.paired_randomization_test,
    "bootstrap": stats.paired_bootstrap_test,
}
TEST_NAMES = {
    "randomization": "paired randomization test (sign flips; Fisher 1935)",
    "bootstrap": "paired studentized bootstrap test (shifted null; Efron & Tibshirani 1993 §16.4)",
}
#: Hydra config groups -> the param their choice sets (to read ``ablate.overrides`` of a sweep parent).
GROUP_PARAMS = {
    "variant": "variant",
    "retrievers": "retrieval.retrievers",
    "fusion": "fusion.method",
    "reranker": "rerank.enabled",
    "corpus": "corpus.name",
}
UNTAGGED = "(untagged)"
CONTRAST = ("exact-id", "paraphrase")


class ReportError(AblateError):
    """Nothing to report, or the runs cannot be read as asked."""


@dataclass
class RunRecord:
    """One tracked run as the report needs it. ``per_query``: index ``qid`` (or a ``qid`` column), a ``category``
    column and per-query metric columns (``ndcg@10``, ``rr@10``, ...); optional ``tags`` (``;``-separated)."""

    run_id: str
    name: str
    params: dict[str, str]
    metrics: dict[str, float]
    tags: dict[str, str]
    per_query: pd.DataFrame
    status: str = "FINISHED"

    @property
    def variant(self) -> str:
        return str(self.params.get("variant") or self.tags.get("ablate.variant") or self.name)

    @property
    def info(self) -> RunInfo:
        return RunInfo.from_run(self.run_id, self.name, self.params, self.tags)


@dataclass
class Report:
    """Everything :func:`build_report` computed; :meth:`files` is what gets written and logged (under ``report/``)."""

    kind: str  # "ablation" (runs differ in variant) or "sweep"
    baseline: str  # run id
    swept: list[str]
    metrics: list[str]
    labels: dict[str, str]  # run id -> row label
    table: pd.DataFrame  # ablation.csv
    markdown: str  # ablation.md (also printed)
    slices: pd.DataFrame  # slices.csv
    slices_markdown: str  # slices.md
    plots: dict[str, bytes]  # file name -> PNG bytes
    checks: dict[str, ComparisonCheck]  # run id -> comparison with the baseline
    warnings: list[str] = field(default_factory=list)

    def files(self) -> dict[str, str | bytes]:
        return {
            "ablation.md": self.markdown,
            "ablation.csv": self.table.to_csv(index=False),
            "slices.md": self.slices_markdown,
            "slices.csv": self.slices.to_csv(index=False),
            **self.plots,
        }

    def write(self, out: str | os.PathLike[str]) -> list[Path]:
        d = Path(out)
        d.mkdir(parents=True, exist_ok=True)
        paths = []
        for name, content in self.files().items():
            p = d / name
            if isinstance(content, bytes):
                p.write_bytes(content)
            else:
                p.write_text(content, encoding="utf-8")
            paths.append(p)
        return paths


# --------------------------------------------------------------------------------------------------------------
# helpers


def pq_column(metric: str) -> str:
    """Per-query column of a reported metric: ``mrr@10`` is the mean of ``rr@10``."""
    return "rr@" + metric.split("@", 1)[1] if metric.startswith("mrr@") else metric


def _check_metrics(metrics: Sequence[str]) -> list[str]:
    out = []
    for m in metrics:
        m = m.strip()
        name, _, k = m.partition("@")
        if not name or not k.isdigit():
            raise ConfigError("--metrics", m, "use <metric>@<k>, e.g. ndcg@10,recall@10,mrr@10,hit@10")
        out.append(m)
    if not out:
        raise ConfigError("--metrics", ",".join(metrics), "name at least one, e.g. ndcg@10")
    return list(dict.fromkeys(out))


def _prepare(rec: RunRecord, cols: list[str]) -> pd.DataFrame:
    pq = rec.per_query.copy()
    if "qid" in pq.columns:
        pq = pq.set_index("qid")
    pq.index = pq.index.astype(str)
    where = f"per_query.csv of run {rec.name} ({rec.run_id})"
    if pq.index.has_duplicates:
        dup = pq.index[pq.index.duplicated()][:3].tolist()
        raise InputError(where, f"query ids {dup} appear more than once", "log one row per query")
    missing = [c for c in cols if c not in pq.columns]
    if missing:
        ks: dict[str, list[str]] = {}
        for c in pq.columns:
            name, _, k = str(c).partition("@")
            if k.isdigit() and name != "unjudged":
                ks.setdefault("mrr" if name == "rr" else name, []).append(k)
        shown = "; ".join(f"{n}@{{{','.join(v)}}}" for n, v in ks.items()) or "none"
        raise InputError(where, f"no per-query column(s) {missing}", f"choose --metrics among: {shown}")
    for c in cols:
        pq[c] = pd.to_numeric(pq[c], errors="coerce")
    return pq


def _scored(pq: pd.DataFrame, cols: list[str]) -> pd.Index:
    """Query ids scored on every column: answerable and defined (the rule of ``EvalResult.means``)."""
    mask = pq[cols].notna().all(axis=1)
    if "category" in pq.columns:
        mask &= pq["category"].astype(str) == "answerable"
    return pq.index[mask.to_numpy()]


def _sort_value(key: str, v: Any) -> tuple:
    if key == "variant":
        return (0, VARIANT_ORDER.get(str(v), 99), str(v))
    n = norm_value(v)
    if isinstance(n, float):
        return (0, n, "")
    return (1, 0.0, "" if n is None else str(n))


def _num(v: Any) -> float | None:
    n = norm_value(v)
    return n if isinstance(n, float) else None


def swept_from_overrides(overrides: str) -> list[str]:
    """Params a Hydra ``-m`` sweep varies, in order, from the parent's ``ablate.overrides`` tag:
    ``"variant=A,B rrf.k=10,60 bm25.k1=1.2"`` -> ``["variant", "rrf.k"]`` (config groups map to the param their
    choice sets, e.g. ``retrievers`` -> ``retrieval.retrievers``)."""
    out: list[str] = []
    for tok in overrides.split():
        if "=" not in tok:
            continue
        key, _, value = tok.partition("=")
        key = key.lstrip("+~").removeprefix("override ")
        if not _is_sweep(value):
            continue
        param = GROUP_PARAMS.get(key, key)
        if param not in out:
            out.append(param)
    return out


def _is_sweep(value: str) -> bool:
    if value.startswith(("range(", "choice(", "glob(", "interval(")):
        return True
    depth, quote = 0, ""
    for ch in value:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            return True
    return False


def _varying(records: Sequence[RunRecord]) -> list[str]:
    keys = sorted({k for r in records for k in r.params})
    out = []
    for k in keys:
        if ignored_param(k) or k in VARIANT_AXES:
            continue
        if len({repr(norm_value(r.params.get(k))) for r in records}) > 1:
            out.append(k)
    return out


def _labels(records: Sequence[RunRecord], swept: list[str]) -> dict[str, str]:
    """Unique row labels: the run name, plus the swept / differing params when names repeat, plus an id prefix."""
    by_name: dict[str, list[RunRecord]] = {}
    for r in records:
        by_name.setdefault(r.name, []).append(r)
    labels: dict[str, str] = {}
    for name, group in by_name.items():
        if len(group) == 1:
            labels[group[0].run_id] = name
            continue
        keys = [k for k in [*swept, *_varying(group)] if k != "variant"]
        keys = [k for k in dict.fromkeys(keys) if len({str(r.params.get(k)) for r in group}) > 1]
        for r in group:
            labels[r.run_id] = " ".join([name, *(f"{k}={r.params.get(k)}" for k in keys)])
    counts: dict[str, int] = {}
    for lab in labels.values():
        counts[lab] = counts.get(lab, 0) + 1
    return {rid: (f"{lab} [{rid[:8]}]" if counts[lab] > 1 else lab) for rid, lab in labels.items()}


def _pick_baseline(
    ordered: list[RunRecord], kind: str, baseline: str | None, labels: dict[str, str]
) -> tuple[RunRecord, list[str]]:
    warnings: list[str] = []
    if baseline:
        for match in (
            lambda r: r.run_id == baseline,
            lambda r: labels[r.run_id] == baseline,
            lambda r: r.name == baseline,
            lambda r: r.variant == baseline,
        ):
            hits = [r for r in ordered if match(r)]
            if hits:
                return hits[0], warnings
        prefixed = [r for r in ordered if len(baseline) >= 6 and r.run_id.startswith(baseline)]
        if len(prefixed) == 1:
            return prefixed[0], warnings
        opts = ", ".join(dict.fromkeys([*(r.variant for r in ordered), *(labels[r.run_id] for r in ordered)]))
        raise ConfigError("--baseline", baseline, f"choose a run id, name or variant of: {opts}")
    if kind == "ablation":
        a = [r for r in ordered if r.variant == "A"]
        if a:
            return a[0], warnings
        warnings.append(
            f"no variant A among the runs: the baseline is {labels[ordered[0].run_id]} (first in order)"
        )
    return ordered[0], warnings


def _fmt_p(p: float) -> str:
    return "-" if p is None or (isinstance(p, float) and math.isnan(p)) else f"{p:.4f}"


def _fmt_delta(d: float) -> str:
    return "-" if d is None or math.isnan(d) else f"{d:+.3f}"


def _fmt_ci(mean: float, lo: float, hi: float) -> str:
    if mean is None or math.isnan(mean):
        return "-"
    if lo is None or math.isnan(lo):
        return fmt(mean)
    return f"{fmt(mean)} [{fmt(lo)}, {fmt(hi)}]"


def _distinct(values: Sequence[Any]) -> str:
    vals = [str(v)[:12] if v else "?" for v in values]
    return ", ".join(dict.fromkeys(vals))


# --------------------------------------------------------------------------------------------------------------
# the pure core


def build_report(
    runs: Sequence[RunRecord],
    baseline: str | None = None,
    metrics: Sequence[str] = DEFAULT_METRICS,
    test: str = "randomization",
    n_resamples: int = 10000,
    seed: int = 0,
    bootstrap: int = 1000,
    swept: Sequence[str] | None = None,
    force: bool = False,
    plots: bool = True,
    title: str = "",
    skipped: Sequence[str] = (),
) -> Report:
    """Compare ``runs`` with a baseline: the ablation table, per-tag slices and plots. Pure (no MLflow).

    ``baseline``: a run id (or a prefix of >= 6 characters), row label, run name or variant; default: variant ``A``
    when the runs differ in variant (an ablation table), else the sweep's first cell (the smallest values of the
    swept params, in order). ``swept``: the params a sweep declared (``swept_from_overrides``); ``None`` infers
    them (the variant, when variants differ; else every param that differs between runs). ``force``: report runs
    scored on different labels or documents (flagged) instead of raising :class:`ablate.compare.ComparisonRefused`.
    ``skipped``: lines about runs left out (failed), repeated in the report.
    """
    if not runs:
        raise ReportError(
            "no runs to report; fix: point --parent at a sweep with finished child runs, or --experiment at one with runs"
        )
    if test not in TESTS:
        raise ConfigError("--test", test, "options: " + ", ".join(TESTS))
    metrics = _check_metrics(metrics)
    cols = [pq_column(m) for m in metrics]
    records = list(runs)
    ids = [r.run_id for r in records]
    if len(set(ids)) != len(ids):
        raise ReportError("the same run appears twice among the runs; fix: pass each run once")
    tables = {r.run_id: _prepare(r, cols) for r in records}

    variants = {r.variant for r in records}
    kind = "ablation" if len(variants) > 1 else "sweep"
    declared = list(swept) if swept is not None else None
    if declared is None:
        inferred = _varying(records)
        swept_l = ["variant"] if kind == "ablation" else inferred
        factor: list[str] = ["variant"] if kind == "ablation" else inferred
        columns_params = inferred
    else:
        swept_l = declared
        factor = declared
        columns_params = [p for p in declared if p != "variant"]
    order_keys = [p for p in swept_l if p != "variant"] or columns_params
    ordered = sorted(
        records,
        key=lambda r: (
            _sort_value("variant", r.variant),
            *(_sort_value(p, r.params.get(p)) for p in order_keys),
            r.name,
            r.run_id,
        ),
    )
    if kind == "sweep":  # the first cell: smallest values of the swept params, in order
        ordered.sort(key=lambda r: tuple(_sort_value(p, r.params.get(p)) for p in order_keys))
    labels = _labels(ordered, swept_l)
    base, warnings = _pick_baseline(ordered, kind, baseline, labels)
    warnings = [*warnings, *_split_warnings(ordered, kind)]

    # comparisons (may raise ComparisonRefused)
    binfo = base.info
    checks: dict[str, ComparisonCheck] = {}
    for r in ordered:
        if r.run_id == base.run_id:
            checks[r.run_id] = ComparisonCheck(True, [], False, "", [], "(baseline)")
        else:
            checks[r.run_id] = check_comparison(binfo, r.info, factor, force=force, order=order_keys)

    # means and CIs per run
    scored = {rid: _scored(pq, cols) for rid, pq in tables.items()}
    cis: dict[str, dict[str, tuple[float, float, float]]] = {}
    for r in ordered:
        pq = tables[r.run_id].loc[scored[r.run_id], cols]
        got = stats.bootstrap_cis(pq, cols, n_resamples=bootstrap, seed=seed, nan_policy="omit")
        cis[r.run_id] = {str(k): v for k, v in got.items()}
        for m, c in zip(metrics, cols, strict=True):
            logged = r.metrics.get(metric_key(m))
            mean = cis[r.run_id][c][0]
            if logged is not None and not math.isnan(mean) and abs(float(logged) - mean) > 1e-6:
                warnings.append(
                    f"{labels[r.run_id]}: logged {metric_key(m)}={float(logged):.6f} but per_query.csv gives "
                    f"{mean:.6f}; the table uses per_query.csv"
                )

    # paired tests against the baseline
    test_fn = TESTS[test]
    bpq = tables[base.run_id]
    results: dict[str, dict[str, stats.PairedResult]] = {}
    paired_n: dict[str, int] = {}
    for r in ordered:
        if r.run_id == base.run_id:
            continue
        common = scored[base.run_id].intersection(scored[r.run_id], sort=False)
        paired_n[r.run_id] = len(common)
        n_b, n_r = len(scored[base.run_id]), len(scored[r.run_id])
        if len(common) < max(n_b, n_r):
            note = (
                f"paired on {len(common)} queries: the baseline scores {n_b}, this run {n_r} (only queries "
                "answerable in both are compared)"
            )
            chk = checks[r.run_id]
            checks[r.run_id] = ComparisonCheck(
                False, [*chk.flags, note], chk.refused, "; ".join([*chk.flags, note]), chk.factors, chk.change
            )
        rpq = tables[r.run_id]
        results[r.run_id] = {
            c: test_fn(
                rpq.loc[common, c].to_numpy(),
                bpq.loc[common, c].to_numpy(),
                n_resamples=n_resamples,
                seed=seed,
            )
            for c in cols
        }
    others = [r.run_id for r in ordered if r.run_id != base.run_id]
    raw = np.array([[results[rid][c].p_value for c in cols] for rid in others], dtype=float).reshape(
        len(others), len(cols)
    )
    adjusted = stats.holm(raw) if raw.size else raw
    family = int(np.count_nonzero(~np.isnan(raw)))

    # the table
    csv_rows: list[dict[str, Any]] = []
    md_rows: list[dict[str, str]] = []
    footnotes: list[str] = []
    for r in ordered:
        rid = r.run_id
        is_base = rid == base.run_id
        chk = checks[rid]
        row: dict[str, Any] = {
            "run_id": rid,
            "run": labels[rid],
            "variant": r.variant,
            "role": "baseline" if is_base else "",
            "change": chk.change,
            "split": r.info.split or "",
            **{p: r.params.get(p, "") for p in columns_params},
            "n": len(scored[rid]) if is_base else paired_n[rid],
        }
        md: dict[str, str] = {
            "run": labels[rid] + (" (baseline)" if is_base else ""),
            "change vs baseline": "-" if is_base else chk.change,
            **{p: str(r.params.get(p, "")) for p in columns_params},
            "n": str(row["n"]),
        }
        for j, (m, c) in enumerate(zip(metrics, cols, strict=True)):
            mean, lo, hi = cis[rid][c]
            row.update({m: mean, f"{m}_ci_low": lo, f"{m}_ci_high": hi})
            md[m] = _fmt_ci(mean, lo, hi)
            if is_base:
                row.update(
                    {
                        f"{m}_delta": 0.0,
                        f"{m}_delta_ci_low": math.nan,
                        f"{m}_delta_ci_high": math.nan,
                        f"{m}_p": math.nan,
                        f"{m}_p_holm": math.nan,
                    }
                )
                md[f"Δ {m}"] = "-"
                md[f"p {m} (Holm)"] = "-"
            else:
                res = results[rid][c]
                p_adj = float(adjusted[others.index(rid), j])
                row.update(
                    {
                        f"{m}_delta": res.delta,
                        f"{m}_delta_ci_low": res.ci_low,
                        f"{m}_delta_ci_high": res.ci_high,
                        f"{m}_p": res.p_value,
                        f"{m}_p_holm": p_adj,
                    }
                )
                md[f"Δ {m}"] = _fmt_delta(res.delta)
                md[f"p {m} (Holm)"] = f"{_fmt_p(res.p_value)} ({_fmt_p(p_adj)})"
        row["flags"] = " | ".join(chk.flags)
        refs = []
        for f in chk.flags:
            footnotes.append(f"{labels[rid]}: {f}")
            refs.append(f"[{len(footnotes)}]")
        md["flags"] = "".join(refs) or "-"
        csv_rows.append(row)
        md_rows.append(md)
    table = pd.DataFrame(csv_rows)
    md_cols = list(md_rows[0].keys())

    header = _header(ordered, base, labels, kind, swept_l, title, test, n_resamples, seed, bootstrap, family)
    parts = [header, format_table(md_rows, md_cols)]
    if footnotes:
        parts.append("Flags:\n\n" + "\n".join(f"{i}. {f}" for i, f in enumerate(footnotes, 1)))
    if warnings:
        parts.append("Warnings:\n\n" + "\n".join(f"- {w}" for w in warnings))
    if skipped:
        parts.append("Left out:\n\n" + "\n".join(f"- {s}" for s in skipped))
    markdown = "\n\n".join(parts) + "\n"

    slices, slices_md = _slices(ordered, tables, metrics, cols, labels, base)
    pngs = _plots(ordered, cis, metrics, cols, labels, base, swept_l, columns_params) if plots else {}
    return Report(
        kind=kind,
        baseline=base.run_id,
        swept=swept_l,
        metrics=metrics,
        labels=labels,
        table=table,
        markdown=markdown,
        slices=slices,
        slices_markdown=slices_md,
        plots=pngs,
        checks=checks,
        warnings=warnings,
    )


def _split_warnings(records: Sequence[RunRecord], kind: str) -> list[str]:
    splits = {r.info.split for r in records}
    out = []
    if len(splits) > 1 and "test" in splits:
        out.append(
            "SPLIT MIX: the runs mix the held-out test split with "
            + ", ".join(sorted(str(s) for s in splits - {"test"}))
            + ": tune on dev, then run the chosen setting once on test"
        )
    elif splits == {"test"} and kind == "sweep" and len(records) > 1:
        out.append(
            "a parameter sweep on the held-out test split is tuning on it: pick settings on dev, then run the "
            "chosen one on test once"
        )
    return out


def _header(
    ordered: list[RunRecord],
    base: RunRecord,
    labels: dict[str, str],
    kind: str,
    swept: list[str],
    title: str,
    test: str,
    n_resamples: int,
    seed: int,
    bootstrap: int,
    family: int,
) -> str:
    infos = [r.info for r in ordered]
    what = (
        "ablation table (one declared change per row)"
        if kind == "ablation"
        else (
            "parameter sweep over " + ", ".join(p for p in swept if p != "variant")
            if swept
            else "runs of one variant"
        )
    )
    lines = [
        f"# Ablation report{': ' + title if title else ''}",
        "",
        f"- {len(ordered)} runs, {what}; baseline: {labels[base.run_id]} (run {base.run_id})",
        f"- corpus: {_distinct([r.tags.get('ablate.corpus') or r.params.get('corpus.name') for r in ordered])}; "
        f"split: {_distinct([i.split for i in infos])}; labels (qrels_hash): {_distinct([i.qrels_hash for i in infos])}; "
        f"documents (snapshot): {_distinct([i.snapshot for i in infos])}",
        f"- cells: mean over the scored answerable queries [95% bootstrap CI over queries, {bootstrap} resamples, "
        f"seed {seed}]",
        f"- Δ: mean of (run - baseline) over the n queries scored in both runs; p: two-sided {TEST_NAMES[test]}, "
        f"{n_resamples} resamples, seed {seed}; (Holm): adjusted over the family of {family} run x metric comparisons",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------------------
# slices by question type


def _tag_members(pq: pd.DataFrame) -> dict[str, np.ndarray]:
    """tag -> row positions of the queries carrying it (``;``-separated tags; none -> ``(untagged)``)."""
    members: dict[str, list[int]] = {}
    tags = pq["tags"].tolist() if "tags" in pq.columns else [""] * len(pq)
    for i, t in enumerate(tags):
        names = [x.strip() for x in ("" if pd.isna(t) else str(t)).split(";") if x.strip()] or [UNTAGGED]
        for name in dict.fromkeys(names):
            members.setdefault(name, []).append(i)
    return {k: np.asarray(v, dtype=np.int64) for k, v in members.items()}


def _slices(
    ordered: list[RunRecord],
    tables: dict[str, pd.DataFrame],
    metrics: list[str],
    cols: list[str],
    labels: dict[str, str],
    base: RunRecord,
) -> tuple[pd.DataFrame, str]:
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
        scored = pq.index.isin(_scored(pq, cols))
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
    parts.append(_contrast(cell, ordered, labels, metrics))
    return df, "\n\n".join(parts) + "\n"


def _contrast(
    cell: dict[tuple[str, str], dict[str, Any]],
    ordered: list[RunRecord],
    labels: dict[str, str],
    metrics: list[str],
) -> str:
    ex, para = CONTRAST
    head = f"## {ex} vs {para}"
    present = {t for t, _ in cell}
    if ex not in present or para not in present:
        missing = [t for t in CONTRAST if t not in present]
        return f"{head}\n\nNo queries tagged {' or '.join(missing)}: the contrast cannot be measured."

    def val(rid: str, tag: str, key: str) -> float:
        c = cell.get((tag, rid))
        return float(c[key]) if c is not None else math.nan

    rows = []
    for r in ordered:
        row = {"run": labels[r.run_id]}
        for t in CONTRAST:
            n = val(r.run_id, t, "n_scored")
            row[f"n {t}"] = str(0 if math.isnan(n) else int(n))
        for m in metrics:
            row[f"{m} {ex} / {para}"] = f"{fmt(val(r.run_id, ex, m))} / {fmt(val(r.run_id, para, m))}"
        rows.append(row)
    cols = ["run", f"n {ex}", f"n {para}", *(f"{m} {ex} / {para}" for m in metrics)]
    lines = [
        head,
        "",
        "Identifier questions favour lexical matching (BM25), paraphrases favour dense retrieval; a "
        "fused run should do well on both.",
        "",
        format_table(rows, cols),
    ]
    m = metrics[0]
    by_variant: dict[str, str] = {}
    for r in ordered:
        by_variant.setdefault(r.variant, r.run_id)
    notes = []
    if "A" in by_variant and "B" in by_variant:
        a, b = by_variant["A"], by_variant["B"]
        notes.append(
            f"B vs A on {para} ({m}): {fmt(val(b, para, m))} vs {fmt(val(a, para, m))}; "
            f"on {ex}: {fmt(val(b, ex, m))} vs {fmt(val(a, ex, m))}."
        )
    if "A" in by_variant:
        a = by_variant["A"]
        hints = {
            "C": "fusion may push exact-identifier matches down; revisit rrf.k or retrieval.window on dev",
            "D": "compare with C to tell the fusion's share from the reranker's",
        }
        for v, hint in hints.items():
            if v not in by_variant:
                continue
            va, vx = val(a, ex, m), val(by_variant[v], ex, m)
            note = f"{v} vs A on {ex} ({m}): {fmt(vx)} vs {fmt(va)}"
            if not (math.isnan(va) or math.isnan(vx)) and vx < va:
                note += f": {v} is lower; {hint}"
            notes.append(note + ".")
    if notes:
        lines += ["", *(f"- {n}" for n in notes), "- Slices are small: read per-tag gaps with their n."]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------------------
# plots (matplotlib's object API on the Agg canvas: no pyplot state, no backend switch)


def _png(fig: Any) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    return buf.getvalue()


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def _plots(
    ordered: list[RunRecord],
    cis: dict[str, dict[str, tuple[float, float, float]]],
    metrics: list[str],
    cols: list[str],
    labels: dict[str, str],
    base: RunRecord,
    swept: list[str],
    columns_params: list[str],
) -> dict[str, bytes]:
    from matplotlib.figure import Figure

    out: dict[str, bytes] = {}
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
    out["metrics_bars.png"] = _png(fig)

    params = [p for p in swept if p != "variant"]  # plots only along what the sweep varied
    numeric = [
        p
        for p in params
        if all(_num(r.params.get(p)) is not None for r in ordered)
        and len({_num(r.params.get(p)) for r in ordered}) > 1
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
                rs = sorted(rs, key=lambda r: _num(r.params.get(p)) or 0.0)
                xs = np.array([_num(r.params.get(p)) for r in rs], dtype=float)
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


# --------------------------------------------------------------------------------------------------------------
# the MLflow edge


@dataclass
class Source:
    """Where the runs came from: the parent run (if any), the experiment, the declared sweep and what was left out."""

    parent_run_id: str | None
    experiment: str
    title: str
    swept: list[str] | None
    sweep_dir: str | None
    skipped: list[str]


def _check_store(uri: str) -> None:
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///") :])
        if not db.exists():
            raise ReportError(
                f"no MLflow store at {db}; fix: run from the directory you launched ablate from, or pass "
                "--tracking-uri (or set MLFLOW_TRACKING_URI)"
            )


def _latest_parent(tracker: Any) -> str:
    from ablate.tracking import _retry

    exps = _retry(tracker.client.search_experiments)
    ids = [e.experiment_id for e in exps]
    runs = (
        _retry(
            tracker.client.search_runs,
            ids,
            filter_string="tags.`ablate.role` = 'sweep-parent'",
            max_results=1,
            order_by=["attributes.start_time DESC"],
        )
        if ids
        else []
    )
    if not runs:
        raise ReportError(
            f"no sweep parent run in {tracker.uri}; fix: run a sweep (python -m ablate -m variant=A,B,C,D), or pass "
            "--parent RUN_ID or --experiment NAME"
        )
    return runs[0].info.run_id


def _read_per_query(tracker: Any, run: Any, tmp: str) -> pd.DataFrame:
    from ablate.tracking import _retry

    rid, name = run.info.run_id, run.info.run_name
    try:
        path = _retry(tracker.client.download_artifacts, rid, "per_query.csv", os.path.join(tmp, rid))
    except Exception:  # noqa: BLE001 - mlflow raises several types for a missing artifact
        raise InputError(
            f"run {name} ({rid})",
            "has no per_query.csv artifact",
            "re-run it with this version of ablate (run_job logs per_query.csv), or leave it out of the report",
        ) from None
    pq = pd.read_csv(path, dtype={"qid": str, "tags": str, "category": str, "status": str})
    if "qid" not in pq.columns:
        pq = pq.rename(columns={pq.columns[0]: "qid"})
    if "tags" in pq.columns:
        pq["tags"] = pq["tags"].fillna("")
    return pq.set_index("qid")


def fetch_runs(
    tracker: Any, parent: str | None = None, experiment: str | None = None
) -> tuple[list[RunRecord], Source]:
    """The finished runs to report (children of ``parent``, or the runs of ``experiment``, or the children of the
    latest sweep parent) with their ``per_query.csv``; unfinished runs are listed in ``Source.skipped``."""
    from ablate.tracking import _retry

    os.environ.setdefault(
        "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false"
    )  # one progress bar per run is noise
    if experiment is not None:
        exp = _retry(tracker.client.get_experiment_by_name, experiment)
        if exp is None:
            names = [e.name for e in _retry(tracker.client.search_experiments)][:15]
            raise ReportError(f"no experiment {experiment!r} in {tracker.uri}; fix: choose one of {names}")
        runs = [
            r
            for r in tracker.search([exp.experiment_id], max_results=10000)
            if r.data.tags.get("ablate.role") != "sweep-parent"
        ]
        source = Source(None, experiment, experiment, None, None, [])
    else:
        pid = parent or _latest_parent(tracker)
        try:
            prun = _retry(tracker.client.get_run, pid)
        except Exception:  # noqa: BLE001 - MlflowException(RESOURCE_DOES_NOT_EXIST) and friends
            raise ReportError(
                f"no run {pid!r} in {tracker.uri}; fix: pass the sweep's parent run id (printed by the sweep, tag "
                "ablate.role=sweep-parent), or --experiment NAME"
            ) from None
        exp = _retry(tracker.client.get_experiment, prun.info.experiment_id)
        runs = tracker.search(
            [prun.info.experiment_id], f"tags.mlflow.parentRunId = '{pid}'", max_results=10000
        )
        if not runs:
            raise ReportError(
                f"run {pid} ({prun.info.run_name}) has no child runs; fix: pass a sweep's parent run id "
                "(tag ablate.role=sweep-parent), or --experiment NAME"
            )
        overrides = prun.data.tags.get("ablate.overrides")
        swept = swept_from_overrides(overrides) if overrides is not None else None
        source = Source(
            pid, exp.name, f"{exp.name} / {prun.info.run_name}", swept, prun.data.tags.get("ablate.sweep"), []
        )
    records: list[RunRecord] = []
    with tempfile.TemporaryDirectory(prefix="ablate-report-") as tmp:
        for r in runs:
            if r.info.status != "FINISHED":
                why = r.data.tags.get("ablate.failure", "")
                source.skipped.append(
                    f"{r.info.run_name} ({r.info.run_id}): {r.info.status}{': ' + why if why else ''}"
                )
                continue
            records.append(
                RunRecord(
                    run_id=r.info.run_id,
                    name=r.info.run_name or r.info.run_id[:8],
                    params=dict(r.data.params),
                    metrics=dict(r.data.metrics),
                    tags=dict(r.data.tags),
                    per_query=_read_per_query(tracker, r, tmp),
                    status=r.info.status,
                )
            )
    if not records:
        raise ReportError(
            f"no finished runs to report in {source.title} ({len(source.skipped)} unfinished: "
            f"{'; '.join(source.skipped[:3])}); fix: re-run the failed jobs"
        )
    return records, source


def _default_out(source: Source) -> Path:
    if source.sweep_dir and Path(source.sweep_dir).is_dir():
        return Path(source.sweep_dir) / "report"
    return Path.cwd() / "reports" / _safe(source.parent_run_id or source.experiment)


def attach_report(
    tracker: Any,
    parent_run_id: str | None = None,
    *,
    experiment: str | None = None,
    out: str | os.PathLike[str] | None = None,
    baseline: str | None = None,
    metrics: Sequence[str] = DEFAULT_METRICS,
    test: str = "randomization",
    n_resamples: int = 10000,
    seed: int = 0,
    bootstrap: int = 1000,
    force: bool = False,
    log: bool = True,
    stream: Any = None,
) -> Report:
    """Fetch the runs, build the report, write it to ``out`` (default: ``<sweep dir>/report``), log it to the
    parent run under ``report/`` and print the ablation table. The call a sweep's end makes; pass the sweep's
    ``stats.bootstrap`` / ``stats.seed`` as ``bootstrap`` / ``seed`` so the CIs match the logged ones."""
    if test not in TESTS:  # fail before downloading anything
        raise ConfigError("--test", test, "options: " + ", ".join(TESTS))
    metrics = _check_metrics(metrics)
    records, source = fetch_runs(tracker, parent_run_id, experiment)
    report = build_report(
        records,
        baseline=baseline,
        metrics=metrics,
        test=test,
        n_resamples=n_resamples,
        seed=seed,
        bootstrap=bootstrap,
        swept=source.swept,
        force=force,
        title=source.title,
        skipped=source.skipped,
    )
    out_dir = Path(out) if out is not None else _default_out(source)
    report.write(out_dir)
    if log and source.parent_run_id:
        tracker.log_files(source.parent_run_id, {f"report/{k}": v for k, v in report.files().items()})
        tracker.set_tags(source.parent_run_id, {"ablate.report_baseline": report.baseline})
    print(report.markdown, file=stream or sys.stdout)
    where = f"logged to run {source.parent_run_id} under report/ and " if log and source.parent_run_id else ""
    print(f"report {where}written to {out_dir}", file=stream or sys.stdout)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    from ablate.tracking import Tracker, resolve_tracking_uri

    ap = argparse.ArgumentParser(
        prog="python -m ablate.report",
        description="Ablation table, slices and plots from tracked runs, logged to the sweep's parent run.",
    )
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--parent", help="sweep parent run id (default: the latest sweep parent in the store)")
    src.add_argument("--experiment", help="report every run of this experiment (no parent to log to)")
    ap.add_argument("--tracking-uri", help="MLflow store (default: $MLFLOW_TRACKING_URI, else ./mlflow.db)")
    ap.add_argument("--baseline", help="run id, name or variant (default: A, or the sweep's first cell)")
    ap.add_argument(
        "--metrics", default=",".join(DEFAULT_METRICS), help="comma-separated, e.g. ndcg@10,mrr@10"
    )
    ap.add_argument("--test", default="randomization", help="paired test: " + " | ".join(TESTS))
    ap.add_argument(
        "--resamples", type=int, default=10000, help="resamples of the paired test (default 10000)"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="folder for the report files (default: <sweep dir>/report)")
    ap.add_argument(
        "--force", action="store_true", help="report runs on different labels/documents (flagged)"
    )
    ap.add_argument("--no-log", action="store_true", help="do not log the report to the parent run")
    args = ap.parse_args(argv)
    try:
        uri = resolve_tracking_uri(args.tracking_uri)
        _check_store(uri)
        attach_report(
            Tracker(uri),
            args.parent,
            experiment=args.experiment,
            out=args.out,
            baseline=args.baseline,
            metrics=args.metrics.split(","),
            test=args.test,
            n_resamples=args.resamples,
            seed=args.seed,
            force=args.force,
            log=not args.no_log,
        )
    except AblateError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - one line, like the CLI
        if os.environ.get("ABLATE_DEBUG"):
            raise
        print(
            f"error: unexpected {type(e).__name__}: {e} (set ABLATE_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
