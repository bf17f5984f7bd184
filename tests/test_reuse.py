"""A finished run whose every input matches is reused, not run again (ablate.runner.reuse, ablate.app.reuse_plan,
the sweeper): through the library with a real MLflow sqlite store, and through the real entry point and Hydra."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from hydra import compose, initialize_config_dir

from ablate import record as R
from ablate import record_digest
from ablate.app.config import job_from_config
from ablate.app.paths import CONF_DIR
from ablate.runner import reuse
from ablate.runner.inputs import check_inputs
from ablate.runner.job import run_job
from ablate.runner.pipeline import planned_components
from ablate.runner.session import Session
from ablate.tracking import Tracker


def _job(tmp_path: Path, uri: str, exp: str, *extra: str, reuse_on: bool = True):
    overrides = ["corpus=demo", f"tracking.uri={uri}", f"tracking.experiment={exp}", "progress=false",
                 "stats.bootstrap=100", *extra]  # fmt: skip
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    job = job_from_config(cfg, str(tmp_path))
    return replace(job, output=replace(job.output, reuse=reuse_on))


@pytest.mark.parametrize("variant", ["A", "B", "C", "oracle"])
def test_the_planned_components_are_the_ones_the_run_records(tmp_path, mlflow_uri, variant):
    """The key is computed before anything runs; it must name what then runs, or a reuse would stand for other work."""
    job = _job(tmp_path, mlflow_uri, f"reuse-plan-{variant}", f"variant={variant}")
    session = Session()
    done = run_job(job, Tracker(mlflow_uri), session, stream=io.StringIO())
    snapshot = check_inputs(job.corpus, job.output, job.pipeline, session=session)
    planned = planned_components(
        snapshot, job.corpus.split, job.pipeline, job.settings, access=job.corpus.access
    )
    assert done.result is not None and done.result.components == planned
    run = Tracker(mlflow_uri).get_run(done.run_id)
    assert run is not None and run.tags[R.T_CELL] == reuse.cell_key(job, planned)
    assert len(run.tags[R.T_CELL]) == 64 and R.T_REUSED_FROM not in run.tags


def test_an_identical_job_reuses_the_finished_run_with_everything_it_logged(tmp_path, mlflow_uri):
    t = Tracker(mlflow_uri)
    job = _job(tmp_path, mlflow_uri, "reuse-same", "variant=C", "rrf.k=30")
    first = run_job(job, t, Session(), stream=io.StringIO())
    out = io.StringIO()
    second = run_job(job, t, Session(), stream=out)
    assert second.result is None and second.reused_from == first.run_id and second.run_id != first.run_id
    assert first.result is not None
    assert second.headline() == {**first.headline(), "run_id": second.run_id}
    a, b = t.get_run(first.run_id), t.get_run(second.run_id)
    assert a is not None and b is not None and b.status == "FINISHED"
    assert b.params == a.params and b.metrics == a.metrics and len(b.metrics) > 100
    assert b.tags[R.T_REUSED_FROM] == first.run_id and b.tags[R.T_CELL] == a.tags[R.T_CELL]
    for k in (R.T_SNAPSHOT, R.T_INDEX_SNAPSHOT, R.T_QRELS_HASH, R.T_LABEL_VERSION, R.T_SPLIT):
        assert b.tags[k] == a.tags[k], k
    assert {k for k in a.tags if k.startswith(R.T_FP_PREFIX)} == {
        k for k in b.tags if k.startswith(R.T_FP_PREFIX)
    }
    ra, rb = t.local_artifact_root(first.run_id), t.local_artifact_root(second.run_id)
    assert ra is not None and rb is not None
    names = sorted(p.relative_to(ra).as_posix() for p in ra.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(rb).as_posix() for p in rb.rglob("*") if p.is_file())
    assert R.A_RUN in names and R.A_PER_QUERY in names and R.A_CONFIG in names
    for name in names:
        if name != R.A_RECORD_DIGEST:
            assert (ra / name).read_bytes() == (rb / name).read_bytes(), name
    # the same record, each naming its own run: a copy is never the run it copies
    was, now = (json.loads((r / R.A_RECORD_DIGEST).read_bytes()) for r in (ra, rb))
    assert (was.pop("run"), now.pop("run")) == (first.run_id, second.run_id) and was == now
    text = out.getvalue()
    assert f"reused run {first.run_id}" in text and "tracking.reuse=false" in text and "| C " in text


@pytest.mark.parametrize(
    "change",
    [
        ("rrf.k=31",),  # a stage parameter
        ("eval.ks=[1,10]",),  # an evaluation rule
        ("stats.bootstrap=101",),  # the intervals' resamples
        ("stats.seed=1",),
        ("variant.name=C2",),  # the name the table shows
        ("bm25.k1=1.1",),  # an upstream stage
        ("corpus.split=train",),
        ("corpus.identity=employee",),  # who asks (permission filtering)
        # the same model named instead of chosen by the corpus language: same numbers, another logged source
        ("dense.model=all-MiniLM-L6-v2",),
        ("dense.num_threads=1",),  # logged, in no fingerprint
    ],
)
def test_any_input_that_changes_the_numbers_or_their_record_gives_a_new_key(tmp_path, mlflow_uri, change):
    t = Tracker(mlflow_uri)
    exp = f"reuse-change-{change[0].split('=')[0]}"
    base = _job(tmp_path, mlflow_uri, exp, "variant=C", "rrf.k=30")
    first = run_job(base, t, Session(), stream=io.StringIO())
    changed = _job(tmp_path, mlflow_uri, exp, "variant=C", "rrf.k=30", *change)
    second = run_job(changed, t, Session(), stream=io.StringIO())
    assert second.result is not None and second.reused_from is None
    a, b = t.get_run(first.run_id), t.get_run(second.run_id)
    assert a is not None and b is not None and a.tags[R.T_CELL] != b.tags[R.T_CELL]
    if change[0].startswith("dense.model="):  # the record says how this job chose its model
        assert (a.params["dense.model_source"], b.params["dense.model_source"]) == ("language:en", "setting")
        assert a.tags[f"{R.T_FP_PREFIX}dense"] == b.tags[f"{R.T_FP_PREFIX}dense"]  # one component, one factor


def test_a_change_to_ablate_code_or_a_scoring_library_gives_a_new_key(tmp_path, mlflow_uri, monkeypatch):
    job = _job(tmp_path, mlflow_uri, "reuse-code", "variant=A")
    session = Session()
    snapshot = check_inputs(job.corpus, job.output, job.pipeline, session=session)
    comps = planned_components(
        snapshot, job.corpus.split, job.pipeline, job.settings, access=job.corpus.access
    )
    key = reuse.cell_key(job, comps)
    assert reuse.cell_key(job, comps) == key  # deterministic
    monkeypatch.setattr(reuse, "package_digest", lambda: "other code")
    assert reuse.cell_key(job, comps) != key
    monkeypatch.undo()
    real = reuse.library_versions
    monkeypatch.setattr(reuse, "library_versions", lambda *d: {**real(*d), "numpy": "0.0"})
    assert reuse.cell_key(job, comps) != key


def test_package_digest_follows_every_source_file(tmp_path, monkeypatch):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    (pkg / "sub" / "b.py").write_text("y = 2\n")
    monkeypatch.setattr(reuse, "PACKAGE_DIR", pkg)
    digests = []
    for edit in (None, ("sub/b.py", "y = 3\n"), ("c.py", "")):
        if edit:
            (pkg / edit[0]).write_text(edit[1])
        reuse.package_digest.cache_clear()
        digests.append(reuse.package_digest())
    reuse.package_digest.cache_clear()
    assert len(set(digests)) == 3


def test_runs_that_are_never_reused(tmp_path, mlflow_uri):
    job = _job(tmp_path, mlflow_uri, "reuse-never", "variant=A")
    assert reuse.why_not_reusable(job) is None
    assert (
        reuse.why_not_reusable(replace(job, output=replace(job.output, reuse=False)))
        == "tracking.reuse=false"
    )
    assert "cache.enabled" in str(
        reuse.why_not_reusable(replace(job, output=replace(job.output, cache_enabled=False)))
    )
    held = replace(job, corpus=replace(job.corpus, split="test"))
    assert "held-out" in str(reuse.why_not_reusable(held))
    gen = _job(tmp_path, mlflow_uri, "reuse-never", "variant=A", "generator=llama_cpp")
    assert "generator" in str(reuse.why_not_reusable(gen))


def test_a_run_that_did_not_finish_is_never_reused(tmp_path, mlflow_uri):
    t = Tracker(mlflow_uri)
    job = _job(tmp_path, mlflow_uri, "reuse-failed", "variant=A")
    first = run_job(job, t, Session(), stream=io.StringIO())
    t.client.set_terminated(first.run_id, "FAILED")
    second = run_job(job, t, Session(), stream=io.StringIO())
    assert second.reused_from is None and second.result is not None
    third = run_job(job, t, Session(), stream=io.StringIO())
    assert third.reused_from == second.run_id  # the newest FINISHED run with the key


def test_reuse_off_runs_again(tmp_path, mlflow_uri):
    t = Tracker(mlflow_uri)
    job = _job(tmp_path, mlflow_uri, "reuse-off", "variant=A", reuse_on=False)
    run_job(job, t, Session(), stream=io.StringIO())
    again = run_job(job, t, Session(), stream=io.StringIO())
    assert again.reused_from is None and again.result is not None


# -- through the real entry point --------------------------------------------------------------------------------


def ablate(args: list[str], cwd: Path, env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **env_extra}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [sys.executable, "-m", "ablate", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.mark.slow  # four sweeps of the demo through the CLI (~25 s): make test-slow
def test_a_repeated_sweep_records_its_cells_as_reused_and_an_extended_one_runs_only_its_new_cells(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    env: dict[str, str] = {}  # the session's cache (tests/conftest.py): the demo's indexes are built once
    base = ["-m", "corpus=demo", f"tracking.uri={uri}", "progress=false", "stats.bootstrap=100", "variant=C"]
    first = ablate([*base, "rrf.k=10,60", "hydra.sweep.dir=multirun/first"], tmp_path, env)
    assert first.returncode == 0, first.stderr
    assert "reused" not in first.stderr
    again = ablate([*base, "rrf.k=10,60", "hydra.sweep.dir=multirun/again"], tmp_path, env)
    assert again.returncode == 0, again.stderr
    assert "2 of 2 cells reused finished runs" in again.stderr and "running 0" in again.stderr
    assert "full report" in again.stdout  # the sweep's report still covers every cell
    assert again.stdout.count("FINISHED (reused)") == 2  # the sweep's table says which cells were reused
    # no job ran: no job folders, only the sweep's own files
    assert sorted(p.name for p in (tmp_path / "multirun" / "again").iterdir()) == [
        ".ablate_parent_run",
        "multirun.yaml",
        "report",
    ]
    extended = ablate([*base, "rrf.k=10,60,100", "hydra.sweep.dir=multirun/extended"], tmp_path, env)
    assert extended.returncode == 0, extended.stderr
    assert "2 of 3 cells reused" in extended.stderr and "running 1" in extended.stderr
    assert re.search(r"^\[3/3\] C k=100  .* \d+\.\d s$", extended.stdout, re.M), (
        extended.stdout
    )  # the one run
    forced = ablate(
        [*base, "rrf.k=10,60", "tracking.reuse=false", "hydra.sweep.dir=multirun/forced"], tmp_path, env
    )
    assert forced.returncode == 0, forced.stderr
    assert "reused" not in forced.stderr + forced.stdout and "[2/2] C k=60  " in forced.stdout

    t = Tracker(uri)
    exp = t.experiment_id("demo", create=False)
    runs = t.find_runs([exp])
    parents = {
        r.tags[R.T_SWEEP].rsplit("/", 1)[-1]: r for r in runs if r.tags.get(R.T_ROLE) == R.ROLE_SWEEP_PARENT
    }
    kids = {name: t.children(p.run_id) for name, p in parents.items()}
    assert {n: len(c) for n, c in kids.items()} == {"first": 2, "again": 2, "extended": 3, "forced": 2}
    assert all(r.status == "FINISHED" for r in runs)
    by_k = {r.params["rrf.k"]: r for r in kids["first"]}
    for r in kids["again"]:
        src = by_k[r.params["rrf.k"]]
        assert r.tags[R.T_REUSED_FROM] == src.run_id and r.metrics == src.metrics
        assert r.tags[R.T_SWEEP].endswith("again") and src.tags[R.T_SWEEP].endswith("first")
        assert r.tags[R.T_OVERRIDES] == src.tags[R.T_OVERRIDES] and r.parent == parents["again"].run_id
    ext = {float(r.params["rrf.k"]): r for r in kids["extended"]}
    assert (
        R.T_REUSED_FROM not in ext[100].tags
        and ext[10].tags[R.T_REUSED_FROM]
        and ext[60].tags[R.T_REUSED_FROM]
    )
    assert not any(R.T_REUSED_FROM in r.tags for r in kids["forced"])
    assert {r.tags[R.T_CELL] for r in kids["forced"]} == {r.tags[R.T_CELL] for r in kids["first"]}
    assert parents["again"].tags[R.T_CHILDREN] == "2"


def test_reused_artifacts_are_linked_and_the_new_config_never_writes_through_to_the_source(
    tmp_path, mlflow_uri
):
    t = Tracker(mlflow_uri)
    quiet = _job(tmp_path, mlflow_uri, "reuse-links", "variant=A")
    loud = _job(
        tmp_path, mlflow_uri, "reuse-links", "variant=A", "progress=true"
    )  # not an input of the numbers
    first = run_job(quiet, t, Session(), stream=io.StringIO())
    second = run_job(loud, t, Session(), stream=io.StringIO())
    assert second.reused_from == first.run_id
    ra, rb = t.local_artifact_root(first.run_id), t.local_artifact_root(second.run_id)
    assert ra is not None and rb is not None
    assert (ra / R.A_RUN).stat().st_ino == (rb / R.A_RUN).stat().st_ino  # one copy of the bytes on disk
    assert (ra / R.A_CONFIG).stat().st_ino != (rb / R.A_CONFIG).stat().st_ino
    assert (
        "progress: false" in (ra / R.A_CONFIG).read_text()
        and "progress: true" in (rb / R.A_CONFIG).read_text()
    )
    assert (ra / R.A_CONFIG).read_text() == quiet.config_yaml and (
        rb / R.A_CONFIG
    ).read_text() == loud.config_yaml


def test_the_plan_settles_only_the_cells_it_looked_up():
    from ablate.app.cli import Command
    from ablate.app.plan import Cell, Plan
    from ablate.runner.reuse import Lookup

    job = SimpleNamespace(
        variant="A", pipeline=SimpleNamespace(generator=None)
    )  # labelled by variant; no answers
    plan = Plan(
        [
            Cell(("a=1", "hydra.sweep.dir=x"), job, looked_up=True),  # looked up, nothing found
            Cell(("a=2",), job, looked_up=True, reuse=Lookup()),  # planned (a found run stands for it)
            Cell(("a=3",), job),  # never looked up (e.g. tracking.reuse=false)
        ],
        multirun=True,
    )
    command = Command(plan, ".")  # type: ignore[arg-type]
    assert command.settled == {
        ("a=1",)
    }  # its job does not look again; a=2 launched anyway (another sweeper) does
    assert plan.cell(["a=1"]) is plan.cells[0] and plan.cell(["a=4"]) is None


def test_under_hydras_basic_sweeper_each_job_finds_its_reused_run_itself(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    env: dict[str, str] = {}  # the session's cache (tests/conftest.py): the demo's indexes are built once
    base = [
        "-m",
        "corpus=demo",
        f"tracking.uri={uri}",
        "progress=false",
        "stats.bootstrap=100",
        "variant=A,B",
    ]
    first = ablate(base, tmp_path, env)
    assert first.returncode == 0, first.stderr
    basic = ablate([*base, "hydra/sweeper=basic"], tmp_path, env)
    assert basic.returncode == 0, basic.stderr
    assert "cells reused" not in basic.stderr and "[2/2] B  " in basic.stdout  # launched, not planned away
    assert basic.stdout.count("  (reused)\n") == 2  # ... and each job recorded its reuse
    t = Tracker(uri)
    parent = t.find_runs(None, f"tags.`{R.T_ROLE}` = '{R.ROLE_SWEEP_PARENT}'", newest_first=True)[0]
    kids = t.children(parent.run_id)
    assert len(kids) == 2 and all(R.T_REUSED_FROM in r.tags for r in kids)


# -- a copy only of a record that still stands (ablate.record_digest) ---------------------------------------------


def _notes(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("note: run ")]


def _files(t: Tracker, run_id: str) -> dict[str, bytes]:
    root = t.local_artifact_root(run_id)
    assert root is not None
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_every_run_is_sealed_with_the_digest_of_its_record(tmp_path, mlflow_uri):
    """Original and reused runs alike: the tag is the sha256 of record_digest.json, which lists every param, metric
    (its exact float) and artifact (the sha256 of its bytes) the store holds; a reused run lists its own config."""
    t = Tracker(mlflow_uri)
    quiet = _job(tmp_path, mlflow_uri, "reuse-sealed", "variant=A")
    loud = _job(tmp_path, mlflow_uri, "reuse-sealed", "variant=A", "progress=true")
    first = run_job(quiet, t, Session(), stream=io.StringIO())
    second = run_job(loud, t, Session(), stream=io.StringIO())
    assert second.reused_from == first.run_id
    for run_id, job in ((first.run_id, quiet), (second.run_id, loud)):
        run = t.get_run(run_id)
        assert run is not None
        files = _files(t, run_id)
        body = files.pop(R.A_RECORD_DIGEST)
        assert run.tags[R.T_RECORD_DIGEST] == hashlib.sha256(body).hexdigest()
        listed = json.loads(body)
        assert (
            listed["metrics"] == {k: repr(v) for k, v in run.metrics.items()} and len(listed["metrics"]) > 100
        )
        assert listed["params"] == dict(run.params)
        assert listed["artifacts"] == {k: hashlib.sha256(v).hexdigest() for k, v in files.items()}
        assert files[R.A_CONFIG] == job.config_yaml.encode() and R.A_RUN in files
        assert record_digest.check(t, run).problem is None


def test_a_metric_edited_on_the_source_after_it_finished_makes_the_cell_run(tmp_path, mlflow_uri, capsys):
    t = Tracker(mlflow_uri)
    job = _job(tmp_path, mlflow_uri, "reuse-edited-metric", "variant=A")
    first = run_job(job, t, Session(), stream=io.StringIO())
    a = t.get_run(first.run_id)
    assert a is not None and a.metrics["ndcg_at_10"] < 0.99
    t.client.log_metric(first.run_id, "ndcg_at_10", 0.999)
    capsys.readouterr()
    second = run_job(job, t, Session(), stream=io.StringIO())
    assert second.result is not None and second.reused_from is None  # ran: not a copy of the edited record
    b = t.get_run(second.run_id)
    assert (
        b is not None and R.T_REUSED_FROM not in b.tags and b.metrics["ndcg_at_10"] == a.metrics["ndcg_at_10"]
    )
    assert _notes(capsys.readouterr().err) == [
        f"note: run {first.run_id} not reused: its metric ndcg_at_10 was changed after it finished "
        "(digest mismatch); running the cell"
    ]
    third = run_job(job, t, Session(), stream=io.StringIO())
    assert third.reused_from == second.run_id  # the fresh run is the newest original now
    assert _notes(capsys.readouterr().err) == []


@pytest.mark.parametrize("name", [R.A_RUN, R.A_PER_QUERY])
def test_an_artifact_deleted_from_the_source_makes_the_cell_run(tmp_path, mlflow_uri, capsys, name):
    t = Tracker(mlflow_uri)
    job = _job(tmp_path, mlflow_uri, f"reuse-deleted-{name}", "variant=A")
    first = run_job(job, t, Session(), stream=io.StringIO())
    kept = _files(t, first.run_id)[name]
    root = t.local_artifact_root(first.run_id)
    assert root is not None
    (root / name).unlink()
    capsys.readouterr()
    second = run_job(job, t, Session(), stream=io.StringIO())
    assert second.result is not None and second.reused_from is None
    assert _files(t, second.run_id)[name] == kept  # made anew, whole
    assert _notes(capsys.readouterr().err) == [
        f"note: run {first.run_id} not reused: its artifact {name} is missing (digest mismatch); running the cell"
    ]


def test_a_reuse_is_never_copied_the_original_is(tmp_path, mlflow_uri, capsys):
    """run, reuse it, damage the reuse (a file and a metric), then an identical job: it copies the first run."""
    t = Tracker(mlflow_uri)
    job = _job(tmp_path, mlflow_uri, "reuse-chain", "variant=A")
    first = run_job(job, t, Session(), stream=io.StringIO())
    second = run_job(job, t, Session(), stream=io.StringIO())
    assert second.reused_from == first.run_id
    root = t.local_artifact_root(second.run_id)
    assert root is not None
    (root / R.A_RUN).unlink()
    t.client.log_metric(second.run_id, "ndcg_at_10", 0.999)
    capsys.readouterr()
    third = run_job(job, t, Session(), stream=io.StringIO())
    assert third.result is None and third.reused_from == first.run_id
    a, c = t.get_run(first.run_id), t.get_run(third.run_id)
    assert a is not None and c is not None and c.tags[R.T_REUSED_FROM] == first.run_id
    assert c.metrics == a.metrics and R.A_RUN in _files(t, third.run_id)
    assert _notes(capsys.readouterr().err) == []


def test_a_run_without_a_record_digest_is_not_reused(tmp_path, mlflow_uri, capsys):
    t = Tracker(mlflow_uri)
    job = _job(tmp_path, mlflow_uri, "reuse-no-digest", "variant=A")
    first = run_job(job, t, Session(), stream=io.StringIO())
    t.client.delete_tag(first.run_id, R.T_RECORD_DIGEST)  # as a run made before records were sealed
    capsys.readouterr()
    second = run_job(job, t, Session(), stream=io.StringIO())
    assert second.result is not None and second.reused_from is None
    assert _notes(capsys.readouterr().err) == [
        f"note: run {first.run_id} not reused: it carries no record digest (it finished before ablate sealed "
        "records); running the cell"
    ]


def test_a_sweeps_plan_copies_only_records_that_still_stand(tmp_path):
    """The plan (before Hydra launches) checks each source: an edited cell runs, with one note; the other is reused."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    env: dict[str, str] = {}  # the session's cache (tests/conftest.py): the demo's indexes are built once
    base = ["-m", "corpus=demo", f"tracking.uri={uri}", "progress=false", "stats.bootstrap=100", "variant=A"]
    first = ablate([*base, "bm25.k1=0.9,1.2", "hydra.sweep.dir=multirun/first"], tmp_path, env)
    assert first.returncode == 0, first.stderr
    t = Tracker(uri)
    exp = t.experiment_id("demo", create=False)
    assert exp is not None
    by_k1 = {r.params["bm25.k1"]: r for r in t.find_runs([exp]) if R.T_CELL in r.tags}
    edited = by_k1["0.9"]
    t.client.log_metric(edited.run_id, "recall_at_10", 0.001)
    again = ablate([*base, "bm25.k1=0.9,1.2", "hydra.sweep.dir=multirun/again"], tmp_path, env)
    assert again.returncode == 0, again.stderr
    assert "1 of 2 cells reused" in again.stderr and "running 1" in again.stderr
    assert _notes(again.stderr) == [
        f"note: run {edited.run_id} not reused: its metric recall_at_10 was changed after it finished "
        "(digest mismatch); running the cell"
    ]
    parent = t.find_runs([exp], f"tags.`{R.T_ROLE}` = '{R.ROLE_SWEEP_PARENT}'", newest_first=True)[0]
    kids = {r.params["bm25.k1"]: r for r in t.children(parent.run_id)}
    assert kids["1.2"].tags[R.T_REUSED_FROM] == by_k1["1.2"].run_id
    assert R.T_REUSED_FROM not in kids["0.9"].tags
    assert kids["0.9"].metrics["recall_at_10"] == edited.metrics["recall_at_10"]  # computed anew


@pytest.fixture
def mlflow_server(tmp_path) -> Iterator[tuple[str, Path]]:
    """A real ``mlflow server`` on 127.0.0.1 serving its artifacts (runs get ``mlflow-artifacts:`` URIs, not local
    folders); stopped at the end. Yields its URI and its artifact folder."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    env.pop("MLFLOW_TRACKING_URI", None)
    server = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{tmp_path}/server.db",
              "--artifacts-destination", str(tmp_path / "served"), "--serve-artifacts", "--host", "127.0.0.1",
              "--port", str(port), "--workers", "1"]  # fmt: skip
    with open(tmp_path / "server.log", "wb") as log:
        proc = subprocess.Popen(server, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 300
        while True:
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{uri}/health", timeout=5) as r:
                if r.status == 200:
                    break
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(
                    f"mlflow server did not start: {(tmp_path / 'server.log').read_text()[-2000:]}"
                )
            time.sleep(1)
        yield uri, tmp_path / "served"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


@pytest.mark.slow
def test_on_a_tracking_server_records_are_downloaded_sealed_and_checked(tmp_path, mlflow_server, capsys):
    """Artifacts that are not local files are downloaded through MLflow to be hashed, when sealing and when checking."""
    uri, served = mlflow_server
    t = Tracker(uri)
    job = _job(tmp_path, uri, "reuse-served", "variant=A")
    first = run_job(job, t, Session(), stream=io.StringIO())
    assert t.local_artifact_root(first.run_id) is None  # served: mlflow-artifacts:/...
    a = t.get_run(first.run_id)
    assert a is not None and a.tags[R.T_RECORD_DIGEST] and record_digest.check(t, a).problem is None
    second = run_job(job, t, Session(), stream=io.StringIO())
    assert second.reused_from == first.run_id
    b = t.get_run(second.run_id)
    assert b is not None and b.metrics == a.metrics and record_digest.check(t, b).problem is None
    (trec,) = served.rglob(f"{first.run_id}/artifacts/{R.A_RUN}")
    trec.unlink()  # gone from the server's store
    capsys.readouterr()
    third = run_job(job, t, Session(), stream=io.StringIO())
    assert third.result is not None and third.reused_from is None
    assert _notes(capsys.readouterr().err) == [
        f"note: run {first.run_id} not reused: its artifact {R.A_RUN} is missing (digest mismatch); running the cell"
    ]


def test_the_note_names_what_changed_in_the_record():
    was = record_digest.manifest(
        {"bm25.k1": "0.9", "variant": "A"}, {"ndcg_at_10": 0.5, "recall_at_10": 0.25}, {"run.trec": "a" * 64}
    )
    sealed = record_digest.digest(was)
    now = record_digest.manifest(
        {"bm25.k1": "1.2", "variant": "A"},
        {"ndcg_at_10": 0.5, "recall_at_10": 0.25000000000000006},  # one ulp off: still a change
        {"run.trec": "b" * 64, "notes.txt": "c" * 64},
    )
    assert record_digest.what_changed(was, sealed, now) == (
        "its artifact run.trec was changed after it finished, artifact notes.txt was added after it finished, "
        "its metric recall_at_10 was changed after it finished, its param bm25.k1 was changed after it finished"
    )
    assert "record_digest.json is missing" in record_digest.what_changed(None, sealed, now)
    assert "record_digest.json was changed" in record_digest.what_changed(was + b" ", sealed, now)
    gone = record_digest.manifest({}, {}, {})
    assert record_digest.what_changed(was, sealed, gone) == (
        "its artifact run.trec is missing, its metrics ndcg_at_10, recall_at_10 are missing, "
        "its params bm25.k1, variant are missing"
    )


def test_a_record_names_its_run_so_a_copy_is_not_that_run():
    """The manifest names the run it is the record of: the same params, metrics and files under another run id are
    another record (a byte-identical copy of run X's record in run Y is "the record of run X")."""
    body = ({"variant": "A"}, {"ndcg_at_10": 0.5}, {"run.trec": "a" * 64})
    x, y = record_digest.manifest(*body, "X" * 32), record_digest.manifest(*body, "Y" * 32)
    assert record_digest.digest(x) != record_digest.digest(y)
    assert json.loads(x)["run"] == "X" * 32 and json.loads(x)["version"] == record_digest.DIGEST_VERSION
    assert record_digest.what_changed(x, record_digest.digest(x), y) == (
        f"its record_digest.json is the record of run {'X' * 32}, not of this run (a copy)"
    )
    # a record sealed before records named their run is still read as it was written
    old = record_digest.manifest(*body)
    assert "run" not in json.loads(old) and json.loads(old)["version"] == record_digest.UNBOUND_VERSION


def test_a_run_sealed_before_records_named_their_run_is_still_checked(mlflow_uri, tmp_path):
    from ablate.record_digest import ArtifactMismatch, RunFiles

    t = Tracker(mlflow_uri)
    with t.run("digest-v1", "old") as rid:
        t.log_run(rid, params={"variant": "A"}, metrics={"ndcg_at_10": 0.5})
        t.log_files(rid, {"run.trec": "q1 Q0 d1 1 1.0 x\n"})
        sha = hashlib.sha256(b"q1 Q0 d1 1 1.0 x\n").hexdigest()
        body = record_digest.manifest(
            {"variant": "A"}, {"ndcg_at_10": 0.5}, {"run.trec": sha}
        )  # no run id: v1
        t.log_files(rid, {R.A_RECORD_DIGEST: body})
        t.set_tags(rid, {R.T_RECORD_DIGEST: record_digest.digest(body)})
    run = t.get_run(rid)
    assert run is not None and record_digest.check(t, run).problem is None
    assert RunFiles(t, run, tmp_path / "a").get("run.trec") is not None
    (t.local_artifact_root(rid) / "run.trec").write_text("q1 Q0 d2 1 1.0 x\n")
    assert "its artifact run.trec was changed" in str(record_digest.check(t, run).problem)
    with pytest.raises(ArtifactMismatch, match=f"expected {sha} as its sealed record lists it"):
        RunFiles(t, run, tmp_path / "b").get("run.trec")
