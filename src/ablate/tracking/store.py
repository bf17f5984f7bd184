"""Where the store is and whether it can be opened: the tracking URI, the check before any work, a tracking server's
probe, and the client of a server that went down (every call to it fails at once)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from ablate.errors import AblateError
from ablate.secrets import redact


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
#: Characters of a store's error kept in the one-line message (the rest is MLflow's trace, not the reason).
ERROR_CHARS = 200


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
    request's retries, not those of every request its remaining jobs and its end would make.

    Pickled (to a launcher's worker: the sweep's callback travels with every Ray job) as its URI alone; the worker
    opens its own client (:func:`_server_client`). An attribute this class lacks is looked up on the client, never
    on an object still being built (unpickling looks up ``__setstate__`` before any attribute is set)."""

    def __init__(self, client: Any, uri: str) -> None:
        self._client, self._uri = client, uri

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return _server_client, (self._uri,)

    def __getattr__(self, name: str) -> Any:
        # only called for a name not found on the object: `_client` itself missing means a half-built object
        if name.startswith("__") or name in ("_client", "_uri"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        client = self.__dict__.get("_client")
        if client is None:
            raise AttributeError(
                f"{type(self).__name__!r} object has no attribute {name!r} (it has no client)"
            )
        attr = getattr(client, name)
        if not callable(attr):
            return attr
        uri = self._uri

        def call(*args: Any, **kwargs: Any) -> Any:
            if uri in _DOWN:
                raise StoreUnavailable(uri, _DOWN[uri])
            try:
                return attr(*args, **kwargs)
            except Exception as e:
                why = _unreachable(e, float(os.environ.get("MLFLOW_HTTP_REQUEST_TIMEOUT", "120")))
                if why is None:
                    # MLflow does not always chain the connection error (an artifact download gathers its
                    # failures into one message): a server that no longer answers a probe was lost all the same
                    why = _silent(uri)
                if why is None:
                    raise
                _DOWN[uri] = why
                raise StoreUnavailable(uri, why) from None

        return call


def _probe(uri: str) -> Any:
    """One cheap MLflow REST call to the server at ``uri`` (search one experiment) with :data:`PROBE_TIMEOUT` and no
    retry, with the credentials MLflow would send (``MLFLOW_TRACKING_USERNAME``/``PASSWORD``/``TOKEN``): its
    response, whatever its status; a connection error raises."""
    from mlflow.utils.credentials import get_default_host_creds
    from mlflow.utils.rest_utils import http_request

    return http_request(
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


def _silent(uri: str) -> str | None:
    """Why the tracking server at ``uri`` does not answer :func:`_probe`; None when it answers, whatever it
    answers."""
    try:
        _probe(uri)
    except Exception as e:  # noqa: BLE001 - MLflow wraps every connection error in MlflowException
        return _unreachable(e, PROBE_TIMEOUT) or "it cannot be reached"
    return None


def _server_client(uri: str) -> _ServerClient:
    """A :class:`_ServerClient` of the tracking server at ``uri`` with its own ``MlflowClient`` (and MLflow's HTTP
    retries bounded by :data:`HTTP_LIMITS`, unless set in the environment). Opening it makes no request."""
    from mlflow.tracking import MlflowClient

    for name, value in HTTP_LIMITS.items():
        os.environ.setdefault(name, value)
    return _ServerClient(MlflowClient(tracking_uri=uri), uri)


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
    """Refuse, as ``key``, a tracking server that does not answer :func:`_probe`, refuses its credentials, or
    answers as something other than an MLflow server."""
    import json

    from ablate.errors import ConfigError

    shown = _redacted(uri)
    start = f"Fix: start the server ({_START_SERVER}), or use a local store"
    try:
        response = _probe(uri)
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


#: The first 16 bytes of every SQLite 3 database file.
SQLITE_MAGIC = b"SQLite format 3\x00"
#: Tables every MLflow tracking database has: a database with tables but not these belongs to something else.
MLFLOW_TABLES = ("alembic_version", "experiments", "runs")


def check_sqlite_file(path: Path, key: str, uri: str) -> None:
    """Refuse a ``sqlite:///`` path that exists but is no MLflow store, reading it only (never writing or locking
    it, so the file stays byte-identical): a folder, something other than a regular file (a pipe, a device), a file
    that cannot be read, a file that is not a SQLite database (a text file, an image) and a SQLite database of
    another application (tables, but not all of :data:`MLFLOW_TABLES`: MLflow would add its own tables to it). An empty file or a
    database without tables is a new store; a missing path is left to the folder checks."""
    import sqlite3
    import stat

    from ablate.errors import ConfigError

    try:
        st = path.stat()
    except (FileNotFoundError, NotADirectoryError):  # nothing there: the folder checks below say why
        return
    except OSError as e:
        raise ConfigError(
            key, uri, f"{path} cannot be read ({e.strerror}); choose another database file"
        ) from None
    new = f"name a new file or an MLflow database, e.g. {path.parent / 'mlflow.db'}"
    if stat.S_ISDIR(st.st_mode):
        raise ConfigError(key, uri, f"{path} is a folder; name the database file, e.g. {path}/mlflow.db")
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(key, uri, f"{path} is not a regular file (a pipe or a device); {new}")
    try:
        with path.open("rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError as e:
        raise ConfigError(
            key, uri, f"{path} cannot be read ({e.strerror}); fix its permissions or {new}"
        ) from None
    if not head:
        return  # an empty file: SQLite makes it a new database
    if head != SQLITE_MAGIC:
        raise ConfigError(
            key, uri, f"{path} is not a SQLite database (it is another kind of file, left as it is); {new}"
        )
    try:  # read-only, immutable: no lock, no journal, nothing written
        with contextlib.closing(
            sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
        ) as db:
            tables = sorted(
                str(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")
            )
    except sqlite3.Error as e:
        raise ConfigError(
            key, uri, f"{path} cannot be read as a SQLite database ({e}); it is left as it is; {new}"
        ) from None
    tables = [t for t in tables if not t.startswith("sqlite_")]
    if tables and not set(MLFLOW_TABLES) <= set(tables):
        shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
        raise ConfigError(
            key,
            uri,
            f"{path} is the SQLite database of another application (tables {shown}; not MLflow's "
            f"{', '.join(MLFLOW_TABLES)}): MLflow would add its tables to it, so it is left as it is; {new}",
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
    if scheme == "sqlite":
        check_sqlite_file(path, key, uri)
    if not writes:
        return
    if not folder.is_dir():
        hint = "it is a file" if folder.exists() else "it does not exist"
        raise ConfigError(
            key,
            uri,
            f"the {what}'s folder {folder}: {hint}; create the folder first or choose another",
        )
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise ConfigError(key, uri, f"{path} is not writable; choose a writable location")


class StoreError(AblateError):
    """The store answered a read with an error that does not say "no such run or artifact" (credentials refused, a
    server failing, an artifact store that cannot be read): never taken for "not found"."""


def not_found(e: BaseException) -> bool:
    """Whether MLflow's error says what was asked for does not exist (``RESOURCE_DOES_NOT_EXIST``): the one failure
    a read reports as "not there"."""
    return getattr(e, "error_code", None) == "RESOURCE_DOES_NOT_EXIST"


def _http_status(e: BaseException) -> int | None:
    """The HTTP status of a failed request to a server (MLflow's error code, or the response of an artifact store)."""
    codes = {"UNAUTHENTICATED": 401, "PERMISSION_DENIED": 403}
    for cause in (e, e.__cause__, e.__context__):
        if cause is None:
            continue
        code = getattr(cause, "error_code", None)
        if code in codes:
            return codes[str(code)]
        status = getattr(getattr(cause, "response", None), "status_code", None)
        if isinstance(status, int):
            return status
    return None


def store_error(uri: str, what: str, e: BaseException) -> AblateError:
    """The one-line error for a read of the store (``what``: "reading run <id>", ...) that failed for another reason
    than :func:`not_found`: refused credentials name the variables to set; anything else says what the store
    answered (on one line, short, without the password or token MLflow sends)."""
    if isinstance(e, AblateError):  # already one line with its fix (a server found down)
        return e
    shown = _redacted(uri)
    status = _http_status(e)
    if status in (401, 403):
        return StoreError(
            f"the tracking store {shown} refused the credentials {what} (HTTP {status}). Fix: set "
            "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN) for it and run the "
            "command again"
        )
    text = " ".join(str(e).split())
    text = redact(text, [os.environ.get(n) for n in ("MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN")])
    if len(text) > ERROR_CHARS:
        text = text[:ERROR_CHARS] + "..."
    return StoreError(
        f"the tracking store {shown} failed {what} ({type(e).__name__}: {text}); this is not a missing run or "
        "artifact. Fix: check that the store answers and can be read (tracking.uri / --tracking-uri), then run the "
        "command again"
    )
