"""A run's artifacts in and out of MLflow: files written in place or logged, tables MLflow's compare view lines up,
artifacts copied from run to run (hard links when both are local), read back and downloaded, and the whole values of
params and tags cut to fit MLflow. :class:`RunArtifacts` is the part of :class:`ablate.tracking.Tracker` that does it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ablate.errors import AblateError
from ablate.record import RecordedRun, cut_artifact
from ablate.tracking.calls import _retry
from ablate.tracking.store import StoreError, not_found, store_error

_UMASK = os.umask(0)
os.umask(_UMASK)

#: MLflow's switch for the progress bar it draws on every download (off: ablate's console has its own lines).
_PROGRESS_BAR_ENV = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"


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


class RunArtifacts:
    """The artifact half of :class:`ablate.tracking.Tracker`: it needs the tracker's client, store URI, the artifact
    URIs it knows, the whole values it wrote, its held-read bookkeeping (``_wrote``) and ``get_run``."""

    uri: str
    client: Any
    _artifact_uris: dict[str, str]
    _own_files: dict[str, set[str]]

    def _wrote(self, run_id: str | None = None) -> None:  # pragma: no cover - the Tracker's
        raise NotImplementedError

    def get_run(self, run_id: str) -> RecordedRun | None:  # pragma: no cover - the Tracker's
        raise NotImplementedError

    # -- writing ----------------------------------------------------------------------------------------------------
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
        os.environ.setdefault(_PROGRESS_BAR_ENV, "false")
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

    # -- reading back ------------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def artifact_files(self, run_id: str) -> Iterator[dict[str, Path]]:
        """Every artifact the run holds now, as ``{relative path: local file}``: the files themselves when its
        artifacts are local folders (nothing is copied), else downloaded through MLflow into a temp folder that is
        removed on exit."""
        root = self.local_artifact_root(run_id)
        if root is not None:
            yield _files_under(root)
            return
        os.environ.setdefault(_PROGRESS_BAR_ENV, "false")
        with tempfile.TemporaryDirectory(prefix="ablate-artifacts-") as tmp:
            yield _files_under(Path(_retry(self.client.download_artifacts, run_id, "", tmp)))

    def download_artifact(self, run_id: str, path: str, dst: str | os.PathLike[str]) -> Path | None:
        """Download one artifact of a run into ``dst``; None when the run has no such artifact: MLflow's download
        failed and the run's listing confirms the path is not there (MLflow reports every failed download of a run's
        artifact as RESOURCE_DOES_NOT_EXIST, a refused login too). Any other failure raises
        :class:`ablate.tracking.store.StoreError`."""
        os.environ.setdefault(_PROGRESS_BAR_ENV, "false")
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
