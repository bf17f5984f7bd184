"""Statistical power of a paired comparison over questions: what a study of ``n`` questions can detect (the minimum
detectable effect), how many questions detect a given effect, and a paired-bootstrap check of both.

Every function takes the pilot's per-question paired differences ``diffs = a - b`` (one per question: the variant's
score minus the baseline's on the same question) and uses the paired t approximation: with ``sd = std(diffs,
ddof=1)`` the standardised effect is ``d = delta / sd``, and a study of ``n`` questions rejects ``mean(diffs) = 0``
with the power of a one-sample t test of ``d`` on ``n - 1`` degrees of freedom (Cohen 1988, ch. 2; Sakai 2016,
topic-set-size design). The t power is statsmodels' :class:`~statsmodels.stats.power.TTestPower` (a noncentral t).

When the pilot cannot say (fewer than 2 differences, or all differences equal so that ``sd = 0``) the answer is NaN
and :func:`undetermined` says why in words a caller can print.

Clustered questions: ``deff`` (the design effect ``1 + (m - 1) * ICC`` of clusters of mean size ``m`` whose
differences correlate by ICC; Kish 1965) inflates the variance of the mean by ``deff``: the MDE grows by
``sqrt(deff)``, the questions needed by ``deff`` (the same power as ``n / deff`` independent questions), and
:func:`simulated_power` with ``groups`` draws whole clusters and tests each study with the cluster-robust t.

References
----------
* Cohen, J. (1988). *Statistical Power Analysis for the Behavioral Sciences*, 2nd ed. Erlbaum.
* Sakai, T. (2016). Topic set size design. *Information Retrieval Journal* 19(3):256-283.
* Kish, L. (1965). *Survey Sampling*. Wiley (the design effect).
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from ablate.evaluation.stats.checks import StatsConfigError, StatsInputError, as_float, check_seed
from ablate.evaluation.stats.cluster import cluster_codes, cluster_sums, n_clusters
from ablate.evaluation.stats.wilson import wilson_interval

if TYPE_CHECKING:
    from statsmodels.stats.power import TTestPower

#: At most this many resampled differences are held at once by :func:`simulated_power`.
_CELLS = 4_000_000
#: A solved sample size within this of a whole number is that number (solve_power's root carries rounding noise:
#: 12.000000001 questions plan 12, not 13).
_CEIL_SLACK = 1e-9
#: Accepted ``alternative`` values (as statsmodels names them).
ALTERNATIVES: tuple[str, ...] = ("two-sided", "larger", "smaller")


def _ttest_power() -> TTestPower:
    """statsmodels' t power, imported when asked for: statsmodels and scipy.stats take about a second to import, which
    every command that imports this package (a run, a label command) would otherwise pay at its start."""
    from statsmodels.stats.power import TTestPower

    return TTestPower()


def _diffs(diffs: ArrayLike, where: str) -> np.ndarray:
    d = as_float(diffs, where, ndim=1)
    if np.isnan(d).any():
        raise StatsInputError(
            where, "contains NaN differences", "drop the questions either run leaves unscored"
        )
    return d


def _check_deff(deff: float) -> float:
    if not (math.isfinite(float(deff)) and float(deff) >= 1.0):
        raise StatsConfigError("deff", deff, "use a design effect >= 1 (1: independent questions)")
    return float(deff)


def _check(alpha: float, power: float | None = None, alternative: str = "two-sided") -> None:
    if not 0.0 < float(alpha) < 1.0:
        raise StatsConfigError("alpha", alpha, "use a level strictly between 0 and 1, e.g. 0.05")
    if power is not None and not 0.0 < float(power) < 1.0:
        raise StatsConfigError("power", power, "use a power strictly between 0 and 1, e.g. 0.8")
    if alternative not in ALTERNATIVES:
        raise StatsConfigError("alternative", alternative, "options: " + ", ".join(ALTERNATIVES))


def sd_diff(diffs: ArrayLike) -> float:
    """The sample standard deviation (``ddof=1``) of the paired differences; NaN for fewer than 2."""
    d = _diffs(diffs, "sd_diff(diffs)")
    return float(np.std(d, ddof=1)) if d.size >= 2 else math.nan


def undetermined(diffs: ArrayLike, n: int | None = None) -> str | None:
    """Why the power of these differences cannot be computed (a phrase), or None when it can."""
    d = _diffs(diffs, "undetermined(diffs)")
    if d.size < 2:
        return f"{d.size} paired question(s): at least 2 are needed for a spread"
    if n is not None and n < 2:
        return f"n = {n}: a paired t test needs at least 2 questions"
    if not np.ptp(d) > 0:  # all equal: np.std can be ~1e-17 from rounding, not a spread
        return "every question's difference is the same (spread 0): the t approximation does not apply"
    return None


def mde(
    diffs: ArrayLike,
    n: int | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
    alternative: str = "two-sided",
    deff: float = 1.0,
) -> float:
    """The minimum detectable effect: the smallest true mean difference that a paired t test over ``n`` questions
    (default: ``len(diffs)``) rejects at level ``alpha`` with probability ``power``, in the metric's units
    (``d * sd_diff``), times ``sqrt(deff)`` for clustered questions. NaN when :func:`undetermined` gives a reason."""
    _check(alpha, power, alternative)
    deff = _check_deff(deff)
    d = _diffs(diffs, "mde(diffs)")
    n = int(d.size if n is None else n)
    if undetermined(d, n) is not None:
        return math.nan
    es = _ttest_power().solve_power(
        effect_size=None, nobs=n, alpha=alpha, power=power, alternative=alternative
    )
    return float(np.asarray(es).item()) * float(np.std(d, ddof=1)) * math.sqrt(deff)


def t_power(
    diffs: ArrayLike,
    delta: float,
    n: int,
    alpha: float = 0.05,
    alternative: str = "two-sided",
    deff: float = 1.0,
) -> float:
    """Analytic power of the paired t test over ``n`` questions for a true mean difference ``delta``, with the
    pilot's spread inflated by ``sqrt(deff)`` (NaN when :func:`undetermined` gives a reason)."""
    _check(alpha, None, alternative)
    deff = _check_deff(deff)
    d = _diffs(diffs, "t_power(diffs)")
    if undetermined(d, n) is not None:
        return math.nan
    es = float(delta) / (float(np.std(d, ddof=1)) * math.sqrt(deff))
    return float(_ttest_power().power(effect_size=es, nobs=n, alpha=alpha, alternative=alternative))


def n_needed(
    diffs: ArrayLike,
    delta: float,
    alpha: float = 0.05,
    power: float = 0.8,
    alternative: str = "two-sided",
    deff: float = 1.0,
) -> float:
    """The smallest number of questions whose paired t test detects a true mean difference ``delta`` with
    probability ``power`` at level ``alpha``: ``ceil`` of statsmodels' ``solve_power(nobs=None)`` with the pilot's
    spread, times ``deff`` for clustered questions before rounding up. A float so that it can be NaN
    (:func:`undetermined` says why); integer-valued otherwise."""
    _check(alpha, power, alternative)
    deff = _check_deff(deff)
    if not float(delta) > 0:
        raise StatsConfigError("delta", delta, "use a positive effect in the metric's units, e.g. 0.03")
    d = _diffs(diffs, "n_needed(diffs)")
    if undetermined(d) is not None:
        return math.nan
    es = float(delta) / float(np.std(d, ddof=1))
    n = _ttest_power().solve_power(
        effect_size=es, nobs=None, alpha=alpha, power=power, alternative=alternative
    )
    # the t test needs n >= 2; solve_power's root is continuous, the design takes the next whole question
    return float(max(2, math.ceil(float(np.asarray(n).item()) * deff - _CEIL_SLACK)))


def simulated_power(
    diffs: ArrayLike,
    delta: float,
    n: int,
    alpha: float = 0.05,
    n_sims: int = 4000,
    seed: int = 0,
    groups: ArrayLike | None = None,
) -> tuple[float, float]:
    """Power by a paired bootstrap: draw ``n`` questions' differences with replacement from the pilot's centred
    differences shifted by ``delta`` (a population whose true effect is ``delta`` and whose spread is the pilot's),
    run the two-sided paired t test (:func:`scipy.stats.ttest_1samp`) on each of ``n_sims`` studies, and return the
    share rejected at ``alpha`` with its Monte-Carlo standard error ``sqrt(p (1 - p) / n_sims)``. NaN, NaN when
    :func:`undetermined` gives a reason.

    ``groups`` (one cluster label per difference): when a cluster holds two or more questions, each study draws
    ``round(n / m)`` whole clusters (``m`` the pilot's mean cluster size, at least 2 clusters) and is tested with the
    cluster-robust t on G − 1 degrees of freedom (:func:`_clustered_rejections`)."""
    from scipy import stats as sps  # here, not at the top: see _ttest_power

    _check(alpha)
    seed = check_seed(seed)
    if isinstance(n_sims, bool) or not isinstance(n_sims, int | np.integer) or n_sims < 1:
        raise StatsConfigError("n_sims", n_sims, "use a positive integer, e.g. 4000")
    d = _diffs(diffs, "simulated_power(diffs)")
    if undetermined(d, n) is not None:
        return math.nan, math.nan
    pop = d - d.mean() + float(delta)
    rng = np.random.default_rng(seed)
    if groups is not None:
        codes = cluster_codes(np.asarray(groups).tolist(), d.size, "simulated_power(groups)")
        if n_clusters(codes) < d.size:
            share = _clustered_rejections(pop, codes, int(n), alpha, int(n_sims), rng) / int(n_sims)
            return share, math.sqrt(share * (1.0 - share) / int(n_sims))
    chunk = max(1, _CELLS // max(int(n), 1))  # studies drawn at once: memory bounded, the stream fixed by n
    rejected = 0
    for start in range(0, int(n_sims), chunk):
        draws = pop[rng.integers(0, pop.size, size=(min(chunk, int(n_sims) - start), int(n)))]
        # a draw of one repeated value has no spread: NaN, not rejected (scipy warns of it; the count says it)
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            p = sps.ttest_1samp(draws, 0.0, axis=1).pvalue
        rejected += int(np.count_nonzero(np.nan_to_num(p, nan=1.0) <= alpha))
    share = rejected / int(n_sims)
    return share, math.sqrt(share * (1.0 - share) / int(n_sims))


def _clustered_rejections(
    pop: np.ndarray, codes: np.ndarray, n: int, alpha: float, n_sims: int, rng: np.random.Generator
) -> int:
    """How many of ``n_sims`` studies of ``round(n / m)`` clusters drawn from ``pop``'s reject mean 0 at ``alpha``
    by the two-sided cluster-robust t test (CR1 standard error, G − 1 df); a study with no spread is not rejected."""
    from scipy import stats as sps

    g = n_clusters(codes)
    drawn_g = max(2, round(n * g / pop.size))
    sums, sizes = cluster_sums(pop, codes), np.bincount(codes, minlength=g).astype(np.float64)
    chunk = max(1, _CELLS // drawn_g)
    rejected = 0
    for start in range(0, n_sims, chunk):
        idx = rng.integers(0, g, size=(min(chunk, n_sims - start), drawn_g))
        w, m = sums[idx], sizes[idx]
        total = m.sum(axis=1)
        mean = w.sum(axis=1) / total
        dev = w - m * mean[:, None]
        se = np.sqrt(drawn_g / (drawn_g - 1) * (dev * dev).sum(axis=1)) / total
        with np.errstate(invalid="ignore", divide="ignore"):
            p = 2.0 * sps.t.sf(np.abs(mean / se), drawn_g - 1)
        rejected += int(np.count_nonzero(np.nan_to_num(p, nan=1.0) <= alpha))
    return rejected


def wilson_width(p_hat: float, n: int, confidence: float = 0.95) -> float:
    """Width of the Wilson interval of a proportion ``p_hat`` observed on ``n`` questions (the count rounded to a
    whole question): how precisely ``n`` questions pin down a hit rate or answer correctness."""
    if not 0.0 <= float(p_hat) <= 1.0:
        raise StatsInputError(f"wilson_width(p_hat={p_hat!r})", "not a proportion", "pass a value in [0, 1]")
    _, low, high = wilson_interval(round(float(p_hat) * int(n)), int(n), confidence)
    return high - low
