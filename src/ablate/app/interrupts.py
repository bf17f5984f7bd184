"""How a command ends when it is interrupted (Ctrl-C: SIGINT) or terminated (``kill``, a CI timeout: SIGTERM).

:func:`install` turns both signals into exceptions in the main thread: ``KeyboardInterrupt`` and :class:`Terminated`
(a ``SystemExit``). Every MLflow run they pass through ends FAILED with the reason
(:meth:`ablate.tracking.Tracker.run`), and the entry point hands them to :func:`stop`: one line ``error: <reason>``
on stderr, every run this process still has RUNNING (a sweep's parent, a run caught while it was being created)
ended FAILED with the same reason, exit 130 for SIGINT and 143 for SIGTERM (128 + the signal), no traceback.

The exit is bounded wherever the signal lands:

* a signal that arrives while the main thread is inside a call into MLflow is held until that call returns
  (:func:`ablate.tracking.in_store_call`; each call takes milliseconds): an exception raised inside SQLAlchemy can
  leave an unfinished read holding sqlite's lock, and this process's own closing writes then waited for it until
  they gave up (20 s each);
* from the signal on, the closing writes do not wait for a locked store (:func:`ablate.tracking.hurry`);
* the closing gets :data:`CLOSE_SECONDS`; then the process exits anyway (a run still RUNNING is closed by the next
  command on the store, :mod:`ablate.runner.orphans`);
* a signal that lands while a finaliser or a weakref callback runs (SQLAlchemy's, torch's: the garbage collector
  runs them at any moment) would have its exception printed as "Exception ignored in ..." and dropped, and the
  command would go on as if nothing happened: :func:`_unraisable` drops that printout and raises the exception
  again in the main thread at its next step;
* a signal whose exception still never reaches the entry point (a library that catches it, native code that does
  not return) is acted on by a watchdog thread after :data:`GRACE_SECONDS`;
* a second signal while the first one is handled is ignored: the exit is already under way, within the bounds above;
* a signal after the command's work is over (while the interpreter shuts down) exits at once with the same line and
  code (:func:`_late`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

T = TypeVar("T")

INTERRUPTED = "interrupted by the user"
#: Seconds the main thread has, after a signal, to reach :func:`stop` before the watchdog stops the command itself.
GRACE_SECONDS = 5.0
#: Seconds :func:`stop` has to end the open runs FAILED before the process exits regardless.
CLOSE_SECONDS = 5.0
#: Seconds a closing write retries a locked store (:func:`ablate.tracking.hurry`).
HURRY_SECONDS = 2.0

_SIGNALLED: list[int] = []  # the first signal received, if any
#: Set while the first signal's exception is still to be raised: held during an MLflow call, or dropped by a finaliser.
_PENDING: list[int] = []
_STOPPING = threading.Lock()  # held by the one thread that closes the runs and exits


class Terminated(SystemExit):
    """SIGTERM (or another terminating signal) as an exception: ``finally`` blocks and run closers see it, and the run
    it ends is FAILED with its text, ``terminated by signal 15``."""

    def __init__(self, signum: int) -> None:
        super().__init__(reason_of(signum))
        self.signum = signum


def reason_of(signum: int) -> str:
    """The ``ablate.failure`` text for a command stopped by ``signum``."""
    return INTERRUPTED if signum == signal.SIGINT else f"terminated by signal {signum}"


def signal_of(e: BaseException) -> int | None:
    """The signal an exception stands for (SIGINT for ``KeyboardInterrupt``), or None."""
    if isinstance(e, KeyboardInterrupt):
        return int(signal.SIGINT)
    if isinstance(e, Terminated):
        return e.signum
    return None


def _exception(signum: int) -> BaseException:
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)


def _again() -> None:
    """Send the first signal to the main thread again in a moment, from another thread: the main thread runs its
    handler at its next step, not inside the code that held or dropped it (a real signal, so a blocking call such as
    a sleep or a read is interrupted too)."""
    main = threading.main_thread().ident
    if main is None:
        return
    timer = threading.Timer(0.01, signal.pthread_kill, (main, _SIGNALLED[0]))
    timer.daemon = True
    timer.start()


def _on_signal(signum: int, frame: object) -> None:
    tracking = sys.modules.get("ablate.tracking")  # not imported yet: no store is open
    if not _SIGNALLED:
        _SIGNALLED.append(signum)
        _PENDING[:] = [1]
        if tracking is not None:
            tracking.hurry(HURRY_SECONDS)
        watchdog = threading.Timer(GRACE_SECONDS, stop, (signum,))
        watchdog.daemon = True
        watchdog.start()
    if not _PENDING or _STOPPING.locked():  # delivered already: the exit is under way (bounded)
        return
    if tracking is not None and tracking.in_store_call():  # raised when MLflow's call has returned
        _again()
        return
    _PENDING.clear()
    raise _exception(_SIGNALLED[0])


def _unraisable(unraisable: Any) -> None:
    """``sys.unraisablehook``: the exception of our signal, dropped by a finaliser or a weakref callback it
    interrupted, is raised again in the main thread a moment later (:func:`_again`: raised from here it would be
    dropped too); anything else goes to the previous hook."""
    if (
        _SIGNALLED
        and isinstance(unraisable.exc_value, (KeyboardInterrupt, Terminated))
        and not _STOPPING.locked()
    ):
        _PENDING[:] = [1]
        _again()
        return
    _PREVIOUS_HOOK[0](unraisable)


_PREVIOUS_HOOK: list[Callable[[Any], None]] = []


def install() -> None:
    """Handle SIGINT and SIGTERM as above, in the main thread. A signal the command was started with ignored (a
    background job of a shell ignores SIGINT) stays ignored; elsewhere (a launcher's worker thread) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL)):
        if signal.getsignal(signum) is default:
            signal.signal(signum, _on_signal)
    if not _PREVIOUS_HOOK:
        _PREVIOUS_HOOK.append(sys.unraisablehook)
        sys.unraisablehook = _unraisable


def guarded(command: Callable[[], T]) -> T:
    """Run ``command`` (an entry point) with the signals handled: a signal's exception that reaches here ends it by
    :func:`stop`; anything else propagates."""
    install()
    try:
        result = command()
        _done()
        return result
    except BaseException as e:
        signum = signal_of(e)
        if signum is not None:
            stop(signum)
        _done()
        raise


def _late(signum: int, frame: object) -> None:
    """A signal after the command's work ended (its runs are closed): one line and the signal's exit code at once,
    instead of an exception that nothing would catch while the interpreter shuts down."""
    print(f"error: {reason_of(signum)}", file=sys.stderr)
    exit_now(128 + signum)


def _done() -> None:
    """The command's work is over: from now on a signal ends the process at once (:func:`_late`)."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) is _on_signal:
            signal.signal(signum, _late)


def close_runs(reason: str) -> None:
    """End FAILED with ``reason`` every run this process has left RUNNING in the stores it opened."""
    from ablate.runner.orphans import close_own_runs
    from ablate.tracking import shared_trackers

    for tracker in shared_trackers():
        try:
            close_own_runs(tracker, reason)
        except Exception as e:  # noqa: BLE001 - a store that cannot be written: the next command's orphans sweep
            if os.environ.get("ABLATE_DEBUG"):
                print(f"could not close the runs in {tracker.uri}: {e!r}", file=sys.stderr)


def exit_now(code: int) -> NoReturn:
    """Flush stdout and stderr (a closed pipe is no error) and end the process with ``code`` at once."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001, S110 - a closed pipe: nothing more to say
            pass
    os._exit(code)


def _show_main_thread() -> None:
    """Where the main thread is while the watchdog stops the command (``ABLATE_DEBUG=1``): what kept the signal's
    exception from reaching the entry point."""
    import traceback

    frame = sys._current_frames().get(threading.main_thread().ident or -1)
    if frame is not None:
        stack = "".join(traceback.format_stack(frame))
        print(f"the interrupt did not reach the command; its main thread was at:\n{stack}", file=sys.stderr)


def stop(signum: int) -> NoReturn:
    """End the command stopped by ``signum``: one line, every open run FAILED, exit 128 + ``signum``. Safe from any
    thread; the first caller closes, a second one waits for the exit."""
    if not _SIGNALLED:
        _SIGNALLED.append(signum)
    signum = _SIGNALLED[0]
    code = 128 + signum
    with _STOPPING:
        from ablate.tracking import hurry

        hurry(HURRY_SECONDS)
        print(f"error: {reason_of(signum)}", file=sys.stderr, flush=True)
        if threading.current_thread() is not threading.main_thread() and os.environ.get("ABLATE_DEBUG"):
            _show_main_thread()
        deadline = threading.Timer(CLOSE_SECONDS, exit_now, (code,))
        deadline.daemon = True
        deadline.start()
        try:
            close_runs(reason_of(signum))
        finally:
            exit_now(code)
