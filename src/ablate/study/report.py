"""The ablation report: one row per tracked run against a baseline, paired tests over queries, slices and plots.

What the numbers are (measured, never pre-filled; the spec: "跑出来是多少就写多少"):

* A run's cell: the mean of a per-query metric over its *scored answerable* queries (``category == "answerable"``
  and the metric defined: the rule of ``EvalResult.means``), with a 95% percentile bootstrap CI over queries
  (:func:`ablate.evaluation.stats.bootstrap_cis`, ``bootstrap`` resamples, ``seed``).
* Δ: ``mean(run - baseline)`` over the queries scored answerable in *both* runs (paired; ``n`` is reported), with a
  bootstrap CI of the mean difference and a two-sided paired p-value: Fisher's randomization test (default) or the
  studentized paired bootstrap (:mod:`ablate.evaluation.stats`), 10,000 resamples, seed 0.
* Holm: the p-values of every (run x metric) comparison in the table form one family
  (:func:`ablate.evaluation.stats.holm`).
* Flags: :func:`ablate.study.compare.check_comparison` (one factor per row; same labels, documents and split).
* Held-out marking (:func:`heldout_marking`): a row on a held-out split is *test-tuned* when its run carries
  ``ablate.test_reuse=true`` (its configuration was changed after the test split had been seen in the study), else
  *dev-tuned*; a row on any other split is a *dev-split* row. A table that mixes dev-tuned and test-tuned rows, or
  dev-split rows with held-out rows, gets a ``HELD-OUT MIX`` line above it naming the rows and why; test-tuned rows
  are marked ``†`` (always) and dev-split rows ``‡`` (in a table with held-out rows).

:func:`build_report` is a pure function of :class:`~ablate.study.fetch.RunRecord` s (no MLflow);
:func:`attach_report` fetches them (:mod:`ablate.study.fetch`), writes the files and logs them to the sweep's parent.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from ablate import record as R
from ablate.cache import Cache, arrays_digest, key_of
from ablate.errors import ConfigError, InputError
from ablate.evaluation import stats
from ablate.record import RecordedRun
from ablate.safenames import inside
from ablate.study.answers import AnswerSection, answer_section
from ablate.study.compare import ComparisonCheck, check_comparison, norm_value, varying_params
from ablate.study.fetch import ReportError, RunRecord, Source, fetch_runs
from ablate.study.options import DEFAULT_METRICS
from ablate.study.plots import funnel_plots
from ablate.study.plots import plots as make_plots
from ablate.study.slices import DEFAULT_CONTRAST, scored_ids, slices
from ablate.tables import fmt, format_table
from ablate.tracking import Tracker

__all__ = [
    "DEFAULT_METRICS",
    "TESTS",
    "HeldOutMarking",
    "Report",
    "ReportError",
    "RunRecord",
    "attach_report",
    "build_report",
    "heldout_marking",
    "tuning_of",
]

#: Paired tests selectable with ``--test``: name -> function(a, b, n_resamples=, seed=) -> PairedResult.
TESTS: dict[str, Callable[..., stats.PairedResult]] = {
    "randomization": stats.paired_randomization_test,
    "bootstrap": stats.paired_bootstrap_test,
}
#: The same tests for many comparisons at once (entry i equals the single test on pair i; one draw of resamples).
BATCH_TESTS: dict[str, Callable[..., list[stats.PairedResult]]] = {
    "randomization": stats.paired_randomization_tests,
    "bootstrap": stats.paired_bootstrap_tests,
}
TEST_NAMES = {
    "randomization": "paired randomization test (sign flips; Fisher 1935)",
    "bootstrap": "paired studentized bootstrap test (shifted null; Efron & Tibshirani 1993 §16.4)",
}


#: Row markers of the held-out marking (:func:`heldout_marking`).
TEST_TUNED_MARK, DEV_SPLIT_MARK = "†", "‡"
DEV_SPLIT, DEV_TUNED, TEST_TUNED = "dev-split", "dev-tuned", "test-tuned"


@dataclass(frozen=True)
class HeldOutMarking:
    """How each row of a table stands to the held-out split (:func:`heldout_marking`)."""

    kinds: dict[str, str]  # run id -> "dev-split" | "dev-tuned" | "test-tuned" | "" (split unknown)
    marks: dict[str, str]  # run id -> "", " †" (test-tuned) or " ‡" (dev-split row beside held-out rows)
    warning: str = ""  # the line printed above the table ("" when nothing is mixed and nothing is test-tuned)

    @property
    def mixed(self) -> bool:
        return self.warning.startswith("HELD-OUT MIX")

    def label(self, run_id: str, label: str) -> str:
        return label + self.marks.get(run_id, "")

    def labels(self, labels: dict[str, str]) -> dict[str, str]:
        return {rid: self.label(rid, lab) for rid, lab in labels.items()}


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

    def files(self) -> dict[str, str | bytes]:
        files: dict[str, str | bytes] = {
            "ablation.md": self.markdown,
            "ablation.csv": self.table.to_csv(index=False),
            "slices.md": self.slices_markdown,
            "slices.csv": self.slices.to_csv(index=False),
        }
        if self.answers is not None:
            files["answers.csv"] = self.answers.table.to_csv(index=False)
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


# --------------------------------------------------------------------------------------------------------------
# helpers


def pq_column(metric: str) -> str:
    """Per-query column of a reported metric: ``mrr@10`` is the mean of ``rr@10``."""
    return "rr@" + metric.split("@", 1)[1] if metric.startswith("mrr@") else metric


def check_metrics(metrics: Sequence[str]) -> list[str]:
    out = []
    for m in metrics:
        m = m.strip()
        name, _, k = m.partition("@")
        if not name or not k.isdigit():
            raise ConfigError("--metrics", m, "use <metric>@<k>, e.g. ndcg@10,recall@10,mrr@10,hit@10")
        out.append(m)
    if not out:
        raise ConfigError("--metrics", ",".join(metrics), "name at least one, e.g. ndcg@10")
    families = {_domain(m) for m in out}
    if len(families) > 1:
        raise ConfigError(
            "--metrics",
            ",".join(out),
            "superseded_first@K (questions in a version conflict) and subq_*@K (questions with sub-questions) are "
            "defined on a subset of the questions, and a report scores every metric on the same questions; report "
            "them on their own, e.g. --metrics superseded_first@10 or --metrics subq_coverage@10,subq_all@10",
        )
    return list(dict.fromkeys(out))


def _domain(metric: str) -> str:
    """Which questions a metric is defined on: all answerable ones, or a subset (conflicts, sub-questions)."""
    name = metric.partition("@")[0]
    if name == "superseded_first":
        return "conflict"
    return "subquestions" if name.startswith("subq_") else "answerable"


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


def _sort_value(key: str, r: RunRecord) -> tuple[int, float, str]:
    if key == "variant":
        return (0, r.variant_order, r.variant)
    n = norm_value(r.params.get(key))
    if isinstance(n, float):
        return (0, n, "")
    return (1, 0.0, "" if n is None else str(n))


def _short_keys(keys: list[str]) -> dict[str, str]:
    """``rrf.k`` -> ``k``, ``pipeline.retrievers`` -> ``retrievers``: the last part, unless two keys share it."""
    last = [k.rsplit(".", 1)[-1] for k in keys]
    return {k: (t if last.count(t) == 1 else k) for k, t in zip(keys, last, strict=True)}


def _label_value(key: str, v: Any) -> str:
    if key == R.P_RETRIEVERS:
        return ",".join(R.json_list(v))
    n = norm_value(v)
    if isinstance(n, float) and n.is_integer():
        return str(int(n))
    return str(v)


def run_labels(records: Sequence[RecordedRun], swept: Sequence[str] = ()) -> dict[str, str]:
    """Unique row labels: the run name, plus the swept params that tell runs of one name apart (short keys:
    ``C k=1 window=20``), then other params all of them log, then an id prefix."""
    by_name: dict[str, list[RecordedRun]] = {}
    for r in records:
        by_name.setdefault(r.name, []).append(r)
    labels: dict[str, str] = {}
    for name, group in by_name.items():
        if len(group) == 1:
            labels[group[0].run_id] = name
            continue
        common = [k for k in varying_params(group) if all(k in r.params for r in group)]
        keys = [k for k in dict.fromkeys([*swept, *common]) if k != "variant"]
        keys = [k for k in keys if len({repr(norm_value(r.params.get(k))) for r in group}) > 1]
        short = _short_keys(keys)
        for r in group:
            parts = [f"{short[k]}={_label_value(k, r.params.get(k))}" for k in keys]
            labels[r.run_id] = " ".join([name, *parts])
    counts: dict[str, int] = {}
    for lab in labels.values():
        counts[lab] = counts.get(lab, 0) + 1
    return {rid: (f"{lab} [{rid[:8]}]" if counts[lab] > 1 else lab) for rid, lab in labels.items()}


def _pick_baseline(
    ordered: list[RunRecord], kind: str, baseline: str | None, labels: dict[str, str]
) -> tuple[RunRecord, list[str]]:
    """The run named by ``baseline`` (id, id prefix, label, name or variant), else the first in order: the lowest
    ``variant.order`` of an ablation table (A), or the first cell of a sweep."""
    if baseline:
        for match in (
            lambda r: r.run_id == baseline,
            lambda r: labels[r.run_id] == baseline,
            lambda r: r.name == baseline,
            lambda r: r.variant == baseline,
        ):
            hits = [r for r in ordered if match(r)]
            if hits:
                return hits[0], []
        prefixed = [r for r in ordered if len(baseline) >= 6 and r.run_id.startswith(baseline)]
        if len(prefixed) == 1:
            return prefixed[0], []
        opts = ", ".join(dict.fromkeys([*(r.variant for r in ordered), *(labels[r.run_id] for r in ordered)]))
        raise ConfigError("--baseline", baseline, f"choose a run id, name or variant of: {opts}")
    warnings = []
    if kind == "ablation" and math.isinf(ordered[0].variant_order):
        warnings.append(
            f"the runs declare no variant order: the baseline is {labels[ordered[0].run_id]} (first by name)"
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


def tuning_of(run: RecordedRun) -> str:
    """``"test-tuned"``: a run on a held-out split (:data:`ablate.record.HELD_OUT_SPLITS`) that carries
    ``ablate.test_reuse=true`` (the runner tags a test run whose configuration is new to the study after test had
    been run: its settings were changed after its test scores had been seen); ``"dev-tuned"``: any other run on a
    held-out split (the first test run or sweep of the study, or a repeat of it); ``"dev-split"``: a run on any other
    split; ``""``: the run records no split."""
    if not run.split:
        return ""
    if run.split not in R.HELD_OUT_SPLITS:
        return DEV_SPLIT
    return TEST_TUNED if str(run.tags.get(R.T_TEST_REUSE, "")).lower() == "true" else DEV_TUNED


def _names(run_ids: Sequence[str], labels: dict[str, str]) -> str:
    shown = [labels.get(rid, rid[:8]) for rid in run_ids[:8]]
    return ", ".join(shown) + (f" and {len(run_ids) - 8} more" if len(run_ids) > 8 else "")


def heldout_marking(runs: Sequence[RecordedRun], labels: dict[str, str]) -> HeldOutMarking:
    """Mark the rows of one table: test-tuned rows ``†``; when the table also has dev-split rows beside held-out
    rows, those ``‡``. The warning line (for above the table) names the rows and why when the table mixes dev-tuned
    with test-tuned rows or dev-split with held-out rows, or, unmixed, when some row is test-tuned."""
    kinds = {r.run_id: tuning_of(r) for r in runs}
    by: dict[str, list[str]] = {DEV_SPLIT: [], DEV_TUNED: [], TEST_TUNED: []}
    for rid, kind in kinds.items():
        if kind:
            by[kind].append(rid)
    held = by[DEV_TUNED] + by[TEST_TUNED]
    split_mix = bool(by[DEV_SPLIT]) and bool(held)
    marks = {rid: f" {TEST_TUNED_MARK}" for rid in by[TEST_TUNED]}
    if split_mix:
        marks.update({rid: f" {DEV_SPLIT_MARK}" for rid in by[DEV_SPLIT]})
    shown = {rid: labels.get(rid, rid[:8]) for rid in kinds}
    why = (
        f"{TEST_TUNED_MARK} test-tuned rows ({_names(by[TEST_TUNED], shown)}) were run on the held-out split with a "
        "configuration changed after its scores had been seen (tag ablate.test_reuse=true): test served as a second "
        "dev set and they read high"
    )
    reasons = []
    if by[TEST_TUNED] and by[DEV_TUNED]:
        reasons.append("dev-tuned and test-tuned settings")
    if split_mix:
        reasons.append("dev-split rows with held-out rows")
    if not reasons:
        warning = f"TEST-TUNED: {why}" if by[TEST_TUNED] else ""
        return HeldOutMarking(kinds, marks, warning)
    parts = []
    if by[TEST_TUNED]:
        parts.append(why)
    if by[DEV_TUNED]:
        parts.append(
            f"dev-tuned held-out rows (settings chosen before test was seen): {_names(by[DEV_TUNED], shown)}"
        )
    if split_mix:
        parts.append(
            f"{DEV_SPLIT_MARK} dev-split rows ({_names(by[DEV_SPLIT], shown)}) are scored on the queries settings are "
            "tuned on, not on the held-out split"
        )
    warning = (
        f"HELD-OUT MIX: this table mixes {' and '.join(reasons)}; {'; '.join(parts)}. Do not pick settings across "
        "these rows: compare dev rows on dev, and read held-out rows only for settings chosen on dev"
    )
    return HeldOutMarking(kinds, marks, warning)


# --------------------------------------------------------------------------------------------------------------
# the pure core, in steps


@dataclass
class _Plan:
    """What the table is about: its kind, the swept params, the studied factor, the row order and labels."""

    kind: str
    swept: list[str]
    factor: list[str]
    columns_params: list[str]
    order_keys: list[str]
    ordered: list[RunRecord]
    labels: dict[str, str]
    heldout: HeldOutMarking = field(default_factory=lambda: HeldOutMarking({}, {}))

    @property
    def shown(self) -> dict[str, str]:
        """Row labels as tables show them: with the held-out marks (``C k=10 †``)."""
        return self.heldout.labels(self.labels)


def _plan(records: list[RunRecord], swept: Sequence[str] | None) -> _Plan:
    kind = "ablation" if len({r.variant for r in records}) > 1 else "sweep"
    if swept is None:
        inferred = varying_params(records)
        swept_l = ["variant"] if kind == "ablation" else inferred
        factor = list(swept_l)
        columns_params = inferred
    else:
        swept_l = list(swept)
        factor = list(swept)
        columns_params = [p for p in swept if p != "variant"]
    order_keys = [p for p in swept_l if p != "variant"] or columns_params
    ordered = sorted(
        records,
        key=lambda r: (_sort_value("variant", r), *(_sort_value(p, r) for p in order_keys), r.name, r.run_id),
    )
    if kind == "sweep":  # the first cell: smallest values of the swept params, in order
        ordered.sort(key=lambda r: tuple(_sort_value(p, r) for p in order_keys))
    labels = run_labels(ordered, swept_l)
    return _Plan(
        kind, swept_l, factor, columns_params, order_keys, ordered, labels, heldout_marking(ordered, labels)
    )


def _cis(
    plan: _Plan,
    tables: dict[str, pd.DataFrame],
    scored: dict[str, pd.Index],
    metrics: list[str],
    cols: list[str],
    bootstrap: int,
    seed: int,
    warnings: list[str],
    cache: Cache | None = None,
) -> dict[str, dict[str, tuple[float, float, float]]]:
    """Mean and 95% interval per run and metric; warns when a logged mean disagrees with per_query.csv. With a
    ``cache``, each run's intervals are kept by content (its per-query values, the resamples, the seed, the stats
    code), so a report over unchanged runs does not resample again."""
    cis: dict[str, dict[str, tuple[float, float, float]]] = {}
    for r in plan.ordered:
        pq = tables[r.run_id].loc[scored[r.run_id], cols]
        cis[r.run_id] = stats.bootstrap_cis_kept(pq, cols, bootstrap, seed, cache, REPORT_CI_KIND)
        for m, c in zip(metrics, cols, strict=True):
            logged = r.metric(m)
            mean = cis[r.run_id][c][0]
            if logged is not None and not math.isnan(mean) and abs(float(logged) - mean) > 1e-6:
                warnings.append(
                    f"{plan.labels[r.run_id]}: logged {R.metric_key(m)}={float(logged):.6f} but per_query.csv gives "
                    f"{mean:.6f}; the table uses per_query.csv"
                )
    return cis


def _paired(
    plan: _Plan,
    base: RunRecord,
    tables: dict[str, pd.DataFrame],
    scored: dict[str, pd.Index],
    cols: list[str],
    checks: dict[str, ComparisonCheck],
    test: str,
    n_resamples: int,
    seed: int,
    cache: Cache | None = None,
) -> tuple[dict[str, dict[str, stats.PairedResult]], dict[str, int]]:
    """Each run against the baseline on the queries scored in both; a flag when that is fewer than either scores.
    Every (run, metric) comparison is one pair of one batched test call (the resamples are drawn once)."""
    bpq = tables[base.run_id]
    pairs: list[tuple[np.ndarray, np.ndarray]] = []
    slots: list[tuple[str, str]] = []
    paired_n: dict[str, int] = {}
    for r in plan.ordered:
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
        for c in cols:
            pairs.append((rpq.loc[common, c].to_numpy(), bpq.loc[common, c].to_numpy()))
            slots.append((r.run_id, c))
    results: dict[str, dict[str, stats.PairedResult]] = {}
    for (rid, c), res in zip(slots, _tests(pairs, test, n_resamples, seed, cache), strict=True):
        results.setdefault(rid, {})[c] = res
    return results, paired_n


#: Cache kind of the report's per-run intervals (keyed like the paired tests: the values, the settings, the code).
REPORT_CI_KIND = "report-cis"

#: Cache kind of the paired tests (keyed by the paired values, the test, its settings and the stats code).
TESTS_KIND = "paired-tests"


def _tests(
    pairs: list[tuple[np.ndarray, np.ndarray]], test: str, n_resamples: int, seed: int, cache: Cache | None
) -> list[stats.PairedResult]:
    """``BATCH_TESTS[test]`` on ``pairs``; with a ``cache``, kept by content (the same values give the same
    results, so a report over unchanged runs does not resample again)."""

    def compute() -> list[list[float]]:
        got = BATCH_TESTS[test](pairs, n_resamples=n_resamples, seed=seed)
        return [[r.mean_a, r.mean_b, r.delta, r.ci_low, r.ci_high, r.p_value, r.n] for r in got]

    if cache is None:
        rows = compute()
    else:
        key = key_of(
            TESTS_KIND,
            stats.code_digest(),
            test,
            n_resamples,
            seed,
            arrays_digest(*(x for pair in pairs for x in pair)),
        )
        rows = cache.memo_json(TESTS_KIND, key, compute)
    return [
        stats.PairedResult(
            float(r[0]), float(r[1]), float(r[2]), float(r[3]), float(r[4]), float(r[5]), int(r[6])
        )
        for r in rows
    ]


def _rows(
    plan: _Plan,
    base: RunRecord,
    metrics: list[str],
    cols: list[str],
    scored: dict[str, pd.Index],
    cis: dict[str, dict[str, tuple[float, float, float]]],
    results: dict[str, dict[str, stats.PairedResult]],
    paired_n: dict[str, int],
    checks: dict[str, ComparisonCheck],
) -> tuple[list[dict[str, Any]], list[dict[str, str]], list[str], int]:
    """The CSV rows, the Markdown rows, the footnotes (flags) and the size of the Holm family."""
    others = [r.run_id for r in plan.ordered if r.run_id != base.run_id]
    raw = np.array([[results[rid][c].p_value for c in cols] for rid in others], dtype=float).reshape(
        len(others), len(cols)
    )
    adjusted = stats.holm(raw) if raw.size else raw
    csv_rows: list[dict[str, Any]] = []
    md_rows: list[dict[str, str]] = []
    footnotes: list[str] = []
    for r in plan.ordered:
        rid, is_base, chk = r.run_id, r.run_id == base.run_id, checks[r.run_id]
        n = len(scored[rid]) if is_base else paired_n[rid]
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
        }
        md: dict[str, str] = {
            "run": plan.shown[rid] + (" (baseline)" if is_base else ""),
            "change vs baseline": "-" if is_base else chk.change,
            **{p: str(r.params.get(p, "")) for p in plan.columns_params},
            "n": str(n),
        }
        for j, (m, c) in enumerate(zip(metrics, cols, strict=True)):
            mean, lo, hi = cis[rid][c]
            row.update({m: mean, f"{m}_ci_low": lo, f"{m}_ci_high": hi})
            md[m] = _fmt_ci(mean, lo, hi)
            if is_base:
                row.update(
                    {
                        f"{m}_{s}": (0.0 if s == "delta" else math.nan)
                        for s in ("delta", "delta_ci_low", "delta_ci_high", "p", "p_holm")
                    }
                )
                md[f"Δ {m}"], md[f"p {m} (Holm)"] = "-", "-"
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
            footnotes.append(f"{plan.labels[rid]}: {f}")
            refs.append(f"[{len(footnotes)}]")
        md["flags"] = "".join(refs) or "-"
        csv_rows.append(row)
        md_rows.append(md)
    return csv_rows, md_rows, footnotes, int(np.count_nonzero(~np.isnan(raw)))


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
    contrast: tuple[str, str] | None = DEFAULT_CONTRAST,
    cache: Cache | None = None,
) -> Report:
    """Compare ``runs`` with a baseline: the ablation table, per-tag slices and plots. Pure (no MLflow).

    ``baseline``: a run id (or a prefix of >= 6 characters), row label, run name or variant; default: the first
    variant of the ablation order (``variant.order``: A) when the runs differ in variant, else the sweep's first cell
    (the smallest values of the swept params, in order). ``swept``: the params a sweep declared
    (:func:`ablate.study.fetch.swept_from_overrides`); ``None`` infers them (the variant, when variants differ; else
    every param that differs between runs). ``force``: report runs scored on different labels or documents (flagged)
    instead of raising :class:`ablate.study.compare.ComparisonRefused`. ``skipped``: lines about runs left out
    (failed), repeated in the report. ``contrast``: the two question tags compared side by side in the slices.
    ``cache``: where figures (:mod:`ablate.study.plots`) and paired-test results are kept by content; None
    computes everything.

    Long because it is the report's one assembly point: every section reads the same baseline, swept params and
    cache, and each section is already its own function; what stays here is the order they run in.
    """
    if not runs:
        raise ReportError(
            "no runs to report; fix: point --parent at a sweep with finished child runs, or --experiment at one with runs"
        )
    if test not in TESTS:
        raise ConfigError("--test", test, "options: " + ", ".join(TESTS))
    metrics = check_metrics(metrics)
    cols = [pq_column(m) for m in metrics]
    records = list(runs)
    if len({r.run_id for r in records}) != len(records):
        raise ReportError("the same run appears twice among the runs; fix: pass each run once")
    tables = {r.run_id: _prepare(r, cols) for r in records}
    plan = _plan(records, swept)
    base, warnings = _pick_baseline(plan.ordered, plan.kind, baseline, plan.labels)
    warnings += _split_warnings(plan.ordered, plan.kind)
    checks = _checks(plan, base, force)  # may raise ComparisonRefused
    scored = {rid: scored_ids(pq, cols) for rid, pq in tables.items()}
    cis = _cis(plan, tables, scored, metrics, cols, bootstrap, seed, warnings, cache)
    results, paired_n = _paired(plan, base, tables, scored, cols, checks, test, n_resamples, seed, cache)
    csv_rows, md_rows, footnotes, family = _rows(
        plan, base, metrics, cols, scored, cis, results, paired_n, checks
    )
    header = _header(plan, base, title, test, n_resamples, seed, bootstrap, family)
    above = [plan.heldout.warning] if plan.heldout.warning else []  # the held-out line: above the table
    parts = [header, *above, format_table(md_rows, list(md_rows[0].keys()))]
    if footnotes:
        parts.append("Flags:\n\n" + "\n".join(f"{i}. {f}" for i, f in enumerate(footnotes, 1)))
    answers = answer_section(plan.ordered, plan.shown, base, TESTS[test], n_resamples, seed, bootstrap)
    for title_, lines in (("Warnings", warnings), ("Left out", skipped)):
        if lines:
            parts.append(f"{title_}:\n\n" + "\n".join(f"- {x}" for x in lines))
    if answers is not None:
        parts.append(answers.markdown.rstrip("\n"))
    slice_table, slices_md = slices(plan.ordered, tables, metrics, cols, plan.shown, base, contrast)
    console = _console(csv_rows, metrics[0], footnotes, warnings, skipped, plan.heldout)
    if answers is not None:
        console += "\n" + answers.console
    figures = _figures(plan, cis, metrics, cols, base, cache) if plots else {}
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
        checks=checks,
        warnings=warnings,
        console=console,
        answers=answers,
        heldout=plan.heldout,
    )


def _checks(plan: _Plan, base: RunRecord, force: bool) -> dict[str, ComparisonCheck]:
    """Each run's comparison with the baseline (one factor per row; same labels, documents and split)."""
    return {
        r.run_id: (
            ComparisonCheck(True, [], False, "", [], "(baseline)")
            if r.run_id == base.run_id
            else check_comparison(base, r, plan.factor, force=force, order=plan.order_keys)
        )
        for r in plan.ordered
    }


def _figures(
    plan: _Plan,
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
) -> str:
    """The narrow table: each run labelled by what it is (``C k=1 window=20``, with its held-out mark), the headline
    metric with its interval, Δ vs the baseline and the p-value (Holm-adjusted in brackets); the held-out line above
    it; flags, warnings and left-out runs as numbered lines below."""
    heldout = heldout or HeldOutMarking({}, {})
    out = []
    for r in rows:
        base = r["role"] == "baseline"
        out.append(
            {
                "run": heldout.label(r["run_id"], r["run"]) + (" (baseline)" if base else ""),
                metric: _fmt_ci(r[metric], r[f"{metric}_ci_low"], r[f"{metric}_ci_high"]),
                "Δ": "-" if base else _fmt_delta(r[f"{metric}_delta"]),
                "p (Holm)": "-" if base else f"{_fmt_p(r[f'{metric}_p'])} ({_fmt_p(r[f'{metric}_p_holm'])})",
                "n": str(r["n"]),
                "flags": r["flags"] and "yes" or "-",
            }
        )
    lines = [f"warning: {heldout.warning}"] if heldout.warning else []
    lines.append(format_table(out, ["run", metric, "Δ", "p (Holm)", "n", "flags"]))
    lines += [f"  [{i}] {f}" for i, f in enumerate(footnotes, 1)]
    lines += [f"  warning: {w}" for w in warnings]
    lines += [f"  left out: {s}" for s in skipped]
    return "\n".join(lines)


def _split_warnings(records: Sequence[RunRecord], kind: str) -> list[str]:
    splits = {r.split for r in records}
    out = []
    if len(splits) > 1 and "test" in splits:
        out.append(
            "SPLIT MIX: the runs mix the held-out test split with "
            + ", ".join(sorted(str(s) for s in splits - {"test"}))
            + ": tune on dev, then run the chosen setting once on test"
        )
    elif splits == {"test"} and kind == "sweep" and len(records) > 1:
        confirmed = all(r.tags.get(R.T_TEST_CONFIRMED) == "true" for r in records)
        out.append(
            "a parameter sweep on the held-out test split is tuning on it"
            + (
                " (it was run with --confirm-test as the final run: report the cell chosen on dev)"
                if confirmed
                else ""
            )
            + ": pick settings on dev, then run the chosen one on test once"
        )
    return out


def _header(
    plan: _Plan,
    base: RunRecord,
    title: str,
    test: str,
    n_resamples: int,
    seed: int,
    bootstrap: int,
    family: int,
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
        f"{n_resamples} resamples, seed {seed}; (Holm): adjusted over the family of {family} run x metric comparisons",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------------------
# fetch, build, write, log


def _default_out(source: Source) -> Path:
    """The sweep's own folder (``<sweep>/report``) when the parent's ``ablate.sweep`` tag names a folder that holds
    this parent's id (a tag is data read from the store: it never sends a report elsewhere), else
    ``./reports/<parent run id or experiment>`` (one folder inside ``./reports``)."""
    if (
        source.sweep_dir
        and source.parent_run_id
        and _is_sweep_folder(Path(source.sweep_dir), source.parent_run_id)
    ):
        return Path(source.sweep_dir) / R.REPORT_DIR
    safe = "".join(
        c if c.isalnum() or c in "._-" else "_" for c in (source.parent_run_id or source.experiment)
    ).lstrip(".")
    return inside(Path.cwd() / "reports", safe or "_")


def _is_sweep_folder(folder: Path, parent_run_id: str) -> bool:
    try:
        return (folder / R.SWEEP_PARENT_FILE).read_text().strip() == parent_run_id
    except (OSError, UnicodeDecodeError):
        return False


def fresh_folder(path: Path) -> Path:
    """``path`` if it does not exist yet, else ``path-2``, ``path-3``, ...: a report never overwrites an earlier
    one (a re-baselined report sits beside the first)."""
    if not path.exists():
        return path
    n = 2
    while path.with_name(f"{path.name}-{n}").exists():
        n += 1
    return path.with_name(f"{path.name}-{n}")


def _artifact_folder(tracker: Tracker, run_id: str) -> str:
    """``report``, or ``report-2``, ... when the parent run already holds a report."""
    probe = tempfile.mkdtemp(prefix="ablate-probe-")
    folder, n = R.REPORT_DIR, 1
    while tracker.download_artifact(run_id, f"{folder}/ablation.md", probe) is not None:
        n += 1
        folder = f"{R.REPORT_DIR}-{n}"
    return folder


def attach_report(
    tracker: Tracker,
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
    stream: IO[str] | None = None,
    contrast: tuple[str, str] | None = DEFAULT_CONTRAST,
    full: bool = False,
    cache: Cache | None = None,
) -> Report:
    """Fetch the runs, build the report, write it to ``out`` (default: ``<sweep dir>/report``), log it to the
    parent run under ``report/`` (a new ``report-<n>`` folder when one exists: a report never overwrites an earlier
    one) and print the narrow table (``full``: the whole Markdown table). The call a sweep's end makes; pass the sweep's
    ``stats.bootstrap`` / ``stats.seed`` as ``bootstrap`` / ``seed`` so the CIs match the logged ones."""
    if test not in TESTS:  # fail before downloading anything
        raise ConfigError("--test", test, "options: " + ", ".join(TESTS))
    metrics = check_metrics(metrics)
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
        contrast=contrast,
        cache=cache,
    )
    out_dir = fresh_folder(Path(out) if out is not None else _default_out(source))
    report.write(out_dir)
    where = ""
    if log and source.parent_run_id:
        folder = _artifact_folder(tracker, source.parent_run_id)
        tracker.log_files(source.parent_run_id, {f"{folder}/{k}": v for k, v in report.files().items()})
        tracker.set_tags(source.parent_run_id, {R.T_REPORT_BASELINE: report.baseline})
        where = f"; logged to MLflow run {source.parent_run_id} under {folder}/"
    stream = stream or sys.stdout
    print(report.markdown if full else report.console, file=stream)
    print(f"full report (all metrics, flags, slices, plots): {out_dir}/ablation.md{where}", file=stream)
    return report
