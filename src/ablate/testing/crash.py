"""A test-only stage that crashes its process the way native code does, inside a cell of a real run: the oracle
retriever that sends its own process a signal (SIGILL by default) when it searches. Selected on the command line like
any stage, e.g. ``python -m ablate -m variant=A,oracle oracle._target_=ablate.testing.crash.CrashingRetriever
++oracle.signal=SIGSEGV`` (tests/test_crash.py)."""

from __future__ import annotations

import os
import signal as signals
from collections.abc import Sequence
from typing import Any

import numpy as np

from ablate.data.snapshot import Snapshot
from ablate.data.types import Query, Run
from ablate.errors import ConfigError
from ablate.stages.retrievers.oracle import OracleRetriever

#: Part of its fingerprint (every stage module declares one).
CODE_VERSION = "ablate-test-crash/1"
#: The signals it may send: those of a crash in native code; ``none``: it is the oracle (a sweep's cell that works).
SIGNALS = ("SIGILL", "SIGSEGV", "SIGBUS", "SIGABRT", "SIGFPE", "none")


class CrashingRetriever(OracleRetriever):
    """The oracle, ended by ``signal`` at its first search (``none``: never)."""

    def __init__(self, name: str = "oracle", min_grade: int = 1, signal: str = "SIGILL") -> None:
        super().__init__(name, min_grade)
        if signal not in SIGNALS:
            raise ConfigError(f"{name}.signal", signal, f"one of {', '.join(SIGNALS)}")
        self.signal = signal

    def params(self) -> dict[str, Any]:
        return {**super().params(), "signal": self.signal}

    def bind(self, snapshot: Snapshot, split: str) -> CrashingRetriever:
        bound = CrashingRetriever(self.name, self.min_grade, self.signal)
        bound._qrels = snapshot.split_qrels(split)
        return bound

    def search(self, queries: Sequence[Query], depth: int, allowed: np.ndarray | None = None) -> Run:
        if self.signal != "none":
            os.kill(os.getpid(), getattr(signals, self.signal))
        return super().search(queries, depth, allowed)
