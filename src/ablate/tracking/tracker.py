"""The :class:`Tracker`: experiments and runs, their params, metrics and tags in and out of MLflow, as plain data;
its artifacts are :class:`ablate.tracking.artifacts.RunArtifacts`."""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ablate.record import T_FAILURE, T_PARENT, RecordedRun, metric_key, param_key, param_value
from ablate.secrets import redact
from ablate.tracking.artifacts import RunArtifacts
from ablate.tracking.calls import _retry, _store_call
from ablate.tracking.limits import PARAM_LIMIT, TAG_LIMIT, batches, fit
from ablate.tracking.store import HTTP_LIMITS, _ServerClient, not_found, sqlite_path, store_error

#: A file every store opened by this process or its launcher workers is named in, one URI a line (set by the entry
#: point's supervisor, :mod:`ablate.app.supervise`): the process that waits for the command reads it to end the runs
#: of a command that crashed in native code.
ENV_OPENED_STORES = "ABLATE_OPENED_STORES"


def note_opened(uri: str) -> None:
    """Name ``uri`` in the file :data:`ENV_OPENED_STORES` names (one short append; nothing when it is unset or the
    file cannot be written: a Ray worker on another machine)."""
    path = os.environ.get(ENV_OPENED_STORES)
    if not path:
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError:
        return
    try:
        os.write(fd, (uri.replace("\n", " ") + "\n").encode())
    except OSError:
        pass
    finally:
        os.close(fd)


def failure_reason(e: BaseException) -> str:
    """The ``ablate.failure`` text for an exception that ended a run."""
    if isinstance(e, KeyboardInterrupt):
        return "interrupted by the user"
    if isinstance(e, SystemExit):
        return str(e.code) if e.code not in (None, 0) else "exited"
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _record(run: Any) -> RecordedRun:
    return RecordedRun(
        run_id=run.info.run_id,
        name=run.info.run_name or run.info.run_id[:8],
        experiment_id=run.info.experiment_id,
        status=run.info.status,
        start_time=int(run.info.start_time or 0),
        params=dict(run.data.params),
        metrics=dict(run.data.metrics),
        tags=dict(run.data.tags),
        end_time=int(run.info.end_time) if run.info.end_time else None,
    )


#: Loggers of MLflow and of the schema migrations it runs, whose INFO lines ("Creating initial MLflow database
#: tables...", "Updating database tables") are noise on ablate's console; their warnings and errors still show.
QUIET_LOGGERS: tuple[str, ...] = ("mlflow", "alembic")


def quiet_mlflow() -> None:
    """MLflow's loggers at WARNING (MLflow sets its own to INFO when imported, so this follows the import)."""
    import logging

    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


class Tracker(RunArtifacts):
    """A thin, explicit-run-id wrapper over ``MlflowClient`` (its artifacts: :class:`RunArtifacts`)."""

    def __init__(self, uri: str) -> None:
        from mlflow.tracking import MlflowClient

        quiet_mlflow()
        self.uri = uri
        note_opened(uri)
        self.client: Any  # an MlflowClient (a _ServerClient around one for a tracking server)
        self._artifact_uris: dict[str, str] = {}
        self._reads: dict[tuple[Any, ...], Any] | None = None  # see held_reads
        self._own_files: dict[str, set[str]] = {}  # run id -> whole values of its tags this tracker wrote
        db = sqlite_path(uri)
        if db is None:
            if uri.startswith(("http://", "https://")):
                for name, value in HTTP_LIMITS.items():
                    os.environ.setdefault(name, value)
            with _store_call():
                self.client = MlflowClient(tracking_uri=uri)
            if uri.startswith(("http://", "https://")):
                self.client = _ServerClient(self.client, uri)
            return
        # Open (and on first use create) a sqlite store under an exclusive file lock: two processes that start on a
        # new store at once would otherwise both run MLflow's schema migration, and one of them fail.
        import fcntl

        with open(db.parent / f".{db.name}.ablate-lock", "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                with _store_call():
                    self.client = MlflowClient(tracking_uri=uri)
                _retry(self.client.search_experiments, max_results=1)
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    # -- experiments ------------------------------------------------------------------------------------------------
    def experiment_id(self, name: str, create: bool = True) -> str | None:
        exp = _retry(self.client.get_experiment_by_name, name)
        if exp is not None:
            return str(exp.experiment_id)
        if not create:
            return None
        artifact_location = None
        db = sqlite_path(self.uri)
        if db is not None:
            artifact_location = (db.parent / "mlartifacts").resolve().as_uri()
        try:
            return str(_retry(self.client.create_experiment, name, artifact_location=artifact_location))
        except Exception:  # noqa: BLE001 - created meanwhile by a parallel job
            exp = _retry(self.client.get_experiment_by_name, name)
            if exp is None:
                raise
            return str(exp.experiment_id)

    def experiment_name(self, experiment_id: str) -> str:
        return str(_retry(self.client.get_experiment, experiment_id).name)

    def experiment_names(self) -> list[str]:
        return [e.name for e in _retry(self.client.search_experiments)]

    @contextlib.contextmanager
    def held_reads(self) -> Iterator[None]:
        """Inside: each read of runs (``get_run``, ``find_runs``, ``children``) queries the store once and is answered
        from memory after that, until this tracker writes anything (every write forgets them). For a caller that
        reads the same finished runs several times while nothing else writes them: the end of a sweep, after its
        launcher returned, reads the children four times (lost jobs, summary, report, outcome)."""
        outer = self._reads
        self._reads = {} if outer is None else outer
        try:
            yield
        finally:
            self._reads = outer

    def _held(self, key: tuple[Any, ...], read: Callable[[], Any]) -> Any:
        if self._reads is None:
            return read()
        if key not in self._reads:
            self._reads[key] = read()
        return self._reads[key]

    def _wrote(self, run_id: str | None = None) -> None:
        """Forget the held reads a write to ``run_id`` changes: that run, and every search that returned it (or, for
        a new run, every search)."""
        if not self._reads:
            return
        for key in list(self._reads):
            value = self._reads[key]
            if key[0] == "get_run":
                stale = key[1] == run_id
            else:
                stale = run_id is None or any(r.run_id == run_id for r in value)
            if stale:
                del self._reads[key]

    # -- runs -------------------------------------------------------------------------------------------------------
    def start(
        self,
        experiment: str,
        run_name: str,
        tags: Mapping[str, str] | None = None,
        parent_run_id: str | None = None,
    ) -> str:
        self._wrote(None)  # a new run: any search may now find it
        tags = {k: str(v) for k, v in (tags or {}).items()}
        if parent_run_id:
            tags[T_PARENT] = parent_run_id
        tags, whole = fit(tags, "tags", TAG_LIMIT)
        exp_id = self.experiment_id(experiment)
        run = _retry(self.client.create_run, exp_id, run_name=run_name, tags=tags)
        run_id = str(run.info.run_id)
        self._artifact_uris[run_id] = str(run.info.artifact_uri)
        if whole:
            self._log_whole(run_id, whole)
        return run_id

    def end(self, run_id: str, status: str = "FINISHED", reason: str | None = None) -> None:
        """End a run (``FINISHED``, ``FAILED`` or ``KILLED``); a reason goes into the tag ``ablate.failure``."""
        self._wrote(run_id)
        if reason:
            with contextlib.suppress(
                Exception
            ):  # the reason is the caller's to report; the status still ends
                self.log_run(run_id, tags={T_FAILURE: redact(reason)})
        _retry(self.client.set_terminated, run_id, status)

    @contextlib.contextmanager
    def run(
        self,
        experiment: str,
        run_name: str,
        tags: Mapping[str, str] | None = None,
        parent_run_id: str | None = None,
    ) -> Iterator[str]:
        """Start a run; end it FINISHED, or FAILED with the reason when the body raises (the error propagates)."""
        run_id = self.start(experiment, run_name, tags, parent_run_id)
        try:
            yield run_id
        except BaseException as e:
            with contextlib.suppress(Exception):
                self.end(run_id, "FAILED", failure_reason(e))
            raise
        else:
            self.end(run_id, "FINISHED")

    def log_run(
        self,
        run_id: str,
        params: Mapping[str, Any] | None = None,
        metrics: Mapping[str, float] | None = None,
        tags: Mapping[str, Any] | None = None,
        step: int = 0,
    ) -> None:
        """Log a run's params, metrics and tags in as few ``log_batch`` calls as MLflow's limits allow (one for a
        run of up to 100 params, 100 tags and 1000 entities in all): each call is one database transaction.
        Names and values as :mod:`ablate.record` writes them; a metric without a finite value is refused before
        anything is logged (the caller decides what an undefined metric means: ablate.runner.emit.split_defined)."""
        from mlflow.entities import Metric, Param, RunTag

        self._wrote(run_id)
        metrics = metrics or {}
        bad = sorted(k for k, v in metrics.items() if v is None or not math.isfinite(float(v)))
        if bad:
            raise ValueError(f"metrics without a finite value cannot be logged: {', '.join(bad[:10])}")
        now = int(time.time() * 1000)
        pv, whole_p = fit(
            {param_key(k): param_value(v) for k, v in (params or {}).items()}, "params", PARAM_LIMIT
        )
        tv, whole_t = fit({param_key(k): str(v) for k, v in (tags or {}).items()}, "tags", TAG_LIMIT)
        if whole_p:
            self.log_files(run_id, whole_p)
        if whole_t:
            self._log_whole(run_id, whole_t)
        p = [Param(k, v) for k, v in pv.items()]
        t = [RunTag(k, v) for k, v in tv.items()]
        m = [Metric(metric_key(k), float(v), now, step) for k, v in metrics.items()]
        for bp, bm, bt in batches(p, m, t):
            _retry(self.client.log_batch, run_id, metrics=bm, params=bp, tags=bt)

    def _log_whole(self, run_id: str, whole: Mapping[str, str]) -> None:
        """Keep the whole values of tags cut to fit MLflow as the run's artifacts, remembered as the run's own: a copy
        of another run's artifacts (:meth:`copy_artifacts`) never replaces them."""
        self.log_files(run_id, whole)
        self._own_files.setdefault(run_id, set()).update(whole)

    def set_tags(self, run_id: str, tags: Mapping[str, Any]) -> None:
        self.log_run(run_id, tags=tags)

    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        self.log_run(run_id, params=params)

    def log_metrics(self, run_id: str, metrics: Mapping[str, float], step: int = 0) -> None:
        self.log_run(run_id, metrics=metrics, step=step)

    # -- reading back -----------------------------------------------------------------------------------------------
    def get_run(self, run_id: str) -> RecordedRun | None:
        """The run as plain data; None when the store says there is no such run. Any other failure (credentials
        refused, a server error) raises :class:`ablate.tracking.store.StoreError`: it is never "not found"."""

        def read() -> RecordedRun | None:
            try:
                run = _retry(self.client.get_run, run_id)
            except Exception as e:  # noqa: BLE001 - only MLflow's "does not exist" is "no such run"
                if not_found(e):
                    return None
                raise store_error(self.uri, f"reading run {run_id}", e) from e
            self._artifact_uris[run_id] = str(run.info.artifact_uri)
            return _record(run)

        got: RecordedRun | None = self._held(("get_run", run_id), read)
        return got

    def find_runs(
        self,
        experiment_ids: Sequence[str] | None = None,
        filter_string: str = "",
        max_results: int = 10000,
        newest_first: bool = False,
    ) -> list[RecordedRun]:
        """Runs matching an MLflow filter (every experiment when ``experiment_ids`` is None), oldest first."""
        key = (
            "find_runs",
            tuple(experiment_ids or ()),
            experiment_ids is None,
            filter_string,
            max_results,
            newest_first,
        )
        found: list[RecordedRun] = self._held(
            key, lambda: self._find_runs(experiment_ids, filter_string, max_results, newest_first)
        )
        return list(found)

    def _find_runs(
        self, experiment_ids: Sequence[str] | None, filter_string: str, max_results: int, newest_first: bool
    ) -> list[RecordedRun]:
        ids = (
            list(experiment_ids)
            if experiment_ids is not None
            else [e.experiment_id for e in _retry(self.client.search_experiments)]
        )
        if not ids:
            return []
        order = ["attributes.start_time DESC" if newest_first else "attributes.start_time ASC"]
        runs = _retry(
            self.client.search_runs, ids, filter_string=filter_string, max_results=max_results, order_by=order
        )
        for r in runs:  # known now: reading a found run's artifacts needs no second query
            self._artifact_uris[str(r.info.run_id)] = str(r.info.artifact_uri)
        return [_record(r) for r in runs]

    def children(self, parent_run_id: str) -> list[RecordedRun]:
        parent = self.get_run(parent_run_id)
        if parent is None:
            return []
        return self.find_runs([parent.experiment_id], f"tags.`{T_PARENT}` = '{parent_run_id}'")


_SHARED: dict[tuple[str, int], Tracker] = {}


def shared_tracker(uri: str) -> Tracker:
    """One :class:`Tracker` per store and process: the jobs of a sweep reuse its client (and its database engine)
    instead of opening the store again per job. Keyed by process id too, so a forked launcher worker opens its own."""
    key = (uri, os.getpid())
    if key not in _SHARED:
        _SHARED[key] = Tracker(uri)
    return _SHARED[key]


def shared_trackers() -> list[Tracker]:
    """The trackers :func:`shared_tracker` opened in this process (one per store)."""
    return [t for (_, pid), t in _SHARED.items() if pid == os.getpid()]
