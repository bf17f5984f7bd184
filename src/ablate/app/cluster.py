"""Sweeps on a Ray cluster (``hydra/launcher=ray``): how the jobs are sent, and what a lost worker leaves behind.

A job running on a Ray worker is another process, possibly on another machine: it sees none of the driver's
globals and not its environment. What it needs from the command travels in Ray's ``runtime_env.env_vars``: the
sweep's parent run (``ABLATE_SWEEP_PARENT``, set by the sweep callback before the launcher starts), the command's
id and size, the cache folder and the tracking server (the variables matching :data:`FORWARD_ENV`; more can be set in
the launcher's ``ray.init.runtime_env.env_vars``).

A worker that dies mid-job (killed, out of memory, its node lost) cannot end its MLflow run. The launcher reports
that job as failed (the sweep goes on) and records why; at the end of the sweep the callback ends every child run
still RUNNING as FAILED with that reason (:func:`close_lost_jobs`): once the launcher has returned, no job of the
sweep is running any more, wherever it ran.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ablate import record as R
from ablate.tracking import Tracker

log = logging.getLogger("ablate")

#: The driver's variables every job gets (``fnmatch`` patterns): the command's own, MLflow's, offline model loading.
FORWARD_ENV = (
    "ABLATE_*",
    "MLFLOW_*",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "OMP_WAIT_POLICY",
    "XDG_CACHE_HOME",
)
#: {" ".join(job overrides): why the job's worker was lost}, filled by :func:`launch_on_ray` in the driver.
LOST_JOBS: dict[str, str] = {}
LOST_REASON = "the job's worker ended without closing the run (killed, out of memory, or its node was lost)"


def forwarded_env(patterns: Sequence[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of ``environ`` (default: this process's) whose names match one of ``patterns`` (``fnmatch``
    wildcards: ``ABLATE_*``); empty values are left out."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in env.items() if v and any(fnmatch.fnmatchcase(k, p) for p in patterns)}


def ray_init_args(init: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """``ray.init`` keyword arguments: the configured ones, ``env`` merged under ``runtime_env.env_vars`` (values
    set in the config win; empty ones are left out), and a small object store and no dashboard when Ray is started
    here (``address`` null)."""
    args = dict(init)
    runtime_env = dict(args.get("runtime_env") or {})
    configured = {k: str(v) for k, v in (runtime_env.get("env_vars") or {}).items() if v not in (None, "")}
    runtime_env["env_vars"] = {**env, **configured}
    args["runtime_env"] = runtime_env
    if args.get("address"):
        args.pop("object_store_memory", None)
    else:  # "local": a private Ray, even when `ray start` runs on this machine (ray.init() would join that one)
        args["address"] = "local"
        args.setdefault("object_store_memory", 200_000_000)
        args.setdefault("include_dashboard", False)
    return args


def launch_on_ray(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[Any]:
    """Submit every job as a Ray task, then wait for all of them; a job whose worker died becomes a completed job
    returning ``{"error": reason}`` (how the app reports a failed job) so the sweep, its report and its exit code
    go on, and its reason is kept for :func:`close_lost_jobs`."""
    import ray
    from hydra.core.singleton import Singleton
    from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, setup_globals
    from omegaconf import OmegaConf, open_dict

    setup_globals()
    config = launcher.config
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    sweep_dir = Path(str(config.hydra.sweep.dir)).resolve()
    sweep_dir.mkdir(parents=True, exist_ok=True)
    log.info(f"Ray launcher: {len(job_overrides)} jobs, sweep output dir: {sweep_dir}")
    if not ray.is_initialized():
        init = OmegaConf.to_container(launcher.ray_cfg.init, resolve=True) or {}
        assert isinstance(init, dict)
        ray.init(**ray_init_args({str(k): v for k, v in init.items()}, forwarded_env(FORWARD_ENV)))

    remote = OmegaConf.to_container(launcher.ray_cfg.remote, resolve=True) or {}
    assert isinstance(remote, dict)
    task = (
        ray.remote(**{str(k): v for k, v in remote.items()})(run_hydra_job)
        if remote
        else ray.remote(run_hydra_job)
    )
    submitted = []
    for i, overrides in enumerate(job_overrides):
        idx = initial_job_idx + i
        log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
        sweep_config = launcher.hydra_context.config_loader.load_sweep_config(config, list(overrides))
        with open_dict(sweep_config):
            sweep_config.hydra.job.id = f"job_id_for_{idx}"
            sweep_config.hydra.job.num = idx
            # one folder for the whole sweep wherever a worker's working directory is
            sweep_config.hydra.sweep.dir = str(sweep_dir)
        ref = task.remote(launcher.hydra_context, sweep_config, launcher.task_function, Singleton.get_state())
        submitted.append((list(overrides), ref))

    results = []
    for overrides, ref in submitted:
        try:
            results.append(ray.get(ref))
        except ray.exceptions.RayError as e:  # the worker died or the task could not run: this job failed
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            reason = f"{LOST_REASON}; Ray: {type(e).__name__}: {first}".rstrip(": ")
            LOST_JOBS[" ".join(overrides)] = reason
            print(f"error: job {' '.join(overrides)}: {reason}", file=sys.stderr)
            results.append(
                JobReturn(overrides=overrides, status=JobStatus.COMPLETED, _return_value={"error": reason})
            )
    return results


def run_hydra_job(hydra_context: Any, sweep_config: Any, task_function: Any, singleton_state: Any) -> Any:
    """One job inside a Ray worker: Hydra's state restored, then Hydra's own ``run_job`` (as hydra-ray-launcher)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.singleton import Singleton
    from hydra.core.utils import run_job, setup_globals

    setup_globals()
    Singleton.set_state(singleton_state)
    HydraConfig.instance().set_config(sweep_config)
    return run_job(
        hydra_context=hydra_context,
        task_function=task_function,
        config=sweep_config,
        job_dir_key="hydra.sweep.dir",
        job_subdir_key="hydra.sweep.subdir",
    )


def close_lost_jobs(tracker: Tracker, parent_run_id: str) -> list[str]:
    """End FAILED, with a reason, every child of the sweep still RUNNING after its launcher returned (its process
    was lost: nothing can still be running it). Returns their run ids."""
    closed = []
    for run in tracker.children(parent_run_id):
        if run.status != "RUNNING":
            continue
        reason = LOST_JOBS.get(run.tags.get(R.T_OVERRIDES, ""), LOST_REASON)
        tracker.end(run.run_id, "FAILED", reason)
        print(
            f"note: run {run.run_id} ({run.name}) was left RUNNING by a lost job; marked FAILED",
            file=sys.stderr,
        )
        closed.append(run.run_id)
    return closed
