"""How a call into MLflow is made: retried while sqlite is locked, briefly once the command is stopping, and known
to be under way (so a signal waits for it to return)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


#: Seconds a write to a locked database is retried once the command is stopping (:func:`hurry`); None = the usual
#: retries (about 20 s in all).
HURRY_SECONDS: list[float] = []


def hurry(seconds: float = 2.0) -> None:
    """The command is stopping (an interrupt, a signal): from now on a write to a locked database is retried for at
    most ``seconds`` in all, and a request to a tracking server is tried once with a timeout of ``seconds`` + 1, so
    the closing writes cannot keep an interrupted command waiting. (A single sqlite statement may still wait for
    MLflow's busy timeout; the caller bounds the whole closing.)"""
    HURRY_SECONDS[:] = [seconds]
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = "0"
    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(int(seconds) + 1)


_CALLS = threading.local()


@contextlib.contextmanager
def _store_call() -> Iterator[None]:
    _CALLS.depth = getattr(_CALLS, "depth", 0) + 1
    try:
        yield
    finally:
        _CALLS.depth -= 1


def in_store_call() -> bool:
    """Whether this thread is inside a call into MLflow. :mod:`ablate.app.interrupts` holds a signal until the call
    returns: an exception raised inside SQLAlchemy can leave an unfinished read holding sqlite's lock, and every
    later write of this process (the closing ``FAILED`` first) would wait for it."""
    return getattr(_CALLS, "depth", 0) > 0


#: The wait on a locked sqlite store: first sleep, growth per attempt, longest sleep, attempts. The 11 sleeps add up
#: to about 20 s (21.6 s): time for the other jobs' writes, while a lock nobody releases is still reported.
RETRY_FIRST_DELAY = 0.2
RETRY_GROWTH = 1.7
RETRY_MAX_DELAY = 3.0
RETRY_ATTEMPTS = 12


def _retry(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    delay = RETRY_FIRST_DELAY
    start = time.monotonic()
    for attempt in range(RETRY_ATTEMPTS):
        try:
            with _store_call():
                return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - mlflow wraps sqlite errors in several types
            msg = str(e).lower()
            late = bool(HURRY_SECONDS) and time.monotonic() - start + delay > HURRY_SECONDS[0]
            if ("locked" not in msg and "busy" not in msg) or attempt == RETRY_ATTEMPTS - 1 or late:
                raise
            time.sleep(delay)
            delay = min(delay * RETRY_GROWTH, RETRY_MAX_DELAY)
    raise AssertionError("unreachable")  # pragma: no cover
