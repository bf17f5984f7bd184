"""Shared helpers for the ``experiments/bench_*.py`` scripts: offline setup, machine facts, interleaved timing and
Markdown reports.

Timing rule (the machine is shared, so absolute seconds drift with other people's load): contenders run side by side
in one process, in rounds whose order alternates (A B, B A, ...), and the report gives the best and the median of
each contender plus their *ratio*. CPU seconds of this process (``time.process_time``) are reported beside wall
seconds: they are less sensitive to other processes, but they add up all threads of this process.
"""

from __future__ import annotations

import gc
import os

# Nothing may be fetched at run time (models are resolved offline by ablate.stages.text.models); set before any HF
# import.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import datetime as _dt  # noqa: E402
import platform  # noqa: E402
import shlex  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from importlib import metadata  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "experiments" / "results"
DATASETS = Path(os.environ.get("ABLATE_DATASETS", "/work/shared/datasets"))


def dataset_path(name_or_path: str) -> Path:
    """A dataset folder: an existing path, else ``$ABLATE_DATASETS/<name>`` (default /work/shared/datasets)."""
    p = Path(name_or_path).expanduser()
    return p if p.is_dir() else DATASETS / name_or_path


def command_line() -> str:
    """How this script was invoked, as a copy-pasteable command (venv python, path relative to the repo)."""
    script = Path(sys.argv[0]).resolve()
    try:
        script_s = str(script.relative_to(REPO))
    except ValueError:
        script_s = str(script)
    return " ".join([sys.executable, script_s, *(shlex.quote(a) for a in sys.argv[1:])])


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return None


def _git_rev() -> str:
    try:
        rev = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        return rev or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def blas_summary() -> str:
    """numpy's BLAS library, version and the kernel it picked (threadpoolctl), e.g. ``openblas 0.3.31 Haswell x2``."""
    try:
        import numpy as np
        from threadpoolctl import threadpool_info

        np.ones(2) @ np.ones(2)  # make sure numpy's BLAS is loaded
        out = []
        for lib in threadpool_info():
            if lib.get("user_api") == "blas" and "numpy" in str(lib.get("filepath", "")):
                out.append(
                    f"{lib.get('internal_api')} {lib.get('version')} {lib.get('architecture', '')} "
                    f"x{lib.get('num_threads')}".replace("  ", " ")
                )
        return "; ".join(out) or "unknown"
    except Exception:  # pragma: no cover - informative only
        return "unknown"


def machine_facts(extra_packages: Sequence[str] = ()) -> dict[str, str]:
    """What a reader needs to weigh the figures: cores, CPU, memory, load, versions, BLAS kernel, git revision."""
    import numpy as np

    facts: dict[str, str] = {
        "date (UTC)": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M"),
        "cores": f"{os.cpu_count()} logical ({len(os.sched_getaffinity(0))} usable by this process)",
        "cpu": _cpu_model(),
        "memory": f"{_mem_total_gb():.1f} GiB" if _mem_total_gb() else "unknown",
        "load average (1/5/15 min, at start)": " / ".join(f"{x:.2f}" for x in os.getloadavg()),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numpy BLAS": blas_summary(),
        "OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE": (
            f"{os.environ.get('OPENBLAS_CORETYPE', 'unset')} / {os.environ.get('OPENBLAS_L2_SIZE', 'unset')}"
        ),
        "torch": _version("torch"),
        "ablate git revision": _git_rev(),
    }
    for dist in extra_packages:
        facts[dist] = _version(dist)
    return facts


def torch_threads() -> str:
    import torch

    return f"{torch.get_num_threads()} intra-op, {torch.get_num_interop_threads()} inter-op"


# --------------------------------------------------------------------------------------------------------------------
# Timing


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """(wall seconds, CPU seconds of this process, value), after a ``gc.collect()``."""
    gc.collect()
    t, c = time.perf_counter(), time.process_time()
    value = fn()
    return time.perf_counter() - t, time.process_time() - c, value


class Timings:
    """Wall and CPU samples per contender, filled by :func:`interleaved`."""

    def __init__(self) -> None:
        self.wall: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}

    def add(self, name: str, wall: float, cpu: float) -> None:
        self.wall.setdefault(name, []).append(wall)
        self.cpu.setdefault(name, []).append(cpu)

    def best(self, name: str) -> float:
        return min(self.wall[name])

    def median(self, name: str) -> float:
        return statistics.median(self.wall[name])

    def best_cpu(self, name: str) -> float:
        return min(self.cpu[name])

    def n(self, name: str) -> int:
        return len(self.wall[name])


def interleaved(
    jobs: dict[str, Callable[[], Any]],
    repeat: int,
    timings: Timings | None = None,
    on_value: Callable[[str, int, Any], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> Timings:
    """Run every job ``repeat`` times in rounds; even rounds in the given order, odd rounds reversed, so each
    contender runs early and late under the same drifting load. ``on_value(name, round, value)`` sees each result."""
    timings = timings or Timings()
    names = list(jobs)
    for r in range(repeat):
        for name in names if r % 2 == 0 else names[::-1]:
            wall, cpu, value = timed(jobs[name])
            timings.add(name, wall, cpu)
            if log:
                log(f"  round {r + 1}/{repeat}  {name}: {wall:.2f}s wall, {cpu:.2f}s CPU")
            if on_value:
                on_value(name, r, value)
            del value
    return timings


def say(msg: str) -> None:
    """Progress to stderr (the table goes to stdout)."""
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------------------------------
# Tables and reports


def fmt(x: Any) -> str:
    """Numbers for tables: thousands separators for big ones, 4 significant digits below 1. Strings pass through."""
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, float):
        if x != x:  # NaN
            return "n/a"
        a = abs(x)
        if a >= 1000:
            return f"{x:,.0f}"
        if a >= 100:
            return f"{x:.1f}"
        if a >= 1:
            return f"{x:.2f}"
        return f"{x:.4g}"
    if isinstance(x, int):
        return f"{x:,}"
    return str(x)


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], align: str | None = None) -> str:
    """A GitHub Markdown table; ``align`` is one character per column (``l`` or ``r``; default: first left)."""
    align = align or "l" + "r" * (len(headers) - 1)
    cells = [[fmt(c) for c in row] for row in rows]
    head = "| " + " | ".join(headers) + " |"
    sep = "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"
    body = ["| " + " | ".join(r) + " |" for r in cells]
    return "\n".join([head, sep, *body])


def text_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], align: str | None = None) -> str:
    """The same table for a terminal, columns padded."""
    align = align or "l" + "r" * (len(headers) - 1)
    cells = [list(headers)] + [[fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for j, r in enumerate(cells):
        lines.append(
            "  ".join(
                c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(r, widths, align, strict=True)
            )
        )
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


class Report:
    """Collects sections; prints them as text and writes them as Markdown to ``experiments/results/bench_<name>.md``."""

    def __init__(self, name: str, title: str, intro: str = "") -> None:
        self.name = name
        self.title = title
        self.intro = intro.strip()
        self.command = command_line()
        self.parts: list[tuple[str, str, str]] = []  # (kind, markdown, text)

    def heading(self, text: str) -> None:
        self.parts.append(("heading", f"## {text}", f"\n== {text} =="))

    def para(self, text: str) -> None:
        self.parts.append(("para", text.strip(), text.strip()))

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Any]], align: str | None = None) -> None:
        self.parts.append(("table", md_table(headers, rows, align), text_table(headers, rows, align)))

    def facts(self, facts: dict[str, str]) -> None:
        self.table(["fact", "value"], [[k, v] for k, v in facts.items()], "ll")

    def markdown(self) -> str:
        out = [f"# {self.title}", ""]
        if self.intro:
            out += [self.intro, ""]
        out += ["Command:", "", "```", self.command, "```", ""]
        for _, md, _ in self.parts:
            out += [md, ""]
        return "\n".join(out).rstrip() + "\n"

    def text(self) -> str:
        return "\n".join(t for _, _, t in self.parts)

    def emit(self, out: str | os.PathLike[str] | None = None) -> Path:
        """Print the text form and write the Markdown; returns the file written."""
        print(self.text())
        path = Path(out) if out else RESULTS / f"bench_{self.name}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.markdown(), encoding="utf-8")
        print(f"\nwrote {path}")
        return path


def status_kb(field: str) -> int:
    """A ``/proc/self/status`` figure in KiB (``VmRSS``, ``VmHWM``, ...): Linux only."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def reset_peak() -> bool:
    """Reset this process's RSS high-water mark (``VmHWM``; Linux >= 4.0); False where refused."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False
