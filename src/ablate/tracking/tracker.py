"""The :class:`Tracker`: runs, their params, metrics, tags and artifacts in and out of MLflow, as plain data."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ablate.errors import AblateError
from ablate.record import T_FAILURE, T_PARENT, RecordedRun, cut_artifact, metric_key, param_key, param_value
from ablate.secrets import redact
from ablate.tracking.calls import _retry, _store_call
from ablate.tracking.limits import PARAM_LIMIT, TAG_LIMIT, batches, fit
from ablate.tracking.store import HTTP_LIMITS, StoreError, _ServerClient, not_found, sqlite_path, store_error

_UMASK = os.umask(0)
os.umask(_UMASK)

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


def _files_under(root: Path) -> dict[str, Path]:
    """``{relative posix path: file}`` for every file under ``root`` (none when it is not a folder)."""
    if not root.is_dir():
        return {}
    return {f.relative_to(root).as_posix(): f for f in sorted(root.rglob("*")) if f.is_file()}


#: MLflow's tag listing a run's tables (``mlflow.utils.mlflow_tags.MLFLOW_LOGGED_ARTIFACTS``), which its artifact
#: compare view reads.
LOGGED_TABLES_TAG = "mlflow.loggedArtifacts"


def _tables(tags: Mapping[str, str]) -> list[dict[str, Any]]:
    """The tables a run's tag ``mlflow.loggedArtifacts`` lists (none when it is absent or unreadable)."""
    try:
        listed = json.loads(tags.get(LOGGED_TABLES_TAG) or "[]")
    except ValueError:
        return []
    return [t for t in listed if isinstance(t, dict)] if isinstance(listed, list) else []


#: Loggers of MLflow and of the schema migrations it runs, whose INFO lines ("Creating initial MLflow database
#: tables...", "Updating database tables") are noise on ablate's console; their warnings and errors still show.
QUIET_LOGGERS: tuple[str, ...] = ("mlflow", "alembic")


def quiet_mlflow() -> None:
    """MLflow's loggers at WARNING (MLflow sets its own to INFO when imported, so this follows the import)."""
    import logging

    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


class Tracker:
    """A thin, explicit-run-id wrapper over ``MlflowClient``."""

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

    def log_files(self, run_id: str, files: Mapping[str, str | bytes]) -> None:
        """Log ``{relative name: content}`` as the run's artifacts. Runs whose artifacts are local folders (a
        ``file:`` artifact store) get each file written in place, atomically (a temp file renamed over the name, so
        a file hard-linked from another run is replaced, never written through); other stores get the files through
        a temp folder and MLflow."""
        self._wrote(run_id)
        root = self.local_artifact_root(run_id)
        if root is not None:
            for name, content in files.items():
                target = root / name
                target.parent.mkdir(parents=True, exist_ok=True)
                data = content if isinstance(content, bytes) else content.encode("utf-8")
                fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
                try:
                    os.fchmod(fd, 0o666 & ~_UMASK)  # as an ordinary new file (mkstemp makes it 0600)
                    with os.fdopen(fd, "wb") as fh:
                        fh.write(data)
                    os.replace(tmp_name, target)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(tmp_name)
                    raise
            return
        with tempfile.TemporaryDirectory(prefix="ablate-artifacts-") as tmp:
            for name, content in files.items():
                p = Path(tmp) / name
                p.parent.mkdir(parents=True, exist_ok=True)
                if isinstance(content, bytes):
                    p.write_bytes(content)
                else:
                    p.write_text(content, encoding="utf-8")
            _retry(self.client.log_artifacts, run_id, tmp)

    def log_table(self, run_id: str, frame: Any, name: str) -> None:
        """Log a pandas table with MLflow's ``log_table`` as the run's artifact ``name`` (a ``.json``: pandas'
        ``orient="split"`` JSON, numbers to 10 decimals, NaN as null; MLflow's ``load_table`` reads it back) and
        list it in the run's tag ``mlflow.loggedArtifacts`` (type ``table``), which MLflow's artifact compare view
        reads to line runs up row by row. Once per run and name: MLflow appends to a table already logged, so an
        attempt retried on a locked store after the file was written (MLflow writes the file, then the tag) only
        sets the tag."""
        self._wrote(run_id)

        def attempt() -> None:
            if self.has_artifact(run_id, name):
                self._list_tables(run_id, [{"path": name, "type": "table"}])
            else:
                self.client.log_table(run_id, frame, name)

        _retry(attempt)

    def copy_artifacts(self, src_run_id: str, dst_run_id: str, skip: Sequence[str] = ()) -> None:
        """Give ``dst_run_id`` every artifact of ``src_run_id`` (same relative paths) but those named in ``skip`` and
        the whole values of ``dst_run_id``'s own tags this tracker kept (:meth:`_log_whole`).

        When both runs keep their artifacts in local folders (a ``file:`` artifact store), each file is hard-linked
        (copied where the file system refuses a link): artifacts are written once and never changed, so the two
        runs share the bytes, and deleting either run's folder leaves the other whole. A file the caller is about to
        write for the new run must be in ``skip``: writing through a link would change the source run's file too.
        Otherwise the artifacts are downloaded to a temp folder and logged through MLflow. The tables among them
        (:meth:`log_table`) stay tables: the source's ``mlflow.loggedArtifacts`` tag is set on ``dst_run_id``."""
        self._wrote(dst_run_id)
        self._copy_tables_tag(src_run_id, dst_run_id, skip)
        skipped = set(skip) | self._own_files.get(dst_run_id, set())
        src, dst = self.local_artifact_root(src_run_id), self.local_artifact_root(dst_run_id)
        if src is not None and dst is not None and src.is_dir():
            for f in sorted(src.rglob("*")):
                rel = f.relative_to(src).as_posix()
                if not f.is_file() or rel in skipped:
                    continue
                target = dst / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(f, target)
                except OSError:  # another file system, or links refused: a copy
                    shutil.copy2(f, target)
            return
        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
        with tempfile.TemporaryDirectory(prefix="ablate-artifacts-") as tmp:
            local = Path(_retry(self.client.download_artifacts, src_run_id, "", tmp))
            for rel in skipped:
                (local / rel).unlink(missing_ok=True)
            _retry(self.client.log_artifacts, dst_run_id, str(local))

    def _copy_tables_tag(self, src_run_id: str, dst_run_id: str, skip: Sequence[str]) -> None:
        """List on ``dst_run_id`` the tables ``src_run_id`` logged (its ``mlflow.loggedArtifacts``), but those in
        ``skip``."""
        src = self.get_run(src_run_id)
        listed = [t for t in _tables(src.tags if src is not None else {}) if t.get("path") not in set(skip)]
        if listed:
            _retry(self._list_tables, dst_run_id, listed)

    def _list_tables(self, run_id: str, tables: Sequence[Mapping[str, Any]]) -> None:
        """Add ``tables`` (``{"path": ..., "type": "table"}``) to the run's ``mlflow.loggedArtifacts``, as MLflow's
        ``log_table`` does."""
        current = _tables(dict(self.client.get_run(run_id).data.tags))
        new = current + [dict(t) for t in tables if dict(t) not in current]
        if new != current:
            self.client.set_tag(run_id, LOGGED_TABLES_TAG, json.dumps(new))

    # -- reading back -----------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def artifact_files(self, run_id: str) -> Iterator[dict[str, Path]]:
        """Every artifact the run holds now, as ``{relative path: local file}``: the files themselves when its
        artifacts are local folders (nothing is copied), else downloaded through MLflow into a temp folder that is
        removed on exit."""
        root = self.local_artifact_root(run_id)
        if root is not None:
            yield _files_under(root)
            return
        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
        with tempfile.TemporaryDirectory(prefix="ablate-artifacts-") as tmp:
            yield _files_under(Path(_retry(self.client.download_artifacts, run_id, "", tmp)))

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

    def download_artifact(self, run_id: str, path: str, dst: str | os.PathLike[str]) -> Path | None:
        """Download one artifact of a run into ``dst``; None when the run has no such artifact: MLflow's download
        failed and the run's listing confirms the path is not there (MLflow reports every failed download of a run's
        artifact as RESOURCE_DOES_NOT_EXIST, a refused login too). Any other failure raises
        :class:`ablate.tracking.store.StoreError`."""
        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
        Path(dst).mkdir(parents=True, exist_ok=True)
        root = self.local_artifact_root(run_id)
        if (
            root is not None
        ):  # artifacts on this machine: copy the file as MLflow would, without its round trips
            src = root / path
            if not src.is_file():
                return (
                    None
                    if not src.is_dir()
                    else Path(shutil.copytree(src, Path(dst) / path, dirs_exist_ok=True))
                )
            target = Path(dst) / path
            target.parent.mkdir(parents=True, exist_ok=True)
            return Path(shutil.copyfile(src, target))
        try:
            return Path(_retry(self.client.download_artifacts, run_id, path, str(dst)))
        except Exception as e:  # noqa: BLE001 - MLflow reports any failed download as "does not exist": ask again
            if isinstance(e, AblateError):
                raise
            if not self.has_artifact(run_id, path):
                return None
            raise store_error(self.uri, f"downloading the artifact {path} of run {run_id}", e) from e

    def has_artifact(self, run_id: str, path: str) -> bool:
        """Whether the run holds the artifact (file or folder) ``path``: looked up in its folder when its artifacts are
        local files, else in MLflow's listing of the folder above it. False for a run that does not exist; any other
        failure raises :class:`ablate.tracking.store.StoreError`."""
        path = path.strip("/")
        root = self.local_artifact_root(run_id)
        if root is not None:
            return (root / path).exists()
        above = path.rpartition("/")[0]
        try:
            listed = _retry(self.client.list_artifacts, run_id, above or None)
        except Exception as e:  # noqa: BLE001 - only MLflow's "does not exist" is "not there"
            if not_found(e):
                return False
            raise store_error(self.uri, f"listing the artifacts of run {run_id}", e) from e
        return any(str(f.path).strip("/") == path for f in listed)

    def whole(self, run: RecordedRun) -> RecordedRun:
        """``run`` with every param and tag that was cut to fit MLflow (:func:`ablate.record.shortened`) replaced by
        its whole value, read from the artifact it names. For code that parses such a value (a sweep's
        ``ablate.overrides``, ``ablate.param_sources``); a run without a cut value is returned as it is."""
        cut = [
            (kind, key, path)
            for kind, values in (("params", run.params), ("tags", run.tags))
            for key, value in values.items()
            if (path := cut_artifact(value)) is not None
        ]
        if not cut:
            return run
        params, tags = dict(run.params), dict(run.tags)
        with tempfile.TemporaryDirectory(prefix="ablate-whole-") as tmp:
            for kind, key, path in cut:
                got = self.download_artifact(run.run_id, path, tmp)
                if got is None or not got.is_file():
                    raise StoreError(
                        f"run {run.run_id}: its {kind[:-1]} {key} was cut to fit MLflow and its whole value, the "
                        f"artifact {path}, is missing. Fix: restore the artifact, or re-run the run"
                    )
                (params if kind == "params" else tags)[key] = got.read_text(encoding="utf-8")
        return dataclasses.replace(run, params=params, tags=tags)

    def local_artifact_root(self, run_id: str) -> Path | None:
        """The folder of the run's artifacts when they are local files (a ``file:`` artifact URI); None when they are
        not, or when there is no such run. Any other failure raises :class:`ablate.tracking.store.StoreError`."""
        from urllib.parse import unquote, urlparse

        try:
            uri = self.artifact_uri(run_id)
        except Exception as e:  # noqa: BLE001 - only MLflow's "does not exist" is "no such run"
            if not_found(e):  # the caller's own read of the run says so
                return None
            raise store_error(self.uri, f"reading run {run_id}", e) from e
        parsed = urlparse(uri)
        if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
            return None
        return Path(unquote(parsed.path))

    def artifact_uri(self, run_id: str) -> str:
        """Where the run's artifacts live (known without a query for a run this tracker started)."""
        if run_id not in self._artifact_uris:
            self._artifact_uris[run_id] = str(_retry(self.client.get_run, run_id).info.artifact_uri)
        return self._artifact_uris[run_id]


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
