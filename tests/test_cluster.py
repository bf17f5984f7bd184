"""Sweeps beyond one process: a cache shared by concurrent writers, sharded encoding over Ray workers, and sweeps on a
Ray cluster logging to an MLflow tracking server (issue 14).

The fast tests need neither Ray nor a server. The slow ones start real ones on 127.0.0.1 (a Ray head with 2 CPUs and a
small object store, ``mlflow server`` with a sqlite backend and its own artifact store) and always stop them; they
skip with the reason when Ray is not installed (the ``cluster`` extra, docs/cluster.md).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ablate
from ablate import record as R
from ablate.app.cluster import LOST_JOBS, LOST_REASON, close_lost_jobs, forwarded_env, ray_init_args
from ablate.cache import TRAILER_LEN, Cache, verify_entry
from ablate.stages.text.sharded import split_shards
from ablate.tracking import Tracker

SRC = str(Path(ablate.__file__).resolve().parents[1])
REPO = Path(SRC).parent
KEY = "ab" * 32
#: the Ray token of the clusters these tests start (Ray reads it from RAY_AUTH_TOKEN: nothing written to ~/.ray)
RAY_TOKEN = secrets.token_hex(32)


# -- a cache shared by concurrent writers --------------------------------------------------------------------------
def _compute_and_store(root: str, barrier: Any, rounds: int, out: Any) -> None:
    """What a worker does on a cache miss: compute the entry (the same bytes in every process), store it, read it."""
    cache = Cache(root)
    arr = np.arange(400_000, dtype=np.float32).reshape(1000, 400) / 7.0
    seen = []
    for _ in range(rounds):
        barrier.wait()  # both processes write the same key at the same moment
        cache.save_array("dense-passages", KEY, arr)
        got = cache.load_array("dense-passages", KEY)
        seen.append(got is not None and np.array_equal(got, arr))
    out.put(all(seen))


def test_two_processes_writing_one_entry_end_with_one_valid_file(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_compute_and_store, args=(str(tmp_path), barrier, 20, out)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    assert [out.get(timeout=5), out.get(timeout=5)] == [True, True]  # every read saw a whole, valid entry
    folder = tmp_path / "dense-passages" / KEY[:2]
    assert sorted(p.name for p in folder.iterdir()) == [f"{KEY}.npy"]  # one file, no temp file left
    assert verify_entry(folder / f"{KEY}.npy") is True
    expected = np.arange(400_000, dtype=np.float32).reshape(1000, 400) / 7.0
    got = Cache(tmp_path).load_array("dense-passages", KEY)
    assert got is not None and np.array_equal(got, expected)


def test_a_damaged_entry_is_a_miss_and_is_rewritten(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    arr = np.linspace(0, 1, 50, dtype=np.float32).reshape(5, 10)
    path = cache.save_array("x", KEY, arr)
    blob = bytearray(path.read_bytes())
    blob[200] ^= 0x01  # one flipped bit in the data: np.load alone would return a wrong array
    path.write_bytes(bytes(blob))
    assert verify_entry(path) is False
    assert cache.load_array("x", KEY) is None
    cache.save_array("x", KEY, arr)
    got = cache.load_array("x", KEY)
    assert got is not None and np.array_equal(got, arr)
    # a truncated JSON entry (a partial copy) is a miss too
    jpath = cache.save_json("j", KEY, {"results": list(range(100))})
    jpath.write_bytes(jpath.read_bytes()[: -TRAILER_LEN - 5] + jpath.read_bytes()[-TRAILER_LEN:])
    assert cache.load_json("j", KEY) is None


def test_entries_written_without_a_checksum_are_still_read(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    arr = np.eye(3, dtype=np.float32)
    legacy = tmp_path / "x" / KEY[:2] / f"{KEY}.npy"
    legacy.parent.mkdir(parents=True)
    np.save(legacy, arr, allow_pickle=False)
    assert verify_entry(legacy) is None
    got = cache.load_array("x", KEY)
    assert got is not None and np.array_equal(got, arr)
    jlegacy = tmp_path / "j" / KEY[:2] / f"{KEY}.json"
    jlegacy.parent.mkdir(parents=True)
    jlegacy.write_text(json.dumps({"a": 1}))
    assert cache.load_json("j", KEY) == {"a": 1}


def test_shards_never_share_a_vector_store_bucket() -> None:
    texts = [f"passage {i}" for i in range(300)]
    parts = split_shards(texts, 3)
    assert sorted(t for p in parts for t in p) == sorted(texts)
    from ablate.cache import sha256_text

    buckets = [{sha256_text(t)[0] for t in p} for p in parts]
    assert all(not (buckets[i] & buckets[j]) for i in range(3) for j in range(i + 1, 3))
    assert all(parts)  # 300 texts over 16 buckets: every shard gets some


# -- what travels to Ray workers -----------------------------------------------------------------------------------
def test_the_commands_environment_travels_in_rays_runtime_env() -> None:
    environ = {
        "ABLATE_SWEEP_PARENT": "run123",
        "ABLATE_CACHE_DIR": "/shared/cache",
        "MLFLOW_TRACKING_URI": "http://127.0.0.1:5000",
        "ABLATE_EMPTY": "",
        "HOME": "/root",
        "HF_HUB_OFFLINE": "1",
    }
    env = forwarded_env(("ABLATE_*", "MLFLOW_*", "HF_HUB_OFFLINE"), environ)
    assert env == {
        "ABLATE_SWEEP_PARENT": "run123",
        "ABLATE_CACHE_DIR": "/shared/cache",
        "MLFLOW_TRACKING_URI": "http://127.0.0.1:5000",
        "HF_HUB_OFFLINE": "1",
    }
    # a running cluster: no object store size (Ray refuses it); configured variables win, empty ones are dropped
    args = ray_init_args(
        {
            "address": "auto",
            "object_store_memory": 1,
            "runtime_env": {"env_vars": {"HF_HUB_OFFLINE": "0", "X": ""}},
        },
        env,
    )
    assert args["address"] == "auto" and "object_store_memory" not in args
    assert args["runtime_env"]["env_vars"]["HF_HUB_OFFLINE"] == "0"
    assert args["runtime_env"]["env_vars"]["ABLATE_SWEEP_PARENT"] == "run123"
    assert "X" not in args["runtime_env"]["env_vars"]
    # no address: a private Ray with a small object store, never the cluster `ray start` may run on this machine
    local = ray_init_args({"address": None}, {})
    assert local["address"] == "local" and local["object_store_memory"] == 200_000_000
    assert local["include_dashboard"] is False


def test_children_left_running_by_a_lost_job_end_failed_with_the_reason(tmp_path: Path) -> None:
    tracker = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}")
    parent = tracker.start("demo", "sweep", tags={R.T_ROLE: R.ROLE_SWEEP_PARENT})
    done = tracker.start("demo", "A", tags={R.T_OVERRIDES: "variant=A"}, parent_run_id=parent)
    tracker.end(done, "FINISHED")
    lost = tracker.start("demo", "B", tags={R.T_OVERRIDES: "variant=B"}, parent_run_id=parent)
    other = tracker.start("demo", "C", tags={R.T_OVERRIDES: "variant=C"}, parent_run_id=parent)
    LOST_JOBS["variant=B"] = f"{LOST_REASON}; Ray: WorkerCrashedError: the worker died"
    try:
        assert sorted(close_lost_jobs(tracker, parent)) == sorted([lost, other])
    finally:
        LOST_JOBS.pop("variant=B", None)
    runs = {r.run_id: r for r in tracker.children(parent)}
    assert runs[done].status == "FINISHED" and not runs[done].failure
    assert runs[lost].status == "FAILED" and "WorkerCrashedError" in runs[lost].tags[R.T_FAILURE]
    assert runs[other].status == "FAILED" and runs[other].tags[R.T_FAILURE] == LOST_REASON


# -- a tracking server's client travels to the workers (issue 37) --------------------------------------------------
def _server_uri() -> str:
    return f"http://127.0.0.1:{_free_port()}"  # nothing listens there: opening a client makes no request


def test_a_tracking_servers_client_survives_pickling_and_copying() -> None:
    import copy
    import pickle

    from ablate.tracking.store import _DOWN, StoreUnavailable, _ServerClient

    uri = _server_uri()
    tracker = Tracker(uri)
    assert isinstance(tracker.client, _ServerClient)
    for dumps, loads in [(pickle.dumps, pickle.loads), _cloudpickle()]:
        back = loads(dumps(tracker.client))
        assert isinstance(back, _ServerClient) and back._uri == uri
        assert back._client is not tracker.client._client  # the worker opens its own client
        assert back.tracking_uri == uri  # a plain attribute of MlflowClient, looked up on it
    for copied in (copy.copy(tracker.client), copy.deepcopy(tracker.client)):
        assert isinstance(copied, _ServerClient) and copied.tracking_uri == uri
    # the whole tracker, as the sweep's callback ships it with every Ray job
    from ablate.app.callbacks import SweepCallback

    callback = SweepCallback()
    callback.tracker, callback.parent = tracker, "run123"
    shipped = pickle.loads(pickle.dumps(callback))
    assert shipped.tracker is not None and shipped.tracker.uri == uri and shipped.parent == "run123"
    assert isinstance(shipped.tracker.client, _ServerClient) and shipped.tracker.client.tracking_uri == uri
    # a copy still fails at once on a server this process found down
    _DOWN[uri] = "the connection was refused"
    try:
        with pytest.raises(StoreUnavailable, match="the connection was refused"):
            copy.copy(tracker.client).search_experiments(max_results=1)
    finally:
        _DOWN.pop(uri, None)


def _cloudpickle() -> tuple[Any, Any]:
    """Ray's own cloudpickle (what ships a Ray job) when Ray is installed, else the standard pickle again."""
    try:
        from ray import cloudpickle
    except ImportError:
        import pickle

        return pickle.dumps, pickle.loads
    return cloudpickle.dumps, cloudpickle.loads


def test_a_half_built_server_client_has_no_attributes_and_never_recurses() -> None:
    from ablate.tracking.store import _ServerClient

    empty = _ServerClient.__new__(_ServerClient)  # what unpickling holds before its state is set
    for name in ("search_runs", "_client", "_uri", "__setstate__", "tracking_uri"):
        with pytest.raises(AttributeError):
            getattr(empty, name)
    assert not hasattr(empty, "__setstate__")
    # an object with a URI and no client yet: still an AttributeError
    half = _ServerClient.__new__(_ServerClient)
    half.__dict__["_uri"] = "http://127.0.0.1:1"
    with pytest.raises(AttributeError, match="no client"):
        half.search_runs  # noqa: B018 - the lookup is the test


@pytest.mark.parametrize(
    ("option", "target"),
    [
        ("ray", "hydra_plugins.ablate_ray_launcher.ablate_ray_launcher.AblateRayLauncher"),
        ("joblib", "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"),
    ],
)
def test_the_launcher_options_compose(option: str, target: str) -> None:
    from hydra import initialize_config_dir

    from ablate.app.paths import CONF_DIR, register_resolvers
    from ablate.app.precheck import compose_cell

    register_resolvers()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose_cell([f"hydra/launcher={option}", "variant=A"])
    assert cfg.hydra.launcher._target_ == target
    if option == "ray":
        assert cfg.hydra.launcher.ray.remote.max_retries == 0 and cfg.hydra.launcher.ray.remote.num_cpus == 1
    else:
        assert cfg.hydra.launcher.n_jobs == 2


def test_a_launcher_whose_library_is_missing_is_refused_before_any_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from omegaconf import OmegaConf

    from ablate.app import precheck
    from ablate.errors import ConfigError

    target = "hydra_plugins.ablate_ray_launcher.ablate_ray_launcher.AblateRayLauncher"
    cfg = OmegaConf.create({"hydra": {"launcher": {"_target_": target}}})
    fix = "pip install 'ablate[cluster]' (docs/cluster.md)"
    monkeypatch.setitem(
        precheck.OPTIONAL_LAUNCHERS, "hydra_plugins.ablate_ray_launcher.", ("ray", "no_such_module_14", fix)
    )
    with pytest.raises(ConfigError) as e:
        precheck.check_launcher(cfg)
    assert "hydra/launcher='ray'" in str(e.value) and "ablate[cluster]" in str(e.value)


# -- with Ray and a tracking server --------------------------------------------------------------------------------
def _need_ray() -> None:
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'ablate[cluster]' (docs/cluster.md)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([SRC, *filter(None, [env.get("PYTHONPATH")])])
    env.update(
        OMP_WAIT_POLICY="PASSIVE", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", RAY_USAGE_STATS_ENABLED="0"
    )
    # Ray 2.5x: once a token exists (~/.ray/auth_token, made by the first local Ray), a `ray start` cluster requires
    # it; a driver sends it only in token mode. Say so on both sides, with this module's own token in the
    # environment: no Ray here writes ~/.ray/auth_token, and none of another user's clusters accepts these tests.
    env["RAY_AUTH_MODE"] = "token"
    env["RAY_AUTH_TOKEN"] = RAY_TOKEN
    env.pop("RAY_ADDRESS", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    env.update(extra)
    return env


def _demo_passages() -> list[str]:
    from ablate.data.corpus import load_corpus

    return [c.text for c in load_corpus(REPO / "corpora" / "demo").chunks]


@pytest.mark.slow
def test_sharded_encoding_over_two_ray_workers_matches_one_process_and_is_written_once(
    tmp_path: Path,
) -> None:
    _need_ray()
    import ray

    from ablate.stages.text.sharded import encode_sharded

    texts = _demo_passages()
    params = {"model": "all-MiniLM-L6-v2", "batch_size": 32, "max_seq_length": 256}
    shared = tmp_path / "shared-cache"
    ray.init(
        address="local",
        num_cpus=2,
        object_store_memory=100_000_000,
        include_dashboard=False,
        runtime_env={"env_vars": {k: v for k, v in _env().items() if k in ("PYTHONPATH", "HF_HUB_OFFLINE")}},
    )
    try:
        out = encode_sharded(texts, params, shared, shards=2)
        assert sum(out.shard_sizes) == len(texts) and all(out.shard_sizes)
        unique = len(set(texts))
        assert (
            sum(s["passages_encoded"] for s in out.shard_stats) == unique
        )  # every text encoded by one worker
        # assembling read every vector from the store: no model, nothing encoded
        assert out.assembly_stats["model_loaded"] == 0 and out.assembly_stats["passages_encoded"] == 0
        matrices = list((shared / "dense-passages").rglob("*.npy"))
        whole = [p for p in matrices if np.load(p).shape[0] == len(texts)]
        assert len(whole) == 1
        stamp = whole[0].stat().st_mtime_ns
        again = encode_sharded(texts, params, shared, shards=2)  # nothing left to encode anywhere
        assert sum(s["passages_encoded"] for s in again.shard_stats) == 0
        assert again.assembly_stats["model_loaded"] == 0
        assert whole[0].stat().st_mtime_ns == stamp  # the matrix was written once
    finally:
        ray.shutdown()
    # one process, its own cache: the same vectors (fp tolerance), and a job on the shared cache reads the matrix
    from ablate.stages.retrievers.dense import DenseRetriever

    single = DenseRetriever(**params).encoder
    single.cache = Cache(tmp_path / "own-cache")
    ref = single.encode_passages(texts)
    assert ref.shape == out.matrix.shape
    np.testing.assert_allclose(out.matrix, ref, atol=1e-5)
    job = DenseRetriever(**params).encoder
    job.cache = Cache(shared)
    np.testing.assert_array_equal(job.encode_passages(texts), out.matrix)
    assert job.stats["model_loaded"] == 0 and job.stats["passages_encoded"] == 0


def _pids_using(folder: Path) -> list[int]:
    """Processes whose command line names ``folder`` (a Ray node's own temp dir names every process of that node)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if str(folder).encode() in cmdline:
            pids.append(int(entry.name))
    return pids


def _stop_ray_head(proc: subprocess.Popen[bytes], temp: Path) -> None:
    """Stop the Ray head this module started, and only it: SIGTERM to `ray start --block` (it stops the processes
    it spawned), SIGKILL to its process group if it does not end, then to any process still naming its temp dir
    (by pid, never `ray stop`, which stops every Ray on the machine)."""
    for sig, wait in ((signal.SIGTERM, 60), (signal.SIGKILL, 20)):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(wait)
            break
        except ProcessLookupError:
            break
        except subprocess.TimeoutExpired:
            continue
    deadline = time.time() + 30
    while (left := _pids_using(temp)) and time.time() < deadline:
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.5)
    assert not _pids_using(temp), f"Ray processes of {temp} still run"


@pytest.fixture(scope="module")
def ray_head() -> Iterator[str]:
    """A Ray head on 127.0.0.1 (2 CPUs, a 100 MB object store, no dashboard) with its own temp dir (a short path:
    Ray's sockets live there) instead of /tmp/ray; stopped and its temp dir removed at the end, even on failure."""
    _need_ray()
    ray_bin = str(Path(sys.executable).parent / "ray")
    port = _free_port()
    temp = Path(tempfile.mkdtemp(prefix="ablate-ray-", dir="/tmp"))
    log_path = temp / "head.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen(
        [
            ray_bin,
            "start",
            "--head",
            "--block",
            f"--port={port}",
            "--node-ip-address=127.0.0.1",
            "--num-cpus=2",
            "--include-dashboard=false",
            "--object-store-memory=100000000",
            "--disable-usage-stats",
            f"--temp-dir={temp}",
        ],
        env=_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.time() + 300
        while b"block forever" not in log_path.read_bytes():
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"ray start did not start: {log_path.read_text()[-2000:]}")
            time.sleep(1)
        yield f"127.0.0.1:{port}"
    finally:
        try:
            _stop_ray_head(proc, temp)
        finally:
            log.close()
            shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    _need_ray()
    root = tmp_path_factory.mktemp("mlflow-server")
    port = _free_port()
    log = open(root / "server.log", "wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            f"sqlite:///{root / 'mlflow.db'}",
            "--artifacts-destination",
            str(root / "artifacts"),
            "--serve-artifacts",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        env=_env(MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false"),
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
            time.sleep(2)
        yield uri, root
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(20)
        log.close()


SWEEP = ["corpus=demo", "variant=A,B,C", "retrieval.window=20,100", "stats.bootstrap=200"]
#: counters and timings that say how a job ran, not what it measured: cache hits, seconds, and the stages' own
#: counters (``bm25_vocab_size`` is 0 where a job reused another job's candidates in the same process)
HOW_IT_RAN = ("cache_", "candidate_cache_", "time_", "bm25_", "dense_", "rrf_", "rerank_")


def _sweep(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "ablate", "-m", *args],
        cwd=cwd,
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=1800,
    )


def _cell(run: Any) -> str:
    """A child's cell: its overrides without the launcher and the tracking settings."""
    words = run.tags.get(R.T_OVERRIDES, "").split()
    return " ".join(w for w in words if not w.startswith(("hydra/", "tracking.")))


def _measured(run: Any) -> dict[str, float]:
    return {k: v for k, v in run.metrics.items() if not k.startswith(HOW_IT_RAN)}


def _parents(tracker: Tracker, experiment: str) -> list[Any]:
    exp = tracker.experiment_id(experiment, create=False)
    assert exp is not None
    return tracker.find_runs([exp], f"tags.`{R.T_ROLE}` = '{R.ROLE_SWEEP_PARENT}'", newest_first=True)


@pytest.mark.slow
def test_a_sweep_on_a_ray_cluster_logs_to_the_tracking_server_like_the_basic_launcher(
    ray_head: str, mlflow_server: tuple[str, Path], tmp_path: Path
) -> None:
    uri, server_root = mlflow_server
    work = tmp_path / "ray"
    ray_sweep = _sweep(
        work,
        "hydra/launcher=ray",
        *SWEEP,
        f"tracking.uri={uri}",
        "tracking.experiment=cluster",
        RAY_ADDRESS=ray_head,
        ABLATE_CACHE_DIR=str(tmp_path / "cache-ray"),
    )
    assert ray_sweep.returncode == 0, ray_sweep.stderr[-4000:]
    basic = _sweep(
        tmp_path / "basic",
        *SWEEP,
        f"tracking.uri={uri}",
        "tracking.experiment=basic",
        ABLATE_CACHE_DIR=str(tmp_path / "cache-basic"),
    )
    assert basic.returncode == 0, basic.stderr[-4000:]

    tracker = Tracker(uri)
    (parent,) = _parents(tracker, "cluster")
    children = tracker.children(parent.run_id)
    assert len(children) == 6 and {c.status for c in children} == {"FINISHED"}
    assert parent.status == "FINISHED"
    # the jobs ran in Ray workers, not in the command's process
    assert {c.tags[R.T_PID] for c in children}.isdisjoint({parent.tags[R.T_PID]})
    # artifacts went to the server's artifact store: the report on the parent, each job's files on its run
    assert tracker.artifact_uri(parent.run_id).startswith("mlflow-artifacts:/")
    report = tracker.download_artifact(parent.run_id, "report/ablation.md", tmp_path / "dl")
    assert report is not None and "ndcg@10" in report.read_text()
    stored = server_root / "artifacts"
    assert (stored / parent.experiment_id / parent.run_id / "artifacts" / "report" / "ablation.md").is_file()
    for c in children:
        assert (stored / c.experiment_id / c.run_id / "artifacts" / "run.trec").is_file()
    assert not (work / "mlartifacts").exists() and not (work / "mlflow.db").exists()
    # the same results as the basic launcher, cell by cell
    (bparent,) = _parents(tracker, "basic")
    ray_cells = {_cell(c): _measured(c) for c in children}
    basic_cells = {_cell(c): _measured(c) for c in tracker.children(bparent.run_id)}
    assert len(ray_cells) == 6 and sorted(ray_cells) == sorted(basic_cells)
    for cell, metrics in ray_cells.items():
        assert metrics == basic_cells[cell], cell
        assert metrics["ndcg_at_10"] > 0


@pytest.mark.slow
def test_a_killed_ray_worker_leaves_its_job_failed_and_a_rerun_completes_from_the_caches(
    ray_head: str, mlflow_server: tuple[str, Path], tmp_path: Path
) -> None:
    uri, _ = mlflow_server
    tracker = Tracker(uri)
    args = ["hydra/launcher=ray", *SWEEP, f"tracking.uri={uri}", "tracking.experiment=killed"]
    env = {"RAY_ADDRESS": ray_head, "ABLATE_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ablate", "-m", *args],
        cwd=tmp_path,
        env=_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    killed: tuple[str, int] | None = None
    try:
        deadline = time.time() + 600
        while killed is None and time.time() < deadline and proc.poll() is None:
            time.sleep(0.5)
            exp = tracker.experiment_id("killed", create=False)
            if exp is None:
                continue
            running = tracker.find_runs([exp], "attributes.status = 'RUNNING'")
            jobs = [r for r in running if r.tags.get(R.T_ROLE) != R.ROLE_SWEEP_PARENT and R.T_PID in r.tags]
            if jobs:
                os.kill(int(jobs[0].tags[R.T_PID]), signal.SIGKILL)  # the Ray worker running this job
                killed = (jobs[0].run_id, int(jobs[0].tags[R.T_PID]))
        out, err = proc.communicate(timeout=1800)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert killed is not None, "no job was seen running"
    assert proc.returncode == 1, err[-4000:]
    assert "1 of 6 jobs failed" in err
    run = tracker.get_run(killed[0])
    assert run is not None and run.status == "FAILED"
    assert run.tags[R.T_FAILURE].startswith(LOST_REASON)
    (parent,) = _parents(tracker, "killed")
    statuses = sorted(c.status for c in tracker.children(parent.run_id))
    assert statuses == ["FAILED"] + ["FINISHED"] * 5

    # tracking.reuse=false: every cell runs again (else the 5 finished cells are copied, with their first counters),
    # so the counters below say what the caches saved
    rerun = _sweep(tmp_path, *args, "tracking.reuse=false", **env)
    assert rerun.returncode == 0, rerun.stderr[-4000:]
    newest = _parents(tracker, "killed")[0]
    children = tracker.children(newest.run_id)
    assert len(children) == 6 and {c.status for c in children} == {"FINISHED"}
    # from the caches: the dense variants encoded no passage again
    dense = [c for c in children if c.tags.get(R.T_VARIANT) in ("B", "C")]
    assert dense and all(c.metrics["dense_passages_encoded"] == 0 for c in dense)
    assert not any(R.T_REUSED_FROM in c.tags for c in children)


@pytest.mark.slow
def test_a_ray_sweep_logging_to_the_server_in_mlflow_tracking_uri_finishes_every_job_under_one_parent(
    ray_head: str, mlflow_server: tuple[str, Path], tmp_path: Path, tiny_corpus: Path
) -> None:
    """Issue 37: the store named by MLFLOW_TRACKING_URI (a server): the sweep's callback, and with it the server's
    client, travels to every Ray job; unpickling it there recursed forever and all 4 jobs failed."""
    uri, server_root = mlflow_server
    work = tmp_path / "work"
    t0 = time.perf_counter()
    p = _sweep(
        work,
        "hydra/launcher=ray",
        "corpus=beir",
        f"corpus.path={tiny_corpus}",
        "corpus.split=dev",
        "corpus.identity=employee",
        "tracking.experiment=ray-env-uri",
        "stats.bootstrap=200",
        "progress=false",
        "variant=A,C",
        "rrf.k=1,60",
        RAY_ADDRESS=ray_head,
        MLFLOW_TRACKING_URI=uri,
        ABLATE_CACHE_DIR=str(tmp_path / "cache"),
    )
    print(f"the Ray sweep took {time.perf_counter() - t0:.1f} s")
    assert p.returncode == 0, p.stderr[-4000:]
    assert "RecursionError" not in p.stderr and "without closing the run" not in p.stderr

    tracker = Tracker(uri)
    (parent,) = _parents(tracker, "ray-env-uri")
    assert parent.status == "FINISHED"
    children = tracker.children(parent.run_id)
    assert sorted(c.status for c in children) == ["FINISHED"] * 4
    cells = sorted((c.tags[R.T_VARIANT], c.params.get("rrf.k", "-")) for c in children)
    assert [v for v, _ in cells] == ["A", "A", "C", "C"]
    assert sorted(k for v, k in cells if v == "C") == ["1", "60"]
    assert all(c.metrics["ndcg_at_10"] > 0 for c in children)
    # the jobs ran in Ray workers, not in the command's process
    assert {c.tags[R.T_PID] for c in children}.isdisjoint({parent.tags[R.T_PID]})
    # the report is the parent's artifact, in the server's artifact store; nothing went to a local store
    report = tracker.download_artifact(parent.run_id, "report/ablation.md", tmp_path / "dl")
    assert report is not None and "ndcg@10" in report.read_text()
    stored = server_root / "artifacts" / parent.experiment_id / parent.run_id / "artifacts" / "report"
    assert (stored / "ablation.md").is_file()
    assert not (work / "mlflow.db").exists() and not (work / "mlartifacts").exists()
