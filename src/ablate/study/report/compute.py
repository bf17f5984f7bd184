"""The report's numbers: which runs, in what order, against which baseline; each run's mean and interval per metric,
each run against the baseline (paired over the queries both score) with its minimum detectable effect, the
chosen correction (Holm by default) over the table's family, and the checks
that each row changes one factor. No text: :mod:`.render` writes it; no MLflow: :mod:`.attach` reads the runs."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ablate import record as R
from ablate.cache import Cache, arrays_digest, key_of
from ablate.errors import ConfigError, InputError
from ablate.evaluation import stats
from ablate.record import RecordedRun
from ablate.study.answers import AnswerSection, answer_section
from ablate.study.compare import ComparisonCheck, check_comparison, norm_value, varying_params
from ablate.study.factorial import Factorial, analyse
from ablate.study.fetch import ReportError, RunRecord
from ablate.study.options import ReportOptions
from ablate.study.per_question import PerQuestionSection, per_question_section
from ablate.study.report.heldout import HeldOutMarking, heldout_marking, split_warnings
from ablate.study.slices import scored_ids

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
    if key == "corpus.chunker":  # {"kind": "tokens", "size": 100, ...} -> tokens-100
        try:
            d = json.loads(str(v))
        except ValueError:
            return str(v)
        return "-".join(str(d[k]) for k in ("kind", "size") if k in d) if isinstance(d, dict) else str(v)
    n = norm_value(v)
    if isinstance(n, float) and n.is_integer():
        return str(int(n))
    return str(v)


def run_labels(records: Sequence[RecordedRun], swept: Sequence[str] = ()) -> dict[str, str]:
    """Unique row labels. Runs of one variant: a run named by its sweep's cell (``C k=1 window=20``: a name of its
    own, unique among them) keeps its name; any other gets its name plus the swept params that tell the variant's
    runs apart (short keys: ``C k=1 window=20``), then other params all of them log; then an id prefix."""
    by_variant: dict[str, list[RecordedRun]] = {}
    for r in records:
        by_variant.setdefault(r.variant, []).append(r)
    labels: dict[str, str] = {}
    for variant, group in by_variant.items():
        if len(group) == 1:
            labels[group[0].run_id] = group[0].name
            continue
        names = [r.name for r in group]
        common = [k for k in varying_params(group) if all(k in r.params for r in group)]
        keys = [k for k in dict.fromkeys([*swept, *common]) if k != "variant"]
        keys = [k for k in keys if len({repr(norm_value(r.params.get(k))) for r in group}) > 1]
        short = _short_keys(keys)
        for r in group:
            if r.name != variant and names.count(r.name) == 1:  # a sweep's cell label (plan.cell_labels)
                labels[r.run_id] = r.name
                continue
            parts = [f"{short[k]}={_label_value(k, r.params.get(k))}" for k in keys]
            labels[r.run_id] = " ".join([r.name, *parts])
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


@dataclass
class Plan:
    """What the table is about: its kind, the swept params, the studied factor, the row order and labels."""

    kind: str
    swept: list[str]
    factor: list[str]
    columns_params: list[str]
    order_keys: list[str]
    ordered: list[RunRecord]
    labels: dict[str, str]
    heldout: HeldOutMarking = field(default_factory=lambda: HeldOutMarking({}, {}))
    #: the runs by variant order and swept values: its first is the default baseline (``ordered`` is the rows'
    #: order: the sweep's as declared when the runs are one sweep's, else this)
    ranked: list[RunRecord] = field(default_factory=list)

    @property
    def shown(self) -> dict[str, str]:
        """Row labels as tables show them: with the held-out marks (``C k=10 †``)."""
        return self.heldout.labels(self.labels)


def unit_warnings(records: Sequence[RecordedRun]) -> list[str]:
    """One line per chunking the runs' labels were projected onto, when the runs do not all score the same chunks'
    labels (re-chunking moves labels and changes the unit: a rise is not to be credited to the model)."""
    onto = {r.tags.get(R.T_UNIT_CHANGE, "") for r in records}
    if len(onto) < 2 and not (any(onto) and len({r.qrels_hash for r in records}) > 1):
        return []
    return [
        f"labels projected onto {p} chunks: the unit changed; compare at the document level (the table shows "
        f"{R.DOC_PREFIX}* scores: document labels from the original labels)"
        for p in sorted(x for x in onto if x)
    ]


def _at_doc_level(records: Sequence[RunRecord], metrics: list[str]) -> tuple[list[str], list[str]]:
    """The document-level metrics and per-query columns standing for ``metrics``; every run must have them."""
    doc_metrics = [R.DOC_PREFIX + m for m in metrics]
    cols = [R.DOC_PREFIX + pq_column(m) for m in metrics]
    for r in records:
        if any(c not in r.per_query.columns for c in cols):
            raise ReportError(
                f"run {r.name} ({r.run_id}) has no document-level scores ({cols[0]}) to compare runs over different "
                "chunkers by; fix: re-run it with its chunker named (e.g. corpus.chunker.kind=clause), which scores "
                "it at the document level too"
            )
    return doc_metrics, cols


def _swept_param(key: str) -> str:
    """The param a swept config key is logged as: ``corpus.chunker.size`` -> ``corpus.chunker`` (one JSON param),
    ``eval.projection.min_overlap`` -> ``labels.projection.min_overlap``."""
    if key.startswith("corpus.chunker."):
        return "corpus.chunker"
    return R.P_PROJECTION + key[len("eval.projection") :] if key.startswith("eval.projection.") else key


def make_plan(records: list[RunRecord], swept: Sequence[str] | None) -> Plan:
    kind = "ablation" if len({r.variant for r in records}) > 1 else "sweep"
    if swept is not None:  # corpus.chunker.kind, .size, .overlap: one param, corpus.chunker
        swept = list(dict.fromkeys(_swept_param(k) for k in swept))
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
    ranked = list(ordered)
    if one_sweep_declared(records):  # the rows as the sweep was declared; the baseline stays the first ranked
        ordered = sorted(records, key=lambda r: (r.sweep_index or 0, r.start_time, r.run_id))
    labels = run_labels(ordered, swept_l)
    return Plan(
        kind,
        swept_l,
        factor,
        columns_params,
        order_keys,
        ordered,
        labels,
        heldout_marking(ordered, labels),
        ranked,
    )


def one_sweep_declared(runs: Sequence[RecordedRun]) -> bool:
    """Whether ``runs`` are cells of one sweep that all carry their place as declared (``ablate.sweep_index``)."""
    return bool(runs) and (
        all(r.sweep_index is not None for r in runs) and len({r.tags.get(R.T_SWEEP) for r in runs}) == 1
    )


def _checks(plan: Plan, base: RunRecord, force: bool) -> dict[str, ComparisonCheck]:
    """Each run's comparison with the baseline (one factor per row; same labels, documents and split)."""
    return {
        r.run_id: (
            ComparisonCheck(True, [], False, "", [], "(baseline)")
            if r.run_id == base.run_id
            else check_comparison(base, r, plan.factor, force=force, order=plan.order_keys)
        )
        for r in plan.ordered
    }


def _cis(
    plan: Plan,
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


@dataclass(frozen=True)
class PairedValues:
    """Each (run, per-query column) against the baseline on the questions both score: the run's and the baseline's
    values in the same order (``pairs``, one per ``slots`` entry) and how many questions each run is paired on."""

    slots: list[tuple[str, str]]
    pairs: list[tuple[np.ndarray, np.ndarray]]
    paired_n: dict[str, int]


def _paired_values(
    plan: Plan,
    base: RunRecord,
    tables: dict[str, pd.DataFrame],
    scored: dict[str, pd.Index],
    cols: list[str],
    checks: dict[str, ComparisonCheck],
) -> PairedValues:
    """Each run against the baseline on the queries scored in both; a flag on its check when that is fewer than
    either scores."""
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
    return PairedValues(slots, pairs, paired_n)


def _paired(
    values: PairedValues, test: str, n_resamples: int, seed: int, cache: Cache | None = None
) -> dict[str, dict[str, stats.PairedResult]]:
    """Every (run, metric) comparison is one pair of one batched test call (the resamples are drawn once)."""
    results: dict[str, dict[str, stats.PairedResult]] = {}
    for (rid, c), res in zip(values.slots, _tests(values.pairs, test, n_resamples, seed, cache), strict=True):
        results.setdefault(rid, {})[c] = res
    return results


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


def _adjust(
    plan: Plan,
    base: RunRecord,
    cols: list[str],
    results: dict[str, dict[str, stats.PairedResult]],
    method: str = "holm",
) -> tuple[dict[str, dict[str, float]], int]:
    """The p-values of every (run x metric) comparison in the table (one family) adjusted by ``method`` (Holm,
    Benjamini-Hochberg or none: :data:`ablate.evaluation.stats.CORRECTIONS`), and the family's size (the
    comparisons with a p-value)."""
    others = [r.run_id for r in plan.ordered if r.run_id != base.run_id]
    raw = np.array([[results[rid][c].p_value for c in cols] for rid in others], dtype=float).reshape(
        len(others), len(cols)
    )
    adjusted = stats.adjust(raw, method) if raw.size else raw
    p_adj = {rid: {c: float(adjusted[i, j]) for j, c in enumerate(cols)} for i, rid in enumerate(others)}
    return p_adj, int(np.count_nonzero(~np.isnan(raw)))


#: The power the report's minimum detectable effect is computed for (at the family's alpha, 0.05).
MDE_POWER = 0.8
MDE_ALPHA = 0.05


def _mdes(values: PairedValues) -> dict[str, dict[str, float]]:
    """The minimum detectable effect (80% power, alpha 0.05, paired t approximation) of each run against the
    baseline per metric, from the per-question differences of the pairs the paired test uses; NaN when the
    differences have no spread or fewer than 2 questions."""
    out: dict[str, dict[str, float]] = {}
    for (rid, c), (run, baseline) in zip(values.slots, values.pairs, strict=True):
        diffs = run.astype(float) - baseline.astype(float)
        out.setdefault(rid, {})[c] = stats.mde(diffs[~np.isnan(diffs)], alpha=MDE_ALPHA, power=MDE_POWER)
    return out


@dataclass
class Computed:
    """Everything a report shows, as numbers: the plan (kind, order, labels, held-out marking), the baseline, the
    per-query tables and the queries each run scores, each row's check, intervals, paired results and their
    adjustment (``p_holm``: adjusted by ``correction``, Holm by default), the answer section (runs with a generator),
    the warnings, and each comparison's minimum detectable effect (``mde``)."""

    plan: Plan
    base: RunRecord
    metrics: list[str]
    cols: list[str]
    tables: dict[str, pd.DataFrame]
    scored: dict[str, pd.Index]
    checks: dict[str, ComparisonCheck]
    cis: dict[str, dict[str, tuple[float, float, float]]]
    results: dict[str, dict[str, stats.PairedResult]]
    paired_n: dict[str, int]
    p_holm: dict[str, dict[str, float]]
    family: int
    answers: AnswerSection | None
    warnings: list[str] = field(default_factory=list)
    #: the questions each run fixed and broke against the baseline, and where the broken ones lost their evidence
    per_question: PerQuestionSection | None = None
    #: how ``p_holm`` was adjusted over the family: holm, bh or none
    correction: str = "holm"
    #: run id -> per-query column -> minimum detectable effect against the baseline (80% power, alpha 0.05)
    mde: dict[str, dict[str, float]] = field(default_factory=dict)
    #: the factorial analysis of the runs' grid (:mod:`ablate.study.factorial`), or None when not asked for and
    #: the runs are not a full grid over two or more swept factors
    factorial: Factorial | None = None


def factorial_of(
    plan: Plan,
    tables: dict[str, pd.DataFrame],
    scored: dict[str, pd.Index],
    metric: str,
    col: str,
    ask: bool | None,
) -> Factorial | None:
    """The factorial analysis on the headline metric (``ask``: :attr:`ReportOptions.factorial`): kept when asked
    for (True: with its note when the runs are no full grid) or when the runs are a full grid (None)."""
    if ask is False:
        return None
    values = {r.run_id: tables[r.run_id].loc[scored[r.run_id], col] for r in plan.ordered}
    got = analyse(plan.ordered, plan.swept, values, metric)
    return got if ask or got.modelled else None


def compute(
    runs: Sequence[RunRecord],
    options: ReportOptions,
    swept: Sequence[str] | None = None,
    cache: Cache | None = None,
) -> Computed:
    """The numbers of the report over ``runs`` (pure: no MLflow, no text). ``swept``: the params a sweep declared
    (:func:`ablate.study.fetch.swept_from_overrides`); None infers them (the variant, when variants differ; else
    every param that differs between runs). ``cache``: where paired-test results and intervals are kept by content.
    Raises :class:`ablate.study.compare.ComparisonRefused` for runs scored on different labels or documents unless
    ``options.force``."""
    if not runs:
        raise ReportError(
            "no runs to report; fix: point --parent at a sweep with finished child runs, or --experiment at one with runs"
        )
    if options.test not in TESTS:
        raise ConfigError("--test", options.test, "options: " + ", ".join(TESTS))
    if options.correction not in stats.CORRECTIONS:
        raise ConfigError("--correction", options.correction, "options: " + ", ".join(stats.CORRECTIONS))
    metrics = check_metrics(options.metrics)
    cols = [pq_column(m) for m in metrics]
    records = list(runs)
    if len({r.run_id for r in records}) != len(records):
        raise ReportError("the same run appears twice among the runs; fix: pass each run once")
    unit = unit_warnings(records)
    if unit:
        metrics, cols = _at_doc_level(records, metrics)
    tables = {r.run_id: _prepare(r, cols) for r in records}
    plan = make_plan(records, swept)
    base, warnings = _pick_baseline(plan.ranked, plan.kind, options.baseline, plan.labels)
    warnings = unit + warnings
    warnings += split_warnings(plan.ordered, plan.kind)
    checks = _checks(plan, base, options.force)  # may raise ComparisonRefused
    scored = {rid: scored_ids(pq, cols) for rid, pq in tables.items()}
    cis = _cis(plan, tables, scored, metrics, cols, options.bootstrap, options.seed, warnings, cache)
    values = _paired_values(plan, base, tables, scored, cols, checks)
    results = _paired(values, options.test, options.n_resamples, options.seed, cache)
    paired_n = values.paired_n
    p_holm, family = _adjust(plan, base, cols, results, options.correction)
    answers = answer_section(
        plan.ordered,
        plan.shown,
        base,
        TESTS[options.test],
        options.n_resamples,
        options.seed,
        options.bootstrap,
        options.correction,
    )
    return Computed(
        plan,
        base,
        metrics,
        cols,
        tables,
        scored,
        checks,
        cis,
        results,
        paired_n,
        p_holm,
        family,
        answers,
        warnings,
        per_question_section(plan.ordered, plan.shown, base, metrics[0], cols[0]),
        options.correction,
        _mdes(values),
        factorial_of(plan, tables, scored, metrics[0], cols[0], options.factorial),
    )
