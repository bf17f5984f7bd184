"""One style for long work: ``[label] 1,024/5,183 (20%) 16.3 items/s, eta 4m15s``.

On a terminal the line is redrawn in place (at most 5 times a second); when stderr is not a terminal (a log file,
CI) a new line is printed at most every ``interval`` seconds (30 by default), so logs stay readable; the last line
("done in ...") is always printed. Encoding, reranker scoring and training, and the cells of a sweep use it.

:func:`batches` hooks sentence-transformers' own batch loop (its ``trange``) instead of re-batching the texts, so
progress never changes how texts are grouped (and so never changes a vector); if a sentence-transformers version
moves that loop, encoding simply runs without progress lines.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import time
from collections.abc import Iterator
from typing import IO, Any


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class Progress:
    """Counts ``done`` of ``total`` items of one labelled piece of work (see the module docstring)."""

    def __init__(
        self,
        label: str,
        total: int | None,
        unit: str = "items",
        enabled: bool = True,
        stream: IO[str] | None = None,
        interval: float | None = None,
    ) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval if interval is not None else (0.2 if self.tty else 30.0)
        self.done = 0
        self.start = self._last = time.perf_counter()
        self._closed = False

    def line(self) -> str:
        elapsed = time.perf_counter() - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        if self.total:
            text = f"[{self.label}] {self.done:,}/{self.total:,} ({100 * self.done / self.total:.0f}%)"
            if rate > 0 and self.done < self.total:
                text += f" {rate:.1f} {self.unit}/s, eta {_duration((self.total - self.done) / rate)}"
        else:
            text = f"[{self.label}] {self.done:,} {self.unit}"
        return text

    def update(self, n: int = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self._last >= self.interval:
            self._last = now
            self._emit(self.line())

    def _emit(self, text: str, final: bool = False) -> None:
        if self.tty:
            self.stream.write("\r\x1b[K" + text + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.enabled:
            elapsed = time.perf_counter() - self.start
            rate = f", {self.done / elapsed:.1f} {self.unit}/s" if elapsed > 0 and self.done else ""
            self._emit(
                f"[{self.label}] {self.done:,} {self.unit} done in {_duration(elapsed)}{rate}", final=True
            )

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def batches(module: str, label: str, total_items: int, batch_size: int, enabled: bool) -> Iterator[None]:
    """While the body runs, the batch loop of sentence-transformers' ``module`` (its ``trange``) reports to one
    :class:`Progress` of ``total_items``. Does nothing when disabled or when the module has no such loop."""
    mod: Any = None
    if enabled:
        with contextlib.suppress(ImportError):
            mod = importlib.import_module(module)
    original = getattr(mod, "trange", None)
    if original is None:
        yield
        return
    progress = Progress(label, total_items, enabled=True)

    def trange(*args: int, **kwargs: Any) -> Iterator[int]:
        kwargs.pop("desc", None)
        kwargs.pop("disable", None)
        for i in range(*args):
            yield i
            progress.update(min(batch_size, max(0, total_items - progress.done)))

    mod.trange = trange
    try:
        yield
    finally:
        mod.trange = original
        progress.close()
