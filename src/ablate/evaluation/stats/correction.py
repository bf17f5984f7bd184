"""Corrections for a family of comparisons: Holm (family-wise error rate, the default), Benjamini-Hochberg (false
discovery rate) or none, chosen by name (``stats.correction``, ``--correction``)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ablate.evaluation.stats.checks import as_float, check_choice
from ablate.evaluation.stats.holm import adjust_defined, holm

#: Accepted correction names: ``holm`` (Holm 1979), ``bh`` (Benjamini & Hochberg 1995), ``none`` (raw p-values).
CORRECTIONS: tuple[str, ...] = ("holm", "bh", "none")
#: How a report names each correction beside its p-values.
CORRECTION_NAMES: dict[str, str] = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "uncorrected"}


def benjamini_hochberg(pvalues: ArrayLike) -> np.ndarray:
    """Benjamini-Hochberg (1995) step-up adjusted p-values, controlling the false discovery rate.

    With the ``m`` defined p-values sorted ascending::

        p~_(i) = min(1, min_{j >= i} m p_(j) / j)

    NaN entries stay NaN and are not counted in ``m`` (as :func:`holm`). Returns a new float array of the input's
    shape, in the input's order.
    """
    return adjust_defined(
        pvalues,
        "benjamini_hochberg(pvalues)",
        lambda ordered, m: np.minimum.accumulate((ordered * m / np.arange(1, m + 1))[::-1])[::-1],
    )


def adjust(pvalues: ArrayLike, method: str = "holm") -> np.ndarray:
    """``pvalues`` adjusted by ``method`` (:data:`CORRECTIONS`); ``none`` returns a float copy. NaN stays NaN."""
    method = check_choice("stats.correction", method, CORRECTIONS)
    if method == "holm":
        return holm(pvalues)
    if method == "bh":
        return benjamini_hochberg(pvalues)
    return as_float(pvalues, "adjust(pvalues)", ndim=np.ndim(pvalues))
