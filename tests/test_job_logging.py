"""What a job logs, batched into one ``log_batch``, is exactly what its pure emitters compute; the per-run bootstrap
intervals kept in the cache are the intervals computed afresh. Real composition, real MLflow sqlite store."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from ablate.app.config import job_from_config
from ablate.app.paths import CONF_DIR
from ablate.cache import Cache
from ablate.record import metric_key, param_key, param_value
from ablate.runner.emit import CI_KIND, metrics_for, params_for, split_defined
from ablate.runner.job import result_tags, run_job
from ablate.runner.reuse import cell_key
from ablate.runner.session import Session
from ablate.tracking import Tracker


@pytest.fixture
def private_cache(tmp_path: Path, monkeypatch) -> Path:
    """A cache of this test's own: a test counting the cache's hits and misses (the session's cache is shared)."""
    monkeypatch.setenv("ABLATE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def job(tmp_path: Path, mlflow_uri: str):
    # the session's cache (tests/conftest.py) unless a test asks for private_cache first
    # tracking.reuse=false: each run_job here must run (these tests read what it computed and logged)
    overrides = ["corpus=demo", "variant=A", f"tracking.uri={mlflow_uri}", "tracking.experiment=job-logging",
                 "progress=false", "stats.bootstrap=200", "tracking.reuse=false"]  # fmt: skip
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    return job_from_config(cfg, str(tmp_path))


def test_logged_run_equals_the_emitters_output(job, mlflow_uri):
    t = Tracker(mlflow_uri)
    done = run_job(job, t, Session(), stream=io.StringIO())
    run = t.get_run(done.run_id)
    assert run is not None and run.status == "FINISHED"
    # independent of the tracker and of the cache: the pure emitters on the job's result, intervals computed afresh
    params = params_for(job.variant, done.result, done.snapshot, job.corpus, job.settings)
    metrics, _ = split_defined(metrics_for(done.result, bootstrap=200, seed=job.settings.seed))
    assert run.params == {param_key(k): param_value(v) for k, v in params.items()}
    assert run.metrics == {metric_key(k): v for k, v in metrics.items()}
    assert len(run.metrics) > 100 and "ndcg_at_10_ci_low" in run.metrics
    tags = result_tags(done.result, done.snapshot, job.corpus, cell_key(job, done.result.components))
    assert {k: run.tags[k] for k in tags} == tags


def test_cached_intervals_equal_fresh_ones_and_a_rerun_serves_them(private_cache, job, mlflow_uri):
    t = Tracker(mlflow_uri)
    first = run_job(job, t, Session(), stream=io.StringIO())
    cache = Cache(private_cache)
    fresh = metrics_for(first.result, bootstrap=200, seed=0)
    assert (
        metrics_for(first.result, bootstrap=200, seed=0, cache=cache) == fresh
    )  # served: the run stored them
    assert cache.stats.by_kind[CI_KIND] == {"hits": 1, "misses": 0}
    assert metrics_for(first.result, bootstrap=300, seed=0, cache=cache) != fresh  # other settings: computed
    assert cache.stats.by_kind[CI_KIND]["misses"] == 1
    second = run_job(job, t, Session(), stream=io.StringIO())
    a, b = t.get_run(first.run_id), t.get_run(second.run_id)
    assert a is not None and b is not None
    ci = {k: v for k, v in a.metrics.items() if k.endswith(("_ci_low", "_ci_high"))}
    assert ci and ci == {k: b.metrics[k] for k in ci}
