"""The CI recipe (docs/examples/ablate-gate.yml) run end to end on the demo: the workflow file is parsed with a real
YAML parser and its own steps' commands run in bash as GitHub's runner runs them (the workflow's env, ``python`` of
the set-up venv on PATH, ``$GITHUB_STEP_SUMMARY``), against a local MLflow sqlite store in a temp workspace.

main's job sweeps and its store is kept as actions/cache keeps it (the step's paths copied aside, restored at the same
place); each pull request restores it, sweeps into it and gates: nothing changed passes (exit 0), a deliberately worse
configuration (``retrieval.window=1``: C fuses one passage from each retriever) is a regression and fails the job
(exit 1), with the interval statsmodels gives on the runs' logged per-question values; a store with no baseline sweep
fails with one line (exit 2). The workflow is checked against the GitHub workflow schema check-jsonschema ships."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import yaml

from conftest import REPO

WORKFLOW = REPO / "docs" / "examples" / "ablate-gate.yml"
#: what the pull request changes in the test (a real one edits conf/; here the same change as an override)
WORSE = "retrieval.window=1"
#: the values the test gives the workflow's ``${{ ... }}`` contexts (repository variables unset: their defaults)
SHA, BASE_SHA = "0" * 40, "0" * 40
EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
VAR_OR = re.compile(r"^vars\.\w+ \|\| '([^']*)'$")


def workflow() -> dict[str, Any]:
    wf = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    wf["on"] = wf.pop(True, wf.get("on"))  # YAML 1.1 reads the key `on` as true
    return wf


def resolve(text: str, workspace: Path) -> str:
    """``text`` with each ``${{ ... }}`` the workflow uses replaced; an expression the test does not know fails."""
    known = {
        "github.workspace": str(workspace),
        "github.sha": SHA,
        "github.event.pull_request.base.sha": BASE_SHA,
    }

    def one(m: re.Match[str]) -> str:
        expr = m.group(1)
        if expr in known:
            return known[expr]
        default = VAR_OR.match(expr)
        if default is None:
            pytest.fail(f"{WORKFLOW.name}: the test does not know the expression {expr!r}")
        return default.group(1)

    return EXPR.sub(one, text)


def step(wf: dict[str, Any], job: str, step_id: str) -> dict[str, Any]:
    return next(s for s in wf["jobs"][job]["steps"] if s.get("id") == step_id)


def cache_step(wf: dict[str, Any], job: str, action: str) -> dict[str, Any]:
    return next(s for s in wf["jobs"][job]["steps"] if str(s.get("uses", "")).startswith(action))


def cache_paths(wf: dict[str, Any], job: str, action: str, workspace: Path) -> list[Path]:
    lines = resolve(cache_step(wf, job, action)["with"]["path"], workspace).split()
    return [workspace / p for p in lines]


def run_step(
    wf: dict[str, Any], job: str, step_id: str, workspace: Path, **env: str
) -> subprocess.CompletedProcess[str]:
    """One step's ``run:`` in bash as the runner runs it (``shell: bash``: ``bash --noprofile --norc -eo pipefail``),
    in the workspace, with the workflow's env (``env`` overrides: a repository variable)."""
    s = step(wf, job, step_id)
    assert wf["defaults"]["run"]["shell"] == "bash"
    full = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "GITHUB_"))}
    for scope in (wf.get("env", {}), wf["jobs"][job].get("env", {}), s.get("env", {})):
        full.update({k: resolve(str(v), workspace) for k, v in scope.items()})
    full.update(env)
    full.update(
        GITHUB_ACTIONS="true",
        GITHUB_WORKSPACE=str(workspace),
        GITHUB_STEP_SUMMARY=str(workspace / "step_summary.md"),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{full.get('PATH', '')}",  # setup's .venv/bin on GITHUB_PATH
    )
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", resolve(s["run"], workspace)],
        cwd=workspace,
        env=full,
        capture_output=True,
        text=True,
        timeout=900,
    )


def restore(saved: Path, paths: list[Path]) -> None:
    """actions/cache/restore: each saved path back where it was (the store's artifact locations are absolute)."""
    for p in paths:
        shutil.rmtree(p, ignore_errors=True)
        shutil.copytree(saved / p.name, p, symlinks=True)


@pytest.fixture(scope="module")
def main_store(tmp_path_factory):
    """main's job in a workspace laid out as a checkout: its sweep, then its cache saved aside."""
    wf = workflow()
    workspace = tmp_path_factory.mktemp("gate-ci") / "repo"  # the runner's workspace: a checkout
    workspace.mkdir()
    for part in ("corpora", "tools"):
        (workspace / part).symlink_to(REPO / part, target_is_directory=True)
    p = run_step(wf, "baseline", "sweep", workspace)
    assert p.returncode == 0, p.stderr[-3000:]
    saved = workspace.parent / "actions-cache"
    for path in cache_paths(wf, "baseline", "actions/cache/save", workspace):
        shutil.copytree(path, saved / path.name, symlinks=True)
    return wf, workspace, saved


def pull_request(main_store, **env: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """The gate job on a pull request: restore main's store, sweep, gate; the gate step and the job summary."""
    wf, workspace, saved = main_store
    restore(saved, cache_paths(wf, "gate", "actions/cache/restore", workspace))
    (workspace / "step_summary.md").unlink(missing_ok=True)
    sweep = run_step(wf, "gate", "sweep", workspace, **env)
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    gate = run_step(wf, "gate", "gate", workspace, **env)
    summary = workspace / "step_summary.md"
    return gate, summary.read_text(encoding="utf-8") if summary.exists() else ""


def test_the_workflow_stores_main_and_gates_pull_requests_with_the_same_sweep():
    wf = workflow()
    assert wf["on"]["push"]["branches"] == ["main"] and "pull_request" in wf["on"]
    base, gate = wf["jobs"]["baseline"], wf["jobs"]["gate"]
    assert (
        base["if"] == "github.event_name != 'pull_request'"
        and gate["if"] == "github.event_name == 'pull_request'"
    )
    # the two sides run the very same sweep command, and main's store is what the pull request restores
    assert step(wf, "baseline", "sweep")["run"] == step(wf, "gate", "sweep")["run"]
    ws = Path("/w")
    save, load = (
        cache_step(wf, "baseline", "actions/cache/save"),
        cache_step(wf, "gate", "actions/cache/restore"),
    )
    assert save["with"]["path"] == load["with"]["path"]
    assert resolve(load["with"]["key"], ws) == resolve(save["with"]["key"], ws)  # base commit = main's commit
    assert resolve(save["with"]["key"], ws).startswith(load["with"]["restore-keys"])
    store = resolve(wf["env"]["ABLATE_STORE"], ws)
    assert store in save["with"]["path"].split() and "$ABLATE_STORE" in step(wf, "gate", "sweep")["run"]
    # the gate step is the script, writing to the job summary; the job fails on its exit code (no || true)
    run = step(wf, "gate", "gate")["run"]
    assert run.startswith("python tools/gate_sweep.py ") and '--summary "$GITHUB_STEP_SUMMARY"' in run
    assert "||" not in run and "continue-on-error" not in step(wf, "gate", "gate")


def test_the_workflow_is_valid_for_github_actions(tmp_path):
    check = [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows"]
    p = subprocess.run([*check, str(WORKFLOW)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    broken = workflow()  # the check is not vacuous: a job without runs-on is refused
    del broken["jobs"]["gate"]["runs-on"]
    (tmp_path / "broken.yml").write_text(yaml.safe_dump(broken), encoding="utf-8")
    p = subprocess.run([*check, str(tmp_path / "broken.yml")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "runs-on" in p.stdout + p.stderr, p.stdout + p.stderr


def test_a_pull_request_that_changes_nothing_passes(main_store):
    gate, summary = pull_request(main_store)
    assert gate.returncode == 0, gate.stdout + gate.stderr
    for cell in ("A", "B", "C"):
        assert f"[{cell}] exit 0 (pass)" in gate.stdout
        assert f"| {cell} | pass | 0 |" in summary
    assert "PASS ndcg@10 Δ +0.000 [+0.000, +0.000] margin 0.02, 17 questions in 5 clusters" in gate.stdout
    assert "::error" not in gate.stdout and gate.stdout.rstrip().endswith("the job passes (exit 0)")


def _sql(store: Path, query: str, *args: str) -> list[tuple[Any, ...]]:
    """Rows of the store's database, read with sqlite3: this process never opens the store through MLflow, which
    keeps an engine per URI that would not see a store restored under it."""
    with contextlib.closing(sqlite3.connect(store / "mlflow.db")) as con:
        return con.execute(query, args).fetchall()


def _answerable(store: Path, run_id: str) -> pd.Series:
    """The run's logged per_query.csv, read from the artifact folder the store names: ndcg@10 of answerable
    questions."""
    ((uri,),) = _sql(store, "select artifact_uri from runs where run_uuid = ?", run_id)
    pq = pd.read_csv(Path(uri.removeprefix("file://")) / "per_query.csv", dtype={"qid": str}).set_index("qid")
    return pq.loc[pq["category"] == "answerable", "ndcg@10"].dropna().sort_index()


def _child(store: Path, sweep: str, name: str) -> str:
    ((run_id,),) = _sql(
        store,
        "select r.run_uuid from runs r join tags t on t.run_uuid = r.run_uuid "
        "where t.key = 'mlflow.parentRunId' and t.value = ? and r.name = ?",
        sweep,
        name,
    )
    return str(run_id)


def test_a_worse_configuration_is_a_regression_and_fails_the_job(main_store):
    gate, summary = pull_request(main_store, ABLATE_OVERRIDES=f"corpus=demo {WORSE}")
    assert gate.returncode == 1, gate.stdout + gate.stderr
    # the window is C's fusion window: A and B are main's runs again
    assert "[A] exit 0 (pass)" in gate.stdout and "[B] exit 0 (pass)" in gate.stdout
    assert "[C] exit 1 (regression)" in gate.stdout and "| C | regression | 1 |" in summary
    annotation = next(line for line in gate.stdout.splitlines() if line.startswith("::error"))
    assert annotation.startswith("::error title=ablate gate: C::REGRESSION ndcg@10 Δ -0.123 [-0.182, -0.065]")
    # the verdict is the clustered interval of the runs' own per-question values (statsmodels, its groups as said)
    _, workspace, _ = main_store
    sweeps = re.search(r"baseline sweep (\w+) .*candidate sweep (\w+) ", gate.stdout)
    assert sweeps is not None
    store = workspace / "ci-store"
    base, cand = (_child(store, sweep, "C") for sweep in sweeps.groups())
    b, c = _answerable(store, base), _answerable(store, cand)
    assert list(b.index) == list(c.index) and len(b) == 17
    groups = _groups(store, base, cand)
    d = (c - b).to_numpy()
    fit = sm.OLS(d, np.ones(len(d))).fit(
        cov_type="cluster",
        cov_kwds={"groups": pd.factorize(np.array([groups[q] for q in b.index]))[0]},
        use_t=True,
    )
    low, high = fit.conf_int(alpha=0.10)[0]
    assert f"Δ {d.mean():+.3f} [{low:+.3f}, {high:+.3f}]" in annotation and high < 0 and low <= -0.02


def _groups(store: Path, base: str, cand: str) -> dict[str, str]:
    """The evidence clusters the gate used, as its ``--json`` says them (the interval above is recomputed from them)."""
    p = subprocess.run(
        [sys.executable, "-m", "ablate.gate", "--baseline", base, "--candidate", cand, "--metric", "ndcg@10",
         "--margin", "0.02", "--json", "--tracking-uri", f"sqlite:///{store / 'mlflow.db'}"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 1, p.stderr
    groups: dict[str, str] = json.loads(p.stdout)["groups"]
    return groups


def test_a_store_without_a_baseline_sweep_fails_with_one_line(main_store):
    wf, workspace, saved = main_store
    restore(
        saved, cache_paths(wf, "gate", "actions/cache/restore", workspace)
    )  # main's sweep alone: no PR sweep
    gate = run_step(wf, "gate", "gate", workspace)
    assert gate.returncode == 2 and gate.stderr.count("\n") == 1, gate.stderr
    assert (
        gate.stderr.startswith("error: no baseline sweep in sqlite:///")
        and "push to main once" in gate.stderr
    )


@pytest.mark.slow  # two more sweeps and two gates of three cells: ~25 s idle
def test_the_worse_configuration_against_itself_passes(main_store):
    """The pull request's worse sweep, run again: gated against its first run (the sweep before), every cell
    passes. The default suite keeps watch with the pull request that changes nothing."""
    wf, workspace, _ = main_store
    first, _ = pull_request(main_store, ABLATE_OVERRIDES=f"corpus=demo {WORSE}")
    assert first.returncode == 1, first.stdout + first.stderr
    again = run_step(wf, "gate", "sweep", workspace, ABLATE_OVERRIDES=f"corpus=demo {WORSE}")
    assert again.returncode == 0, again.stderr[-3000:]
    gate = run_step(wf, "gate", "gate", workspace)
    assert gate.returncode == 0, gate.stdout + gate.stderr
    assert "3 pass (A, B, C)" in gate.stdout and "::error" not in gate.stdout


@pytest.mark.slow  # one more sweep and gate: ~15 s idle
def test_an_inconclusive_cell_passes_the_job_with_a_warning(main_store):
    """BM25 without its stemmer: A's drop is within what 17 questions in 5 clusters cannot tell from the margin, so
    the job passes with a warning. The default suite keeps watch on the exit codes with the regression and the
    pull request that changes nothing."""
    gate, summary = pull_request(main_store, ABLATE_OVERRIDES="corpus=demo ++bm25.stemmer=null")
    assert gate.returncode == 0, gate.stdout + gate.stderr
    assert "[A] exit 3 (inconclusive)" in gate.stdout and "| A | inconclusive | 3 |" in summary
    warning = next(line for line in gate.stdout.splitlines() if line.startswith("::warning"))
    assert warning.startswith(
        "::warning title=ablate gate: A::INCONCLUSIVE ndcg@10 Δ -0.045 [-0.114, +0.024]"
    )
    assert "::error" not in gate.stdout and gate.stdout.rstrip().endswith("the job passes (exit 0)")


def test_a_cell_the_gate_refuses_fails_the_job_with_the_gates_line(main_store):
    """main's sweep against itself, on a metric the runs do not have: every cell is the gate's refusal (exit 2), and
    so is the job; never a regression."""
    wf, workspace, saved = main_store
    restore(saved, cache_paths(wf, "gate", "actions/cache/restore", workspace))
    store = workspace / "ci-store"
    uri = f"sqlite:///{store / 'mlflow.db'}"
    ((sweep,),) = _sql(
        store, "select run_uuid from tags where key = 'ablate.role' and value = 'sweep-parent'"
    )
    p = subprocess.run(
        [sys.executable, str(REPO / "tools" / "gate_sweep.py"), "--tracking-uri", uri, "--metric", "ndcg@7",
         "--margin", "0.02", "--baseline-sweep", sweep, "--candidate-sweep", sweep],
        capture_output=True, text=True, timeout=300, env={**os.environ, "GITHUB_ACTIONS": "true"},
    )  # fmt: skip
    assert p.returncode == 2, p.stdout + p.stderr
    errors = [line for line in p.stdout.splitlines() if line.startswith("::error")]
    assert len(errors) == 3 and all("--metric 'ndcg@7': run " in line for line in errors), p.stdout + p.stderr
    assert "3 bad input (A, B, C): the job fails (exit 2)" in p.stdout
