"""The checks every statistic runs first: its settings (method, confidence, resamples, seed, ``nan_policy``) and its
per-query values (numeric, finite, the right shape, NaN only where allowed), with the two errors they raise."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from ablate.errors import ConfigError, InputError

#: Interval methods accepted by :func:`bootstrap_ci` / :func:`bootstrap_cis` (``method=``).
BOOTSTRAP_METHODS: tuple[str, ...] = ("percentile", "bca")
#: Accepted ``nan_policy`` values.
NAN_POLICIES: tuple[str, ...] = ("raise", "omit")

#: ``(estimate, low, high)``.
Interval = tuple[float, float, float]
NAN3: Interval = (math.nan, math.nan, math.nan)


class StatsInputError(InputError, ValueError):
    """Per-query values that cannot be analysed as given (wrong shape, misaligned pairs, NaN, ...)."""


class StatsConfigError(ConfigError, ValueError):
    """An invalid statistical setting (``method``, ``confidence``, ``n_resamples``, ``nan_policy``)."""


def check_choice(key: str, value: object, options: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in options:
        raise StatsConfigError(key, value, "options: " + ", ".join(options))
    return value


def check_confidence(confidence: float) -> float:
    try:
        c = float(confidence)
    except (TypeError, ValueError):
        c = math.nan
    if not 0.0 < c < 1.0:
        raise StatsConfigError("confidence", confidence, "use a level strictly between 0 and 1, e.g. 0.95")
    return c


def check_resamples(n_resamples: int) -> int:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int | np.integer) or n_resamples < 1:
        raise StatsConfigError(
            "n_resamples", n_resamples, "use a positive integer, e.g. 1000 (CIs) or 10000 (tests)"
        )
    return int(n_resamples)


def check_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise StatsConfigError("seed", seed, "use a non-negative integer so that results are reproducible")
    return int(seed)


def as_float(values: ArrayLike, where: str, ndim: int) -> np.ndarray:
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


def nan_problem(where: str, mask: np.ndarray, labels: Sequence[object] | None = None) -> StatsInputError:
    pos = np.flatnonzero(mask)
    shown = [labels[i] for i in pos[:5]] if labels is not None else pos[:5].tolist()
    return StatsInputError(
        where,
        f"{pos.size} undefined (NaN) per-query value(s), first at {shown}",
        "drop or fill the undefined queries deliberately, or pass nan_policy='omit'",
    )
