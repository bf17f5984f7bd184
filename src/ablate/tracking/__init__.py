"""MLflow at the edge: the only package that imports mlflow. Everything it returns is plain data
(:class:`ablate.record.RecordedRun`, paths, strings).

* Store: ``tracking.uri`` if set, else ``$MLFLOW_TRACKING_URI``, else ``sqlite:///<launch dir>/mlflow.db`` as an
  absolute URI (so Hydra's job folders never scatter stores). Artifacts of a sqlite store go to ``mlartifacts/``
  beside the database file.
* Names: :mod:`ablate.record` (``ndcg@10`` is logged as ``ndcg_at_10``).
* Failure: a run that raises is ended ``FAILED`` with the reason in the tag ``ablate.failure``.
* sqlite is shared by parallel jobs (Hydra's joblib launcher): every write retries on "database is locked", for about
  20 s, or :data:`HURRY_SECONDS` once the command is stopping (:func:`hurry`).
* A tracking server (``http(s)://``) is probed with one cheap request before anything runs (:func:`check_uri`), and
  MLflow's own HTTP retries are bounded (:data:`HTTP_LIMITS`), so a server that is down or dies costs seconds, not
  MLflow's default of about four minutes per request.

The package: :mod:`.store` (where the store is, the check before any work), :mod:`.calls` (retries, the stop),
:mod:`.limits` (what one call may log), :mod:`.tracker` (the :class:`Tracker`: experiments, runs, params, metrics and
tags), :mod:`.artifacts` (a run's artifacts and tables, the :class:`Tracker`'s other half).
"""

from ablate.tracking.calls import HURRY_SECONDS, _retry, hurry, in_store_call
from ablate.tracking.limits import MAX_ENTITIES, MAX_METRICS, MAX_PARAMS_TAGS, batches
from ablate.tracking.store import (
    HTTP_LIMITS,
    PROBE_TIMEOUT,
    SCHEMES,
    StoreError,
    StoreUnavailable,
    check_uri,
    not_found,
    resolve_tracking_uri,
    sqlite_path,
)
from ablate.tracking.tracker import Tracker, failure_reason, shared_tracker, shared_trackers

__all__ = [
    "HTTP_LIMITS",
    "HURRY_SECONDS",
    "MAX_ENTITIES",
    "MAX_METRICS",
    "MAX_PARAMS_TAGS",
    "PROBE_TIMEOUT",
    "SCHEMES",
    "StoreError",
    "StoreUnavailable",
    "Tracker",
    "_retry",
    "batches",
    "check_uri",
    "failure_reason",
    "hurry",
    "in_store_call",
    "not_found",
    "resolve_tracking_uri",
    "shared_tracker",
    "shared_trackers",
    "sqlite_path",
]
