"""``python -m MODULE ARGS`` run in this process: what a test of a refusal needs from the command, without the seconds a
new interpreter takes to import torch, MLflow and Hydra for a one-line answer.

:func:`run_module` does what the interpreter does for ``python -m MODULE ARGS`` (``runpy`` with ``sys.argv``, the
command's folder first on ``sys.path``, its working folder and environment) and hands back a
:class:`subprocess.CompletedProcess` (exit code, stdout, stderr), so a test's assertions read it as they read a real
process's. The command sees what a new process would:

* stdout and stderr: file descriptors 1 and 2 point to files of their own while it runs (native code's writes are
  caught as well), ``sys.stdout``/``sys.stderr`` are text streams on those descriptors (no tty, UTF-8); a logging
  handler that writes to the console the test process had writes there too while the command runs; an empty stdin;
* ``SystemExit``: its code as the exit code (None 0, a text printed to stderr and 1), an exception that escapes:
  its traceback on stderr and 1, as the interpreter reports them;
* warnings: the interpreter's default filters and printing (pytest records them instead, with its own filters);
* the process-wide state a first command leaves (listed in :data:`FRESH`) is as a new process has it.

Afterwards the test process is as it was: signal handlers and mask (the entry points install theirs, and after the
command one that calls ``os._exit``), ``sys.unraisablehook``/``excepthook``, ``threading.excepthook``, ``sys.argv``,
``sys.path``, the working folder, the environment, Hydra's singletons and OmegaConf's resolvers, the logging
configuration (every logger's level, handlers, propagation), ``gc.freeze``. Safe to call many times in a row; not
from several threads at once (one process has one working folder, one environment, one pair of descriptors 1 and 2).

What a command needs a process of its own for stays a subprocess: exit codes set by ``os._exit`` (a signal, the
supervisor's fork, ``interrupts._late``), the console (a tty, its encoding), the crash handler, ``atexit`` work.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import importlib
import io
import logging
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

#: Module-level state of ablate that a command leaves behind and a new process starts without: (module, name, how
#: it is emptied). A new module-level cache or set must be listed here or in :data:`KEPT`
#: (test_catalogue.py::test_the_runner_knows_every_process_wide_cache_of_ablate).
FRESH: tuple[tuple[str, str, str], ...] = (
    # the loaded corpus, prepared stages, candidates
    ("ablate.runner.session", "_SHARED", "none"),
    # one Tracker per store, tracking servers found down, the hurry of a stopping command
    ("ablate.tracking.tracker", "_SHARED", "clear"),
    ("ablate.tracking.store", "_DOWN", "clear"),
    ("ablate.tracking.calls", "HURRY_SECONDS", "clear"),
    # said once per process: values cut, generators whose prompts fit, "running emulated", prefix notes
    ("ablate.tracking.limits", "_SAID", "clear"),
    ("ablate.runner.inputs", "_SAID", "clear"),
    ("ablate.runner.answers", "_FITS", "clear"),
    ("ablate.stages.text.compute", "_NOTED", "clear"),
    ("ablate.stages.retrievers.dense", "_NOTED", "clear"),
    # Ray jobs whose worker was lost
    ("ablate.app.cluster", "LOST_JOBS", "clear"),
    # the first signal, and the hook install() keeps (else it would not set sys.unraisablehook again)
    ("ablate.app.interrupts", "_SIGNALLED", "clear"),
    ("ablate.app.interrupts", "_PENDING", "clear"),
    ("ablate.app.interrupts", "_PREVIOUS_HOOK", "clear"),
    # keys a provider remembered to redact
    ("ablate.secrets", "_REMEMBERED", "clear"),
    # by path (and size and mtime): a case's file is read again
    ("ablate.runner.reuse", "_file_sha256", "cache_clear"),
    ("ablate.stages.generate.gguf", "_gguf_problem", "cache_clear"),
)
#: Process-wide caches of ablate kept between commands, and why a command cannot tell.
KEPT: dict[tuple[str, str], str] = {
    ("ablate.runner.reuse", "package_digest"): "the package's source does not change under the tests",
    ("ablate.runner.job", "git_commit"): "the checkout's commit does not change under the tests",
    ("ablate.cache", "source_digest"): "source files do not change under the tests",
    ("ablate.evaluation.stats.kept", "code_digest"): "source files do not change under the tests",
    ("ablate.stages.base", "_installed_version"): "installed versions do not change under the tests",
    ("ablate.stages.text.tokenize", "_version"): "installed versions do not change under the tests",
    ("ablate.stages.text.tokenize", "_jieba_tok"): "a tokenizer built once, the same in every process",
    ("ablate.stages.generate.cpu", "installed_wheel_folder"): "installed files do not change under the tests",
    ("ablate.stages.generate.llama_cpp", "llama_build"): "the imported llama.cpp does not change",
    ("ablate.app.paths", "_parsed_yaml"): "keyed by path, mtime and size: an edited file is read again",
    ("ablate.stages.text.compute", "_MEASURED"): "a measurement of this CPU (also kept in the cache folder)",
    ("ablate.app.supervise", "_CRASH_LOG"): "only under the supervisor (ABLATE_NO_SUPERVISOR=1 here)",
}
#: Loggers a command configures (Hydra's job and hydra logging, ablate's own, the ones ablate quiets): made before
#: the command runs, so their configuration is put back afterwards even when the command made them.
LOGGERS = ("ablate", "hydra", "urllib3.connectionpool", "werkzeug", "mlflow", "alembic", "bm25s", "jieba")
#: CPython's warning filters at start-up (not in development mode), last applied first.
DEFAULT_FILTERS = (
    ("default", DeprecationWarning, "__main__"),
    ("ignore", DeprecationWarning, ""),
    ("ignore", PendingDeprecationWarning, ""),
    ("ignore", ImportWarning, ""),
    ("ignore", ResourceWarning, ""),
)

_LOCK = threading.Lock()


def _fresh_state() -> None:
    """Empty :data:`FRESH` in the modules already imported (one not imported yet starts empty anyway)."""
    for module, name, how in FRESH:
        mod = sys.modules.get(module)
        if mod is None:
            continue
        value = getattr(mod, name)
        if how == "none":
            setattr(mod, name, None)
        elif how == "clear":
            value.clear()
        else:
            value.cache_clear()


class _Stream(io.TextIOWrapper):
    """``sys.stdout``/``sys.stderr`` of a command: text on descriptor 1 or 2 as a process's own pipe has it (UTF-8,
    stderr's errors ``backslashreplace``), written through at once (the descriptor is read when the command ends)."""

    def __init__(self, fd: int) -> None:
        super().__init__(
            io.FileIO(fd, "w", closefd=False),
            encoding="utf-8",
            errors="backslashreplace" if fd == 2 else "strict",
            write_through=True,
        )


_STDOUT, _STDERR = _Stream(1), _Stream(2)


def _show_warning(msg: Any) -> None:
    """The interpreter's own printing of a warning (pytest's records it)."""
    file = msg.file if msg.file is not None else sys.stderr
    if file is None:
        return
    with contextlib.suppress(OSError):
        file.write(warnings._formatwarnmsg_impl(msg))  # type: ignore[attr-defined]


@contextlib.contextmanager
def _interpreter_warnings(module: str) -> Iterator[None]:
    """The interpreter's warning filters (its defaults, ``-W``, ``PYTHONWARNINGS``, and those ablate's modules add when
    imported) and printing, for a command run as ``module``."""
    with warnings.catch_warnings():
        warnings.resetwarnings()
        for action, category, module in reversed(DEFAULT_FILTERS):
            warnings.filterwarnings(action, category=category, module=module)
        warnings._processoptions(sys.warnoptions)  # type: ignore[attr-defined]  # -W, PYTHONWARNINGS
        warnings.showwarning = warnings._showwarning_orig  # type: ignore[attr-defined]
        warnings._showwarnmsg_impl = _show_warning  # type: ignore[attr-defined]
        if (
            module.split(".")[0] == "ablate"
        ):  # every entry point imports ablate.app, whose import adds a filter
            importlib.reload(importlib.import_module("ablate.app"))
        yield


def _logging_state() -> dict[str, Any]:
    manager = logging.Logger.manager
    loggers = {"": logging.getLogger(), **{n: logging.getLogger(n) for n in LOGGERS}}
    loggers.update({n: lg for n, lg in manager.loggerDict.items() if isinstance(lg, logging.Logger)})
    return {
        "loggers": {
            n: (lg, lg.level, list(lg.handlers), lg.propagate, lg.disabled, list(lg.filters))
            for n, lg in loggers.items()
        },
        "disable": manager.disable,
        "handlers": {id(h()): h() for h in logging._handlerList if h() is not None},  # type: ignore[attr-defined]
    }


def _restore_logging(state: dict[str, Any]) -> None:
    manager = logging.Logger.manager
    for lg, level, handlers, propagate, disabled, filters in state["loggers"].values():
        lg.setLevel(level)
        lg.handlers[:] = handlers
        lg.propagate, lg.disabled, lg.filters[:] = propagate, disabled, filters
    for name, lg in list(
        manager.loggerDict.items()
    ):  # made by the command: as its module left it, not disabled
        if isinstance(lg, logging.Logger) and name not in state["loggers"]:
            lg.disabled = False
    logging.disable(state["disable"])
    attached = {
        id(h)
        for lg in [logging.getLogger(), *manager.loggerDict.values()]
        for h in getattr(lg, "handlers", [])
    }
    for ref in list(logging._handlerList):  # type: ignore[attr-defined]
        h = ref()
        if h is not None and id(h) not in state["handlers"] and id(h) not in attached:
            h.close()  # made by the command's logging configuration (Hydra's log file) and dropped with it


@contextlib.contextmanager
def _console_handlers(stdout: Any, stderr: Any) -> Iterator[None]:
    """Logging handlers that write to the test process's console (its ``stdout``/``stderr``, or the interpreter's
    original streams) write to the command's while it runs."""
    proxies = {
        id(stdout): _STDOUT,
        id(sys.__stdout__): _STDOUT,
        id(stderr): _STDERR,
        id(sys.__stderr__): _STDERR,
    }
    swapped = []
    for ref in list(logging._handlerList):  # type: ignore[attr-defined]
        h = ref()
        if isinstance(h, logging.StreamHandler) and id(h.stream) in proxies:
            swapped.append((h, h.stream))
            h.stream = proxies[id(h.stream)]
    try:
        yield
    finally:
        for h, stream in swapped:
            h.stream = stream


def _hydra_found() -> tuple[type, ...]:
    """Hydra's singletons filled as plugins are found and imported (once per process, as a new process that imported
    them has them): kept. The others (GlobalHydra, HydraConfig, JobRuntime, VersionBase) hold a command's state."""
    from hydra._internal.sources_registry import SourcesRegistry
    from hydra.core.config_store import ConfigStore
    from hydra.core.plugins import Plugins

    return Plugins, SourcesRegistry, ConfigStore


def _hydra_state() -> Any:
    from hydra.core.singleton import Singleton
    from omegaconf.basecontainer import BaseContainer

    found = _hydra_found()
    instances = {k: v for k, v in Singleton._instances.items() if k not in found}
    return copy.deepcopy(instances), copy.deepcopy(BaseContainer._resolvers)


def _restore_hydra(state: Any) -> None:
    from hydra.core.singleton import Singleton
    from omegaconf.basecontainer import BaseContainer

    instances, resolvers = state
    found = _hydra_found()
    Singleton._instances = {**{k: v for k, v in Singleton._instances.items() if k in found}, **instances}
    BaseContainer._resolvers = resolvers


def _exit_code(e: SystemExit) -> int:
    """The exit code the interpreter makes of ``SystemExit(code)``; a code that is not an int is printed."""
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


def run_module(
    module: str,
    args: Sequence[str],
    *,
    cwd: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m module *args`` in folder ``cwd`` with environment ``env`` (default: this process's), run in this
    process: the exit code and what it printed (see the module docstring). ``ABLATE_NO_SUPERVISOR=1`` is set (the
    supervisor would fork this process)."""
    with _LOCK:
        return _run(module, list(args), Path(cwd), dict(os.environ if env is None else env))


def _run(module: str, args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env["ABLATE_NO_SUPERVISOR"] = "1"
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    saved_argv, saved_path = (sys.argv, list(sys.argv)), list(sys.path)
    saved_streams = (sys.stdin, sys.stdout, sys.stderr)
    saved_hooks = (sys.unraisablehook, sys.excepthook, threading.excepthook)
    saved_signals = {
        s: signal.getsignal(s) for s in signal.valid_signals() if signal.getsignal(s) is not None
    }
    saved_mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    frozen = gc.get_freeze_count()
    logs, hydra = _logging_state(), _hydra_state()
    for stream in (*saved_streams[1:], sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):
            stream.flush()  # type: ignore[union-attr]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        fds = os.dup(1), os.dup(2)
        code = 1
        try:
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            _fresh_state()
            os.environ.clear()
            os.environ.update(env)
            os.chdir(cwd)
            sys.argv = [module, *args]
            sys.path.insert(0, str(cwd))  # python -m puts the working folder first
            sys.stdin, sys.stdout, sys.stderr = io.StringIO(), _STDOUT, _STDERR
            sys.unraisablehook, sys.excepthook = (
                sys.__unraisablehook__,
                sys.__excepthook__,
            )  # pytest sets its own
            threading.excepthook = threading.__excepthook__
            root = logging.getLogger()
            root.handlers[:] = []  # pytest's capture handlers: a new process's root logger has none
            root.setLevel(logging.WARNING)
            with _console_handlers(*saved_streams[1:]), _interpreter_warnings(module):
                try:
                    runpy.run_module(module, run_name="__main__", alter_sys=True)
                    code = 0
                except SystemExit as e:
                    code = _exit_code(e)
                except BaseException:  # noqa: BLE001 - what the interpreter does with an exception that escapes
                    traceback.print_exc()
                    code = 1
        finally:
            for stream in (_STDOUT, _STDERR, sys.__stdout__, sys.__stderr__):
                with contextlib.suppress(Exception):
                    stream.flush()  # type: ignore[union-attr]
            os.dup2(fds[0], 1)
            os.dup2(fds[1], 2)
            for fd in fds:
                os.close(fd)
            sys.stdin, sys.stdout, sys.stderr = saved_streams
            sys.unraisablehook, sys.excepthook, threading.excepthook = saved_hooks
            for signum, handler in saved_signals.items():
                if signal.getsignal(signum) is not handler:
                    signal.signal(signum, handler)
            signal.pthread_sigmask(signal.SIG_SETMASK, saved_mask)
            if gc.get_freeze_count() and not frozen:
                gc.unfreeze()
            sys.argv = saved_argv[0]
            sys.argv[:] = saved_argv[1]
            sys.path[:] = saved_path
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
            _restore_logging(logs)
            _restore_hydra(hydra)
            _fresh_state()
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", errors="replace")
        stderr = err.read().decode("utf-8", errors="replace")
    return subprocess.CompletedProcess([sys.executable, "-m", module, *args], code, stdout, stderr)
