"""The report's numbers over its rows (:mod:`.rows`: which runs, in what order, against which baseline): each run's
mean and interval per metric, each run against the baseline (paired over the queries both score) with its minimum
detectable effect, the chosen correction (Holm by default) over the table's family, and the checks that each row
changes one factor. When questions cluster (:mod:`ablate.study.clusters`, ``options.cluster``) the intervals and
tests resample clusters and the MDE carries the design effect. No text: :mod:`.render` writes it; no MLflow:
:mod:`.attach` reads the runs."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ablate import record as R
from ablate.cache import Cache, arrays_digest, key_of
from ablate.errors import ConfigError, InputError
from ablate.evaluation import stats
from ablate.record import RecordedRun
from ablate.study.answers import AnswerSection, answer_section
from ablate.study.clusters import Clustering, clustering, design_effect, few_clusters
from ablate.study.compare import ComparisonCheck, check_comparison
from ablate.study.factorial import Factorial, analyse
from ablate.study.fetch import ReportError, RunRecord
from ablate.study.options import ReportOptions
from ablate.study.per_question import PerQuestionSection, per_question_section
from ablate.study.report.heldout import split_warnings
from ablate.study.report.rows import Plan, make_plan, pick_baseline
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
    clusters: Clustering | None = None,
) -> dict[str, dict[str, tuple[float, float, float]]]:
    """Mean and 95% interval per run and metric (over clusters of questions when ``clusters`` puts two or more of a
    run's questions in one); warns when a logged mean disagrees with per_query.csv. With a ``cache``, each run's
    intervals are kept by content (its per-query values, their clusters, the resamples, the seed, the stats code), so
    a report over unchanged runs does not resample again."""
    cis: dict[str, dict[str, tuple[float, float, float]]] = {}
    for r in plan.ordered:
        pq = tables[r.run_id].loc[scored[r.run_id], cols]
        groups = clusters.of([str(q) for q in pq.index]) if clusters is not None else None
        cis[r.run_id] = stats.bootstrap_cis_kept(pq, cols, bootstrap, seed, cache, REPORT_CI_KIND, groups)
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
    values in the same order (``pairs``, one per ``slots`` entry), the questions' clusters (``groups``, one entry per
    pair: None when every question is alone) and how many questions (``paired_n``) in how many clusters
    (``paired_g``) each run is paired on."""

    slots: list[tuple[str, str]]
    pairs: list[tuple[np.ndarray, np.ndarray]]
    paired_n: dict[str, int]
    groups: list[list[str] | None] = field(default_factory=list)
    paired_g: dict[str, int] = field(default_factory=dict)


def _paired_values(
    plan: Plan,
    base: RunRecord,
    tables: dict[str, pd.DataFrame],
    scored: dict[str, pd.Index],
    cols: list[str],
    checks: dict[str, ComparisonCheck],
    clusters: Clustering | None = None,
) -> PairedValues:
    """Each run against the baseline on the queries scored in both, with their clusters; a flag on its check when
    that is fewer than either scores."""
    bpq = tables[base.run_id]
    out = PairedValues([], [], {})
    for r in plan.ordered:
        if r.run_id == base.run_id:
            continue
        common = scored[base.run_id].intersection(scored[r.run_id], sort=False)
        qids = [str(q) for q in common]
        groups = clusters.of(qids) if clusters is not None else None
        out.paired_n[r.run_id] = len(common)
        out.paired_g[r.run_id] = len(set(groups or qids))
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
            out.pairs.append((rpq.loc[common, c].to_numpy(), bpq.loc[common, c].to_numpy()))
            out.slots.append((r.run_id, c))
            out.groups.append(groups)
    return out


def _paired(
    values: PairedValues, test: str, n_resamples: int, seed: int, cache: Cache | None = None
) -> dict[str, dict[str, stats.PairedResult]]:
    """Every (run, metric) comparison is one pair of one batched test call (the resamples are drawn once)."""
    results: dict[str, dict[str, stats.PairedResult]] = {}
    got = _tests(values.pairs, test, n_resamples, seed, cache, values.groups)
    for (rid, c), res in zip(values.slots, got, strict=True):
        results.setdefault(rid, {})[c] = res
    return results


#: Cache kind of the report's per-run intervals (keyed like the paired tests: the values, the settings, the code).
REPORT_CI_KIND = "report-cis"

#: Cache kind of the paired tests (keyed by the paired values, the test, its settings and the stats code).
TESTS_KIND = "paired-tests"


def _tests(
    pairs: list[tuple[np.ndarray, np.ndarray]],
    test: str,
    n_resamples: int,
    seed: int,
    cache: Cache | None,
    groups: list[list[str] | None] | None = None,
) -> list[stats.PairedResult]:
    """``BATCH_TESTS[test]`` on ``pairs`` (over the clusters ``groups`` gives, one entry per pair); with a ``cache``,
    kept by content (the same values and clusters give the same results, so a report over unchanged runs does not
    resample again, and a per-question result never stands for a clustered one)."""
    clustered = groups if groups and any(g is not None for g in groups) else None

    def compute() -> list[list[float]]:
        got = BATCH_TESTS[test](pairs, n_resamples=n_resamples, seed=seed, groups=clustered)
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
            clustered,
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
    baseline per metric, from the per-question differences of the pairs the paired test uses, times the square root
    of their clusters' design effect (:func:`ablate.study.clusters.design_effect`); NaN when the differences have no
    spread or fewer than 2 questions (or clusters)."""
    out: dict[str, dict[str, float]] = {}
    for (rid, c), (run, baseline), groups in zip(values.slots, values.pairs, _each(values), strict=True):
        diffs = run.astype(float) - baseline.astype(float)
        keep = ~np.isnan(diffs)
        mde = stats.mde(diffs[keep], alpha=MDE_ALPHA, power=MDE_POWER)
        if groups is not None:
            mde *= design_effect(
                diffs[keep].tolist(), [g for g, k in zip(groups, keep, strict=True) if k]
            ).inflation
        out.setdefault(rid, {})[c] = mde
    return out


def _each(values: PairedValues) -> list[list[str] | None]:
    return values.groups or [None] * len(values.pairs)


def _cluster_counts(
    clusters: Clustering, base_ids: pd.Index, base_id: str, values: PairedValues, warnings: list[str]
) -> dict[str, int]:
    """How many clusters each row's n questions fall in (the baseline's scored ones, each other run's paired ones);
    the few-clusters warning appended when some row's questions share clusters."""
    counts = {base_id: clusters.count([str(q) for q in base_ids]), **values.paired_g}
    n = {base_id: len(base_ids), **values.paired_n}
    shared = [g for rid, g in counts.items() if g < n[rid]]
    few = few_clusters(min(shared)) if shared else None
    warnings += [few] if few else []
    return counts


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
    #: the questions' clusters (``options.cluster``) and, per run, how many clusters its n questions fall in (the
    #: baseline's scored ones, each other run's paired ones)
    clusters: Clustering | None = None
    n_clusters: dict[str, int] = field(default_factory=dict)

    @property
    def clustered(self) -> bool:
        """Whether some row's questions share a cluster (its intervals and tests resampled clusters)."""
        n = {**{self.base.run_id: len(self.scored[self.base.run_id])}, **self.paired_n}
        return any(self.n_clusters.get(rid, n[rid]) < n[rid] for rid in n)


def factorial_of(
    plan: Plan,
    tables: dict[str, pd.DataFrame],
    scored: dict[str, pd.Index],
    metric: str,
    col: str,
    ask: bool | None,
    names: Mapping[str, str] | None = None,
) -> Factorial | None:
    """The factorial analysis on the headline metric (``ask``: :attr:`ReportOptions.factorial`): kept when asked
    for (True: with its note when the runs are no full grid) or when the runs are a full grid (None)."""
    if ask is False:
        return None
    values = {r.run_id: tables[r.run_id].loc[scored[r.run_id], col] for r in plan.ordered}
    got = analyse(plan.ordered, plan.swept, values, metric, names)
    return got if ask or got.modelled else None


def compute(
    runs: Sequence[RunRecord],
    options: ReportOptions,
    swept: Sequence[str] | None = None,
    cache: Cache | None = None,
    names: Mapping[str, str] | None = None,
) -> Computed:
    """The numbers of the report over ``runs`` (pure: no MLflow, no text). ``swept``: the params a sweep declared
    (:func:`ablate.study.fetch.swept_from_overrides`); None infers them (the variant, when variants differ; else
    every param that differs between runs). ``cache``: where paired-test results and intervals are kept by content.
    ``names``: each swept param as the sweep typed it (the factorial analysis names its factors so).
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
    base, warnings = pick_baseline(plan.ranked, plan.kind, options.baseline, plan.labels)
    warnings = unit + warnings
    warnings += split_warnings(plan.ordered, plan.kind)
    checks = _checks(plan, base, options.force)  # may raise ComparisonRefused
    scored = {rid: scored_ids(pq, cols) for rid, pq in tables.items()}
    clusters = clustering(records, options.cluster)
    warnings += clusters.warnings
    cis = _cis(
        plan, tables, scored, metrics, cols, options.bootstrap, options.seed, warnings, cache, clusters
    )
    values = _paired_values(plan, base, tables, scored, cols, checks, clusters)
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
        clusters,
    )
    n_clusters = _cluster_counts(clusters, scored[base.run_id], base.run_id, values, warnings)
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
        factorial_of(plan, tables, scored, metrics[0], cols[0], options.factorial, names),
        clusters,
        n_clusters,
    )
