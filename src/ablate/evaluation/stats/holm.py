"""Multiple comparisons: Holm's (1979) step-down adjustment of p-values (family-wise error rate)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from ablate.evaluation.stats.checks import StatsInputError, as_float


def holm(pvalues: ArrayLike) -> np.ndarray:
    """Holm (1979) step-down adjusted p-values, controlling the family-wise error rate.

    With the ``m`` defined p-values sorted ascending, ``p_(1) <= ... <= p_(m)``::

        p~_(i) = min(1, max_{j <= i} (m - j + 1) p_(j))

    so adjusted values are monotone in the raw ones, never below them, capped at 1, and tied raw p-values get the
    same adjusted value. Reject H_(i) at level ``alpha`` iff ``p~_(i) <= alpha``. NaN entries (tests that could
    not be run) stay NaN and are not counted in the family size ``m``. Returns a new float array of the input's
    shape, in the input's order.
    """
    return adjust_defined(
        pvalues, "holm(pvalues)", lambda ordered, m: np.maximum.accumulate((m - np.arange(m)) * ordered)
    )


def adjust_defined(
    pvalues: ArrayLike, where: str, step: Callable[[np.ndarray, int], np.ndarray]
) -> np.ndarray:
    """What every step-wise adjustment shares: the defined p-values (checked in [0, 1]) sorted ascending are passed
    to ``step(sorted, m)``, capped at 1 and put back in the input's order and shape; NaN entries stay NaN and are
    not counted in ``m``."""
    p = as_float(pvalues, where, ndim=np.ndim(pvalues))
    flat = p.ravel()
    defined = ~np.isnan(flat)
    vals = flat[defined]
    if ((vals < 0.0) | (vals > 1.0)).any():
        raise StatsInputError(
            where, f"p-values outside [0, 1]: {vals[(vals < 0) | (vals > 1)][:5]}", "pass raw p-values"
        )
    m = vals.size
    order = np.argsort(vals, kind="stable")
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(step(vals[order], m), 1.0)
    out = np.full(flat.shape, np.nan)
    out[defined] = adjusted
    return out.reshape(p.shape)
