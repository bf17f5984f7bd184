"""A crash in native code (SIGILL: an instruction the CPU lacks; SIGSEGV, ...) ends the command with one line from
ablate, exit 128 + the signal, and no run left RUNNING: ``python -m ablate`` runs its command under a supervisor
(:mod:`ablate.app.supervise`). The crash is real: a stage selected on the command line sends its own process the
signal inside a cell (:class:`ablate.testing.crash.CrashingRetriever`), and the store is a real sqlite one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from ablate import record as R
from ablate.app import supervise
from ablate.tracking import Tracker
from ablate.tracking.tracker import ENV_OPENED_STORES

ORACLE = "ablate.stages.retrievers.oracle.OracleRetriever"
CRASHING = "ablate.testing.crash.CrashingRetriever"


def _run(
    args: list[str], cwd: Path, env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}  # the session's cache (tests/conftest.py)
    for name in (
        "MLFLOW_TRACKING_URI",
        "ABLATE_INVOCATION",
        "ABLATE_DEBUG",
        supervise.ENV_OFF,
        supervise.ENV_DIR,
    ):
        env.pop(name, None)
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "ablate", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def _base(corpus: Path, store: Path) -> list[str]:
    return [
        "corpus=beir",
        f"corpus.path={corpus}",
        "corpus.split=dev",
        "corpus.identity=employee",
        f"tracking.uri=sqlite:///{store}",
        "tracking.experiment=crash",
        "progress=false",
        "stats.bootstrap=100",
    ]


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def test_sigill_in_a_sweeps_cell_fails_the_cell_and_the_parent_with_one_line_and_exit_132(
    tiny_corpus, tmp_path
):
    """``-m`` over two cells: the first finishes, the second's retriever dies of SIGILL. The sweep's parent and the
    crashed cell are FAILED with the signal, the finished cell stays FINISHED, nothing is RUNNING; one line names
    SIGILL and `make setup`; no traceback; nothing is left in the temporary folder."""
    store = tmp_path / "m.db"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    p = _run(
        ["-m", "variant=oracle", f"oracle._target_={ORACLE},{CRASHING}", *_base(tiny_corpus, store)],
        tmp_path,
        {"TMPDIR": str(tmp)},
    )
    assert p.returncode == 128 + signal.SIGILL, p.stderr
    errors = _errors(p.stderr)
    assert len(errors) == 1, p.stderr
    assert errors[0].startswith(
        "error: crashed: signal 4 (SIGILL) in native code, in ablate.testing.crash (search)"
    )
    assert "the CPU lacks an instruction" in errors[0] and "`make setup`" in errors[0]
    assert "Traceback" not in p.stderr and "Fatal Python error" not in p.stderr
    runs = Tracker(f"sqlite:///{store}").find_runs(None)
    assert [r for r in runs if r.status == "RUNNING"] == []
    parent = [r for r in runs if r.tags.get(R.T_ROLE) == R.ROLE_SWEEP_PARENT]
    cells = {r.tags.get(R.T_OVERRIDES, ""): r for r in runs if r.parent}
    assert len(parent) == 1 and len(cells) == 2
    failure = "crashed: signal 4 (SIGILL) in native code, in ablate.testing.crash (search)"
    assert parent[0].status == "FAILED" and parent[0].failure == failure
    crashed = next(r for o, r in cells.items() if CRASHING in o)
    finished = next(r for o, r in cells.items() if ORACLE in o)
    assert crashed.status == "FAILED" and crashed.failure == failure and crashed.parent == parent[0].run_id
    assert finished.status == "FINISHED"
    # the runs belong to the command's process, not the supervisor the caller started
    assert {r.tags[R.T_PID] for r in runs} == {parent[0].tags[R.T_PID]}
    assert (
        list(tmp.iterdir()) == []
    )  # the supervisor's files (the stores opened, the crash's stacks) are gone


def test_sigsegv_in_a_joblib_worker_fails_its_cell_and_the_parent_and_debug_prints_the_stacks(
    tiny_corpus, tmp_path
):
    """``hydra/launcher=joblib``: the cells run in loky worker processes and the second one's retriever dies of
    SIGSEGV there (the command's own process lives on: joblib reports the dead worker). The sweep's parent and the
    crashed cell are FAILED with the signal and the stage, nothing is RUNNING; one
    ``error:`` line names SIGSEGV and ABLATE_DEBUG; exit 139; with ABLATE_DEBUG=1 the worker's stacks follow."""
    store = tmp_path / "m.db"
    args = ["-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "variant=oracle"]
    args += [f"oracle._target_={CRASHING}", "++oracle.signal=none,SIGSEGV", *_base(tiny_corpus, store)]
    p = _run(args, tmp_path, {"ABLATE_DEBUG": "1"})
    assert p.returncode == 128 + signal.SIGSEGV, p.stderr
    errors = _errors(p.stderr)
    failure = (
        "crashed: signal 11 (SIGSEGV) in native code in a launcher worker, in ablate.testing.crash (search)"
    )
    assert len(errors) == 1 and errors[0].startswith(f"error: {failure}: "), p.stderr
    assert "ABLATE_DEBUG=1" in errors[0] and "faulthandler" in errors[0]
    assert "the worker's Python stacks at the crash (faulthandler):" in p.stderr
    assert "Traceback" not in p.stderr and p.stderr.count("Fatal Python error") == 1
    runs = Tracker(f"sqlite:///{store}").find_runs(None)
    assert [r for r in runs if r.status == "RUNNING"] == []
    parent = next(r for r in runs if r.tags.get(R.T_ROLE) == R.ROLE_SWEEP_PARENT)
    cells = {r.tags.get(R.T_OVERRIDES, ""): r for r in runs if r.parent}
    crashed = next(r for o, r in cells.items() if "SIGSEGV" in o)
    assert parent.status == "FAILED" and parent.failure == failure
    assert crashed.status == "FAILED" and crashed.failure == failure
    assert crashed.tags[R.T_PID] != parent.tags[R.T_PID]  # the worker's run, closed for the worker
    # the other cell ran beside it: it finished, its worker was stopped with the broken pool (its run closed FAILED),
    # or it never started (no run): none is RUNNING (above)
    assert len(cells) in (1, 2)


def test_the_stage_that_crashed_is_read_from_faulthandlers_stacks():
    """The innermost ablate frame, in the crashing thread first; a native thread that crashed (no Python frames of
    its own) points at the thread inside ablate's call."""
    pkg = supervise.PACKAGE_DIR
    dump = (
        "Fatal Python error: Illegal instruction\n\n"
        "Thread 0x00007f01 (most recent call first):\n"
        f'  File "{pkg}runner/job.py", line 10 in run_job\n\n'
        "Current thread 0x00007f02 (most recent call first):\n"
        '  File "/venv/lib/python3.11/site-packages/llama_cpp/llama.py", line 1 in eval\n'
        f'  File "{pkg}stages/generate/llama_cpp.py", line 200 in generate\n'
        f'  File "{pkg}runner/job.py", line 99 in run_job\n\n'
        "Extension modules: numpy.core._multiarray_umath (total: 1)\n"
    )
    assert supervise.crash_site(dump) == "ablate.stages.generate.llama_cpp (generate)"
    native = dump.replace("Current thread 0x00007f02", "Thread 0x00007f02").replace(
        "Thread 0x00007f01", "Current thread 0x7"
    )
    assert supervise.crash_site(native) == "ablate.runner.job (run_job)"
    # a folder named ablate above a site-packages file is not ablate's code
    assert (
        supervise.crash_site(
            'Current thread 0x1 (most recent call first):\n  File "/home/u/ablate/x.py", line 1 in f\n'
        )
        is None
    )
    assert supervise.crash_site("") is None


def test_each_signal_has_its_reason_and_line():
    reason, line = supervise.describe(signal.SIGBUS, None)
    assert reason == "crashed: signal 7 (SIGBUS) in native code"
    assert line.startswith(reason + ": a memory-mapped file") and "ABLATE_DEBUG=1" in line
    assert supervise.describe(signal.SIGTERM, None) == ("terminated by signal 15", "terminated by signal 15")
    assert supervise.describe(signal.SIGINT, "x") == ("interrupted by the user", "interrupted by the user")
    reason, line = supervise.describe(signal.SIGKILL, None)
    assert reason == "killed by signal 9 (SIGKILL)" and "memory" in line
    assert supervise.ENV_STORES == ENV_OPENED_STORES  # the supervisor names the file the trackers write to


#: A command run as an entry point runs it (supervised, its signals handled), without ablate's heavy imports.
SCRIPT = """
import os, sys, time
from ablate.app import interrupts
from ablate.app.supervise import supervise

supervise()
print(f"ready {os.getpid()}", flush=True)
interrupts.guarded(lambda: sys.exit(int(sys.argv[1])) if len(sys.argv) > 1 else time.sleep(60))
"""


def _at_a_terminal(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[bytes], int]:
    """SCRIPT started at a real terminal (a pty whose foreground process group it is), as a user starts a command;
    returns the process and the master side of the terminal."""
    import fcntl
    import pty
    import termios

    master, slave = pty.openpty()
    script = tmp_path / "command.py"
    script.write_text(SCRIPT)

    def terminal() -> None:  # in the new session: this pty becomes its controlling terminal
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    env = {k: v for k, v in os.environ.items() if k not in (supervise.ENV_OFF, supervise.ENV_DIR)}
    env["TMPDIR"] = str(
        tmp_path
    )  # what a supervisor killed by SIGKILL could not remove stays in the test's folder
    p = subprocess.Popen(
        [sys.executable, str(script), *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        preexec_fn=terminal,
        env=env,
    )
    os.close(slave)
    return p, master


def _read_until(master: int, needle: bytes, out: bytearray, timeout: float = 30.0) -> None:
    import select
    import time

    deadline = time.time() + timeout
    while needle not in out and time.time() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                out.extend(os.read(master, 4096))
            except OSError:  # the terminal's last process ended
                return


def _ended(p: subprocess.Popen[bytes], master: int, out: bytearray) -> int:
    code = p.wait(timeout=30)
    _read_until(master, b"\x00never", out, timeout=0.5)
    os.close(master)
    return code


def test_ctrl_c_at_a_terminal_is_one_line_and_130_and_a_kill_is_passed_on(tmp_path):
    """Ctrl-C at the terminal reaches the supervisor and the command (one process group): the supervisor ignores it,
    the command prints its one line and exits 130, the supervisor adds nothing. SIGTERM sent to the pid the caller
    started is passed on: one line, 143. An exit code passes through unchanged."""
    p, master = _at_a_terminal(tmp_path)
    out = bytearray()
    _read_until(master, b"\n", out)  # the whole "ready" line: a signal inside its print would cut it
    os.write(master, b"\x03")  # Ctrl-C: the kernel signals the foreground process group
    assert _ended(p, master, out) == 130, out
    # the terminal echoes the keystroke as ^C, on the line the command's own line then completes
    lines = [line.removeprefix("^C") for line in out.decode().replace("\r", "").splitlines()]
    assert [line for line in lines if line.startswith("error:")] == ["error: interrupted by the user"], out

    p, master = _at_a_terminal(tmp_path)
    out = bytearray()
    _read_until(master, b"\n", out)
    p.send_signal(signal.SIGTERM)
    assert _ended(p, master, out) == 143, out
    lines = out.decode().replace("\r", "").splitlines()
    assert [line for line in lines if line.startswith("error:")] == ["error: terminated by signal 15"], out

    p, master = _at_a_terminal(tmp_path, "3")
    out = bytearray()
    assert _ended(p, master, out) == 3 and b"error:" not in out, out


def test_kill_9_of_the_supervisor_ends_the_command_too(tmp_path):
    """``kill -9`` of the pid the caller started still ends the work (the kernel kills the command with it)."""
    import time

    p, master = _at_a_terminal(tmp_path)
    out = bytearray()
    _read_until(master, b"\n", out)
    child = int(out.decode().split("ready ", 1)[1].split()[0])
    assert child != p.pid
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    deadline = time.time() + 10
    while Path(f"/proc/{child}").exists() and time.time() < deadline:
        time.sleep(0.05)
    os.close(master)
    assert not Path(f"/proc/{child}").exists() or "State:\tZ" in Path(f"/proc/{child}/status").read_text()
