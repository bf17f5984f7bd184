"""Hydra entry point: ``python -m ablate variant=C rrf.k=60`` / ``python -m ablate -m variant=A,B,C,D,oracle``.

Plan, then run. Before Hydra starts anything, :mod:`ablate.app.precheck` composes every cell of the command line
once, builds its :class:`~ablate.runner.job.JobSpec` (stages built and bound) and checks its inputs, so a mistake is
one line and exit 2 with nothing created; the settings are checked before the corpus, the tracking store or a model
library is touched, so a mistaken override is refused at once. :mod:`ablate.app.reuse_plan` decides which cells a
finished run stands for. Then Hydra runs the command with a :class:`~ablate.app.command.Command` as its task
function, carrying the plan to the sweeper and to every job run in this process. A sweep whose jobs failed exits 1
and says how many and where the reasons are.
"""

from __future__ import annotations

import logging
import os
import sys
import uuid
from typing import Any

from ablate import record as R
from ablate.app import interrupts
from ablate.app.argv import hydra_argv, introspects, stage_overrides_where_they_run, wants_help
from ablate.app.command import (
    ENV_INVOCATION,
    ENV_PARENT,
    ENV_TEST_CONFIRMED,
    EXIT_CONFIG,
    EXIT_FAILED,
    Command,
    settle_heap,
)
from ablate.app.paths import CONF_DIR, register_resolvers, stage_blocks
from ablate.app.plan import Plan, is_multirun
from ablate.app.supervise import NativeCrash
from ablate.errors import AblateError

log = logging.getLogger("ablate")


def _fail(message: str, code: int) -> None:
    print(message, file=sys.stderr)
    sys.exit(code)


def _prepare(argv: list[str], launch_dir: str) -> tuple[list[str], Plan]:
    """Plan the command (nothing is created when a check fails) and set its environment. The settings are checked
    first (:func:`ablate.app.precheck.check_settings`), before the tracking store, the corpus or a model library is
    imported or read."""
    from ablate.app.precheck import check_inputs_of, check_settings

    argv = stage_overrides_where_they_run(argv, list(stage_blocks()))
    plan = check_settings(argv, launch_dir)

    from ablate.app.reuse_plan import look_up
    from ablate.runner.heldout import HELD_OUT_SPLITS
    from ablate.runner.orphans import clean_orphans
    from ablate.tracking import shared_tracker

    check_inputs_of(plan)
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


def main() -> None:
    """The command: a signal at any point (SIGINT, SIGTERM) ends it through :func:`ablate.app.interrupts.stop`."""
    interrupts.guarded(_main)


def _main() -> None:
    sys.argv[1:] = argv = hydra_argv(sys.argv[1:])
    if wants_help(argv):  # before Hydra is imported: the help reads conf/ as text
        from ablate.app.help import print_help

        print_help()
        return
    launch_dir = os.getcwd()
    multirun = is_multirun(argv)
    introspect = introspects(argv)
    plan = Plan(multirun=multirun)
    try:
        if not introspect:
            argv, plan = _prepare(argv, launch_dir)
            sys.argv[1:] = argv
    except AblateError as e:
        _fail(f"error: {e}", EXIT_CONFIG)
    import hydra  # after the checks: a mistaken override is refused before Hydra is imported where it can be

    register_resolvers()
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
