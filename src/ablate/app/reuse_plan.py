"""Which cells of a command reuse a finished run, decided once before Hydra launches anything.

The command-line check (:mod:`ablate.app.precheck`) has already composed every cell, built its
:class:`~ablate.runner.job.JobSpec` and loaded its corpus into the plan (:mod:`ablate.app.plan`). :func:`look_up`
computes each cell's key (:mod:`ablate.runner.reuse`) and looks for a FINISHED run with it, checking that run's
record. The sweep's sweeper (``hydra_plugins.ablate_sweeper``) then records those cells as reused runs under the
sweep's parent (:func:`record_planned`) and launches only the others, so a reused cell costs one copy in MLflow: no
job folder, no composition, no job. A cell the plan looked up and found nothing for does not look again in its job
(:meth:`ablate.app.command.Command.__call__`); a cell launched in another process without the plan looks itself up.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ablate.app.plan import Cell, Plan, task_cell

if TYPE_CHECKING:
    from ablate.progress import SweepProgress


def look_up(plan: Plan) -> int:
    """Settle reuse for every cell of ``plan`` that may be reused (sets ``looked_up`` and ``reuse``); returns how
    many cells a finished run stands for. A source whose record no longer stands is said once, here."""
    from ablate.runner.pipeline import planned_components
    from ablate.runner.reuse import cell_key, find_reusable, why_not_reusable
    from ablate.runner.session import shared_session
    from ablate.tracking import shared_tracker

    experiment_ids: dict[tuple[str, str], str | None] = {}
    for cell in plan.cells:
        job = cell.job
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
        cell.looked_up = True
        if experiment_ids[where] is None:  # a new experiment holds no run to reuse
            continue
        found = find_reusable(
            tracker, job.output.experiment, cell_key(job, components), experiment_ids[where]
        )
        if found.note:  # the cell runs; its job does not look again
            print(found.note, file=sys.stderr)
        if found.source is not None:
            cell.reuse = found
    return plan.reused()


def record_planned(
    cell: Cell,
    overrides: Sequence[str],
    sweep_id: str,
    parent_run_id: str | None,
    place: tuple[int, str],
    progress: SweepProgress,
) -> None:
    """Record the planned reuse of ``cell`` (launched as ``overrides``; ``place``: its place as declared and its
    label, the run's name) under the sweep's parent, and say it in its one line. A copy that fails ends its run
    FAILED with the reason (counted as a failed job) and is reported; the sweep goes on."""
    from ablate import record as R
    from ablate.progress import cell_figures
    from ablate.runner.job import start_tags
    from ablate.runner.reuse import print_reused, record_reuse
    from ablate.tracking import shared_tracker

    found = cell.reuse
    assert found is not None and found.source is not None  # only found sources are planned
    index, label = place
    job = replace(
        cell.job,
        sweep_id=sweep_id,
        parent_run_id=parent_run_id,
        overrides=tuple(overrides),
        run_name=label,
        sweep_index=index,
    )
    tracker = shared_tracker(job.output.tracking_uri)
    try:
        run_id = record_reuse(tracker, job, found, start_tags(job))
    except Exception as e:  # noqa: BLE001 - one cell's failure is the sweep's to count, not to crash on
        print(f"error: could not record the reuse of run {found.source.run_id}: {e}", file=sys.stderr)
        progress.fail(index, label, 0.0)
        return
    print_reused(job, run_id, found.source, tracker.uri, brief=True, verbose=job.output.verbose)
    metrics = found.source.metrics
    headline = {k: metrics.get(R.metric_key(k)) for k in ("ndcg@10", "recall@10")}
    progress.cell(
        index, label, cell_figures({**headline, "correct": metrics.get("answer_correct")}), None, True
    )


def run_cells(
    plan: Plan,
    batches: list[list[list[str]]],
    sweep_dir: str,
    parent: str | None,
    places: dict[tuple[str, ...], tuple[int, str]],
    progress: SweepProgress,
) -> list[list[list[str]]]:
    """Record every planned cell of ``batches`` as a reused run under ``parent`` (the sweep's parent run), named
    and placed by ``places`` (:attr:`ablate.app.command.Command.places`), each said on ``progress``; returns the
    batches of the cells left to launch (empty batches dropped)."""
    total = sum(len(b) for b in batches)
    out: list[list[list[str]]] = []
    position = 0
    for batch in batches:
        left = []
        for overrides in batch:
            cell = plan.cell(overrides)
            if cell is not None and cell.reuse is not None:
                place = places.get(task_cell(overrides), (position, " ".join(overrides)))
                record_planned(cell, overrides, sweep_dir, parent, place, progress)
            else:
                left.append(overrides)
            position += 1
        if left:
            out.append(left)
    launched = sum(len(b) for b in out)
    if launched < total:
        progress.begin(
            f"[sweep] {total - launched} of {total} cells reused finished runs with the same inputs "
            f"(tracking.reuse=false runs them again); running {launched}"
        )
    return out
