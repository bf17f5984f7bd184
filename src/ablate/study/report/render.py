"""The report as text, tables and figures, from its numbers (:mod:`.compute`): the ablation table (Markdown and CSV),
its narrow console version, the header saying how the numbers were made, the slices, the answer section and the
plots. :func:`build_report` is the whole pure report: compute, then render."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ablate import record as R
from ablate.cache import Cache
from ablate.evaluation.stats import PPIResult
from ablate.study.answers import AnswerSection
from ablate.study.clusters import JOINED_BY
from ablate.study.compare import ComparisonCheck
from ablate.study.factorial import ALPHA, TEST_NAME, WHY_POOLED, Factorial, cell_means
from ablate.study.fetch import RunRecord
from ablate.study.options import P_COLUMNS, P_HEADS, ReportOptions
from ablate.study.plots import funnel_plots, interaction_name, interaction_plots
from ablate.study.plots import plots as make_plots
from ablate.study.ppi_inputs import PPIInputs
from ablate.study.report.compute import Computed, compute
from ablate.study.report.heldout import HeldOutMarking
from ablate.study.report.judged import labels_note
from ablate.study.report.ppi import PPIKey, ppi_section
from ablate.study.report.relabelled import llm_made_line
from ablate.study.report.rows import Plan
from ablate.study.slices import slices
from ablate.tables import fmt, format_table

TEST_NAMES = {
    "randomization": "paired randomization test (sign flips; Fisher 1935)",
    "bootstrap": "paired studentized bootstrap test (shifted null; Efron & Tibshirani 1993 §16.4)",
}


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
    console: str = ""  # the narrow table printed at the end of a sweep (the full one is in the files)
    answers: AnswerSection | None = None  # runs with a generator: correctness, refusals, the diagnosis split
    heldout: HeldOutMarking | None = None  # dev-tuned / test-tuned rows and the line above the table
    #: per_question.csv: each run's fixed and broken questions against the baseline, with where the evidence was lost
    per_question: pd.DataFrame | None = None
    #: factorial.csv: the factorial analysis of the runs' grid, one row per term (None: no grid was modelled)
    factorial: pd.DataFrame | None = None
    #: the prediction-powered figures (``--labels`` on a version with a checked random sample: :mod:`.ppi`)
    ppi: dict[PPIKey, PPIResult] = field(default_factory=dict)

    def files(self) -> dict[str, str | bytes]:
        files: dict[str, str | bytes] = {
            "ablation.md": self.markdown,
            "ablation.csv": self.table.to_csv(index=False),
            "slices.md": self.slices_markdown,
            "slices.csv": self.slices.to_csv(index=False),
        }
        if self.answers is not None:
            files["answers.csv"] = self.answers.table.to_csv(index=False)
        if self.per_question is not None:
            files["per_question.csv"] = self.per_question.to_csv(index=False)
        if self.factorial is not None:
            files["factorial.csv"] = self.factorial.to_csv(index=False)
        return {**files, **self.plots}

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


def _fmt_p(p: float) -> str:
    return "-" if p is None or (isinstance(p, float) and math.isnan(p)) else f"{p:.4f}"


CORRECTION_TEXT = {
    "holm": "Holm-adjusted (family-wise error; Holm 1979)",
    "bh": "Benjamini-Hochberg-adjusted (false discovery rate; Benjamini & Hochberg 1995)",
    "none": "not adjusted (stats.correction=none)",
}


def _fmt_p_adj(p: float, p_adj: float, correction: str) -> str:
    """The raw p-value, and the adjusted one in brackets unless the correction is none."""
    return _fmt_p(p) if correction == "none" else f"{_fmt_p(p)} ({_fmt_p(p_adj)})"


def _fmt_mde(d: float) -> str:
    return "-" if d is None or math.isnan(d) else f"{d:.3f}"


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


def _rows(c: Computed) -> tuple[list[dict[str, Any]], list[dict[str, str]], list[str]]:
    """The CSV rows, the Markdown rows and the footnotes (flags)."""
    plan, base, metrics, cols, scored = c.plan, c.base, c.metrics, c.cols, c.scored
    cis, results, paired_n, checks = c.cis, c.results, c.paired_n, c.checks
    csv_rows: list[dict[str, Any]] = []
    md_rows: list[dict[str, str]] = []
    footnotes: list[str] = []
    p_col, p_head = P_COLUMNS[c.correction], P_HEADS[c.correction]
    for r in plan.ordered:
        rid, is_base, chk = r.run_id, r.run_id == base.run_id, checks[r.run_id]
        n = len(scored[rid]) if is_base else paired_n[rid]
        g = {"clusters": c.n_clusters.get(rid, n)} if c.clustered else {}  # G beside n when questions cluster
        row: dict[str, Any] = {
            "run_id": rid,
            "run": plan.labels[rid],
            "variant": r.variant,
            "role": "baseline" if is_base else "",
            "change": chk.change,
            "split": r.split or "",
            "heldout": plan.heldout.kinds.get(rid, ""),
            **{p: r.params.get(p, "") for p in plan.columns_params},
            "n": n,
            **g,
        }
        md: dict[str, str] = {
            "run": plan.shown[rid] + (" (baseline)" if is_base else ""),
            "change vs baseline": "-" if is_base else chk.change,
            **{p: str(r.params.get(p, "")) for p in plan.columns_params},
            "n": str(n),
            **({"G": str(g["clusters"])} if g else {}),
        }
        for m, c_ in zip(metrics, cols, strict=True):
            mean, lo, hi = cis[rid][c_]
            row.update({m: mean, f"{m}_ci_low": lo, f"{m}_ci_high": hi})
            md[m] = _fmt_ci(mean, lo, hi)
            if is_base:
                row.update(
                    {
                        f"{m}_{s}": (0.0 if s == "delta" else math.nan)
                        for s in ("delta", "delta_ci_low", "delta_ci_high", "mde", "p", p_col)
                    }
                )
                md[f"Δ {m}"], md[f"MDE {m}"], md[f"p {m}{p_head}"] = "-", "-", "-"
            else:
                res = results[rid][c_]
                p_adj = c.p_holm[rid][c_]
                mde = c.mde.get(rid, {}).get(c_, math.nan)
                row.update(
                    {
                        f"{m}_delta": res.delta,
                        f"{m}_delta_ci_low": res.ci_low,
                        f"{m}_delta_ci_high": res.ci_high,
                        f"{m}_mde": mde,
                        f"{m}_p": res.p_value,
                        f"{m}_{p_col}": p_adj,
                    }
                )
                md[f"Δ {m}"] = _fmt_delta(res.delta)
                md[f"MDE {m}"] = _fmt_mde(mde)
                md[f"p {m}{p_head}"] = _fmt_p_adj(res.p_value, p_adj, c.correction)
        row["flags"] = " | ".join(chk.flags)
        refs = []
        for f in chk.flags:
            footnotes.append(f"{plan.labels[rid]}: {f}")
            refs.append(f"[{len(footnotes)}]")
        md["flags"] = "".join(refs) or "-"
        csv_rows.append(row)
        md_rows.append(md)
    return csv_rows, md_rows, footnotes


def build_report(
    runs: Sequence[RunRecord],
    options: ReportOptions | None = None,
    *,
    swept: Sequence[str] | None = None,
    title: str = "",
    skipped: Sequence[str] = (),
    cache: Cache | None = None,
    names: Mapping[str, str] | None = None,
    ppi: PPIInputs | None = None,
) -> Report:
    """Compare ``runs`` with a baseline: the ablation table, per-tag slices and plots. Pure (no MLflow).

    ``options``: :class:`ablate.study.options.ReportOptions` (baseline, metrics, test, resamples, ...; the defaults
    when None). ``swept``: the params a sweep declared (:func:`ablate.study.fetch.swept_from_overrides`); ``None``
    infers them. ``title``: the report's heading. ``skipped``: lines about runs left out (failed), repeated in the
    report. ``cache``: where figures (:mod:`ablate.study.plots`) and paired-test results are kept by content; None
    computes everything. ``names``: each swept param as the sweep typed it (:attr:`ablate.study.fetch.Source.names`),
    the factorial analysis's names for its factors. ``ppi``: what the prediction-powered figures need
    (:mod:`.ppi`; None: none)."""
    options = options or ReportOptions()
    return render(compute(runs, options, swept, cache, names), options, title, skipped, cache, ppi)


def render(
    c: Computed,
    options: ReportOptions,
    title: str = "",
    skipped: Sequence[str] = (),
    cache: Cache | None = None,
    ppi: PPIInputs | None = None,
) -> Report:
    """The report's files and console text from its numbers, in reading order: the header, the held-out line, the
    table, its flags, the warnings and left-out runs, the prediction-powered figures (``ppi``), the answer section,
    the per-question section (fixed and broken questions against the baseline); slices, console table, figures."""
    plan, base, metrics, warnings, answers = c.plan, c.base, c.metrics, c.warnings, c.answers
    csv_rows, md_rows, footnotes = _rows(c)
    header = _header(
        plan,
        base,
        title,
        options.test,
        options.n_resamples,
        options.seed,
        options.bootstrap,
        c.family,
        c.correction,
    )
    header += f"\n- {clusters_line(c, long=True)}" if c.clustered else ""
    above = [plan.heldout.warning] if plan.heldout.warning else []  # the held-out line: above the table
    llm = llm_made_line(plan.ordered)  # LLM-made labels: said in the header
    header += f"\n- {llm}" if llm else ""
    parts = [header, *above, format_table(md_rows, list(md_rows[0].keys()))]
    if footnotes:
        parts.append("Flags:\n\n" + "\n".join(f"{i}. {f}" for i, f in enumerate(footnotes, 1)))
    for title_, lines in (("Warnings", warnings), ("Left out", skipped)):
        if lines:
            parts.append(f"{title_}:\n\n" + "\n".join(f"- {x}" for x in lines))
    note = labels_note(plan.ordered, plan.shown, metrics)
    parts.append(note.markdown)
    powered = ppi_section(c, ppi) if ppi is not None else None  # prediction-powered figures (--labels)
    parts += [powered.markdown] if powered is not None else []
    if answers is not None:
        parts.append(answers.markdown.rstrip("\n"))
    if c.per_question is not None:
        parts.append(c.per_question.markdown.rstrip("\n"))
    if c.factorial is not None:
        parts.append(factorial_markdown(c.factorial))
    slice_table, slices_md = slices(
        plan.ordered, c.tables, metrics, c.cols, plan.shown, base, options.contrast
    )
    below = clusters_line(c) if c.clustered else ""
    console = _console(csv_rows, metrics[0], footnotes, warnings, skipped, plan.heldout, c.correction, below)
    console += "".join(f"\n  warning: {w}" for w in note.warnings)
    more = (powered.console if powered is not None else "", answers.console if answers is not None else "")
    console += "".join(f"\n{x}" for x in more if x)  # the prediction-powered figures, the answers
    figures = _figures(plan, c.cis, metrics, c.cols, base, cache) if options.plots else {}
    fact = c.factorial
    if fact is not None:
        console += "\n" + factorial_console(fact)
        if options.plots and fact.modelled:
            means = lambda a, b: cell_means(fact.long, a, b)  # noqa: E731
            figures.update(interaction_plots(fact.significant, means, fact.metric, cache))
    return Report(
        kind=plan.kind,
        baseline=base.run_id,
        swept=plan.swept,
        metrics=metrics,
        labels=plan.labels,
        table=pd.DataFrame(csv_rows),
        markdown="\n\n".join(parts) + "\n",
        slices=slice_table,
        slices_markdown=slices_md,
        plots=figures,
        checks=c.checks,
        warnings=warnings,
        console=console,
        answers=answers,
        heldout=plan.heldout,
        per_question=c.per_question.table if c.per_question is not None else None,
        factorial=fact.table if fact is not None and fact.modelled else None,
        ppi=dict(powered.figures) if powered is not None else {},
    )


def _df(f: Factorial) -> str:
    return "-" if f.residual is None else f"{f.residual.df:g}"


def factorial_console(f: Factorial) -> str:
    """The factorial lines of the console: its design, a sentence per term and, when a term is significant, why a
    pair of its runs in the table above may not be; or the note saying why there is none."""
    if not f.modelled:
        return f"  {f.note}"
    lines = [f.design, *f.sentences]
    if (f.table["p"] < ALPHA).any():
        lines.append(WHY_POOLED)
    return "\n".join(f"  factorial: {x}" for x in lines)


def factorial_markdown(f: Factorial) -> str:
    """The Factorial analysis section: which metric, the model, the test, the table, a sentence per term and the
    interaction plots; or the one line saying why the runs were not modelled."""
    lines = ["## Factorial analysis", ""]
    if not f.modelled or f.grid is None:
        return "\n".join([*lines, f"{f.note}."])
    lines += [
        f"- {f.design}",
        f"- metric: {f.metric} per question, on the {f.n_questions} questions every cell scores ({f.dropped})",
        f"- model: OLS `{f.formula}`"
        + ("; three factors or more: main effects and two-way interactions only" if f.two_way_only else ""),
        f"- test: {TEST_NAME}; p uncorrected, a term matters below {ALPHA}",
        "- effect: a main effect is the largest difference between two levels' means (over the other factors and "
        "the questions); an interaction, the largest difference of differences of a 2x2 sub-table; each with a "
        f"95% interval from the model's residual mean square ({_df(f)} df, the F test's denominator; Scheffé's for "
        "a term with more than 1 df, as its largest difference is picked from several); a sentence "
        "adds the per-question paired interval when that one includes 0 for a term the test calls significant",
        "",
    ]
    rows = [
        {
            "term": str(t.term),
            "df": f"{t.df:g}",
            "F": "-" if math.isnan(t.F) else f"{t.F:.3f}",
            "p": _fmt_p(t.p),
            "effect [95% CI]": f"{_fmt_delta(t.effect)} [{_fmt_delta(t.ci_low)}, {_fmt_delta(t.ci_high)}]",
        }
        for t in f.table.itertuples(index=False)
    ]
    lines += [format_table(rows, ["term", "df", "F", "p", "effect [95% CI]"]), ""]
    lines += [f"- {x}" for x in f.sentences]
    if (f.table["p"] < ALPHA).any():
        lines.append(f"- {WHY_POOLED}")
    for a, b in f.significant:
        lines.append(f"- figure: {interaction_name(a, b)} (lines that are not parallel: the interaction)")
    return "\n".join(lines)


def _figures(
    plan: Plan,
    cis: dict[str, dict[str, tuple[float, float, float]]],
    metrics: list[str],
    cols: list[str],
    base: RunRecord,
    cache: Cache | None = None,
) -> dict[str, bytes]:
    """The metric bars, the sweep curves and one stage funnel per run."""
    return {
        **make_plots(plan.ordered, cis, metrics, cols, plan.labels, base, plan.swept, cache),
        **funnel_plots(plan.ordered, plan.labels, cache),
    }


def _console(
    rows: list[dict[str, Any]],
    metric: str,
    footnotes: list[str],
    warnings: list[str],
    skipped: Sequence[str],
    heldout: HeldOutMarking | None = None,
    correction: str = "holm",
    below: str = "",
) -> str:
    """The narrow table: each run labelled by what it is (``C k=1 window=20``, with its held-out mark), the headline
    metric with its interval, Δ vs the baseline, the minimum detectable effect at 80% power and the p-value (adjusted
    by ``correction`` in brackets), n (and G, its clusters, when questions cluster); the held-out line above it;
    ``below`` (what the clusters are) under it, then flags, warnings and left-out runs as numbered lines."""
    heldout = heldout or HeldOutMarking({}, {})
    p_col, p_head = P_COLUMNS[correction], "p" + P_HEADS[correction]
    out = []
    for r in rows:
        base = r["role"] == "baseline"
        out.append(
            {
                "run": heldout.label(r["run_id"], r["run"]) + (" (baseline)" if base else ""),
                metric: _fmt_ci(r[metric], r[f"{metric}_ci_low"], r[f"{metric}_ci_high"]),
                "Δ": "-" if base else _fmt_delta(r[f"{metric}_delta"]),
                "MDE": "-" if base else _fmt_mde(r[f"{metric}_mde"]),
                p_head: "-" if base else _fmt_p_adj(r[f"{metric}_p"], r[f"{metric}_{p_col}"], correction),
                "n": str(r["n"]),
                **({"G": str(r["clusters"])} if "clusters" in r else {}),
                "flags": r["flags"] and "yes" or "-",
            }
        )
    kind = "note" if heldout.exploratory_only else "warning"
    lines = [f"{kind}: {heldout.warning}"] if heldout.warning else []
    g = ["G"] if rows and "clusters" in rows[0] else []
    lines.append(format_table(out, ["run", metric, "Δ", "MDE", p_head, "n", *g, "flags"]))
    lines += [f"  {below}"] if below else []
    lines += [f"  [{i}] {f}" for i, f in enumerate(footnotes, 1)]
    lines += [f"  warning: {w}" for w in warnings]
    lines += [f"  left out: {s}" for s in skipped]
    return "\n".join(lines)


def clusters_line(c: Computed, long: bool = False) -> str:
    """What the clusters are and what they change: ``17 questions in 5 clusters (...)``; ``long``: the header's
    sentence with what was resampled."""
    n = len(c.scored[c.base.run_id])
    g = c.n_clusters.get(c.base.run_id, n)
    how = c.clusters.how if c.clusters is not None else "none"
    what = f"{n} questions in {g} clusters (--cluster {how}: {JOINED_BY.get(how, how)})"
    if not long:
        return f"clusters: {what}: intervals, tests and MDE resample clusters (G)"
    return (
        f"clusters: the baseline's {what}; G: the clusters a row's n questions fall in. Intervals resample clusters "
        "(the cluster bootstrap), the paired tests flip or draw clusters (the bootstrap studentised by the "
        "cluster-robust SE), and the MDE is the paired t's times sqrt(1 + (m − 1)·ICC), the design effect of m "
        "questions per cluster correlated by ICC"
    )


def _header(
    plan: Plan,
    base: RunRecord,
    title: str,
    test: str,
    n_resamples: int,
    seed: int,
    bootstrap: int,
    family: int,
    correction: str = "holm",
) -> str:
    ordered = plan.ordered
    if plan.kind == "ablation":
        what = "ablation table (one declared change per row)"
    elif plan.swept:
        what = "parameter sweep over " + ", ".join(p for p in plan.swept if p != "variant")
    else:
        what = "runs of one variant"
    lines = [
        f"# Ablation report{': ' + title if title else ''}",
        "",
        f"- {len(ordered)} runs, {what}; baseline: {plan.labels[base.run_id]} (run {base.run_id})",
        f"- corpus: {_distinct([r.tags.get(R.T_CORPUS) or r.params.get(R.P_CORPUS_NAME) for r in ordered])}; "
        f"split: {_distinct([r.split for r in ordered])}; labels (qrels_hash): "
        f"{_distinct([r.qrels_hash for r in ordered])}; documents (snapshot): {_distinct([r.snapshot for r in ordered])}",
        f"- cells: mean over the scored answerable queries [95% bootstrap CI over queries, {bootstrap} resamples, "
        f"seed {seed}]",
        f"- Δ: mean of (run - baseline) over the n queries scored in both runs; p: two-sided {TEST_NAMES[test]}, "
        f"{n_resamples} resamples, seed {seed}; "
        + (
            f"{P_HEADS[correction].strip()}: {CORRECTION_TEXT[correction]} over the family of {family} run x metric "
            "comparisons"
            if correction != "none"
            else f"the {family} run x metric comparisons' p-values are {CORRECTION_TEXT[correction]}"
        ),
        "- MDE: minimum detectable effect, the smallest true Δ a paired t test over the same n queries detects "
        "with 80% power at α = 0.05 for that one comparison (from the spread of the per-query differences); "
        f"python -m ablate.plan plans the m = {max(len(ordered) - 1, 1)} comparisons with the baseline at α/m "
        "(Bonferroni: the strictest step of Holm), so its MDE for the same comparison is larger, and gives the "
        "questions a smaller Δ needs",
    ]
    return "\n".join(lines)
