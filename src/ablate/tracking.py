"""MLflow at the edge: the only module that imports mlflow.

* Store: ``tracking.uri`` if set, else ``$MLFLOW_TRACKING_URI``, else ``sqlite:///<launch dir>/mlflow.db`` as an
  absolute URI (so Hydra's job folders never scatter stores). Artifacts of a sqlite store go to ``mlartifacts/``
  beside the database file.
* Keys: MLflow refuses ``@``, so ``ndcg@10`` is logged as ``ndcg_at_10``; any other character MLflow refuses
  becomes ``_``.
* Failure: a run that raises is ended ``FAILED`` with the reason in the tag ``ablate.failure``.
* sqlite is shared by parallel jobs (Hydra's joblib launcher): every write retries on "database is locked".
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

_BAD = re.compile(r"[^A-Za-z0-9_\-. /:]")


def metric_key(key: str) -> str:
    """``ndcg@10`` -> ``ndcg_at_10``; ``ci95_low/ndcg@10`` -> ``ci95_low/ndcg_at_10``."""
    return _BAD.sub("_", key.replace("@", "_at_"))


def param_key(key: str) -> str:
    return _BAD.sub("_", key)


def resolve_tracking_uri(uri: str | None, launch_dir: str | os.PathLike[str] | None = None) -> str:
    if uri:
        return str(uri)
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    base = Path(launch_dir or os.getcwd()).resolve()
    return f"sqlite:///{base / 'mlflow.db'}"


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping):
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


def _param_value(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, (list, tuple)):
        return json.dumps(list(v), ensure_ascii=False)
    s = str(v)
    return s if len(s) <= 6000 else s[:5997] + "..."


def _retry(fn, *args, **kwargs):
    delay = 0.2
    for attempt in range(12):
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - mlflow wraps sqlite errors in several types
            if "locked" not in str(e).lower() and "busy" not in str(e).lower() or attempt == 11:
                raise
            time.sleep(delay)
            delay = min(delay * 1.7, 3.0)


class Tracker:
    """A thin, explicit-run-id wrapper over ``MlflowClient``."""

    def __init__(self, uri: str) -> None:
        import mlflow
        from mlflow.tracking import MlflowClient

        self.uri = uri
        mlflow.set_tracking_uri(uri)
        self.client = MlflowClient(tracking_uri=uri)

    def experiment_id(self, name: str) -> str:
        exp = _retry(self.client.get_experiment_by_name, name)
        if exp is not None:
            return exp.experiment_id
        artifact_location = None
        if self.uri.startswith("sqlite:///"):
            db = Path(self.uri[len("sqlite:///") :])
            artifact_location = (db.parent / "mlartifacts").resolve().as_uri()
        try:
            return _retry(self.client.create_experiment, name, artifact_location=artifact_location)
        except Exception:  # created meanwhile by a parallel job
            exp = _retry(self.client.get_experiment_by_name, name)
            if exp is None:
                raise
            return exp.experiment_id

    def start(self, experiment: str, run_name: str, tags: Mapping[str, str] | None = None, parent_run_id: str | None = None) -> str:
        tags = dict(tags or {})
        if parent_run_id:
            tags["mlflow.parentRunId"] = parent_run_id
        run = _retry(self.client.create_run, self.experiment_id(experiment), run_name=run_name, tags=tags)
        return run.info.run_id

    @contextlib.contextmanager
    def run(self, experiment: str, run_name: str, tags: Mapping[str, str] | None = None, parent_run_id: str | None = None) -> Iterator[str]:
        """Start a run; end it FINISHED, or FAILED with the reason when the body raises (the error propagates)."""
        run_id = self.start(experiment, run_name, tags, parent_run_id)
        try:
            yield run_id
        except BaseException as e:
            reason = f"{type(e).__name__}: {e}"[:4900]
            with contextlib.suppress(Exception):
                _retry(self.client.set_tag, run_id, "ablate.failure", reason)
            with contextlib.suppress(Exception):
                _retry(self.client.set_terminated, run_id, "FAILED")
            raise
        else:
            _retry(self.client.set_terminated, run_id, "FINISHED")

    def set_tags(self, run_id: str, tags: Mapping[str, Any]) -> None:
        from mlflow.entities import RunTag

        items = [RunTag(param_key(k), str(v)[:4900]) for k, v in tags.items()]
        for i in range(0, len(items), 100):
            _retry(self.client.log_batch, run_id, tags=items[i : i + 100])

    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        items = [Param(param_key(k), _param_value(v)) for k, v in params.items()]
        for i in range(0, len(items), 100):
            _retry(self.client.log_batch, run_id, params=items[i : i + 100])

    def log_metrics(self, run_id: str, metrics: Mapping[str, float], step: int = 0) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [
            Metric(metric_key(k), float(v), now, step)
            for k, v in metrics.items()
            if v is not None and not (isinstance(v, float) and math.isnan(v))
        ]
        for i in range(0, len(items), 1000):
            _retry(self.client.log_batch, run_id, metrics=items[i : i + 1000])

    def log_files(self, run_id: str, files: Mapping[str, str | bytes]) -> None:
        """Write ``{relative name: content}`` to a temp folder and log it as the run's artifacts."""
        with tempfile.TemporaryDirectory(prefix="ablate-artifacts-") as tmp:
            for name, content in files.items():
                p = Path(tmp) / name
                p.parent.mkdir(parents=True, exist_ok=True)
                if isinstance(content, bytes):
                    p.write_bytes(content)
                else:
                    p.write_text(content, encoding="utf-8")
            _retry(self.client.log_artifacts, run_id, tmp)

    def log_paths(self, run_id: str, paths: list[Path], artifact_path: str | None = None) -> None:
        for p in paths:
            _retry(self.client.log_artifact, run_id, str(p), artifact_path)

    def search(self, experiment_ids: list[str], filter_string: str = "", max_results: int = 1000):
        return _retry(self.client.search_runs, experiment_ids, filter_string=filter_string, max_results=max_results)
