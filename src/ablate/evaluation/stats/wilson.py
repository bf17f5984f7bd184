"""The Wilson (1927) score interval for a proportion: 0/1 per-query outcomes (Hit@k, answered correctly)."""

from __future__ import annotations

import math

from scipy import special

from ablate.evaluation.stats.checks import NAN3, Interval, StatsInputError, check_confidence


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> Interval:
    """Wilson (1927) score interval for a proportion: ``(p, low, high)`` with ``p = successes / n``.

    With ``z = Phi^-1(1 - alpha/2)``::

        centre = (p + z^2 / (2n)) / (1 + z^2 / n)
        half   = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / (4 n^2))
        [low, high] = [centre - half, centre + half]   (exactly 0 at k = 0 and 1 at k = n)

    Unlike the Wald interval ``p +- z sqrt(p(1-p)/n)`` it never leaves [0, 1], is not degenerate at 0 or n
    successes, and keeps close to nominal coverage on small samples. Example: 24 of 30 -> ``(0.80, 0.627, 0.905)``. ``n = 0`` -> ``(nan, nan, nan)``. Use it for 0/1 per-query outcomes
    (Hit@k, answered correctly); for graded metrics use :func:`bootstrap_ci`.
    """
    confidence = check_confidence(confidence)
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
        return NAN3
    p = k_f / n_f
    z = float(special.ndtri(1.0 - (1.0 - confidence) / 2.0))
    z2 = z * z
    denom = 1.0 + z2 / n_f
    centre = (p + z2 / (2.0 * n_f)) / denom
    half = z / denom * math.sqrt(p * (1.0 - p) / n_f + z2 / (4.0 * n_f * n_f))
    low = 0.0 if k_f == 0 else max(0.0, centre - half)  # exact at the ends: the formula gives 0 / 1 there,
    high = 1.0 if k_f == n_f else min(1.0, centre + half)  # up to rounding
    return p, low, high
