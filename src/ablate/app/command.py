"""The task function Hydra runs for each job of ``python -m ablate``: a :class:`Command` carrying the command's plan.

Hydra hands it to the sweeper (``hydra_plugins.ablate_sweeper``, which reads the plan) and calls it per job with the
job's composed config; a job in this process takes its :class:`~ablate.runner.job.JobSpec` from the plan and hands it
to :func:`ablate.runner.job.run_job`. Also the environment the command sets for what Hydra builds outside its reach
(the sweep callback, a launcher's workers).
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from ablate import record as R
from ablate.app.entry import say_unexpected
from ablate.app.paths import register_resolvers
from ablate.app.plan import Plan, cell_labels, task_cell
from ablate.errors import AblateError
from ablate.secrets import redact

PARENT_FILE = R.SWEEP_PARENT_FILE
#: Environment this command sets, for what Hydra builds and runs outside its reach: a unique id for the command,
#: read by ``conf/config.yaml`` (``${oc.env:ABLATE_INVOCATION}`` names the output folder); the sweep's parent run,
#: set by the sweep callback when it exists and read by jobs in launcher workers (Ray's may run on other machines:
#: the variable travels in the runtime environment, :mod:`ablate.app.cluster`).
ENV_INVOCATION, ENV_PARENT = "ABLATE_INVOCATION", "ABLATE_SWEEP_PARENT"
#: Set ("1") for the sweep callback (built by Hydra, which hands it only the config) when this command's cells on
#: the held-out split were confirmed as the final run: the parent run is tagged so.
ENV_TEST_CONFIRMED = "ABLATE_TEST_CONFIRMED"
EXIT_CONFIG, EXIT_FAILED = 2, 1  # an interrupt exits 128 + the signal: 130, 143 (ablate.app.interrupts)


def _sweep_context() -> tuple[str | None, Path | None, tuple[str, ...], int | None]:
    """(sweep id, sweep dir, this job's overrides, job number) under Hydra; sweep fields None for a single run."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return None, None, (), None
    hc = HydraConfig.get()
    overrides = tuple(str(o) for o in hc.overrides.task)
    if hc.mode == RunMode.MULTIRUN:
        d = Path(hc.sweep.dir).resolve()
        return str(d), d, overrides, int(hc.job.num)
    return None, None, overrides, None


def _parent_run(sweep_dir: Path | None) -> str | None:
    """The sweep's parent run: from the environment this command set, else from this sweep's own (unique) folder."""
    env = os.environ.get(ENV_PARENT)
    if env:
        return env
    if sweep_dir is not None and (sweep_dir / PARENT_FILE).exists():
        return (sweep_dir / PARENT_FILE).read_text().strip() or None
    return None


def settle_heap() -> None:
    """Before a job: collect what earlier work left in reference cycles, then move every live object (the loaded
    corpus, built indexes, cached candidates: they live as long as the command) out of the cyclic collector's sight
    (``gc.freeze``). A job makes hundreds of thousands of small objects (hits, rows), and each collection they
    trigger would otherwise walk the whole long-lived heap again, the cost growing with the heap, not with the job.
    Objects frozen here are still freed by reference counting; only cycles among them would outlive the command."""
    import gc

    gc.collect()
    gc.freeze()


def planned_answers(plan: Plan) -> int:
    """How many answers the cells of ``plan`` that run ask their generator for: every question of the cell's split
    times the generator's ``repeats`` (a cell a finished run stands for asks none). The corpora are the ones the
    command-line check loaded."""
    from ablate.runner.session import shared_session

    total = 0
    for cell in plan.cells:
        generator = cell.job.pipeline.generator
        if generator is None or cell.reuse is not None:
            continue
        snapshot = shared_session().snapshot(cell.job.corpus)
        total += len(snapshot.split_qids(cell.job.corpus.split)) * generator.repeats
    return total


class Command:
    """The task function Hydra runs for each job of this command, carrying the command's plan.

    Hydra hands its task function to the sweeper (``setup``) and calls it per job with the job's composed config:
    the sweeper reads :attr:`plan`, and a job in this process takes its JobSpec from it (its stages built once, in
    the check). A launcher that runs jobs in other processes (joblib, Ray) pickles the command without the plan's
    jobs; such a job builds its JobSpec from its config and looks up reuse itself unless the plan settled it."""

    def __init__(self, plan: Plan, launch_dir: str) -> None:
        from ablate.progress import SweepProgress

        self.plan = plan
        self.launch_dir = launch_dir
        self.size = len(plan)
        #: cells the plan looked up and found no finished run for: their jobs do not look again
        self.settled = frozenset(
            task_cell(c.overrides) for c in plan.cells if c.looked_up and c.reuse is None
        )
        #: how many jobs the sweeper launched, when some cells were reused (jobs number themselves in it)
        self.launched: int | None = None
        #: a sweep's cells (their task overrides) -> (place as declared, label): the console's line and the run's
        #: name (plain strings: they travel to a launcher's workers with the command)
        labels = cell_labels([c.overrides for c in plan.cells], [c.job.variant for c in plan.cells])
        self.places: dict[tuple[str, ...], tuple[int, str]] = (
            {
                task_cell(c.overrides): (i, label)
                for i, (c, label) in enumerate(zip(plan.cells, labels, strict=True))
            }
            if plan.multirun
            else {}
        )
        #: the notes a job of this command printed already: a note every cell raises (the pilot's split) is said
        #: once per sweep, not once per cell
        self.said: set[str] = set()
        #: the sweep's console (this process only: a launcher's worker prints its cells' lines alone)
        self.progress: SweepProgress | None = (
            SweepProgress(self.size, answers=planned_answers(plan)) if plan.multirun and self.size else None
        )

    def __getstate__(self) -> dict[str, Any]:
        """Pickled into another process (a launcher's worker): everything but the plan's built jobs and the
        sweep's console."""
        return {**self.__dict__, "plan": Plan(multirun=self.plan.multirun), "progress": None}

    def place(self, overrides: tuple[str, ...], num: int | None) -> tuple[int, str] | None:
        """(place as declared, label) of this job's cell in a sweep; None for a single run."""
        if num is None:
            return None
        return self.places.get(task_cell(overrides), (num, " ".join(overrides) or "(defaults)"))

    def __call__(self, cfg: Any) -> dict[str, Any]:
        """One job; a failure is one line (the run, if it started, is FAILED in MLflow) and, in a sweep, the sweep
        goes on with the job counted as failed. A sweep's job ends with its one line (:meth:`_cell_line`)."""
        import time

        settle_heap()  # the command's process only: library callers keep their own collector settings
        _, _, overrides, num = _sweep_context()
        place = self.place(overrides, num)
        if place is not None and self.progress is not None:
            self.progress.begin()
        t0 = time.perf_counter()
        try:
            out = self.run(cfg, place)
        except AblateError as e:
            print(redact(f"error: {e}"), file=sys.stderr)
            if self.plan.multirun:
                self._cell_line(place, None, time.perf_counter() - t0)
                return {"error": redact(str(e))}
            sys.exit(EXIT_CONFIG)
        except Exception as e:  # an unexpected failure: still one line, still FAILED in MLflow
            say_unexpected(e)
            if self.plan.multirun:
                self._cell_line(place, None, time.perf_counter() - t0)
                return {"error": redact(str(e))}
            sys.exit(EXIT_FAILED)
        self._cell_line(place, out, time.perf_counter() - t0)
        return out

    def _cell_line(self, place: tuple[int, str] | None, out: dict[str, Any] | None, seconds: float) -> None:
        """A sweep's job ended: its one line (``out`` None: it failed), through the sweep's console when this
        process has it."""
        from ablate.progress import cell_figures, cell_line

        if place is None:
            return
        index, label = place
        reused = out is not None and bool(out.get("reused_from"))
        if self.progress is not None:
            if out is None:
                self.progress.fail(index, label, seconds)
            else:
                self.progress.cell(index, label, cell_figures(out), seconds, reused=reused)
            return
        figures = "FAILED (the error is above)" if out is None else cell_figures(out)
        print(cell_line(index, self.size, label, figures, seconds, reused), flush=True)

    def run(self, cfg: Any, place: tuple[int, str] | None = None) -> dict[str, Any]:
        """One configured job: its planned JobSpec (else one built from ``cfg``) run by
        :func:`ablate.runner.job.run_job`, named by ``place`` in a sweep. Returns the headline metrics and the run
        id."""
        from ablate.app.config import job_from_config, print_notes
        from ablate.app.supervise import watch_this_process
        from ablate.runner.job import run_job

        watch_this_process()  # a launcher's worker: its crash stacks go where the command's report reads them
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        register_resolvers()  # also in joblib workers, which never ran main()
        sweep_id, sweep_dir, overrides, _ = _sweep_context()
        parent = _parent_run(sweep_dir)
        cell = self.plan.cell(overrides)
        if cell is not None:
            print_notes([n for n in cell.notes if n not in self.said])
            self.said.update(cell.notes)
            job = replace(cell.job, sweep_id=sweep_id, parent_run_id=parent, overrides=overrides)
        else:
            notes: list[str] = []
            job = job_from_config(
                cfg,
                self.launch_dir,
                sweep_id=sweep_id,
                parent_run_id=parent,
                overrides=overrides,
                notes=notes,
            )
            print_notes([n for n in notes if n not in self.said])
            self.said.update(notes)
        if place is not None and task_cell(overrides) in self.places:  # a cell the plan labelled
            job = replace(job, run_name=place[1], sweep_index=place[0])
        if task_cell(overrides) in self.settled:  # the plan found no finished run: no second look-up
            job = replace(job, output=replace(job.output, reuse=False))
        console = self.progress
        done = run_job(job, answers=console if console is not None and console.answers is not None else None)
        out = done.headline()
        if done.reused_from:
            out["reused_from"] = done.reused_from
        return out
