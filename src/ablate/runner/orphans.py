"""Runs whose process died without closing them (SIGKILL, a machine that lost power) are found and closed.

Every run records the process that owns it: ``ablate.host``, ``ablate.pid`` and ``ablate.pid_start`` (the process's
start time, so a recycled pid is not mistaken for the owner). A RUNNING run of this host whose owner is gone is marked
FAILED with the reason "process ended without closing the run". That happens at the start of every command on the
same store, and on demand with ``python -m ablate.runs clean``. Runs owned by other hosts are left alone (their
processes cannot be seen from here) and counted.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

from ablate import record as R
from ablate.record import RecordedRun
from ablate.tracking import Tracker

REASON = "process ended without closing the run"


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22), or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def process_tags() -> dict[str, str]:
    """The tags that say which process owns a run."""
    pid = os.getpid()
    return {R.T_HOST: socket.gethostname(), R.T_PID: str(pid), R.T_PID_START: _start_time(pid) or ""}


def owner_alive(run: RecordedRun) -> bool | None:
    """True/False for a run owned by a process of this host; None when it cannot be told (another host, no tags)."""
    host, pid, start = run.tags.get(R.T_HOST), run.tags.get(R.T_PID), run.tags.get(R.T_PID_START)
    if not host or not pid or host != socket.gethostname():
        return None
    now = _start_time(int(pid))
    return now is not None and (not start or now == start)


@dataclass
class CleanReport:
    closed: list[RecordedRun]
    other_hosts: int
    alive: int


def clean_orphans(tracker: Tracker) -> CleanReport:
    """Mark FAILED every RUNNING run of this host whose process is gone."""
    closed, other, alive = [], 0, 0
    for run in tracker.find_runs(None, "attributes.status = 'RUNNING'"):
        state = owner_alive(run)
        if state is None:
            other += 1
        elif state:
            alive += 1
        else:
            tracker.end(run.run_id, "FAILED", REASON)
            closed.append(run)
    return CleanReport(closed, other, alive)


def close_own_runs(tracker: Tracker, reason: str) -> list[str]:
    """End FAILED with ``reason`` every run of the store that this process owns and has not ended (the command is
    ending: nothing can run them any more), children before their parent. Returns their run ids."""
    mine = process_tags()
    filt = (
        f"attributes.status = 'RUNNING' and tags.`{R.T_HOST}` = '{mine[R.T_HOST]}' "
        f"and tags.`{R.T_PID}` = '{mine[R.T_PID]}'"
    )
    runs = [r for r in tracker.find_runs(None, filt) if r.tags.get(R.T_PID_START, "") == mine[R.T_PID_START]]
    runs.sort(key=lambda r: r.parent is None)
    for run in runs:
        tracker.end(run.run_id, "FAILED", reason)
    return [r.run_id for r in runs]


def close_runs_of_process(
    tracker: Tracker, pid: int, pid_start: str | None, reason: str, wait: float = 3.0
) -> list[RecordedRun]:
    """End FAILED with ``reason`` the runs of a command whose process ``pid`` (started at ``pid_start``, clock ticks;
    None: not checked) died without closing them (a native crash): its own RUNNING runs (a sweep's parent, the cell it
    ran), and every RUNNING child run of those whose owner is gone too (a cell of a launcher worker, which the
    command's death ends). A worker still alive gets up to ``wait`` seconds to end; one alive after that is left to
    close its own run (or to the next command's orphan sweep). Children before their parent; returns the runs
    closed."""
    import time

    host = socket.gethostname()
    filt = f"attributes.status = 'RUNNING' and tags.`{R.T_HOST}` = '{host}' and tags.`{R.T_PID}` = '{pid}'"
    own = [
        r
        for r in tracker.find_runs(None, filt)
        if pid_start is None or r.tags.get(R.T_PID_START) == pid_start
    ]
    ids = {r.run_id for r in own}
    closed: list[RecordedRun] = []
    deadline = time.monotonic() + wait
    for parent in own:
        children = [
            r for r in tracker.children(parent.run_id) if r.status == "RUNNING" and r.run_id not in ids
        ]
        while any(owner_alive(r) for r in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        for child in children:
            if not owner_alive(child):
                tracker.end(child.run_id, "FAILED", reason)
                closed.append(child)
    own.sort(key=lambda r: r.parent is None)
    for run in own:
        tracker.end(run.run_id, "FAILED", reason)
        closed.append(run)
    return closed
