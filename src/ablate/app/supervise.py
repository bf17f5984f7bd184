"""A command that crashes in native code still ends with one line from ablate and no run left RUNNING.

A crash inside a C extension (SIGILL: an instruction the CPU lacks, as a llama.cpp build made for another CPU;
SIGSEGV, SIGBUS, SIGABRT, SIGFPE: a fault inside the extension) kills the process before any of its own code runs:
no ``finally``, no line, its MLflow runs stay RUNNING. So an entry point calls :func:`supervise` first thing, before
anything heavy is imported: the process forks (a few milliseconds); the child runs the command exactly as before (it
owns the runs, handles SIGINT/SIGTERM itself: :mod:`ablate.app.interrupts`) and the parent, the process the shell or
the caller sees, only waits for it and exits with its exit code. When the child is ended by a signal, the parent:

* prints one line ``error: crashed: signal 4 (SIGILL) in native code, in <module> (<function>): <the likely cause
  and the fix>`` (:func:`describe`); the module is the innermost ablate frame of the Python stacks that
  ``faulthandler``, enabled in the child, wrote at the crash into the command's private temporary folder
  (``ABLATE_SUPERVISOR_DIR``, removed when the command ends; ``ABLATE_DEBUG=1`` prints those stacks after the line);
* ends FAILED, with that reason in ``ablate.failure``, every run the child left RUNNING in the stores it opened (their
  URIs are appended to a file of that folder by :class:`ablate.tracking.Tracker`, variable ``ABLATE_OPENED_STORES``):
  its own (a sweep's parent, the cell it ran) and the RUNNING child runs of those whose process is gone with it (a
  launcher worker's cell): :func:`ablate.runner.orphans.close_runs_of_process`;
* exits 128 + the signal (132 for SIGILL), as a shell reports a process killed by it.

Signals sent to the command: the parent blocks SIGINT, SIGTERM, SIGHUP and SIGQUIT and reads them one by one. One
the terminal sent (Ctrl-C, Ctrl-\\, a hang-up: the kernel sends it to the whole foreground process group, so the
child has it too) is ignored; one sent by a process (``kill <pid>``, a CI timeout, a test) is passed on to the child,
which ends with its own line and code (130, 143): the parent adds nothing. If the parent itself is killed
(``kill -9``) the kernel kills the child too (``PR_SET_PDEATHSIG``), as before the fork; the next command's orphan
sweep closes its runs.

A launcher's worker that crashes (``hydra/launcher=joblib``: the command's process lives on and joblib reports the
dead worker) ends the command the same way, from inside it: the sweeper turns the launcher's error into a
:class:`NativeCrash` (:func:`worker_crash`; the worker's stacks are in the same folder, :func:`watch_this_process`)
and the command closes its runs and the worker's with the reason, prints the line and exits 128 + the signal.

``ABLATE_NO_SUPERVISOR=1`` runs the command in one process (under a debugger or a profiler that follows one pid); a
help request is never forked. Used by ``python -m ablate``, ``python -m ablate.report`` and ``python -m ablate.label
judge|validate``; another entry point opts in with one line, ``supervise()``, before its heavy
imports.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import IO

from ablate.app.interrupts import exit_now

#: Run the command in one process, without the supervisor.
ENV_OFF = "ABLATE_NO_SUPERVISOR"
#: The file the child's trackers name their stores in: :data:`ablate.tracking.tracker.ENV_OPENED_STORES` (not
#: imported here: importing the tracking package takes longer than the whole supervisor).
ENV_STORES = "ABLATE_OPENED_STORES"
#: The command's private folder (removed when it ends): faulthandler writes the crash stacks of its process PID to
#: ``<folder>/<pid>.stacks``; the stores it opened are named in ``<folder>/stores``.
ENV_DIR = "ABLATE_SUPERVISOR_DIR"
#: Signals sent to the command that the parent passes on to the child (unless the terminal sent them to both).
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
#: Signals of a crash in native code (faulthandler writes the Python stacks for these).
CRASHES = (signal.SIGILL, signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGFPE)
#: ``si_code`` of a signal the kernel sent (a terminal's Ctrl-C goes to the foreground process group this way).
SI_KERNEL = 0x80
#: The likely cause and the fix, per crash signal.
CAUSES = {
    signal.SIGILL: "the CPU lacks an instruction the llama.cpp/native build uses; rebuild with `make setup` "
    "(portable tier flags)",
    signal.SIGSEGV: "a C extension read or wrote memory it does not own",
    signal.SIGBUS: "a memory-mapped file (a model, an index) changed or shrank while in use, or the disk is full",
    signal.SIGABRT: "a C extension aborted (a check inside it failed)",
    signal.SIGFPE: "an arithmetic fault in native code",
}
DEBUG_HINT = "run again with ABLATE_DEBUG=1 to print every thread's Python stack at the crash (faulthandler)"
#: ablate's own source folder (with a trailing separator): a frame in a file under it is ablate's.
PACKAGE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "")
#: A frame of a faulthandler dump.
FRAME = r'^\s*File "(?P<path>[^"]+)", line \d+ in (?P<function>\S+)'

_CRASH_LOG: dict[int, IO[str]] = {}  # pid -> its faulthandler file, open as long as the process


class NativeCrash(SystemExit):
    """A process of the command other than its main one (a launcher's worker) was ended by a signal: the command
    ends as if it had crashed itself (its entry point closes its runs with :attr:`reason` and prints :attr:`line`);
    exit 128 + the signal."""

    def __init__(self, signum: int, site: str | None, dump: str = "") -> None:
        super().__init__(128 + signum)
        self.signum, self.dump = signum, dump  # dump: the worker's crash stacks (faulthandler), if any
        self.reason, self.line = describe(signum, site, worker=True)


def supervise() -> None:
    """Fork: return in the child, which runs the command; in the parent wait for the child and exit as it did (see
    the module docstring). Does nothing under ``ABLATE_NO_SUPERVISOR=1``, where there is no ``fork``, or for a help
    request (``-h``/``--help``: it runs no native code and creates no run, and the fork would be its only cost)."""
    if os.environ.get(ENV_OFF) or not hasattr(os, "fork") or not hasattr(signal, "sigwaitinfo"):
        return
    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        return
    folder = os.path.join(os.environ.get("TMPDIR") or "/tmp", f"ablate-{os.getpid()}-{os.urandom(4).hex()}")
    try:
        os.mkdir(folder, 0o700)
    except OSError:  # no temporary folder: the command runs unsupervised
        return
    stores = os.path.join(folder, "stores")
    watched = {*FORWARDED, signal.SIGCHLD}
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # an inherited SIG_IGN would reap the child before we can
    # held from here: none is lost before the wait
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    parent = os.getpid()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    pid = os.fork()
    if pid == 0:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        _die_with(parent)
        os.environ[ENV_STORES] = stores
        os.environ[ENV_DIR] = folder
        watch_this_process()
        return
    start = _start_time(pid)
    status = _wait(pid, watched)
    try:
        if status is not None and os.WIFSIGNALED(status):
            stacks = os.path.join(folder, f"{pid}.stacks")
            code = ended_by_signal(os.WTERMSIG(status), pid, start, stores, stacks)
        else:
            code = os.waitstatus_to_exitcode(status) if status is not None else 1
    finally:
        _remove(folder)
    exit_now(code)


def _remove(folder: str) -> None:
    """Remove the command's private folder (flat: the stores file, the crash stacks)."""
    try:
        for entry in os.listdir(folder):
            os.unlink(os.path.join(folder, entry))
        os.rmdir(folder)
    except OSError:
        pass


def _die_with(parent: int) -> None:
    """The child is killed when the parent dies (``kill -9`` of the pid the caller sees ends the command, as before
    the fork)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the child outlives a killed parent and ends by itself
        return
    if os.getppid() != parent:  # the parent died before the request: nobody waits for this command
        os._exit(128 + int(signal.SIGKILL))


def watch_this_process() -> None:
    """At a crash, this process of a supervised command (its main one, a launcher's worker: called where a job
    starts) writes the Python stack of every thread to ``<ABLATE_SUPERVISOR_DIR>/<pid>.stacks``, read by who reports
    the crash; nothing outside a supervised command. Replaces the handler a launcher enabled (loky's prints to the
    console)."""
    folder, pid = os.environ.get(ENV_DIR), os.getpid()
    if not folder or pid in _CRASH_LOG:
        return
    import faulthandler

    try:
        log = open(os.path.join(folder, f"{pid}.stacks"), "w", encoding="utf-8")  # noqa: SIM115 - open as long as the process
    except OSError:  # a Ray worker on another machine
        return
    faulthandler.enable(file=log, all_threads=True)
    _CRASH_LOG[pid] = log


def worker_crash(e: BaseException) -> NativeCrash | None:
    """The :class:`NativeCrash` a launcher's error stands for when its worker was ended by a signal (joblib's
    ``TerminatedWorkerError``: "The exit codes of the workers are {SIGILL(-4)}"), else None. The crashed stage is read
    from the worker's crash stacks (:func:`watch_this_process`)."""
    import re

    if type(e).__name__ not in ("TerminatedWorkerError", "BrokenProcessPool"):
        return None
    codes = [int(c) for c in re.findall(r"\((-\d+)\)", str(e))]
    signum = next((-c for c in codes if -c in CRASHES), next((-c for c in codes), None))
    if signum is None:
        return None
    dump = _worker_dump()
    return NativeCrash(signum, crash_site(dump), dump)


def _worker_dump() -> str:
    """The crash stacks a worker of this command wrote (a process other than this one), or ""."""
    folder = os.environ.get(ENV_DIR)
    if not folder:
        return ""
    try:
        entries = sorted(os.listdir(folder))
    except OSError:
        return ""
    for entry in entries:
        if entry.endswith(".stacks") and entry != f"{os.getpid()}.stacks":
            dump = _read(os.path.join(folder, entry))
            if "Fatal Python error" in dump:
                return dump
    return ""


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks (as :mod:`ablate.runner.orphans` records it in ``ablate.pid_start``)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _wait(pid: int, watched: set[signal.Signals]) -> int | None:
    """The child's wait status; meanwhile a signal a process sent the parent is passed on to the child, one the
    terminal sent to the whole process group (the child has it too) is dropped."""
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return status
        info = signal.sigwaitinfo(watched)
        if info.si_signo == signal.SIGCHLD or info.si_code == SI_KERNEL:
            continue
        try:
            os.kill(pid, info.si_signo)
        except ProcessLookupError:
            pass


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def crash_site(dump: str) -> str | None:
    """``ablate.<module> (<function>)``: the innermost frame of an ablate module in a faulthandler dump, in the
    crashing thread first, then in the others (a native worker thread that crashed has no Python frames of its own;
    the main thread is then inside the call that started the work); None when there is none."""
    import re

    frame = re.compile(FRAME)
    blocks: list[tuple[bool, list[tuple[str, str]]]] = []  # (the crashing thread, its frames)
    for line in dump.splitlines():
        if line.startswith(("Current thread", "Thread ")):
            blocks.append((line.startswith("Current thread"), []))
        elif blocks and (m := frame.match(line)):
            blocks[-1][1].append((m["path"], m["function"]))
    blocks.sort(key=lambda b: not b[0])
    for _, frames in blocks:
        for path, function in frames:  # most recent call first
            if path.startswith(PACKAGE_DIR) and path.endswith(".py"):
                module = path[len(PACKAGE_DIR) : -len(".py")].replace(os.sep, ".").removesuffix(".__init__")
                return f"ablate.{module} ({function})" if module != "__init__" else f"ablate ({function})"
    return None


def describe(signum: int, site: str | None, worker: bool = False) -> tuple[str, str]:
    """(the ``ablate.failure`` reason, the console line without ``error:``) of a command ended by ``signum`` (in a
    launcher's worker: ``worker``)."""
    from ablate.app.interrupts import reason_of

    name = signal_name(signum)
    if worker and signum not in CRASHES:
        reason = f"a launcher worker was ended by signal {signum} ({name})"
        if signum == signal.SIGKILL:
            return reason, f"{reason}: by hand, or by the kernel when memory ran out (`dmesg` says which)"
        return reason, reason
    if signum in CRASHES:
        reason = f"crashed: signal {signum} ({name}) in native code" + (
            " in a launcher worker" if worker else ""
        )
        reason += f", in {site}" if site else ""
        advice = CAUSES[signal.Signals(signum)]
        return reason, f"{reason}: {advice}" + ("" if signum == signal.SIGILL else f"; {DEBUG_HINT}")
    if signum in (signal.SIGINT, signal.SIGTERM):  # ended by it before its own handler was installed
        return reason_of(signum), reason_of(signum)
    if signum == signal.SIGKILL:
        reason = f"killed by signal {signum} (SIGKILL)"
        return reason, f"{reason}: by hand, or by the kernel when memory ran out (`dmesg` says which)"
    reason = f"ended by signal {signum} ({name})"
    return reason, reason


def ended_by_signal(signum: int, pid: int, start: str | None, stores: str, crash_log: str) -> int:
    """The child ``pid`` was ended by ``signum``: one line, its runs FAILED, the exit code (128 + ``signum``)."""
    dump = _read(crash_log)
    reason, line = describe(signum, crash_site(dump))
    _say(f"error: {line}")
    debug = bool(os.environ.get("ABLATE_DEBUG"))
    if debug and dump.strip():
        _say(f"the Python stacks at the crash (faulthandler):\n{dump.rstrip()}")
    close_runs(stores, pid, start, reason, debug)
    return 128 + signum


def close_runs(stores: str, pid: int, start: str | None, reason: str, debug: bool = False) -> None:
    """End FAILED with ``reason`` the runs process ``pid`` left RUNNING in the stores named in the file ``stores``
    (and its workers' runs under them)."""
    try:
        with open(stores, encoding="utf-8") as fh:
            uris = list(dict.fromkeys(u.strip() for u in fh if u.strip()))
    except OSError:
        return  # no store was opened: no run to close
    from ablate.runner.orphans import close_runs_of_process
    from ablate.tracking import Tracker

    for uri in uris:
        try:
            close_runs_of_process(Tracker(uri), pid, start, reason)
        except Exception as e:  # noqa: BLE001 - a store that cannot be written: the next command's orphans sweep
            if debug:
                _say(f"could not close the runs in {uri}: {e!r}")


def _say(text: str) -> None:
    try:
        print(text, file=sys.stderr, flush=True)
    except OSError:  # the terminal is gone (a hang-up)
        pass
