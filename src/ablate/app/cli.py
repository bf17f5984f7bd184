"""Hydra entry point: ``python -m ablate variant=C rrf.k=60`` / ``python -m ablate -m variant=A,B,C,D,oracle``.

Plan, then run. Before Hydra starts anything, :mod:`ablate.app.precheck` composes every cell of the command line
once, builds its :class:`~ablate.runner.job.JobSpec` (stages built and bound) and checks its inputs, so a mistake is
one line and exit 2 with nothing created; :mod:`ablate.app.reuse_plan` decides which cells a finished run stands for.
Then Hydra runs the command with a :class:`Command` as its task function: the plan travels with it to the sweeper
(which records the reused cells and launches the rest) and to every job run in this process, which takes its
JobSpec from the plan and hands it to :func:`ablate.runner.job.run_job`. A sweep whose jobs failed exits 1 and says
how many and where the reasons are.
"""

from __future__ import annotations

import logging
import os
import sys
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from ablate import record as R
from ablate.app import interrupts
from ablate.app.entry import say_unexpected
from ablate.app.paths import CONF_DIR, register_resolvers
from ablate.app.plan import Plan, cell_labels, is_multirun, task_cell
from ablate.app.supervise import NativeCrash
from ablate.errors import AblateError
from ablate.secrets import redact

log = logging.getLogger("ablate")

PARENT_FILE = R.SWEEP_PARENT_FILE
#: Environment this command sets, for what Hydra builds and runs outside its reach: a unique id for the command,
#: read by ``conf/config.yaml`` (``${oc.env:ABLATE_INVOCATION}`` names the output folder); the sweep's parent run,
#: set by the sweep callback when it exists and read by jobs in launcher workers (Ray's may run on other machines:
#: the variable travels in the runtime environment, :mod:`ablate.app.cluster`).
ENV_INVOCATION, ENV_PARENT = "ABLATE_INVOCATION", "ABLATE_SWEEP_PARENT"
#: Set ("1") for the sweep callback (built by Hydra, which hands it only the config) when this command's cells on
#: the held-out split were confirmed as the final run: the parent run is tagged so.
ENV_TEST_CONFIRMED = "ABLATE_TEST_CONFIRMED"
#: The command-line flag that confirms a sweep on the held-out split; it becomes the override below, so the config
#: (and the run's recorded overrides) hold it like any other setting.
CONFIRM_TEST_FLAG, CONFIRM_TEST_OVERRIDE = "--confirm-test", "heldout.confirm_test=true"
#: ``-v`` / ``--verbose``: every query-accounting counter of each run on the console (the setting ``verbose``).
VERBOSE_FLAGS, VERBOSE_OVERRIDE = ("-v", "--verbose"), "verbose=true"
EXIT_CONFIG, EXIT_FAILED = 2, 1  # an interrupt exits 128 + the signal: 130, 143 (ablate.app.interrupts)


def confirm_test_flag(argv: list[str]) -> list[str]:
    """Strip ``--confirm-test`` (Hydra does not know it) and, when it was given, append ``heldout.confirm_test=true``
    (last, so it wins over an earlier ``heldout.confirm_test=false``)."""
    rest = [a for a in argv if a != CONFIRM_TEST_FLAG]
    return [*rest, CONFIRM_TEST_OVERRIDE] if len(rest) != len(argv) else rest


def verbose_flag(argv: list[str]) -> list[str]:
    """Strip ``-v``/``--verbose`` (Hydra does not know them) and, when given, append ``verbose=true``."""
    rest = [a for a in argv if a not in VERBOSE_FLAGS]
    return [*rest, VERBOSE_OVERRIDE] if len(rest) != len(argv) else rest


def stage_overrides_where_they_run(argv: list[str]) -> list[str]:
    """``bm25.k1=1.2`` -> ``++bm25.k1=1.2`` for every key inside a stage block (``bm25``, ``dense``, ``rrf``,
    ``rerank``, ...): Hydra then sets it where the stage runs and adds an orphan block elsewhere, which the job
    ignores with a note. So ``-m variant=A,B,C bm25.k1=1.2`` sets k1 for A and C and leaves B alone, instead of
    failing B's composition because B has no ``bm25`` block."""
    from ablate.app.paths import stage_blocks

    blocks = stage_blocks()
    out = []
    for arg in argv:
        key, eq, _ = arg.partition("=")
        if eq and not arg.startswith(("-", "+", "~")) and "." in key and key.split(".", 1)[0] in blocks:
            arg = "++" + arg
        out.append(arg)
    return out


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


def _fail(message: str, code: int) -> None:
    print(message, file=sys.stderr)
    sys.exit(code)


def _prepare(argv: list[str], launch_dir: str) -> tuple[list[str], Plan]:
    """Plan the command (nothing is created when a check fails) and set its environment."""
    from ablate.app.precheck import check_command_line
    from ablate.app.reuse_plan import look_up
    from ablate.runner.heldout import HELD_OUT_SPLITS
    from ablate.runner.orphans import clean_orphans
    from ablate.tracking import shared_tracker

    argv = stage_overrides_where_they_run(argv)
    plan = check_command_line(argv, launch_dir)
    jobs = [c.job for c in plan.cells]
    os.environ.setdefault(ENV_INVOCATION, uuid.uuid4().hex[:6])
    os.environ.pop(ENV_PARENT, None)
    if any(j.test_confirmed and j.corpus.split in HELD_OUT_SPLITS and not j.corpus.exploratory for j in jobs):
        os.environ[ENV_TEST_CONFIRMED] = "1"
    else:
        os.environ.pop(ENV_TEST_CONFIRMED, None)
    for uri in dict.fromkeys(j.output.tracking_uri for j in jobs):
        report = clean_orphans(shared_tracker(uri))
        for run in report.closed:
            print(
                f"note: run {run.run_id} ({run.name}) was left RUNNING by a process that ended; marked FAILED",
                file=sys.stderr,
            )
    if plan.multirun:
        settle_heap()  # the corpus the check loaded lives as long as the command: out of the collector's walks
        look_up(plan)  # which cells a finished run stands for (the sweeper records them)
    return argv, plan


def flags_first(argv: list[str]) -> list[str]:
    """``-m``/``--multirun`` moved before the overrides, so ``python -m ablate corpus=demo_zh -m variant=A,B`` works
    (Hydra's parser takes the overrides as one positional list and refuses a flag in the middle of it)."""
    flags = [a for a in argv if a in ("-m", "--multirun")]
    return [*flags[:1], *(a for a in argv if a not in ("-m", "--multirun"))] if flags else argv


def main() -> None:
    """The command: a signal at any point (SIGINT, SIGTERM) ends it through :func:`ablate.app.interrupts.stop`."""
    interrupts.guarded(_main)


def _main() -> None:
    sys.argv[1:] = argv = flags_first(verbose_flag(confirm_test_flag(sys.argv[1:])))
    if any(a in ("-h", "--help") for a in argv):  # before Hydra is imported: the help reads conf/ as text
        from ablate.app.help import print_help

        print_help()
        return
    import hydra

    register_resolvers()
    launch_dir = os.getcwd()
    multirun = is_multirun(argv)
    introspect = any(a.startswith(("--cfg", "-c", "--info", "--resolve", "--package", "-p")) for a in argv)
    plan = Plan(multirun=multirun)
    try:
        if not introspect:
            argv, plan = _prepare(argv, launch_dir)
            sys.argv[1:] = argv
    except AblateError as e:
        _fail(f"error: {e}", EXIT_CONFIG)
    command = Command(plan, launch_dir)
    try:
        hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")(command)()
    except NativeCrash as e:  # a launcher's worker crashed: the command ends as a crash does (supervise.py)
        _crashed(e)
    except (
        BaseException
    ) as e:  # an interrupt goes to main(); anything else ends this process's open runs FAILED
        if multirun and interrupts.signal_of(e) is None:
            from ablate.tracking import failure_reason

            interrupts.close_runs(failure_reason(e))
        raise
    if multirun and not introspect:
        if command.progress is not None:  # under a sweeper that did not close it (hydra/sweeper=basic)
            command.progress.close()
        _exit_for_failed_jobs(plan)


def _crashed(crash: NativeCrash) -> None:
    """A worker of this command crashed: its runs and this process's FAILED with the crash's reason (the worker's
    and any other left RUNNING under this process's runs by a process that is gone), one line, exit 128 + the
    signal."""
    from ablate.runner.orphans import close_runs_of_process, process_tags
    from ablate.tracking import hurry, shared_trackers

    hurry(interrupts.HURRY_SECONDS)
    print(f"error: {crash.line}", file=sys.stderr, flush=True)
    if os.environ.get("ABLATE_DEBUG") and crash.dump.strip():
        print(
            f"the worker's Python stacks at the crash (faulthandler):\n{crash.dump.rstrip()}", file=sys.stderr
        )
    start = process_tags()[R.T_PID_START] or None
    for tracker in shared_trackers():
        try:
            close_runs_of_process(tracker, os.getpid(), start, crash.reason)
        except Exception as e:  # noqa: BLE001 - a store that cannot be written: the next command's orphans sweep
            if os.environ.get("ABLATE_DEBUG"):
                print(f"could not close the runs in {tracker.uri}: {e!r}", file=sys.stderr)
    raise SystemExit(crash.code)


def sweep_outcome(tracker: Any, parent: str, expected: int) -> tuple[int, int]:
    """(jobs, failed) of the sweep under ``parent``: its children that did not finish, and the jobs of the
    ``expected`` that never started a run."""
    from ablate.errors import AblateError

    try:
        children = tracker.children(parent)
    except AblateError as e:  # the store cannot say how the jobs ended: none is counted as finished
        print(f"warning: the sweep's jobs could not be read back: {e}", file=sys.stderr)
        children = []
    failed = sum(1 for r in children if r.status != "FINISHED") + max(0, expected - len(children))
    return max(expected, len(children)), failed


def _exit_for_failed_jobs(plan: Plan) -> None:
    """Exit 1 when jobs of the sweep failed: FAILED children of its parent run and cells that never started one."""
    from ablate.tracking import shared_tracker

    parent = os.environ.get(ENV_PARENT)
    if parent is None or not plan.cells:
        return  # no parent run (said when it could not be created): nothing to count under
    jobs, failed = sweep_outcome(shared_tracker(plan.cells[0].job.output.tracking_uri), parent, len(plan))
    if failed:
        _fail(
            f"error: {failed} of {jobs} jobs failed; the reasons are printed above and in the tag ablate.failure of "
            f"the FAILED runs under parent run {parent} (python -m ablate.report --parent {parent} lists them)",
            EXIT_FAILED,
        )


if __name__ == "__main__":
    main()
