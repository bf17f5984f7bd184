"""Which cells of a sweep reuse a finished run, decided once before Hydra launches anything.

The command-line check (:mod:`ablate.app.precheck`) has already composed every cell, built its
:class:`~ablate.runner.job.JobSpec` and loaded its corpus. :func:`plan` uses that to compute each cell's key
(:mod:`ablate.runner.reuse`) and look for a FINISHED run with it. The sweep's sweeper
(``hydra_plugins.ablate_sweeper``) then records those cells as reused runs under the sweep's parent
(:func:`record_planned`) and launches only the others, so a reused cell costs one copy in MLflow: no job folder, no
composition, no job. A cell the plan could not settle (another process, a launcher worker) still finds its reused
run inside the job.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ablate.runner.job import JobSpec
    from ablate.runner.reuse import Lookup

#: Set for the jobs when some cells of the sweep were reused: how many jobs the sweeper launches (they number
#: themselves in it).
ENV_LAUNCHED = "ABLATE_SWEEP_LAUNCHED"
#: cell (its overrides) -> the job the check built and the checked finished run that stands for it
PLAN: dict[tuple[str, ...], tuple[JobSpec, Lookup]] = {}
#: cells the command-line check composed and validated in this process (the sweeper need not compose them again)
CHECKED: set[tuple[str, ...]] = set()


def task_cell(cell: Sequence[str]) -> tuple[str, ...]:
    """A cell as the sweeper sees it: without the ``hydra.*`` / ``hydra/*`` overrides (Hydra takes those for itself)."""
    out = []
    for o in cell:
        key = o.partition("=")[0].lstrip("+~")
        if not key.startswith(("hydra.", "hydra/")):
            out.append(o)
    return tuple(out)


def plan(cells: Sequence[Sequence[str]], jobs: Sequence[JobSpec]) -> int:
    """Fill :data:`PLAN` and :data:`CHECKED` for this command's cells (in the check's order); returns how many cells
    a finished run stands for."""
    from ablate.runner.pipeline import planned_components
    from ablate.runner.reuse import cell_key, find_reusable, why_not_reusable
    from ablate.runner.session import shared_session
    from ablate.tracking import shared_tracker

    PLAN.clear()
    CHECKED.clear()
    experiment_ids: dict[tuple[str, str], str | None] = {}
    for cell, job in zip(cells, jobs, strict=True):
        key = task_cell(cell)
        CHECKED.add(key)
        if why_not_reusable(job) is not None:
            continue
        snapshot = shared_session().snapshot(job.corpus)
        components = planned_components(
            snapshot, job.corpus.split, job.pipeline, job.settings, access=job.corpus.access
        )
        tracker = shared_tracker(job.output.tracking_uri)
        where = (job.output.tracking_uri, job.output.experiment)
        if where not in experiment_ids:
            experiment_ids[where] = tracker.experiment_id(job.output.experiment, create=False)
        if experiment_ids[where] is None:  # a new experiment holds no run to reuse
            continue
        found = find_reusable(
            tracker, job.output.experiment, cell_key(job, components), experiment_ids[where]
        )
        if found.note:  # the cell runs; its job does not look again (looked_up)
            print(found.note, file=sys.stderr)
        if found.source is not None:
            PLAN[key] = (job, found)
    return len(PLAN)


def record_planned(cell: Sequence[str], sweep_id: str, parent_run_id: str | None, label: str) -> bool:
    """Record the planned reuse of ``cell`` under the sweep's parent; False when the cell is not planned. A copy that
    fails ends its run FAILED with the reason (counted as a failed job) and is reported, the sweep goes on."""
    from ablate.runner.job import start_tags
    from ablate.runner.reuse import print_reused, record_reuse
    from ablate.tracking import shared_tracker

    planned = PLAN.get(task_cell(cell))
    if planned is None:
        return False
    job, found = planned
    source = found.source
    assert source is not None  # only found sources are planned
    job = replace(job, sweep_id=sweep_id, parent_run_id=parent_run_id, overrides=tuple(cell))
    tracker = shared_tracker(job.output.tracking_uri)
    print(f"[sweep] {label}: {' '.join(cell) or '(defaults)'}: reused", file=sys.stderr)
    try:
        run_id = record_reuse(tracker, job, found, start_tags(job))
    except Exception as e:  # noqa: BLE001 - one cell's failure is the sweep's to count, not to crash on
        print(f"error: could not record the reuse of run {source.run_id}: {e}", file=sys.stderr)
        return True
    print_reused(job, run_id, source, tracker.uri)
    return True


def run_cells(batches: list[list[list[str]]], sweep_dir: str, parent: str | None) -> list[list[list[str]]]:
    """Record every planned cell of ``batches`` as a reused run under ``parent`` (the sweep's parent run); returns
    the batches of the cells left to launch (empty batches dropped). Sets :data:`ENV_LAUNCHED` to their number when
    some were reused."""
    total = sum(len(b) for b in batches)
    out: list[list[list[str]]] = []
    position = 0
    for batch in batches:
        left = []
        for cell in batch:
            position += 1
            if not record_planned(cell, sweep_dir, parent, f"cell {position}/{total}"):
                left.append(cell)
        if left:
            out.append(left)
    launched = sum(len(b) for b in out)
    if launched < total:
        print(
            f"[sweep] {total - launched} of {total} cells reused finished runs with the same inputs "
            f"(tracking.reuse=false runs them again); running {launched}",
            file=sys.stderr,
        )
        os.environ[ENV_LAUNCHED] = str(launched)
    else:
        os.environ.pop(ENV_LAUNCHED, None)
    return out


def all_checked(batch: Sequence[Sequence[str]]) -> bool:
    """Every cell of ``batch`` was composed and validated by this process's command-line check."""
    return bool(CHECKED) and all(task_cell(c) in CHECKED for c in batch)


def looked_up(cell: Sequence[str]) -> bool:
    """The plan looked ``cell`` up in this process and found no run to reuse: a job of it need not look again. (A
    planned cell that is launched anyway, under another sweeper than ablate's, looks itself up in the job.)"""
    key = task_cell(cell)
    return key in CHECKED and key not in PLAN
