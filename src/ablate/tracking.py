"""MLflow at the edge: the only module that imports mlflow. Everything it returns is plain data
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
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ablate.errors import AblateError
from ablate.record import T_FAILURE, T_PARENT, RecordedRun, metric_key, param_key, param_value

T = TypeVar("T")


_UMASK = os.umask(0)
os.umask(_UMASK)


def resolve_tracking_uri(uri: str | None, launch_dir: str | os.PathLike[str] | None = None) -> str:
    if uri:
        return str(uri)
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    base = Path(launch_dir or os.getcwd()).resolve()
    return f"sqlite:///{base / 'mlflow.db'}"


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI, else None."""
    return Path(uri[len("sqlite:///") :]) if uri.startswith("sqlite:///") else None


#: URI schemes MLflow's tracking client accepts (a local path without a scheme is a file store).
SCHEMES = ("sqlite", "file", "http", "https", "postgresql", "mysql", "mssql", "databricks")

#: Seconds the probe of a tracking server (:func:`check_uri`) waits to connect, and then for its answer.
PROBE_TIMEOUT = 5.0
#: MLflow's HTTP settings ablate uses for a tracking server unless they are set in the environment: MLflow's defaults
#: (7 retries with a backoff factor of 2, 120 s per request) turn a server that is down into minutes per request.
#: With these a refused connection fails in about 3 s, a server that stopped answering in 3 x 20 s; after that every
#: call to it fails at once (:data:`_DOWN`).
HTTP_LIMITS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "20",
}
#: Tracking servers this process found down (URI -> why): a call to one fails at once instead of waiting out
#: MLflow's retries again, until a probe (:func:`check_uri`, before each job of a sweep) finds it answering.
_DOWN: dict[str, str] = {}
_START_SERVER = "make mlflow-server serves http://127.0.0.1:5000"


class StoreUnavailable(AblateError):
    """The tracking server stopped answering while the command worked."""

    def __init__(self, uri: str, why: str) -> None:
        super().__init__(
            f"the tracking server {_redacted(uri)} stopped answering ({why}). Fix: start it again ({_START_SERVER}) "
            "and run the command again; the runs it left RUNNING are closed by the next command on that store"
        )


def _unreachable(e: BaseException, timeout: float) -> str | None:
    """Why a request to a tracking server failed when the server could not be reached (the connection refused or
    broken, no answer within ``timeout`` seconds); None for any other failure (an error the server answered with)."""
    import requests

    for cause in (e, e.__cause__, e.__context__):
        if isinstance(cause, requests.exceptions.Timeout):
            return f"no answer within {timeout:g} s"
        if isinstance(cause, requests.exceptions.ConnectionError):
            return (
                "the connection was refused" if "refused" in str(cause).lower() else "the connection failed"
            )
    return None


class _ServerClient:
    """An ``MlflowClient`` of a tracking server that does not call a server this process found down (:data:`_DOWN`):
    each call to it raises :class:`StoreUnavailable` at once. A sweep whose server died mid-way so costs one
    request's retries, not those of every request its remaining jobs and its end would make."""

    def __init__(self, client: Any, uri: str) -> None:
        self._client, self._uri = client, uri

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if self._uri in _DOWN:
                raise StoreUnavailable(self._uri, _DOWN[self._uri])
            try:
                return attr(*args, **kwargs)
            except Exception as e:
                why = _unreachable(e, float(os.environ.get("MLFLOW_HTTP_REQUEST_TIMEOUT", "120")))
                if why is None:
                    raise
                _DOWN[self._uri] = why
                raise StoreUnavailable(self._uri, why) from None

        return call


def _redacted(uri: str) -> str:
    """The URI without a password (``https://user:secret@host`` -> ``https://user:***@host``)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def _file_stores_refused() -> bool:
    """Whether the installed MLflow refuses file stores (recent releases do, unless MLFLOW_ALLOW_FILE_STORE=true)."""
    try:
        from mlflow.environment_variables import MLFLOW_ALLOW_FILE_STORE  # type: ignore[attr-defined,unused-ignore]
    except ImportError:  # an MLflow that still opens file stores
        return False
    return not MLFLOW_ALLOW_FILE_STORE.get()


def _sqlite_for(path: Path) -> str:
    """The sqlite URI a user probably meant by a plain path: a database inside it when it is a folder, else the path
    itself as the database file (``.db`` added when it has no such suffix)."""
    path = Path(os.path.abspath(path))
    if path.is_dir():
        return f"sqlite:///{path / 'mlflow.db'}"
    if path.suffix in (".db", ".sqlite", ".sqlite3") or path.is_file():
        return f"sqlite:///{path}"
    return f"sqlite:///{path}.db"


def _probe_server(uri: str, key: str) -> None:
    """One cheap MLflow REST call (search one experiment) with :data:`PROBE_TIMEOUT` and no retry, with the
    credentials MLflow would send (``MLFLOW_TRACKING_USERNAME``/``PASSWORD``/``TOKEN``)."""
    import json

    from mlflow.utils.credentials import get_default_host_creds
    from mlflow.utils.rest_utils import http_request

    from ablate.errors import ConfigError

    shown = _redacted(uri)
    start = f"Fix: start the server ({_START_SERVER}), or use a local store"
    try:
        response = http_request(
            get_default_host_creds(uri),
            "/api/2.0/mlflow/experiments/search",
            "POST",
            max_retries=0,
            backoff_factor=0,
            backoff_jitter=0,
            timeout=PROBE_TIMEOUT,
            raise_on_status=False,
            json={"max_results": 1},
        )
    except Exception as e:  # noqa: BLE001 - MLflow wraps every connection error in MlflowException
        why = _unreachable(e, PROBE_TIMEOUT) or "it cannot be reached"
        _DOWN[uri] = why
        raise ConfigError(
            key, shown, f"no MLflow server answers there ({why}). {start}, e.g. sqlite:////abs/path/mlflow.db"
        ) from None
    _DOWN.pop(uri, None)  # it answers (again)
    if response.status_code in (401, 403):
        raise ConfigError(
            key,
            shown,
            f"the server refused the credentials (HTTP {response.status_code}). Fix: set MLFLOW_TRACKING_USERNAME and "
            "MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN) for it",
        )
    try:
        ok = response.status_code == 200 and isinstance(json.loads(response.text), dict)
    except ValueError:
        ok = False
    if not ok:
        raise ConfigError(
            key,
            shown,
            f"the server there is not an MLflow tracking server (HTTP {response.status_code} to an MLflow request). "
            f"Fix: check the address and port of the server ({_START_SERVER})",
        )


def check_uri(uri: str, key: str = "tracking.uri", writes: bool = True) -> None:
    """Refuse, before any work, a tracking URI that cannot be opened, naming it as ``key`` (``tracking.uri`` or
    ``--tracking-uri``): an unknown scheme; a file store (a plain path or ``file://``) where the installed MLflow
    refuses them; a tracking server that does not answer an MLflow request (:func:`_probe_server`); when the caller
    ``writes``, a sqlite file or a file store whose folder does not exist (it is not created silently) or cannot be
    written."""
    from urllib.parse import urlparse

    from ablate.errors import ConfigError

    scheme = urlparse(uri).scheme.split("+")[0]
    if scheme and scheme not in SCHEMES:
        raise ConfigError(key, _redacted(uri), f"unknown scheme {scheme!r}; use one of {', '.join(SCHEMES)}")
    if scheme in ("http", "https"):
        _probe_server(uri, key)
        return
    if scheme not in ("sqlite", "file", ""):
        return
    if scheme == "sqlite":
        path = sqlite_path(uri)
        if path is None:
            raise ConfigError(key, uri, "write sqlite:////absolute/path/mlflow.db")
        folder, what = path.parent, "database"
    else:
        path = Path(urlparse(uri).path if scheme == "file" else uri)
        if _file_stores_refused():
            raise ConfigError(
                key,
                uri,
                "the installed MLflow no longer opens file stores (a plain path or file://). "
                f"Fix: use a sqlite database, e.g. {_sqlite_for(path)} (or set MLFLOW_ALLOW_FILE_STORE=true to keep "
                "MLflow's deprecated file store)",
            )
        folder, what = (path if path.is_dir() else path.parent), "store"
    if not writes:
        return
    if path.exists() and path.is_dir() and scheme == "sqlite":
        raise ConfigError(key, uri, f"{path} is a folder; name the database file, e.g. {path}/mlflow.db")
    if not folder.is_dir():
        hint = "it is a file" if folder.exists() else "it does not exist"
        raise ConfigError(
            key,
            uri,
            f"the {what}'s folder {folder}: {hint}; create the folder first or choose another",
        )
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise ConfigError(key, uri, f"{path} is not writable; choose a writable location")


def failure_reason(e: BaseException) -> str:
    """The ``ablate.failure`` text for an exception that ended a run."""
    if isinstance(e, KeyboardInterrupt):
        return "interrupted by the user"
    if isinstance(e, SystemExit):
        return str(e.code) if e.code not in (None, 0) else "exited"
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


#: Seconds a write to a locked database is retried once the command is stopping (:func:`hurry`); None = the usual
#: retries (about 20 s in all).
HURRY_SECONDS: list[float] = []


def hurry(seconds: float = 2.0) -> None:
    """The command is stopping (an interrupt, a signal): from now on a write to a locked database is retried for at
    most ``seconds`` in all, and a request to a tracking server is tried once with a timeout of ``seconds`` + 1, so
    the closing writes cannot keep an interrupted command waiting. (A single sqlite statement may still wait for
    MLflow's busy timeout; the caller bounds the whole closing.)"""
    HURRY_SECONDS[:] = [seconds]
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = "0"
    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(int(seconds) + 1)


_CALLS = threading.local()


@contextlib.contextmanager
def _store_call() -> Iterator[None]:
    _CALLS.depth = getattr(_CALLS, "depth", 0) + 1
    try:
        yield
    finally:
        _CALLS.depth -= 1


def in_store_call() -> bool:
    """Whether this thread is inside a call into MLflow. :mod:`ablate.app.interrupts` holds a signal until the call
    returns: an exception raised inside SQLAlchemy can leave an unfinished read holding sqlite's lock, and every
    later write of this process (the closing ``FAILED`` first) would wait for it."""
    return getattr(_CALLS, "depth", 0) > 0


def _retry(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    delay = 0.2
    start = time.monotonic()
    for attempt in range(12):
        try:
            with _store_call():
                return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - mlflow wraps sqlite errors in several types
            msg = str(e).lower()
            late = bool(HURRY_SECONDS) and time.monotonic() - start + delay > HURRY_SECONDS[0]
            if ("locked" not in msg and "busy" not in msg) or attempt == 11 or late:
                raise
            time.sleep(delay)
            delay = min(delay * 1.7, 3.0)
    raise AssertionError("unreachable")  # pragma: no cover


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
    )


def _files_under(root: Path) -> dict[str, Path]:
    """``{relative posix path: file}`` for every file under ``root`` (none when it is not a folder)."""
    if not root.is_dir():
        return {}
    return {f.relative_to(root).as_posix(): f for f in sorted(root.rglob("*")) if f.is_file()}


#: MLflow's ``log_batch`` limits: params and tags per call, metrics per call, entities (all three) per call.
MAX_PARAMS_TAGS, MAX_METRICS, MAX_ENTITIES = 100, 1000, 1000


def batches(
    params: Sequence[T], metrics: Sequence[T], tags: Sequence[T]
) -> Iterator[tuple[list[T], list[T], list[T]]]:
    """Split params, metrics and tags into ``log_batch`` calls within MLflow's limits (:data:`MAX_PARAMS_TAGS`,
    :data:`MAX_METRICS`, :data:`MAX_ENTITIES`), in order, every item exactly once, as few calls as the limits
    allow; nothing to log -> no call."""
    ip = im = it = 0
    while ip < len(params) or im < len(metrics) or it < len(tags):
        bp = list(params[ip : ip + MAX_PARAMS_TAGS])
        bt = list(tags[it : it + MAX_PARAMS_TAGS])
        room = min(MAX_METRICS, MAX_ENTITIES - len(bp) - len(bt))
        bm = list(metrics[im : im + room])
        ip, im, it = ip + len(bp), im + len(bm), it + len(bt)
        yield bp, bm, bt


class Tracker:
    """A thin, explicit-run-id wrapper over ``MlflowClient``."""

    def __init__(self, uri: str) -> None:
        from mlflow.tracking import MlflowClient

        self.uri = uri
        self.client: Any  # an MlflowClient (a _ServerClient around one for a tracking server)
        self._artifact_uris: dict[str, str] = {}
        self._reads: dict[tuple[Any, ...], Any] | None = None  # see held_reads
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
        tags = dict(tags or {})
        if parent_run_id:
            tags[T_PARENT] = parent_run_id
        exp_id = self.experiment_id(experiment)
        run = _retry(self.client.create_run, exp_id, run_name=run_name, tags=tags)
        self._artifact_uris[str(run.info.run_id)] = str(run.info.artifact_uri)
        return str(run.info.run_id)

    def end(self, run_id: str, status: str = "FINISHED", reason: str | None = None) -> None:
        """End a run (``FINISHED``, ``FAILED`` or ``KILLED``); a reason goes into the tag ``ablate.failure``."""
        self._wrote(run_id)
        if reason:
            with contextlib.suppress(Exception):
                _retry(self.client.set_tag, run_id, T_FAILURE, reason[:4900])
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
        p = [Param(param_key(k), param_value(v)) for k, v in (params or {}).items()]
        t = [RunTag(param_key(k), str(v)[:4900]) for k, v in (tags or {}).items()]
        m = [Metric(metric_key(k), float(v), now, step) for k, v in metrics.items()]
        for bp, bm, bt in batches(p, m, t):
            _retry(self.client.log_batch, run_id, metrics=bm, params=bp, tags=bt)

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

    def copy_artifacts(self, src_run_id: str, dst_run_id: str, skip: Sequence[str] = ()) -> None:
        """Give ``dst_run_id`` every artifact of ``src_run_id`` (same relative paths) but those named in ``skip``.

        When both runs keep their artifacts in local folders (a ``file:`` artifact store), each file is hard-linked
        (copied where the file system refuses a link): artifacts are written once and never changed, so the two
        runs share the bytes, and deleting either run's folder leaves the other whole. A file the caller is about to
        write for the new run must be in ``skip``: writing through a link would change the source run's file too.
        Otherwise the artifacts are downloaded to a temp folder and logged through MLflow."""
        self._wrote(dst_run_id)
        skipped = set(skip)
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
        def read() -> RecordedRun | None:
            try:
                run = _retry(self.client.get_run, run_id)
            except Exception:  # noqa: BLE001 - MlflowException(RESOURCE_DOES_NOT_EXIST) and friends
                return None
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
        """Download one artifact of a run into ``dst``; None when the run has no such artifact."""
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
        except Exception:  # noqa: BLE001 - mlflow raises several types for a missing artifact
            return None

    def local_artifact_root(self, run_id: str) -> Path | None:
        """The folder of the run's artifacts when they are local files (a ``file:`` artifact URI), else None."""
        from urllib.parse import unquote, urlparse

        try:
            uri = self.artifact_uri(run_id)
        except Exception:  # noqa: BLE001 - no such run: MLflow's own download reports it
            return None
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
