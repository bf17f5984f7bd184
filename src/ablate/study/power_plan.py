"""How many questions a comparison needs: for each run against the baseline (chosen as the report chooses it), the
paired per-question differences of one metric on the questions both runs score, and from their spread the minimum
detectable effect at today's n and at 2x/4x/8x, or the questions needed to detect a given ``delta`` (paired t
approximation, checked by a paired-bootstrap simulation over the pilot's differences). Proportions (``hit@K``,
0/1 per question) also get the Wilson interval's width per n. Pure: runs in, rows out (:mod:`ablate.app.plan_questions`
reads the runs and prints).

The family: with ``m`` comparisons in the plan, Holm and Benjamini-Hochberg are planned at ``alpha / m`` (the
strictest step of either, as Bonferroni: conservative), ``none`` at ``alpha``. The report's MDE column is at
``alpha`` for one comparison, so for the same pair it is smaller than the plan's whenever ``m > 1``.

The ceiling (a run retrieving the gold evidence, the oracle) is no candidate: :func:`without_ceiling` leaves it out
of a sweep's plan. On a 0-1 metric an MDE beyond 1 is said to be no detectable difference (:func:`beyond_range`).

Clustered questions (:mod:`ablate.study.clusters`): when the compared questions fall in fewer clusters than there are
questions, the MDE grows by the square root of their design effect ``1 + (m - 1) * ICC`` (``m`` the mean cluster
size, ICC the within-cluster correlation of the differences), the questions needed by the design effect (more
questions in clusters of today's size and correlation), and the simulation draws whole clusters and tests each study
with the cluster-robust t."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from ablate import record as R
from ablate.errors import ConfigError, InputError
from ablate.evaluation import stats
from ablate.study.clusters import Clustering, design_effect
from ablate.study.fetch import RunRecord
from ablate.study.report.compute import pq_column
from ablate.study.report.rows import make_plan, pick_baseline
from ablate.study.slices import scored_ids

#: The multiples of today's n at which the MDE is shown when no ``delta`` is given.
MULTIPLES: tuple[int, ...] = (1, 2, 4, 8)
#: Simulated studies larger than this many questions are not simulated (the t approximation alone is given).
MAX_SIMULATED_N = 20_000
#: The retriever that returns the gold evidence itself: a run with it is the ceiling (what perfect retrieval
#: gives), not a candidate, so the plan leaves it out unless asked (``--with-ceiling``).
CEILING_RETRIEVER = "oracle"
#: Metrics whose per-question value lies in [0, 1] (a share, a gain normalised by the ideal, 0/1): no difference
#: between two runs on them exceeds :data:`UNIT_RANGE`, so a larger MDE means no difference is detectable.
UNIT_METRICS = (
    "ndcg",
    "recall",
    "rr",
    "mrr",
    "hit",
    "precision",
    "judged",
    "answer_correct",
    "subq_",
    "superseded",
)
UNIT_RANGE = 1.0


@dataclass(frozen=True)
class PlanRow:
    """One comparison's plan. ``mde``: at today's n; ``mde_at``: n -> MDE (no ``delta``); ``n_needed`` / ``t_power``
    / ``sim_power`` (with its Monte-Carlo ``sim_se``): for ``delta``, else the simulated power of the MDE at n;
    ``wilson_width``: n -> width of the 95% Wilson interval of the run's proportion (0/1 metrics only); ``note``:
    why a number is missing. ``clusters``, ``cluster_size`` (m), ``icc`` and ``deff``: the questions' clusters and
    their design effect ``1 + (m - 1) * icc`` (``clusters == n``, ``deff == 1``: the questions are independent)."""

    baseline: str
    run: str
    metric: str
    n: int
    sd_diff: float
    delta_observed: float
    alpha: float
    mde: float
    n_needed: float
    t_power: float
    sim_power: float
    sim_se: float
    mde_at: dict[int, float]
    wilson_width: dict[int, float]
    note: str
    clusters: int = 0
    cluster_size: float = 1.0
    icc: float = 0.0
    deff: float = 1.0

    @property
    def clustered(self) -> bool:
        return self.clusters < self.n

    def as_json(self) -> dict[str, object]:
        d = asdict(self)
        for k in ("mde_at", "wilson_width"):
            d[k] = {str(n): v for n, v in d[k].items()}
        if not math.isnan(self.n_needed):
            d["n_needed"] = int(self.n_needed)
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}


def metric_name(text: str) -> str:
    """``ndcg@10`` or its tracked spelling ``ndcg_at_10`` -> ``ndcg@10``; refused otherwise."""
    m = text.strip().replace("_at_", "@")
    name, _, k = m.partition("@")
    if not name or not k.isdigit():
        raise ConfigError("--metric", text, "use <metric>@<k> (or <metric>_at_<k>), e.g. ndcg@10 or hit@10")
    return m


def check_settings(delta: float | None, power: float, alpha: float, correction: str = "holm") -> None:
    """Refuse a setting the plan cannot use, before any run is read."""
    if correction not in stats.CORRECTIONS:
        raise ConfigError("--correction", correction, "valid options: " + ", ".join(stats.CORRECTIONS))
    if delta is not None and not (math.isfinite(delta) and delta > 0):
        raise ConfigError("--delta", delta, "give a positive effect in the metric's units, e.g. 0.03")
    if not 0.0 < power < 1.0:
        raise ConfigError("--power", power, "give a power strictly between 0 and 1, e.g. 0.8")
    if not 0.0 < alpha < 1.0:
        raise ConfigError("--alpha", alpha, "give a level strictly between 0 and 1, e.g. 0.05")


def is_ceiling(run: RunRecord) -> bool:
    """Whether ``run`` retrieved with the gold evidence itself (:data:`CEILING_RETRIEVER`)."""
    return CEILING_RETRIEVER in R.json_list(run.params.get(R.P_RETRIEVERS))


def without_ceiling(runs: Sequence[RunRecord]) -> tuple[list[RunRecord], list[RunRecord]]:
    """The candidates and the ceilings among ``runs``; all of them candidates when every run is a ceiling (a sweep
    of prompts on the oracle compares oracles with each other)."""
    ceilings = [r for r in runs if is_ceiling(r)]
    if len(ceilings) == len(runs):
        return list(runs), []
    return [r for r in runs if not is_ceiling(r)], ceilings


def unit_metric(metric: str) -> bool:
    """Whether ``metric``'s per-question values lie in [0, 1] (:data:`UNIT_METRICS`)."""
    return metric.partition("@")[0].startswith(UNIT_METRICS)


def _column(runs: Sequence[RunRecord], metric: str) -> str:
    col = pq_column(metric)
    for r in runs:
        if col not in r.per_query.columns:
            ks: dict[str, list[str]] = {}
            for c in r.per_query.columns:
                name, _, k = str(c).partition("@")
                if k.isdigit() and name in ("ndcg", "recall", "rr", "hit", "precision", "answer_correct"):
                    ks.setdefault("mrr" if name == "rr" else name, []).append(k)
            shown = "; ".join(f"{n}@{{{','.join(v)}}}" for n, v in ks.items()) or "none"
            raise InputError(
                f"--metric {metric}",
                f"run {r.name} ({r.run_id}) logged no per-question {col}",
                f"choose one it logged, e.g. {shown}",
            )
    return col


def _table(r: RunRecord, col: str) -> tuple[np.ndarray, list[str]]:
    pq = r.per_query.copy()
    if "qid" in pq.columns:
        pq = pq.set_index("qid")
    pq.index = pq.index.astype(str)
    pq[col] = pq[col].astype(float)
    ids = scored_ids(pq, [col])
    return pq.loc[ids, col].to_numpy(float), [str(i) for i in ids]


def plan_rows(
    runs: Sequence[RunRecord],
    metric: str,
    delta: float | None = None,
    power: float = 0.8,
    alpha: float = 0.05,
    correction: str = "holm",
    baseline: str | None = None,
    swept: Sequence[str] | None = None,
    pairs_first: bool = False,
    n_sims: int = 2000,
    seed: int = 0,
    clusters: Clustering | None = None,
) -> list[PlanRow]:
    """One :class:`PlanRow` per run against the baseline. The baseline is the report's (``baseline`` names one;
    else the first variant or sweep cell), or with ``pairs_first`` the first of ``runs``. ``clusters``: the
    questions' clusters (:func:`ablate.study.clusters.clustering`; None: every question alone)."""
    check_settings(delta, power, alpha, correction)
    metric = metric_name(metric)
    col = _column(runs, metric)
    plan = make_plan(list(runs), swept)
    base = runs[0] if pairs_first else pick_baseline(plan.ranked, plan.kind, baseline, plan.labels)[0]
    others = [r for r in plan.ordered if r.run_id != base.run_id]
    a_level = alpha / len(others) if correction != "none" and others else alpha
    b_vals, b_ids = _table(base, col)
    b_series = dict(zip(b_ids, b_vals, strict=True))
    rows = []
    for r in others:
        vals, ids = _table(r, col)
        common = [(v, b_series[q], q) for v, q in zip(vals, ids, strict=True) if q in b_series]
        a = np.array([c[0] for c in common], dtype=float)
        b = np.array([c[1] for c in common], dtype=float)
        groups = clusters.of([c[2] for c in common]) if clusters is not None else None
        rows.append(
            _row(
                plan.labels[base.run_id],
                plan.labels[r.run_id],
                metric,
                a,
                b,
                delta,
                power,
                a_level,
                n_sims,
                seed,
                groups,
            )
        )
    return rows


def _row(
    base: str,
    run: str,
    metric: str,
    a: np.ndarray,
    b: np.ndarray,
    delta: float | None,
    power: float,
    alpha: float,
    n_sims: int,
    seed: int,
    groups: list[str] | None = None,
) -> PlanRow:
    """Long because it is one comparison's whole plan: the design effect, the MDE at each n or the questions needed,
    the simulation that checks them and the note on what they mean, in the order a reader checks them."""
    diffs = a - b
    n = int(diffs.size)
    de = design_effect(diffs.tolist(), groups)
    note = stats.undetermined(diffs) or ""
    if not note and not math.isfinite(de.deff):
        note = (
            f"all {n} questions are in one cluster: no spread between clusters to plan from (--cluster none)"
        )
    deff = de.deff if math.isfinite(de.deff) else 1.0
    sd = stats.sd_diff(diffs) if n >= 2 else math.nan
    mde_at = (
        {k * n: stats.mde(diffs, n=k * n, alpha=alpha, power=power, deff=deff) for k in MULTIPLES}
        if n
        else {}
    )
    if not math.isfinite(de.deff):
        mde_at = dict.fromkeys(mde_at, math.nan)
    mde = mde_at.get(n, math.nan)
    if delta is None:
        needed, t_pow = math.nan, math.nan
        sim, se = (
            stats.simulated_power(diffs, mde, n, alpha, n_sims, seed, groups)
            if not note
            else (math.nan, math.nan)
        )
        sizes = list(mde_at)
    else:
        needed = stats.n_needed(diffs, delta, alpha, power, deff=deff) if math.isfinite(de.deff) else math.nan
        ok = not math.isnan(needed)
        t_pow = stats.t_power(diffs, delta, int(needed), alpha, deff=deff) if ok else math.nan
        sim, se = math.nan, math.nan
        if ok and needed <= MAX_SIMULATED_N:
            sim, se = stats.simulated_power(diffs, delta, int(needed), alpha, n_sims, seed, groups)
        elif ok:
            note = f"not simulated: {int(needed)} questions is beyond {MAX_SIMULATED_N}"
        sizes = [n, int(needed)] if ok else [n]
    target = power if delta is None else t_pow
    if not note and not math.isnan(sim) and abs(sim - target) > 3 * se + 0.02:
        note = (
            f"the simulation (whole clusters drawn from the pilot's {de.g}) gives power {sim:.2f}, the design-effect "
            f"approximation {target:.2f}: {de.g} clusters pin down neither the within-cluster correlation nor the "
            "spread between clusters; plan with questions from more distinct evidence"
            if groups is not None
            else f"the simulation gives power {sim:.2f}, the t approximation {target:.2f}: the differences are far "
            "from normal at this n; trust the simulation"
        )
    if delta is None and unit_metric(metric) and mde > UNIT_RANGE:
        note = "; ".join(x for x in (note, beyond_range(n)) if x)
    binary = n > 0 and bool(np.isin(a, (0.0, 1.0)).all())
    widths = {m: stats.wilson_width(float(a.mean()), m) for m in sizes} if binary else {}
    return PlanRow(
        base,
        run,
        metric,
        n,
        sd,
        float(diffs.mean()) if n else math.nan,
        alpha,
        mde,
        needed,
        t_pow,
        sim,
        se,
        mde_at if delta is None else {n: mde},
        widths,
        note,
        de.g,
        de.m,
        de.icc,
        de.deff,
    )


def beyond_range(n: int) -> str:
    """The note for an MDE larger than a 0-1 metric's whole range at ``n`` questions."""
    return (
        f"MDE > {UNIT_RANGE:g}: no difference on this 0-1 metric is detectable with n = {n} (the MDE falls as the "
        "questions grow: see the larger n)"
    )
