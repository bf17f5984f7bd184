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
from typing import IO, Any, Protocol


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


class AnswerSink(Protocol):
    """What a generator tells about each answer it hands back (:meth:`GeneratorBase.generate
    <ablate.stages.generate.base.GeneratorBase.generate>`): the seconds it took to generate, or None when the cache
    served it."""

    def answered(self, seconds: float | None) -> None: ...


class AnswerCount:
    """The answers of a whole sweep: ``answers 35/100 · 65 left · ETA 4m10s``. Answers served by the cache count as
    done but not in the mean time per answer, so the ETA (the answers left times the mean seconds of the answers
    generated so far) stays what generating them costs; an answer left is assumed to be generated (the cache may
    still serve it: the ETA is an upper bound). No ETA before the first answer is generated."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = self.cached = 0
        self.seconds = 0.0  # generating the answers not served by the cache

    def answered(self, seconds: float | None) -> None:
        self.done += 1
        if seconds is None:
            self.cached += 1
        else:
            self.seconds += max(0.0, seconds)

    @property
    def left(self) -> int:
        return max(0, self.total - self.done)

    def eta(self) -> float | None:
        """Seconds until the last answer: the answers left times the mean seconds of a generated answer."""
        generated = self.done - self.cached
        if not generated or not self.left:
            return None if self.left else 0.0
        return self.left * self.seconds / generated

    def line(self) -> str:
        text = f"answers {self.done:,}/{self.total:,} · {self.left:,} left"
        if self.cached:
            text += f" ({self.cached:,} cached)"
        eta = self.eta()
        if eta is not None and self.left:
            text += f" · ETA {_duration(eta)}"
        return text


class SweepProgress:
    """The console of a ``-m`` sweep: one line per cell as it ends (on stdout: its label, headline figures and time,
    or ``(reused)``), and one overall line on stderr: when the first job starts, then on a terminal redrawn after
    every cell (off a terminal at most every ``interval`` seconds), and a last one when the sweep ends. The ETA is
    the mean time of the cells that ran times the cells left; reused cells are counted apart (they cost nothing).

    A sweep with a generator (``answers``: how many answers its cells ask for) counts answers instead: the overall
    line leads with :class:`AnswerCount`'s ``answers 35/100 · 65 left · ETA 4m10s`` (the ETA of the whole sweep's
    answers, which dominate its time) and is redrawn after every answer on a terminal; the sweep is the
    generators' :class:`AnswerSink`, and their own per-run line is left out."""

    def __init__(
        self,
        total: int,
        out: IO[str] | None = None,
        err: IO[str] | None = None,
        interval: float = 30.0,
        answers: int = 0,
    ) -> None:
        self.total = total
        self.out, self.err = out, err
        self.interval = interval
        self.start = self._last = time.perf_counter()
        self.ran: list[float] = []
        self.reused = self.failed = 0
        self.started = self.closed = False
        self._drawn = False
        self.answers = AnswerCount(answers) if answers > 0 else None

    @property
    def done(self) -> int:
        return len(self.ran) + self.reused

    def _streams(self) -> tuple[IO[str], IO[str]]:
        return self.out or sys.stdout, self.err or sys.stderr

    def _tty(self) -> bool:
        return bool(getattr(self._streams()[1], "isatty", lambda: False)())

    def line(self) -> str:
        """``[sweep] 3/12 cells, 1 reused, 7s elapsed, eta 19s``; with answers to count
        ``[sweep] answers 35/100 · 65 left · ETA 4m10s · 1/5 cells, 1m02s elapsed``."""
        elapsed = time.perf_counter() - self.start
        if self.answers is not None:
            text = f"[sweep] {self.answers.line()} · {self.done}/{self.total} cells"
            if self.reused:
                text += f", {self.reused} reused"
            if self.failed:
                text += f", {self.failed} failed"
            return text + f", {_duration(elapsed)} elapsed"
        text = f"[sweep] {self.done}/{self.total} cells"
        if self.reused:
            text += f", {self.reused} reused"
        if self.failed:
            text += f", {self.failed} failed"
        text += f", {_duration(elapsed)} elapsed"
        left = self.total - self.done
        if self.ran and left > 0:
            text += f", eta {_duration(left * sum(self.ran) / len(self.ran))}"
        return text

    def _say(self, text: str, final: bool = False) -> None:
        """The overall line: redrawn in place on a terminal (ended by a newline when ``final``), else a new line."""
        err = self._streams()[1]
        if self._tty():
            err.write("\r\x1b[K" + text + ("\n" if final else ""))
            self._drawn = not final
        else:
            err.write(text + "\n")
        err.flush()
        self._last = time.perf_counter()

    def begin(self, text: str | None = None) -> None:
        """Said once, before the first job starts: ``text``, else ``[sweep] running N of M cells``."""
        if self.started:
            return
        self.started = True
        self._say(
            text
            or f"[sweep] running {self.total - self.done} of {self.total} cell{'s' if self.total != 1 else ''}"
        )

    def cell(self, index: int, label: str, figures: str, seconds: float | None, reused: bool = False) -> None:
        """One cell ended: its line (``[3/12] C k=60 window=20  ndcg@10 0.688  recall@10 0.843  2.1 s``)."""
        out, err = self._streams()
        if self._drawn:  # clear the overall line before a result line takes its place
            err.write("\r\x1b[K")
            err.flush()
            self._drawn = False
        print(cell_line(index, self.total, label, figures, seconds, reused), file=out, flush=True)
        if reused:
            self.reused += 1
        elif seconds is not None:
            self.ran.append(seconds)
        due = self._tty() or time.perf_counter() - self._last >= self.interval
        if self.started and self.done < self.total and due:
            self._say(self.line())

    def answered(self, seconds: float | None) -> None:
        """One answer of the sweep handed back (``seconds`` to generate it; None: from the cache): counted, and the
        overall line redrawn on a terminal (off one at most every ``interval`` seconds)."""
        if self.answers is None:
            return
        self.answers.answered(seconds)
        due = self._tty() or time.perf_counter() - self._last >= self.interval
        if self.started and due:
            self._say(self.line())

    def fail(self, index: int, label: str, seconds: float) -> None:
        self.failed += 1
        self.cell(index, label, "FAILED (the error is above)", seconds)

    def close(self, launched: int | None = None) -> None:
        """The last overall line: how long the sweep took, cells run (their mean time) and reused."""
        if self.closed or not (self.started or self.done):
            return
        self.closed = True
        elapsed = time.perf_counter() - self.start
        parts = []
        if self.ran:
            parts.append(f"{len(self.ran)} run (mean {sum(self.ran) / len(self.ran):.1f} s)")
        elif launched:
            parts.append(f"{launched} run")
        if self.reused:
            parts.append(f"{self.reused} reused")
        if self.failed:
            parts.append(f"{self.failed} failed")
        answers = ""
        if self.answers is not None:
            a = self.answers
            answers = f" · answers {a.done:,}/{a.total:,}" + (f" ({a.cached:,} cached)" if a.cached else "")
        self._say(
            f"[sweep] {self.total} cell{'s' if self.total != 1 else ''} in {_duration(elapsed)}: {', '.join(parts) or 'none run'}"
            + answers,
            final=True,
        )


def cell_line(
    index: int, total: int, label: str, figures: str, seconds: float | None, reused: bool = False
) -> str:
    """``[3/12] C k=60 window=20  ndcg@10 0.688  recall@10 0.843  2.1 s`` (``(reused)`` for a reused cell)."""
    took = "(reused)" if reused else (f"{seconds:.1f} s" if seconds is not None else "")
    return f"[{index + 1}/{total}] {label}  {figures}  {took}".rstrip()


#: The figures of a sweep's cell line, in order (``correct``: answers, with a generator).
CELL_FIGURES: tuple[str, ...] = ("ndcg@10", "recall@10", "correct")


def cell_figures(values: dict[str, Any]) -> str:
    """``ndcg@10 0.688  recall@10 0.843`` from a job's headline values (missing or None ones left out)."""
    return "  ".join(f"{k} {float(values[k]):.3f}" for k in CELL_FIGURES if values.get(k) is not None)
