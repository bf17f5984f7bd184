"""Which sweep "the latest sweep" is: the sweep a study command reads when no ``--parent`` names one
(``python -m ablate.report``, ``python -m ablate.plan``, ``python -m ablate.label pool``).

The latest sweep is the sweep parent run (tag ``ablate.role=sweep-parent``) that started last, unless another sweep
*overlaps* it in time: its runs were going while the latest one's were (two sweeps started from two terminals, or
one started before the other ended). Then "the latest" names no one sweep, and a guess reads the wrong runs (the one
that started last may be the one that ended first), so the command refuses with one line per overlapping sweep and
asks for ``--parent ID``. Sweeps run one after the other never overlap: the newest is taken, as it always was.

A sweep's span runs from its parent's start to its parent's end; a parent that never ended (a sweep still running,
or one whose process was killed) ends at the last start or end among its child runs, so a sweep killed long ago does
not overlap every later one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from ablate import record as R
from ablate.errors import AblateError
from ablate.record import RecordedRun
from ablate.tracking import Tracker

#: How many of the newest sweep parents are looked at for one overlapping the newest: sweeps run side by side are
#: few; one started before the last twenty others and still going is not "recent".
RECENT_SWEEPS = 20
#: Overrides longer than this are cut in a candidate's line (the line stays readable; the run id names it whole).
SHOWN_OVERRIDES = 80


class NoSweep(AblateError):
    """No sweep parent to read, or no one sweep that "the latest" names."""


@dataclass(frozen=True)
class Span:
    """A sweep parent run with the time its sweep was going (ms since the epoch) and its number of child runs."""

    run: RecordedRun
    start: int
    end: int
    children: int

    def overlaps(self, other: Span) -> bool:
        """Whether the two sweeps were going at the same time (touching ends do not count: one followed the other)."""
        return self.start < other.end and other.start < self.end


def latest_parent(tracker: Tracker) -> str:
    """The run id of the latest sweep's parent; :class:`NoSweep` when the store has none, or when sweeps overlap the
    latest one in time (one line per sweep, and the fix: ``--parent ID``)."""
    parents = tracker.find_runs(
        None,
        f"tags.`{R.T_ROLE}` = '{R.ROLE_SWEEP_PARENT}'",
        max_results=RECENT_SWEEPS,
        newest_first=True,
    )
    if not parents:
        raise NoSweep(
            f"no sweep parent run in {tracker.uri}; fix: run a sweep (python -m ablate -m variant=A,B,C,D), or pass "
            "--parent RUN_ID or --experiment NAME"
        )
    spans = [span(tracker, p) for p in parents]
    newest = spans[0]
    overlapping = [s for s in spans if s is newest or s.overlaps(newest)]
    if len(overlapping) == 1:
        return newest.run.run_id
    lines = "\n".join(f"  {candidate_line(tracker, s)}" for s in overlapping)
    raise NoSweep(
        f"{len(overlapping)} sweeps in {tracker.uri} overlap in time (their runs were going at the same time), so "
        f"'the latest sweep' names no one of them; fix: name one with --parent ID:\n{lines}"
    )


def span(tracker: Tracker, parent: RecordedRun) -> Span:
    """When ``parent``'s sweep was going: its start to its end, or, unended, to the last start or end of its
    children."""
    children = tracker.children(parent.run_id)
    end = parent.end_time
    if end is None:
        end = max([parent.start_time, *(c.end_time or c.start_time for c in children)])
    return Span(parent, parent.start_time, end, len(children))


def candidate_line(tracker: Tracker, s: Span) -> str:
    """One sweep as a reader chooses between them: its ``--parent`` id, experiment, start (UTC), overrides and runs."""
    run = s.run
    started = datetime.fromtimestamp(s.start / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    overrides = run.tags.get(R.T_OVERRIDES) or "(no overrides recorded)"
    if len(overrides) > SHOWN_OVERRIDES:
        overrides = overrides[: SHOWN_OVERRIDES - 1] + "…"
    state = "" if run.status == "FINISHED" else f", {run.status.lower()}"
    return (
        f"--parent {run.run_id}  experiment {tracker.experiment_name(run.experiment_id)!r}, started {started}, "
        f"{overrides}, {s.children} run(s){state}"
    )
