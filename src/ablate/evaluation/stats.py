"""Uncertainty over queries: bootstrap confidence intervals, the Wilson interval, paired tests, Holm's correction.

**The unit of resampling is the query.** Every function here takes one value per query (a per-query metric such as
``ndcg@10`` or a 0/1 ``hit@10``) and treats the queries as the sample drawn from the population of questions users
ask. Repeated generations or repeated runs of one query are *not* new samples: 30 questions answered 3 times each are
still 30 observations. Average repeats per query first (``table.groupby(level=0).mean()``); :func:`bootstrap_cis`
refuses a table whose index repeats a query id. Worked check from the spec: 24 correct out of 30 questions gives a
95% Wilson interval of about 63%-90% (:func:`wilson_interval`), far too wide to separate two variants that differ by
a few points.

Conventions shared by all functions:

* Pure functions over 1-D arrays (or pandas objects); inputs are never modified.
* Deterministic: every resampling function takes an integer ``seed`` and draws from
  ``numpy.random.default_rng(seed)``; the same inputs and seed give bit-identical outputs, whatever the chunk size
  used internally to bound memory.
* Paired functions take ``a`` (the variant) and ``b`` (the baseline) aligned by query; ``delta = mean(a - b)``, so a
  positive delta means the variant scores higher. Two :class:`pandas.Series` are aligned by their index (query ids).
* ``nan_policy``: per-query values may be undefined (nDCG of a query with no relevant document). ``"raise"`` (the
  default) refuses NaN so that the caller decides which queries count; ``"omit"`` leaves them out (see each function).
* Bad input raises :class:`StatsInputError` and bad settings :class:`StatsConfigError`; both are
  :class:`ablate.errors.AblateError` subclasses (one-line message with the fix) *and* :class:`ValueError` subclasses.

References
----------
* Efron, B. & Tibshirani, R. J. (1993). *An Introduction to the Bootstrap*. Chapman & Hall. Ch. 13 (percentile
  intervals), ch. 14 (BCa), §16.4 (the one-sample problem: testing by resampling data shifted to the null).
* Efron, B. (1987). Better bootstrap confidence intervals. *JASA* 82(397):171-185.
* Hall, P. & Wilson, S. R. (1991). Two guidelines for bootstrap hypothesis testing. *Biometrics* 47(2):757-762.
* Sakai, T. (2006). Evaluating evaluation metrics based on the bootstrap. *SIGIR 2006*, 525-532.
* Smucker, M. D., Allan, J. & Carterette, B. (2007). A comparison of statistical significance tests for information
  retrieval evaluation. *CIKM 2007*, 623-632.
* Fisher, R. A. (1935). *The Design of Experiments*. Oliver & Boyd (randomization test).
* Phipson, B. & Smyth, G. K. (2010). Permutation p-values should never be zero. *Stat. Appl. Genet. Mol. Biol.*
  9(1):39.
* Wilson, E. B. (1927). Probable inference, the law of succession, and statistical inference. *JASA* 22:209-212.
* Holm, S. (1979). A simple sequentially rejective multiple test procedure. *Scand. J. Statist.* 6(2):65-70.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import special
from scipy import stats as sps

from ablate.cache import Cache, arrays_digest, key_of, source_digest
from ablate.errors import ConfigError, InputError

__all__ = [
    "BOOTSTRAP_METHODS",
    "NAN_POLICIES",
    "PairedResult",
    "StatsConfigError",
    "StatsInputError",
    "bootstrap_ci",
    "bootstrap_cis",
    "holm",
    "paired_bootstrap_test",
    "paired_bootstrap_tests",
    "paired_randomization_test",
    "paired_randomization_tests",
    "paired_t_test",
    "wilson_interval",
]

#: Interval methods accepted by :func:`bootstrap_ci` / :func:`bootstrap_cis` (``method=``).
BOOTSTRAP_METHODS: tuple[str, ...] = ("percentile", "bca")
#: Accepted ``nan_policy`` values.
NAN_POLICIES: tuple[str, ...] = ("raise", "omit")

# At most this many resampled query indices (or sign flips) are held in memory at once.
_CHUNK_ELEMENTS = 1 << 22
# Two test statistics closer than this (relative) are a tie: exact enumeration yields ties (a sign-flip pattern
# and its mirror) that floating-point summation in a different order would otherwise split.
_TIE_RTOL = 1e-12

Interval = tuple[float, float, float]
_NAN3: Interval = (math.nan, math.nan, math.nan)


class StatsInputError(InputError, ValueError):
    """Per-query values that cannot be analysed as given (wrong shape, misaligned pairs, NaN, ...)."""


class StatsConfigError(ConfigError, ValueError):
    """An invalid statistical setting (``method``, ``confidence``, ``n_resamples``, ``nan_policy``)."""


@dataclass(frozen=True)
class PairedResult:
    """Outcome of a paired comparison of a variant ``a`` against a baseline ``b`` over the same ``n`` queries.

    ``delta = mean(a - b)``; ``[ci_low, ci_high]`` is an interval for the mean paired difference; ``p_value`` is
    two-sided (H0: no difference). All fields are NaN (and ``n == 0``) when there is no query to compare.
    """

    mean_a: float
    mean_b: float
    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    n: int


# --------------------------------------------------------------------------------------------------------------
# validation


def _check_choice(key: str, value: object, options: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in options:
        raise StatsConfigError(key, value, "options: " + ", ".join(options))
    return value


def _check_confidence(confidence: float) -> float:
    try:
        c = float(confidence)
    except (TypeError, ValueError):
        c = math.nan
    if not 0.0 < c < 1.0:
        raise StatsConfigError("confidence", confidence, "use a level strictly between 0 and 1, e.g. 0.95")
    return c


def _check_resamples(n_resamples: int) -> int:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int | np.integer) or n_resamples < 1:
        raise StatsConfigError(
            "n_resamples", n_resamples, "use a positive integer, e.g. 1000 (CIs) or 10000 (tests)"
        )
    return int(n_resamples)


def _check_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise StatsConfigError("seed", seed, "use a non-negative integer so that results are reproducible")
    return int(seed)


def _as_float(values: ArrayLike, where: str, ndim: int) -> np.ndarray:
    try:
        arr = np.array(values, dtype=np.float64)  # a copy: callers' arrays are never touched
    except (TypeError, ValueError) as exc:
        raise StatsInputError(where, f"values are not numeric ({exc})", "pass one number per query") from None
    if arr.ndim != ndim:
        shape = "a 1-D array (one value per query)" if ndim == 1 else "a 2-D table (queries x metrics)"
        raise StatsInputError(where, f"got an array of shape {arr.shape}", f"pass {shape}")
    if np.isinf(arr).any():
        raise StatsInputError(where, "contains infinite values", "per-query metric values must be finite")
    return arr


def _nan_problem(where: str, mask: np.ndarray, labels: Sequence[object] | None = None) -> StatsInputError:
    pos = np.flatnonzero(mask)
    shown = [labels[i] for i in pos[:5]] if labels is not None else pos[:5].tolist()
    return StatsInputError(
        where,
        f"{pos.size} undefined (NaN) per-query value(s), first at {shown}",
        "drop or fill the undefined queries deliberately, or pass nan_policy='omit'",
    )


# --------------------------------------------------------------------------------------------------------------
# the resampling engine: one shared draw of query indices, any number of metric columns


def _resample_indices(rng: np.random.Generator, n: int, n_resamples: int) -> Iterator[np.ndarray]:
    """Yield ``(rows, n)`` matrices of query indices, one resample per row, ``n_resamples`` rows in all.

    Each resample draws ``n`` query indices uniformly with replacement (``rng.integers(0, n, (rows, n))``). Chunks
    hold at most ``_CHUNK_ELEMENTS`` indices; chunks consume the generator's stream in order, and every reduction
    below is per row (numpy's pairwise sum along a row, no BLAS), so results do not depend on the chunk size.
    """
    rows = max(1, _CHUNK_ELEMENTS // n)
    done = 0
    while done < n_resamples:
        r = min(rows, n_resamples - done)
        yield rng.integers(0, n, size=(r, n))
        done += r


def _bootstrap_means(table: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """``(n_resamples, m)`` bootstrap means of the columns of ``table`` (``n`` queries x ``m`` metrics).

    Every column is evaluated on the same resampled query indices. Column ``j`` of resample ``b`` is the mean of
    the drawn queries' values, skipping NaN cells (``sum x / #defined``; NaN if none of the drawn cells is defined).
    """
    n, m = table.shape
    defined = ~np.isnan(table)
    filled = np.ascontiguousarray(np.where(defined, table, 0.0).T)  # (m, n): one contiguous row per metric
    weights = np.ascontiguousarray(defined.T.astype(np.float64))
    complete = defined.all(axis=0)
    out = np.empty((n_resamples, m))
    start = 0
    for idx in _resample_indices(np.random.default_rng(seed), n, n_resamples):
        stop = start + idx.shape[0]
        for j in range(m):
            sums = filled[j][idx].sum(axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                out[start:stop, j] = sums / (n if complete[j] else weights[j][idx].sum(axis=1))
        start = stop
    return out


def _percentile_bounds(boot: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = 1.0 - confidence
    boot = boot[~np.isnan(boot)]
    if boot.size == 0:
        return math.nan, math.nan
    low, high = np.quantile(boot, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(low), float(high)


def _bca_bounds(boot: np.ndarray, values: np.ndarray, confidence: float) -> tuple[float, float]:
    """BCa endpoints (Efron 1987; Efron & Tibshirani 1993, §14.3) for the mean of ``values``.

    ``z0 = Phi^-1((#{theta* < theta} + #{theta* = theta} / 2) / B)`` (ties counted half: discrete metrics such as
    Hit@k put many resample means exactly on the estimate, and counting them all on one side would bias ``z0``);
    acceleration from the jackknife, ``a = sum d_i^3 / (6 (sum d_i^2)^(3/2))`` with
    ``d_i = mean_j theta_(j) - theta_(i)``; endpoints are the ``Phi(z0 + (z0 + z) / (1 - a (z0 + z)))`` quantiles
    of ``theta*`` for ``z = Phi^-1(alpha/2)`` and ``Phi^-1(1 - alpha/2)``.
    """
    boot = boot[~np.isnan(boot)]
    b = boot.size
    if b == 0:
        return math.nan, math.nan
    theta = float(values.mean())
    prop = float(np.count_nonzero(boot < theta) + 0.5 * np.count_nonzero(boot == theta)) / b
    prop = min(max(prop, 0.5 / b), 1.0 - 0.5 / b)  # keep z0 finite when every resample falls on one side
    z0 = float(special.ndtri(prop))
    k = values.size
    jack = (values.sum() - values) / (k - 1)  # leave-one-out means
    dev = jack.mean() - jack
    denom = 6.0 * float((dev**2).sum()) ** 1.5
    accel = float((dev**3).sum()) / denom if denom > 0 else 0.0
    alpha = 1.0 - confidence
    levels = []
    for z in (special.ndtri(alpha / 2.0), special.ndtri(1.0 - alpha / 2.0)):
        levels.append(float(special.ndtr(z0 + (z0 + z) / (1.0 - accel * (z0 + z)))))
    low, high = np.quantile(boot, levels)
    return float(low), float(high)


def _bootstrap_columns(
    table: np.ndarray, n_resamples: int, confidence: float, seed: int, method: str
) -> list[Interval]:
    """(mean, low, high) per column, all columns resampled with one shared set of query indices."""
    n, m = table.shape
    if n == 0:
        return [_NAN3] * m
    boot = _bootstrap_means(table, n_resamples, seed)
    out: list[Interval] = []
    for j in range(m):
        col = table[:, j]
        values = col[~np.isnan(col)]
        if values.size == 0:
            out.append(_NAN3)
            continue
        if np.all(values == values[0]):  # one query, or a constant metric: every resample mean is that value
            v = float(values[0])
            out.append((v, v, v))
            continue
        mean = float(values.mean())
        if method == "bca":
            low, high = _bca_bounds(boot[:, j], values, confidence)
        else:
            low, high = _percentile_bounds(boot[:, j], confidence)
        out.append((mean, low, high))
    return out


def bootstrap_ci(
    values: ArrayLike,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    method: str = "percentile",
    nan_policy: str = "raise",
) -> Interval:
    """Mean of per-query ``values`` with a nonparametric bootstrap confidence interval, resampling **queries**.

    Each of the ``B = n_resamples`` resamples draws ``n`` query indices uniformly with replacement and takes the mean
    ``theta*_b`` of the drawn values (Efron & Tibshirani 1993). Returns ``(theta, low, high)`` where ``theta`` is the
    plain sample mean and, for ``confidence = 1 - alpha``:

    * ``method="percentile"`` (the default; E&T ch. 13): ``low, high`` = the ``alpha/2`` and ``1 - alpha/2``
      quantiles of ``theta*`` (``numpy.quantile``, linear interpolation).
    * ``method="bca"`` (Efron 1987; E&T §14.3): bias-corrected and accelerated quantiles, see :func:`_bca_bounds`.
      Better coverage for skewed metrics (RR, nDCG on few queries); needs a larger ``n_resamples`` (>= 2000).

    Degenerate inputs: no value -> ``(nan, nan, nan)``; one value or a constant ``v`` -> ``(v, v, v)``.
    ``nan_policy="omit"`` keeps undefined queries in the draw but leaves them out of each resample's mean (the
    same rule as :func:`bootstrap_cis`, so both give identical intervals for the same column and seed).
    """
    method = _check_choice("method", method, BOOTSTRAP_METHODS)
    nan_policy = _check_choice("nan_policy", nan_policy, NAN_POLICIES)
    confidence = _check_confidence(confidence)
    n_resamples, seed = _check_resamples(n_resamples), _check_seed(seed)
    x = _as_float(values, "bootstrap_ci(values)", ndim=1)
    nan = np.isnan(x)
    if nan_policy == "raise" and nan.any():
        raise _nan_problem("bootstrap_ci(values)", nan)
    return _bootstrap_columns(x[:, None], n_resamples, confidence, seed, method)[0]


def bootstrap_cis(
    table: pd.DataFrame,
    columns: Sequence[Hashable] | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    method: str = "percentile",
    nan_policy: str = "raise",
) -> dict[Hashable, Interval]:
    """:func:`bootstrap_ci` for several metric columns at once, with ONE shared set of resampled queries.

    ``table`` has one row per query (index = query id, which must be unique) and one column per metric. Every
    resample draws one multiset of rows and computes every column's mean on it, so the intervals of different
    metrics (and of differences derived from them) describe the same hypothetical query sets and are coherent.
    ``columns=None`` takes every numeric or boolean column. Returns ``{column: (mean, low, high)}`` in column order;
    for a given seed, each entry equals ``bootstrap_ci(table[column], ...)``.
    """
    method = _check_choice("method", method, BOOTSTRAP_METHODS)
    nan_policy = _check_choice("nan_policy", nan_policy, NAN_POLICIES)
    confidence = _check_confidence(confidence)
    n_resamples, seed = _check_resamples(n_resamples), _check_seed(seed)
    where = "bootstrap_cis(table)"
    if not isinstance(table, pd.DataFrame):
        raise StatsInputError(
            where,
            f"expected a pandas DataFrame, got {type(table).__name__}",
            "pass one row per query and one column per metric",
        )
    if columns is None:
        cols = list(table.select_dtypes(include=["number", "bool"]).columns)
    else:
        cols = [columns] if isinstance(columns, str) else list(columns)
        missing = [c for c in cols if c not in table.columns]
        if missing:
            raise StatsInputError(
                where, f"no column(s) {missing}", f"choose from {list(map(str, table.columns))}"
            )
    if table.index.has_duplicates:
        dup = table.index[table.index.duplicated()].unique()[:5].tolist()
        raise StatsInputError(
            where,
            f"query id(s) {dup} appear more than once (repeated generations are not new queries)",
            "average the repeats per query first, e.g. table.groupby(level=0).mean()",
        )
    try:
        raw = table[cols].to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError) as exc:
        raise StatsInputError(
            where,
            f"column(s) {cols} are not all numeric ({exc})",
            "pass metric columns only (one number per query)",
        ) from None
    matrix = _as_float(raw.reshape(len(table), len(cols)), where, ndim=2)
    if nan_policy == "raise":
        for j, c in enumerate(cols):
            if np.isnan(matrix[:, j]).any():
                raise _nan_problem(f"{where}[{c!r}]", np.isnan(matrix[:, j]), table.index.tolist())
    intervals = _bootstrap_columns(matrix, n_resamples, confidence, seed, method)
    return dict(zip(cols, intervals, strict=True))


# --------------------------------------------------------------------------------------------------------------
# the Wilson interval


def bootstrap_cis_kept(
    table: pd.DataFrame,
    columns: Sequence[str],
    n_resamples: int,
    seed: int,
    cache: Cache | None,
    kind: str,
) -> dict[str, tuple[float, float, float]]:
    """:func:`bootstrap_cis` of ``table``'s ``columns`` (missing values omitted) as plain floats. With a ``cache``,
    kept there by content under ``kind``: the same query ids, values, resamples, seed and statistics code give the
    same intervals, so intervals over unchanged per-query scores are never resampled again."""
    cols = list(columns)

    def compute() -> dict[str, list[float]]:
        got = bootstrap_cis(table, cols, n_resamples=n_resamples, seed=seed, nan_policy="omit")
        return {str(c): [float(x) for x in v] for c, v in got.items()}

    if cache is None:
        raw = compute()
    else:
        matrix = table[cols].to_numpy(dtype=np.float64, na_value=np.nan)
        key = key_of(
            kind,
            source_digest(__file__),
            n_resamples,
            seed,
            cols,
            table.index.tolist(),
            arrays_digest(matrix),
        )
        raw = cache.memo_json(kind, key, compute)
    return {c: (v[0], v[1], v[2]) for c, v in raw.items()}


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> Interval:
    """Wilson (1927) score interval for a proportion: ``(p, low, high)`` with ``p = successes / n``.

    With ``z = Phi^-1(1 - alpha/2)``::

        centre = (p + z^2 / (2n)) / (1 + z^2 / n)
        half   = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / (4 n^2))
        [low, high] = [centre - half, centre + half]   (exactly 0 at k = 0 and 1 at k = n)

    Unlike the Wald interval ``p +- z sqrt(p(1-p)/n)`` it never leaves [0, 1], is not degenerate at 0 or n
    successes, and keeps close to nominal coverage on small samples. Example (the spec's): 24 of 30 questions
    correct -> ``(0.80, 0.627, 0.905)``. ``n = 0`` -> ``(nan, nan, nan)``. Use it for 0/1 per-query outcomes
    (Hit@k, answered correctly); for graded metrics use :func:`bootstrap_ci`.
    """
    confidence = _check_confidence(confidence)
    where = f"wilson_interval(successes={successes!r}, n={n!r})"
    try:
        k_f, n_f = float(successes), float(n)
    except (TypeError, ValueError):
        raise StatsInputError(where, "counts are not numbers", "pass integer counts") from None
    if not (k_f.is_integer() and n_f.is_integer()) or n_f < 0 or not 0 <= k_f <= n_f:
        raise StatsInputError(
            where, "counts must be integers with 0 <= successes <= n", "pass integer counts"
        )
    if n_f == 0:
        return _NAN3
    p = k_f / n_f
    z = float(special.ndtri(1.0 - (1.0 - confidence) / 2.0))
    z2 = z * z
    denom = 1.0 + z2 / n_f
    centre = (p + z2 / (2.0 * n_f)) / denom
    half = z / denom * math.sqrt(p * (1.0 - p) / n_f + z2 / (4.0 * n_f * n_f))
    low = 0.0 if k_f == 0 else max(0.0, centre - half)  # exact at the ends: the formula gives 0 / 1 there,
    high = 1.0 if k_f == n_f else min(1.0, centre + half)  # up to rounding
    return p, low, high


# --------------------------------------------------------------------------------------------------------------
# paired tests


def _paired(a: ArrayLike, b: ArrayLike, where: str, nan_policy: str) -> tuple[np.ndarray, np.ndarray]:
    """Aligned float arrays for a paired test: Series are aligned on query ids, arrays must have equal length.

    With ``nan_policy="omit"`` a query is dropped when either of its two values is NaN.
    """
    if isinstance(a, pd.Series) and isinstance(b, pd.Series):
        for name, s in (("a", a), ("b", b)):
            if s.index.has_duplicates:
                raise StatsInputError(
                    f"{where}({name})", "repeats query ids", "average repeats per query first"
                )
        if not a.index.equals(b.index):
            only_a, only_b = a.index.difference(b.index), b.index.difference(a.index)
            if len(only_a) or len(only_b):
                raise StatsInputError(
                    where,
                    f"the two systems cover different queries ({len(only_a)} only in a, e.g. "
                    f"{only_a[:3].tolist()}; {len(only_b)} only in b, e.g. {only_b[:3].tolist()})",
                    "evaluate both systems on the same query set",
                )
            b = b.reindex(a.index)
    x = _as_float(a, f"{where}(a)", ndim=1)
    y = _as_float(b, f"{where}(b)", ndim=1)
    if x.shape != y.shape:
        raise StatsInputError(
            where,
            f"a has {x.size} values and b has {y.size}",
            "pass one value per query for both systems, aligned on the same query ids",
        )
    nan = np.isnan(x) | np.isnan(y)
    if nan.any():
        if nan_policy == "raise":
            raise _nan_problem(where, nan)
        x, y = x[~nan], y[~nan]
    return x, y


def _ties_or_beyond(stat: np.ndarray, observed: float) -> int:
    """How many ``|stat|`` are at least ``|observed|`` (relative tolerance :data:`_TIE_RTOL` for ties)."""
    obs = abs(observed)
    return int(np.count_nonzero(np.abs(stat) >= obs - _TIE_RTOL * obs))


def _empty_result() -> PairedResult:
    return PairedResult(math.nan, math.nan, math.nan, math.nan, math.nan, math.nan, 0)


def _check_paired_settings(
    n_resamples: int, confidence: float, seed: int, nan_policy: str
) -> tuple[int, float, int]:
    _check_choice("nan_policy", nan_policy, NAN_POLICIES)
    return _check_resamples(n_resamples), _check_confidence(confidence), _check_seed(seed)


def paired_bootstrap_test(
    a: ArrayLike,
    b: ArrayLike,
    n_resamples: int = 10000,
    seed: int = 0,
    confidence: float = 0.95,
    nan_policy: str = "raise",
) -> PairedResult:
    """Paired bootstrap test over queries, two-sided, by the shifted-null method.

    The paired problem is the one-sample problem on the per-query differences ``d_i = a_i - b_i`` (Efron &
    Tibshirani 1993, §16.4; as used in IR by Sakai 2006 and Smucker et al. 2007), with a studentized statistic as
    Hall & Wilson (1991) advise:

    1. ``t = mean(d) / (sd(d) / sqrt(n))`` (``sd`` with ``n - 1``).
    2. Shift the data so that H0 (``E[d] = 0``) holds exactly: ``w_i = d_i - mean(d)``.
    3. Draw ``B = n_resamples`` resamples of ``n`` queries with replacement; for each compute
       ``t*_b = mean(w*) / (sd(w*) / sqrt(n))`` on the shifted values (a resample whose values are all equal has
       ``sd = 0``; its ``t*`` is taken as 0 if its mean is 0 and as infinite otherwise).
    4. ``p = (1 + #{b : |t*_b| >= |t|}) / (B + 1)``: the Monte-Carlo ``+1`` form (Phipson & Smyth 2010), which
       counts the observed data as one resample and so never reports ``p = 0`` from finitely many resamples.

    ``ci_low, ci_high``: percentile interval of ``mean(d*)`` over the *same* resamples, unshifted.
    Edge cases: all ``d_i = 0`` -> ``delta = 0``, ``p = 1``; a constant nonzero shift (``n >= 2``) ->
    ``p = 1 / (B + 1)``; a single nonzero pair -> ``p = nan``; no pair -> all NaN.
    """
    return paired_bootstrap_tests([(a, b)], n_resamples, seed, confidence, nan_policy)[0]


def paired_bootstrap_tests(
    pairs: Sequence[tuple[ArrayLike, ArrayLike]],
    n_resamples: int = 10000,
    seed: int = 0,
    confidence: float = 0.95,
    nan_policy: str = "raise",
) -> list[PairedResult]:
    """:func:`paired_bootstrap_test` for many ``(a, b)`` pairs at once: entry ``i`` equals
    ``paired_bootstrap_test(*pairs[i], ...)`` exactly. Every test starts from the same ``seed``, so pairs over the
    same number of queries draw the same resampled query indices: they are drawn once and applied to every pair."""
    n_resamples, confidence, seed = _check_paired_settings(n_resamples, confidence, seed, nan_policy)
    out: list[PairedResult | None] = [None] * len(pairs)
    groups: dict[int, list[tuple[int, np.ndarray, float, float]]] = {}
    for i, (a, b) in enumerate(pairs):
        x, y = _paired(a, b, "paired_bootstrap_test", nan_policy)
        n = x.size
        if n == 0:
            out[i] = _empty_result()
            continue
        d = x - y
        mean_a, mean_b, delta = float(x.mean()), float(y.mean()), float(d.mean())
        if np.all(d == d[0]):
            c = float(d[0])
            p = 1.0 if c == 0.0 else (1.0 / (n_resamples + 1) if n >= 2 else math.nan)
            out[i] = PairedResult(mean_a, mean_b, c, c, c, p, n)
            continue
        groups.setdefault(n, []).append((i, d, mean_a, mean_b))
    for n, items in groups.items():
        ws, t_obs, scales, deltas = [], [], [], []
        for _, d, _, _ in items:
            delta = float(d.mean())
            w = d - delta
            ws.append(w)
            deltas.append(delta)
            t_obs.append(delta / (d.std(ddof=1) / math.sqrt(n)))
            scales.append(float((w**2).max()))
        means = np.empty((len(items), n_resamples))
        counts = [0] * len(items)
        start = 0
        for idx in _resample_indices(np.random.default_rng(seed), n, n_resamples):
            stop = start + idx.shape[0]
            for j, w in enumerate(ws):
                drawn = w[idx]
                mean_w = drawn.sum(axis=1) / n
                var_w = np.maximum((drawn * drawn).sum(axis=1) / n - mean_w**2, 0.0) * n / (n - 1)
                flat = var_w <= 1e-12 * scales[j]  # all drawn values equal (up to rounding)
                with np.errstate(divide="ignore", invalid="ignore"):
                    t_star = np.where(
                        flat,
                        np.where(np.abs(mean_w) <= 1e-9 * math.sqrt(scales[j]), 0.0, np.inf),
                        mean_w / np.sqrt(var_w / n),
                    )
                counts[j] += _ties_or_beyond(t_star, t_obs[j])
                means[j, start:stop] = mean_w + deltas[j]
            start = stop
        for j, (i, _, mean_a, mean_b) in enumerate(items):
            low, high = _percentile_bounds(means[j], confidence)
            out[i] = PairedResult(
                mean_a, mean_b, deltas[j], low, high, (counts[j] + 1) / (n_resamples + 1), n
            )
    return [r if r is not None else _empty_result() for r in out]


def _sign_matrix(n: int, codes: np.ndarray) -> np.ndarray:
    """The ``(len(codes), n)`` matrix of signs (+1, or -1 where bit ``i`` of the code is set: flip query ``i``)."""
    bits = (codes[:, None] >> np.arange(n, dtype=np.int64)) & 1
    return (1 - 2 * bits).astype(np.float64)


def _sign_flip_means(d: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """``mean(s * d)`` for the sign patterns whose bit ``i`` (1 = flip query ``i``) is encoded in ``codes``."""
    return (_sign_matrix(d.size, codes) @ d) / d.size


def paired_randomization_test(
    a: ArrayLike,
    b: ArrayLike,
    n_resamples: int = 10000,
    seed: int = 0,
    confidence: float = 0.95,
    nan_policy: str = "raise",
) -> PairedResult:
    """Fisher's (1935) paired randomization test (sign-flip permutation test) over queries, two-sided.

    H0: for every query the labels "variant" and "baseline" are exchangeable, so each difference ``d_i = a_i - b_i``
    is as likely to have had the opposite sign. Statistic ``T = mean(d)``; under H0 its distribution is that of
    ``T_s = mean(s_i d_i)`` over sign vectors ``s`` in ``{-1, +1}^n`` (swapping a query's two values flips
    ``d_i``; Smucker et al. 2007 recommend this test for IR).

    * Exact, when ``2^n <= n_resamples``: enumerate all ``2^n`` sign vectors (the identity included) and report
      ``p = #{s : |T_s| >= |T|} / 2^n``.
    * Monte Carlo otherwise: ``B = n_resamples`` random sign vectors (each sign +-1 with probability 1/2) and
      ``p = (1 + #{b : |T_b| >= |T|}) / (B + 1)`` (the observed labelling counts as one draw; Phipson & Smyth
      2010), so that ``p`` is never 0 and the test is exact in size for any ``B``.

    Ties: ``|T_s|`` within a relative ``1e-12`` of ``|T|`` count as ``>=``. This matches
    ``scipy.stats.permutation_test(..., permutation_type="samples")``, which we use as a differential reference.
    The randomization test yields no interval of its own: ``ci_low, ci_high`` are
    ``bootstrap_ci(a - b, n_resamples, confidence, seed)`` (percentile bootstrap over queries).
    Edge cases: all ``d_i = 0`` -> ``p = 1``; no pair -> all NaN.
    """
    return paired_randomization_tests([(a, b)], n_resamples, seed, confidence, nan_policy)[0]


def paired_randomization_tests(
    pairs: Sequence[tuple[ArrayLike, ArrayLike]],
    n_resamples: int = 10000,
    seed: int = 0,
    confidence: float = 0.95,
    nan_policy: str = "raise",
) -> list[PairedResult]:
    """:func:`paired_randomization_test` for many ``(a, b)`` pairs at once: entry ``i`` equals
    ``paired_randomization_test(*pairs[i], ...)`` exactly. Every test starts from the same ``seed``, so pairs over
    the same number of queries draw the same sign vectors and the same resampled queries (for the interval): they are
    drawn once and applied to every pair (the differences of a group form one queries x pairs table)."""
    n_resamples, confidence, seed = _check_paired_settings(n_resamples, confidence, seed, nan_policy)
    out: list[PairedResult | None] = [None] * len(pairs)
    groups: dict[int, list[tuple[int, np.ndarray, float, float]]] = {}
    for i, (a, b) in enumerate(pairs):
        x, y = _paired(a, b, "paired_randomization_test", nan_policy)
        if x.size == 0:
            out[i] = _empty_result()
            continue
        groups.setdefault(x.size, []).append((i, x - y, float(x.mean()), float(y.mean())))
    for n, items in groups.items():
        table = np.column_stack([d for _, d, _, _ in items])
        intervals = _bootstrap_columns(table, n_resamples, confidence, seed, "percentile")
        deltas = [float(d.mean()) for _, d, _, _ in items]
        live = [j for j, (_, d, _, _) in enumerate(items) if not np.all(d == 0.0)]
        counts = dict.fromkeys(live, 0)
        rows = max(1, _CHUNK_ELEMENTS // n)
        exact = n < 62 and (1 << n) <= n_resamples
        if live and exact:
            total = 1 << n
            for start in range(0, total, rows):
                signs = _sign_matrix(n, np.arange(start, min(start + rows, total), dtype=np.int64))
                for j in live:
                    counts[j] += _ties_or_beyond((signs @ items[j][1]) / n, deltas[j])
        elif live:
            rng = np.random.default_rng(seed)
            done = 0
            while done < n_resamples:
                r = min(rows, n_resamples - done)
                signs = rng.integers(0, 2, size=(r, n)).astype(np.float64) * 2.0 - 1.0
                for j in live:
                    counts[j] += _ties_or_beyond(signs @ items[j][1] / n, deltas[j])
                done += r
        for j, (i, _, mean_a, mean_b) in enumerate(items):
            _, low, high = intervals[j]
            if j not in counts:  # all d_i = 0
                p = 1.0
            else:
                p = counts[j] / (1 << n) if exact else (counts[j] + 1) / (n_resamples + 1)
            out[i] = PairedResult(mean_a, mean_b, deltas[j], low, high, float(p), n)
    return [r if r is not None else _empty_result() for r in out]


def paired_t_test(
    a: ArrayLike, b: ArrayLike, confidence: float = 0.95, nan_policy: str = "raise"
) -> PairedResult:
    """Student's paired t-test (two-sided), a thin wrapper over :func:`scipy.stats.ttest_rel`, for reference.

    ``t = mean(d) / (sd(d) / sqrt(n))`` with ``n - 1`` degrees of freedom; the interval is
    ``mean(d) +- t_{1-alpha/2, n-1} sd(d) / sqrt(n)`` (``TtestResult.confidence_interval``). Wrapper choices
    where scipy returns NaN or rounding noise: all ``d_i = 0`` -> ``p = 1``, interval ``[0, 0]``; a constant
    nonzero shift -> ``p = 0``, interval ``[d, d]``; fewer than 2 pairs -> ``p`` and interval NaN.
    """
    _check_choice("nan_policy", nan_policy, NAN_POLICIES)
    confidence = _check_confidence(confidence)
    x, y = _paired(a, b, "paired_t_test", nan_policy)
    n = x.size
    if n == 0:
        return _empty_result()
    d = x - y
    mean_a, mean_b, delta = float(x.mean()), float(y.mean()), float(d.mean())
    if np.all(d == d[0]):
        c = float(d[0])
        if n < 2 and c != 0.0:
            return PairedResult(mean_a, mean_b, c, math.nan, math.nan, math.nan, n)
        return PairedResult(mean_a, mean_b, c, c, c, 1.0 if c == 0.0 else 0.0, n)
    res = sps.ttest_rel(x, y)
    ci = res.confidence_interval(confidence_level=confidence)
    return PairedResult(mean_a, mean_b, delta, float(ci.low), float(ci.high), float(res.pvalue), n)


# --------------------------------------------------------------------------------------------------------------
# multiple testing


def holm(pvalues: ArrayLike) -> np.ndarray:
    """Holm (1979) step-down adjusted p-values, controlling the family-wise error rate.

    With the ``m`` defined p-values sorted ascending, ``p_(1) <= ... <= p_(m)``::

        p~_(i) = min(1, max_{j <= i} (m - j + 1) p_(j))

    so adjusted values are monotone in the raw ones, never below them, capped at 1, and tied raw p-values get the
    same adjusted value. Reject H_(i) at level ``alpha`` iff ``p~_(i) <= alpha``. NaN entries (tests that could
    not be run) stay NaN and are not counted in the family size ``m``. Returns a new float array of the input's
    shape, in the input's order.
    """
    p = _as_float(pvalues, "holm(pvalues)", ndim=np.ndim(pvalues))
    flat = p.ravel()
    defined = ~np.isnan(flat)
    vals = flat[defined]
    if ((vals < 0.0) | (vals > 1.0)).any():
        raise StatsInputError(
            "holm(pvalues)",
            f"p-values outside [0, 1]: {vals[(vals < 0) | (vals > 1)][:5]}",
            "pass raw p-values",
        )
    m = vals.size
    order = np.argsort(vals, kind="stable")
    stepped = np.maximum.accumulate((m - np.arange(m)) * vals[order])
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(stepped, 1.0)
    out = np.full(flat.shape, np.nan)
    out[defined] = adjusted
    return out.reshape(p.shape)
