"""The regression gate's decision: is a candidate non-inferior to a baseline on per-question values, given that
questions written from the same evidence move together?

Δ is the mean over questions of (candidate − baseline). Its interval is the cluster-robust t interval of that mean
at level 1 − 2·alpha (each side a one-sided test at alpha) with G − 1 degrees of freedom for G clusters: exactly what
``statsmodels`` gives for ``OLS(d, ones).fit(cov_type="cluster", cov_kwds={"groups": g}, use_t=True)
.conf_int(alpha=2 * alpha)`` (its small-sample factor G/(G−1)·(N−1)/(N−1) included; ``tests/test_gate.py`` checks it
to 1e-9). Without groups every question is its own cluster and the interval is the ordinary paired t interval.

The outcome (:data:`PASS`, :data:`REGRESSION`, :data:`INCONCLUSIVE`) and its exit code:

* pass (0) when low > −margin: non-inferior ("better" when low > 0 too);
* regression (1) when low ≤ −margin and high < 0;
* inconclusive (3) otherwise, with the smallest drop this n and G could rule out and the questions that would decide
  it at this margin with 80% power, from the observed spread and within-cluster correlation (design effect
  1 + (m − 1)·ICC, m the mean cluster size).

Pure functions over plain mappings; no MLflow here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from scipy import stats

from ablate.errors import AblateError

PASS, REGRESSION, INCONCLUSIVE = "pass", "regression", "inconclusive"
EXIT_CODES = {PASS: 0, REGRESSION: 1, INCONCLUSIVE: 3}
#: the power a "questions needed" figure plans for (the usual 80%)
POWER = 0.8
#: fewer clusters than this leave a t interval with few degrees of freedom: said beside the verdict
FEW_CLUSTERS = 10


class GateError(AblateError):
    """Two sides that cannot be compared, or settings outside their range."""


@dataclass(frozen=True)
class Decision:
    """What the gate decided, with everything needed to say why (the fields of ``--json``)."""

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

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["warnings"] = list(self.warnings)
        return out


def _check(margin: float, alpha: float) -> None:
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


def cluster_interval(d: list[float], groups: list[str], level: float) -> tuple[float, float, float, float]:
    """(mean, low, high, standard error) of ``d``'s mean: the cluster-robust t interval at ``level`` with G − 1 df."""
    n = len(d)
    mean = sum(d) / n
    sums: dict[str, float] = {}
    for x, g in zip(d, groups, strict=True):
        sums[g] = sums.get(g, 0.0) + (x - mean)
    g_count = len(sums)
    # statsmodels' small-sample factor for one regressor: G/(G-1) * (N-1)/(N-K), K = 1
    var = sum(s * s for s in sums.values()) / (n * n) * g_count / (g_count - 1)
    se = math.sqrt(var)
    t = float(stats.t.ppf(0.5 + level / 2, g_count - 1))
    return mean, mean - t * se, mean + t * se, se


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


def decide(
    baseline: Mapping[str, float],
    candidate: Mapping[str, float],
    *,
    margin: float,
    alpha: float = 0.05,
    groups: Mapping[str, str] | None = None,
) -> Decision:
    """The gate's decision on two mappings question → value (``groups``: question → cluster; a question without one
    is its own cluster; None: every question alone)."""
    _check(margin, alpha)
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
    delta, low, high, se = cluster_interval(d, g, 1 - 2 * alpha)
    if low > -margin:
        outcome = PASS
    elif high < 0:
        outcome = REGRESSION
    else:
        outcome = INCONCLUSIVE
    icc = icc_of(d, g)
    t_sum = float(stats.t.ppf(1 - alpha, n_clusters - 1) + stats.t.ppf(POWER, n_clusters - 1))
    mde = t_sum * se
    needed = _questions_needed(d, g, icc, margin, alpha) if outcome == INCONCLUSIVE else None
    warnings: tuple[str, ...] = ()
    if n_clusters < FEW_CLUSTERS:
        warnings = (
            f"only {n_clusters} clusters: the interval has {n_clusters - 1} degrees of freedom and is wide; "
            "questions from more distinct evidence narrow it more than more questions from the same",
        )
    return Decision(
        outcome=outcome,
        exit_code=EXIT_CODES[outcome],
        delta=delta,
        low=low,
        high=high,
        alpha=alpha,
        margin=margin,
        n_questions=len(qids),
        n_clusters=n_clusters,
        better=low > 0,
        icc=icc,
        mde=mde,
        questions_needed=needed,
        groups=dict(zip(qids, g, strict=True)),
        warnings=warnings,
    )


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
    z = float(stats.norm.ppf(1 - alpha) + stats.norm.ppf(POWER))
    return math.ceil((z * sd / margin) ** 2 * deff)
