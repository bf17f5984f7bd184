"""Prediction-powered inference (PPI++) for a mean: the metric an assessor's labels give on every question, corrected
by its measured error on a random sample of questions humans checked, with an interval that holds for the human
labels' metric.

``y``: the per-question value on the *checked* questions under the human grades; ``yhat``: the same questions under
the assessor's grades; ``yhat_unlabelled``: the *unchecked* questions under the assessor's grades. The estimate is
``mean(yhat_unlabelled)·λ + mean(y - λ·yhat)`` and its interval the normal one with the two parts' standard errors
added in quadrature; λ is PPI++'s power tuning (λ = 1 is plain PPI, λ = 0 the human-only mean), estimated from the
data and clipped to [0, 1], so a useless assessor costs little more than ignoring it. The numbers are
``ppi_py.ppi_mean_pointestimate`` and ``ppi_py.ppi_mean_ci`` (the authors' package, default ``lam=None``) called
as they are; only the cases where those return NaN or fail are decided here:

* ``yhat`` and ``yhat_unlabelled`` take one single value between them (the assessor says the same about every
  question): every λ gives the same estimate, ``mean(y)``, and the same interval, the normal one on ``y`` alone;
  ppi_py's tuned λ is then 0/0 (NaN: all of ``y``, ``yhat`` and ``yhat_unlabelled`` constant) or a ratio of
  rounding errors, so λ = 0 is passed. Nothing varying at all gives the plain mean with a zero-width interval.
* no unchecked question (humans checked them all): the normal interval on ``y`` alone
  (``ppi_py.classical_mean_ci``), the limit of PPI++ as the unchecked share goes to 0.
* fewer than 2 checked questions: refused (one value has no spread to measure the assessor's error with).

PPI is valid only when the checked questions are a random sample of the questions (``ablate.label sample`` draws
them); a hand-picked sample gets no interval from the report.

ppi_py is imported on first use (it imports scikit-learn and numba), inside :func:`warnings.catch_warnings`: its
``ppi`` module silences every warning of the process when imported, and that must not leak into ablate's.

References
----------
* Angelopoulos, A. N., Bates, S., Fannjiang, C., Jordan, M. I. & Zrnic, T. (2023). Prediction-powered inference.
  *Science* 382(6671):669-674.
* Angelopoulos, A. N., Duchi, J. C. & Zrnic, T. (2023). PPI++: Efficient prediction-powered inference.
  arXiv:2311.01453.
* Saad-Falcon, J., Khattab, O., Potts, C. & Zaharia, M. (2024). ARES: An automated evaluation framework for
  retrieval-augmented generation systems. *NAACL 2024* (PPI over an LLM judge's RAG labels).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ablate.evaluation.stats.checks import StatsConfigError, StatsInputError, as_float

#: Fewest checked questions PPI is computed on.
MIN_CHECKED = 2


@dataclass(frozen=True)
class PPIResult:
    """The prediction-powered estimate of a mean and its interval, over ``n_checked`` questions humans checked and
    ``n_unchecked`` the assessor alone labelled."""

    estimate: float
    low: float
    high: float
    n_checked: int
    n_unchecked: int

    def as_dict(self) -> dict[str, float | int]:
        """The fields by name (the report's ``--json`` ``"ppi"`` object)."""
        return {
            "estimate": self.estimate,
            "low": self.low,
            "high": self.high,
            "n_checked": self.n_checked,
            "n_unchecked": self.n_unchecked,
        }


def _ppi_py() -> ModuleType:
    with warnings.catch_warnings():  # ppi_py.ppi calls warnings.simplefilter("ignore") when imported
        import ppi_py

    return ppi_py


def _values(values: ArrayLike, name: str) -> np.ndarray:
    arr = as_float(values, f"ppi_mean({name})", ndim=1)
    if np.isnan(arr).any():
        raise StatsInputError(
            f"ppi_mean({name})",
            f"{int(np.isnan(arr).sum())} undefined (NaN) value(s)",
            "give one defined value per question (a question with no relevant unit scores 0)",
        )
    return arr


def _floats(lo_hi: Any) -> tuple[float, float]:
    lo, hi = lo_hi
    return float(np.asarray(lo).reshape(-1)[0]), float(np.asarray(hi).reshape(-1)[0])


def ppi_mean(y: ArrayLike, yhat: ArrayLike, yhat_unlabelled: ArrayLike, alpha: float = 0.05) -> PPIResult:
    """The PPI++ estimate of the mean of ``y``'s population and its ``1 - alpha`` interval (see the module
    docstring): ``y`` the checked questions under human grades, ``yhat`` the same questions (same order) under the
    assessor's, ``yhat_unlabelled`` the unchecked questions under the assessor's.

    Raises :class:`~ablate.evaluation.stats.StatsInputError` for fewer than 2 checked questions, ``y`` and ``yhat``
    of different lengths, or values that are not finite numbers; :class:`~ablate.evaluation.stats.StatsConfigError`
    for ``alpha`` outside (0, 1)."""
    if isinstance(alpha, bool) or not isinstance(alpha, float | int) or not 0.0 < alpha < 1.0:
        raise StatsConfigError("alpha", alpha, "use an error level strictly between 0 and 1, e.g. 0.05")
    y_, yhat_, yhat_u = _values(y, "y"), _values(yhat, "yhat"), _values(yhat_unlabelled, "yhat_unlabelled")
    if len(y_) != len(yhat_):
        raise StatsInputError(
            "ppi_mean",
            f"{len(y_)} checked values under human grades but {len(yhat_)} under the assessor's",
            "give both for the same checked questions, in the same order",
        )
    n, n_u = len(y_), len(yhat_u)
    if n < MIN_CHECKED:
        raise StatsInputError(
            "ppi_mean",
            f"{n} checked question(s)",
            f"have humans check at least {MIN_CHECKED} questions of a random sample (python -m ablate.label sample)",
        )
    ppi = _ppi_py()
    if n_u == 0:
        lo, hi = _floats(ppi.classical_mean_ci(y_, alpha=alpha))
        return PPIResult(float(y_.mean()), lo, hi, n, 0)
    lam = 0.0 if np.ptp(np.concatenate([yhat_, yhat_u])) == 0 else None
    estimate = float(np.asarray(ppi.ppi_mean_pointestimate(y_, yhat_, yhat_u, lam=lam)).reshape(-1)[0])
    lo, hi = _floats(ppi.ppi_mean_ci(y_, yhat_, yhat_u, alpha=alpha, lam=lam))
    return PPIResult(estimate, lo, hi, n, n_u)
