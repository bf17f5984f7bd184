"""When a run's top K lies mostly outside the labels: the caution the pool command and the report both print.

An unjudged result is *unknown*, neither relevant nor not. A run whose first K units the labels mostly do not judge
is scored mostly on guesses (``eval.unjudged`` counts them as not relevant): a gain or a loss measured for it on
those labels cannot be trusted until its unjudged results are judged (``python -m ablate.label pool``, then
``serve`` or ``judge``, ``commit``, and ``python -m ablate.report --labels NAME``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: A run whose top K the labels judge for less than this share (over its questions) gets the warning: most of what
#: it is scored on is unknown, so the labels cannot tell its gain or loss apart from what they never looked at.
#: One half is where judged results stop being the majority of the ranking the metric reads.
MIN_JUDGED_SHARE = 0.5

#: How many runs the one summary line names (the report's Labels table lists every run's share).
SHOWN_RUNS = 6


def mostly_unjudged(share: float) -> bool:
    """Whether a judged share is under :data:`MIN_JUDGED_SHARE` (an undefined share is not)."""
    return not math.isnan(share) and share < MIN_JUDGED_SHARE


def warning(run: str, share: float, k: int, then: str) -> str:
    """The one-line warning for ``run`` whose top ``k`` the labels judge for ``share``; ``then``: what to do."""
    return (
        f"{run}: only {share:.0%} of its top {k} is judged by these labels (under {MIN_JUDGED_SHARE:.0%}): neither a "
        f"gain nor a loss measured on them can be trusted; {then}"
    )


def summary(runs: Sequence[tuple[str, float]], k: int, then: str, total: int) -> str:
    """The one line for every run under :data:`MIN_JUDGED_SHARE` at once (``runs``: label and share, of ``total``
    runs): which runs, the worst share and what to do."""
    worst, share = min(runs, key=lambda x: x[1])
    names = ", ".join(label for label, _ in runs[:SHOWN_RUNS])
    more = f" and {len(runs) - SHOWN_RUNS} more" if len(runs) > SHOWN_RUNS else ""
    which = f"{len(runs)} of {total} runs ({names}{more})"
    return (
        f"{which}: under {MIN_JUDGED_SHARE:.0%} of the top {k} judged by these labels (worst: {worst}, "
        f"{share:.0%}): neither a gain nor a loss measured on them can be trusted; {then}"
    )
