"""The regression gate's decision: is a candidate non-inferior to a baseline on per-question values, given that
questions written from the same evidence move together?

Δ is the mean over questions of (candidate − baseline). Its standard error is the cluster-robust one with G − 1
degrees of freedom for G clusters: the interval at level 1 − 2·alpha is exactly what ``statsmodels`` gives for
``OLS(d, ones).fit(cov_type="cluster", cov_kwds={"groups": g}, use_t=True).conf_int(alpha=2 * alpha)`` (its
small-sample factor G/(G−1)·(N−1)/(N−1) included; ``tests/test_gate.py`` checks it to 1e-9). Without groups every
question is its own cluster and the interval is the ordinary paired t interval.

Each metric carries two one-sided tests on that t with G − 1 degrees of freedom: non-inferiority (H0: Δ ≤ −margin;
rejected: the candidate is no worse than the margin) and regression (H0: Δ ≥ 0; rejected: the candidate is worse).
Over several metrics each kind of claim is decided by Holm's step-down (:func:`holm_levels`) at the family level
alpha: the metric with the smallest p-value is tested at alpha/m, the next at alpha/(m − 1), ..., and once one does not
stand no later one does. A metric's ``low`` is the bound of the one-sided interval at the level its non-inferiority
test used, ``high`` at the level its regression test used, so the outcome reads off them (with one metric both
levels are alpha and the interval is the 1 − 2·alpha one):

* pass (0) when low > −margin: non-inferior ("better" when low > 0 too);
* regression (1) when low ≤ −margin and high < 0;
* inconclusive (3) otherwise, with the smallest drop this n and G could rule out and the questions that would decide
  it at this margin with 80% power, from the observed spread and within-cluster correlation (design effect
  1 + (m − 1)·ICC, m the mean cluster size).

A claim stands when its p-value is below its level (a bound exactly at −margin or 0 does not clear it), so Holm's
adjusted p-values (``p_noninferior_holm``, ``p_regression_holm``: what ``statsmodels``' ``multipletests(method="holm")``
gives) are below alpha exactly for the claims that stand. Each kind of wrong claim, passing a metric that is worse
by the margin or more or calling a regression on one that did not drop, has a family-wise rate of at most alpha.

Pure functions over plain mappings; no MLflow here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from ablate.errors import AblateError
from ablate.evaluation.stats.cluster import cluster_codes, cluster_se
from ablate.evaluation.stats.holm import holm

PASS, REGRESSION, INCONCLUSIVE = "pass", "regression", "inconclusive"
EXIT_CODES = {PASS: 0, REGRESSION: 1, INCONCLUSIVE: 3}
#: the exit code of a gate that failed for a reason of its own (not bad input, 2): never 1, which fails a build as a
#: regression would
UNEXPECTED = 4
#: the power a "questions needed" figure plans for (the usual 80%)
POWER = 0.8
#: fewer clusters than this leave a t interval with few degrees of freedom: said beside the verdict
FEW_CLUSTERS = 10


class GateError(AblateError):
    """Two sides that cannot be compared, or settings outside their range."""


@dataclass(frozen=True)
class Decision:
    """What the gate decided on one metric, with everything needed to say why (the fields of ``--json``).

    ``alpha`` is the family level; ``level_noninferior`` and ``level_regression`` the levels Holm's step-down gave
    this metric's two tests (both ``alpha`` with one metric); ``p_*`` their one-sided p-values and ``p_*_holm`` Holm's
    adjusted ones."""

    outcome: str
    exit_code: int
    delta: float
    low: float
    high: float
    alpha: float
    margin: float
    n_questions: int
    n_clusters: int
    better: bool
    icc: float
    mde: float
    questions_needed: int | None
    groups: dict[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    metric: str = ""
    level_noninferior: float = math.nan
    level_regression: float = math.nan
    p_noninferior: float = math.nan
    p_regression: float = math.nan
    p_noninferior_holm: float = math.nan
    p_regression_holm: float = math.nan

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["warnings"] = list(self.warnings)
        return out


def _scipy_stats() -> ModuleType:
    """scipy.stats, imported when a verdict is computed: the run and label commands import this module (its
    clusters' helpers) and would otherwise pay scipy.stats' second of import at their start."""
    from scipy import stats

    return stats


def check_settings(margin: float, alpha: float) -> None:
    """Refuse a margin or alpha outside its range (one line naming the value)."""
    if not (math.isfinite(margin) and margin >= 0):
        raise GateError(f"--margin {margin!r} is not valid: a drop you accept, a number >= 0 (e.g. 0.02)")
    if not (0 < alpha < 0.5):
        raise GateError(f"--alpha {alpha!r} is not valid: a one-sided level between 0 and 0.5 (e.g. 0.05)")


def _paired(baseline: Mapping[str, float], candidate: Mapping[str, float]) -> tuple[list[str], list[float]]:
    only_b, only_c = sorted(set(baseline) - set(candidate)), sorted(set(candidate) - set(baseline))
    if only_b or only_c:
        parts = [f"{len(only_b)} only in the baseline (e.g. {only_b[0]})"] if only_b else []
        parts += [f"{len(only_c)} only in the candidate (e.g. {only_c[0]})"] if only_c else []
        which = "; ".join(parts)
        raise GateError(
            f"the two sides scored different questions: {which}. Fix: score both on the same questions and labels "
            "(python -m ablate.report --labels VERSION re-scores runs on one label version)"
        )
    qids = sorted(baseline)
    d = [float(candidate[q]) - float(baseline[q]) for q in qids]
    bad = [q for q, x in zip(qids, d, strict=True) if not math.isfinite(x)]
    if bad:
        raise GateError(
            f"question {bad[0]!r} has no finite value on one side: score it, or leave it out of both"
        )
    return qids, d


def icc_of(d: list[float], groups: list[str]) -> float:
    """The within-cluster correlation of ``d`` (one-way ANOVA estimator, unbalanced clusters), clipped at 0."""
    by: dict[str, list[float]] = {}
    for x, g in zip(d, groups, strict=True):
        by.setdefault(g, []).append(x)
    n, k = len(d), len(by)
    if k < 2 or n <= k:
        return 0.0
    mean = sum(d) / n
    ssb = sum(len(v) * (sum(v) / len(v) - mean) ** 2 for v in by.values())
    ssw = sum((x - sum(v) / len(v)) ** 2 for v in by.values() for x in v)
    msb, msw = ssb / (k - 1), ssw / (n - k)
    n0 = (n - sum(len(v) ** 2 for v in by.values()) / n) / (k - 1)
    denom = msb + (n0 - 1) * msw
    return max(0.0, (msb - msw) / denom) if denom > 0 else 0.0


def holm_levels(
    pvalues: Sequence[float], alpha: float, stands: Callable[[int, float], bool] | None = None
) -> tuple[list[float], list[bool]]:
    """Holm's step-down over one family: each hypothesis' level and whether its claim stands. The k-th smallest
    p-value (k = 0, 1, ...) is tested at alpha/(m − k) while every smaller one stood; from the first that does not,
    the procedure stops and every later one is held to that level (and does not stand). ``stands(i, level)`` decides
    one test (default: ``p_i < level``), so a caller can decide by the interval's bound at that level."""
    m = len(pvalues)
    decide_one = stands or (lambda i, level: pvalues[i] < level)
    order = sorted(range(m), key=lambda i: pvalues[i])
    levels, stood = [math.nan] * m, [False] * m
    stopped: float | None = None
    for k, i in enumerate(order):
        levels[i] = alpha / (m - k) if stopped is None else stopped
        if stopped is None:
            stood[i] = decide_one(i, levels[i])
            if not stood[i]:
                stopped = levels[i]
    return levels, stood


@dataclass(frozen=True)
class _Paired:
    """One metric's paired differences and their clusters, with the mean and its cluster-robust standard error."""

    qids: list[str]
    d: list[float]
    g: list[str]
    delta: float
    se: float

    @property
    def df(self) -> int:
        return len(set(self.g)) - 1

    def bound(self, level: float, side: int) -> float:
        """The one-sided bound at ``level``: the lower (``side`` −1) or upper (+1)."""
        return self.delta + side * float(_scipy_stats().t.ppf(1 - level, self.df)) * self.se

    def p_noninferior(self, margin: float) -> float:
        """One-sided p of H0: Δ ≤ −margin."""
        if self.se == 0:
            return 0.0 if self.delta > -margin else 1.0
        return float(_scipy_stats().t.sf((self.delta + margin) / self.se, self.df))

    def p_regression(self) -> float:
        """One-sided p of H0: Δ ≥ 0."""
        if self.se == 0:
            return 0.0 if self.delta < 0 else 1.0
        return float(_scipy_stats().t.cdf(self.delta / self.se, self.df))


def _pair(
    baseline: Mapping[str, float], candidate: Mapping[str, float], groups: Mapping[str, str] | None
) -> _Paired:
    qids, d = _paired(baseline, candidate)
    if not qids:
        raise GateError("no question is scored on both sides: there is nothing to compare")
    g = [str(groups.get(q, f"question:{q}")) if groups else f"question:{q}" for q in qids]
    n_clusters = len(set(g))
    if n_clusters < 2:
        raise GateError(
            f"{len(qids)} question(s) in {n_clusters} cluster: an interval needs at least 2 clusters. Fix: more "
            "questions from other evidence, or --cluster none if the questions are independent"
        )
    values = np.asarray(d, dtype=np.float64)
    se = cluster_se(values, cluster_codes(g, values.size, "the gate"))
    return _Paired(qids, d, g, float(values.mean()), se)


def decide(
    baseline: Mapping[str, float],
    candidate: Mapping[str, float],
    *,
    margin: float,
    alpha: float = 0.05,
    groups: Mapping[str, str] | None = None,
) -> Decision:
    """The gate's decision on two mappings question → value (``groups``: question → cluster; a question without one
    is its own cluster; None: every question alone): one metric, both tests at ``alpha``."""
    return decide_metrics({"": (baseline, candidate)}, margin=margin, alpha=alpha, groups=groups)[0]


def decide_metrics(
    pairs: Mapping[str, tuple[Mapping[str, float], Mapping[str, float]]],
    *,
    margin: float,
    alpha: float = 0.05,
    groups: Mapping[str, str] | None = None,
) -> list[Decision]:
    """The gate's decision on several metrics (``metric -> (baseline, candidate)``, each a mapping question →
    value), Holm's step-down over them at family level ``alpha`` for each kind of claim (the module docstring), in
    the order given."""
    check_settings(margin, alpha)
    if not pairs:
        raise GateError("no metric to gate. Fix: give --metric (e.g. --metric ndcg@10)")
    names = list(pairs)
    paired = [_pair(*pairs[m], groups) for m in names]
    p_ni = [x.p_noninferior(margin) for x in paired]
    p_reg = [x.p_regression() for x in paired]
    lv_ni, ni = holm_levels(p_ni, alpha, lambda i, lv: paired[i].bound(lv, -1) > -margin)
    lv_reg, reg = holm_levels(p_reg, alpha, lambda i, lv: paired[i].bound(lv, +1) < 0)
    adj_ni, adj_reg = holm(p_ni), holm(p_reg)
    out = []
    for i, metric in enumerate(names):
        x = paired[i]
        low, high = x.bound(lv_ni[i], -1), x.bound(lv_reg[i], +1)
        outcome = PASS if ni[i] else (REGRESSION if reg[i] else INCONCLUSIVE)
        icc = icc_of(x.d, x.g)
        n_clusters = x.df + 1
        t_sum = float(_scipy_stats().t.ppf(1 - lv_ni[i], x.df) + _scipy_stats().t.ppf(POWER, x.df))
        needed = _questions_needed(x.d, x.g, icc, margin, lv_ni[i]) if outcome == INCONCLUSIVE else None
        warnings: tuple[str, ...] = ()
        if n_clusters < FEW_CLUSTERS:
            warnings = (
                f"only {n_clusters} clusters: the interval has {x.df} degrees of freedom and is wide; "
                "questions from more distinct evidence narrow it more than more questions from the same",
            )
        out.append(
            Decision(
                outcome=outcome,
                exit_code=EXIT_CODES[outcome],
                delta=x.delta,
                low=low,
                high=high,
                alpha=alpha,
                margin=margin,
                n_questions=len(x.qids),
                n_clusters=n_clusters,
                better=low > 0,
                icc=icc,
                mde=t_sum * x.se,
                questions_needed=needed,
                groups=dict(zip(x.qids, x.g, strict=True)),
                warnings=warnings,
                metric=metric,
                level_noninferior=lv_ni[i],
                level_regression=lv_reg[i],
                p_noninferior=p_ni[i],
                p_regression=p_reg[i],
                p_noninferior_holm=float(adj_ni[i]),
                p_regression_holm=float(adj_reg[i]),
            )
        )
    return out


def overall(decisions: Sequence[Decision]) -> str:
    """The build's outcome over the metrics: a regression on any fails it; else an inconclusive one leaves it
    inconclusive; else it passes."""
    outcomes = {d.outcome for d in decisions}
    return REGRESSION if REGRESSION in outcomes else (INCONCLUSIVE if INCONCLUSIVE in outcomes else PASS)


def _questions_needed(d: list[float], g: list[str], icc: float, margin: float, alpha: float) -> int | None:
    """Questions (clusters of today's mean size, the observed ICC) for 80% power to show non-inferiority at
    ``margin`` when the true difference is 0; None when there is no spread to plan from or no margin to show."""
    n = len(d)
    mean = sum(d) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1)) if n > 1 else 0.0
    if sd == 0 or margin == 0:
        return None
    m = n / len(set(g))
    deff = 1 + (m - 1) * icc
    z = float(_scipy_stats().norm.ppf(1 - alpha) + _scipy_stats().norm.ppf(POWER))
    return math.ceil((z * sd / margin) ** 2 * deff)
