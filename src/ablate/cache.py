"""Content-addressed on-disk cache: numpy arrays and JSON, written atomically, never pickled.

An entry's key is the sha256 of a JSON description of everything that determines its content (snapshot fingerprint,
component parameters, model fingerprint, ...). Entries are written to a temporary file in the same folder and then
renamed into place, so a reader sees a whole entry or none; concurrent writers of one key race harmlessly (both write
the same bytes, the last rename wins), also on a filesystem shared by a cluster's workers (the rename happens inside
the entry's own folder). Every entry ends with a checksum trailer (``#ablate-sha256=<hex of the bytes before it>``):
an entry damaged after it was written (a truncated copy, a bad disk) fails the check and is a miss, recomputed and
written again, never served. Entries written before trailers existed are read as before (no checksum to check).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import sys
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np


def default_cache_dir() -> Path:
    """``$ABLATE_CACHE_DIR`` if set, else the user cache folder (``$XDG_CACHE_HOME/ablate`` or ``~/.cache/ablate``)."""
    env = os.environ.get("ABLATE_CACHE_DIR")
    if env:
        return Path(env).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return (Path(base) / "ablate").resolve()


_KIND = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
_KEY = re.compile(r"[0-9a-f]{16,128}")


def _check_entry_name(kind: str, key: str, ext: str) -> None:
    """An entry's path is built from a kind (a constant), a key (a hex digest, :func:`key_of`) and an extension:
    anything else is a bug, refused before it could name a path outside the cache."""
    if not (_KIND.fullmatch(kind) and _KEY.fullmatch(key) and _KIND.fullmatch(ext)) or ".." in kind:
        raise ValueError(
            f"cache entry {kind!r}/{key!r}.{ext!r}: the kind must be a plain name and the key a hex digest"
        )


def key_of(*parts: Any) -> str:
    """Stable sha256 key of JSON-serialisable parts (dict keys sorted)."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str).encode()
    return hashlib.sha256(blob).hexdigest()


@functools.cache
def source_digest(path: str) -> str:
    """sha256 of a source file (read once per process): part of the key of a cached result that code computed, so
    an entry computed by other code is never served."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def arrays_digest(*arrays: np.ndarray) -> str:
    """sha256 of arrays' dtypes, shapes and bytes, in order: the content key of numbers a result was computed from."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape};".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: The checksum trailer at the end of every entry: this prefix, 64 hex digits (sha256 of the bytes before the
#: trailer) and a newline. ``np.load`` stops at the array's end, so it never sees it; JSON entries are read without it.
TRAILER_PREFIX = b"\n#ablate-sha256="
TRAILER_LEN = len(TRAILER_PREFIX) + 64 + 1


class _Hashing:
    """A write-only file wrapper that hashes what goes through it (so a large array is written and hashed in one
    pass, without a copy in memory)."""

    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self.sha = hashlib.sha256()

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self.sha.update(view)
        return self.fh.write(view)

    def trailer(self) -> bytes:
        return TRAILER_PREFIX + self.sha.hexdigest().encode("ascii") + b"\n"


def _write_with_checksum(write: Callable[[Any], object]) -> Callable[[BinaryIO], object]:
    def _write(fh: BinaryIO) -> None:
        hashing = _Hashing(fh)
        write(hashing)
        fh.write(hashing.trailer())

    return _write


def verify_entry(path: Path) -> bool | None:
    """True when the entry's checksum trailer matches its content, False when it does not (damaged), None when it has
    no trailer (written before trailers existed, or not an entry)."""
    size = path.stat().st_size
    if size < TRAILER_LEN:
        return None
    with open(path, "rb") as fh:
        fh.seek(size - TRAILER_LEN)
        tail = fh.read(TRAILER_LEN)
        if not (tail.startswith(TRAILER_PREFIX) and tail.endswith(b"\n")):
            return None
        want = tail[len(TRAILER_PREFIX) : -1].decode("ascii", "replace")
        fh.seek(0)
        sha, left = hashlib.sha256(), size - TRAILER_LEN
        while left:
            chunk = fh.read(min(left, 1 << 20))
            if not chunk:
                return False
            sha.update(chunk)
            left -= len(chunk)
    return sha.hexdigest() == want


def process_umask() -> int:
    """The process's umask, read without changing it where the system says it (Linux: ``/proc/self/status``), else
    by setting it and setting it back (a moment in which another thread's new file would get the wrong mode)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def ordinary_folder(path: Path) -> Path:
    """``path`` (a folder made by ``tempfile.mkdtemp``, 0700) given the mode of any new folder (``0o777`` less the
    umask: 0755 under the usual 022), before it is renamed into place as an output."""
    os.chmod(path, 0o777 & ~process_umask())
    return path


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same folder, then rename)."""
    _atomic_write(path, lambda fh: fh.write(data))


def _atomic_write(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """The file gets the mode of any new file (``0o666`` less the umask: 0644 under the usual 022), not the 0600 of
    the temporary file it was written as."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), 0o666 & ~process_umask())
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _checked_json(blob: bytes, path: Path) -> bytes:
    """The JSON text of an entry: without its trailer once the checksum matched (ValueError when it does not)."""
    tail = blob[-TRAILER_LEN:]
    if len(blob) < TRAILER_LEN or not (tail.startswith(TRAILER_PREFIX) and tail.endswith(b"\n")):
        return blob  # no trailer: an entry from before trailers existed
    body = blob[:-TRAILER_LEN]
    if hashlib.sha256(body).hexdigest().encode("ascii") != tail[len(TRAILER_PREFIX) : -1]:
        raise ValueError(f"checksum mismatch: {path}")
    return body


def read_json_entry(path: Path) -> Any:
    """The value of a JSON cache entry read from its file (checksum trailer checked and removed); ``ValueError`` when
    the entry is damaged. For tools and tests that inspect a cache folder; the runner reads through :class:`Cache`."""
    return json.loads(_checked_json(Path(path).read_bytes(), Path(path)))


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    by_kind: dict[str, dict[str, int]] = field(default_factory=dict)
    corrupt: int = 0  # entries found unreadable or inconsistent (counted as misses, rebuilt by the caller)

    def record(self, kind: str, hit: bool) -> None:
        if hit:
            self.hits += 1
        else:
            self.misses += 1
        d = self.by_kind.setdefault(kind, {"hits": 0, "misses": 0})
        d["hits" if hit else "misses"] += 1


ORPHAN_AGE_S = 3600.0  # a temp file older than this was left by a killed process


class Cache:
    """A folder of ``<kind>/<key[:2]>/<key>.{npy,json}`` entries."""

    def __init__(self, root: str | os.PathLike[str] | None = None, enabled: bool = True) -> None:
        self.root = Path(root).expanduser().resolve() if root else default_cache_dir()
        self.enabled = enabled
        self.stats = CacheStats()

    def check(self, setting: str = "cache.dir") -> None:
        """Refuse, before any work, a cache folder that cannot hold entries (a file, not writable)."""
        if not self.enabled:
            return
        from ablate.errors import ConfigError

        root = self.root
        if root.exists() and not root.is_dir():
            raise ConfigError(
                setting, str(root), "it is a file, not a folder; point it at a folder (or unset it)"
            )
        try:
            root.mkdir(parents=True, exist_ok=True)
            probe = root / f".probe-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as e:
            raise ConfigError(
                setting,
                str(root),
                f"it cannot be written ({e.strerror}); choose a writable folder, or cache.enabled=false",
            ) from None

    def sweep_orphans(self, max_age_s: float = ORPHAN_AGE_S) -> int:
        """Delete temp files and folders (``.*.tmp``) older than ``max_age_s`` that a killed process left beside the
        entries; returns how many. Entries themselves are never touched."""
        import shutil
        import time

        if not self.enabled or not self.root.is_dir():
            return 0
        now, removed = time.time(), 0
        for kind in self.root.iterdir():
            if not kind.is_dir():
                continue
            for shard in kind.iterdir():
                if not shard.is_dir():
                    continue
                for p in shard.iterdir():
                    if not (p.name.startswith(".") and p.name.endswith(".tmp")):
                        continue
                    try:
                        if now - p.stat().st_mtime < max_age_s:
                            continue
                        if p.is_dir():
                            shutil.rmtree(p)
                        else:
                            p.unlink()
                        removed += 1
                    except OSError:
                        continue
        return removed

    def _path(self, kind: str, key: str, ext: str) -> Path:
        _check_entry_name(kind, key, ext)
        return self.root / kind / key[:2] / f"{key}.{ext}"

    # -- arrays ---------------------------------------------------------------------------------------------------
    def load_array(self, kind: str, key: str) -> np.ndarray | None:
        p = self._path(kind, key, "npy")
        if not self.enabled or not p.exists():
            self.stats.record(kind, False)
            return None
        try:
            if verify_entry(p) is False:  # damaged after it was written: a miss, rewritten by the next save
                raise ValueError(f"checksum mismatch: {p}")
            arr = np.load(p, allow_pickle=False)
        except (ValueError, OSError):  # a corrupt entry is a miss, never a crash
            self.stats.record(kind, False)
            return None
        self.stats.record(kind, True)
        return arr

    def save_array(self, kind: str, key: str, arr: np.ndarray) -> Path:
        p = self._path(kind, key, "npy")
        if self.enabled:
            _atomic_write(
                p,
                _write_with_checksum(lambda fh: np.save(fh, np.ascontiguousarray(arr), allow_pickle=False)),
            )
        return p

    # -- json -----------------------------------------------------------------------------------------------------
    def load_json(self, kind: str, key: str) -> Any | None:
        p = self._path(kind, key, "json")
        if not self.enabled or not p.exists():
            self.stats.record(kind, False)
            return None
        try:
            value = json.loads(_checked_json(p.read_bytes(), p))
        except (ValueError, OSError):
            self.stats.record(kind, False)
            return None
        self.stats.record(kind, True)
        return value

    def save_json(self, kind: str, key: str, value: Any) -> Path:
        p = self._path(kind, key, "json")
        if self.enabled:
            data = json.dumps(value, ensure_ascii=False).encode("utf-8")
            _atomic_write(p, _write_with_checksum(lambda fh: fh.write(data)))
        return p

    # -- several arrays (and a JSON header) as one entry --------------------------------------------------------------
    def load_arrays(
        self,
        kind: str,
        key: str,
        check: Callable[[dict[str, np.ndarray], Any], None] | None = None,
    ) -> tuple[dict[str, np.ndarray], Any] | None:
        """The arrays and JSON header :meth:`save_arrays` stored, or None (a miss).

        An entry is one ``.npz`` file (a zip: every member carries a CRC-32 that numpy checks on reading), so a
        truncated or bit-flipped file fails to load; ``check(arrays, header)`` may raise ``ValueError`` for an entry
        that loads but is inconsistent with what the caller expects. Either way the entry is a miss, counted in
        :attr:`CacheStats.corrupt`, and a one-line warning on stderr says it will be rebuilt; never a crash."""
        p = self._path(kind, key, "npz")
        if not self.enabled or not p.exists():
            self.stats.record(kind, False)
            return None
        try:
            with np.load(p, allow_pickle=False) as z:
                arrays = {name: z[name] for name in z.files}
            header = json.loads(bytes(arrays.pop("__header__")).decode("utf-8"))
            if check is not None:
                check(arrays, header)
        except (ValueError, OSError, KeyError, EOFError, zipfile.BadZipFile) as e:
            self.stats.record(kind, False)
            self.stats.corrupt += 1
            reason = str(e).splitlines()[0] if str(e) else type(e).__name__
            print(f"warning: cache entry {p} is unreadable ({reason}); rebuilding it", file=sys.stderr)
            return None
        self.stats.record(kind, True)
        return arrays, header

    def save_arrays(self, kind: str, key: str, arrays: Mapping[str, np.ndarray], header: Any) -> Path:
        """Store ``arrays`` (no object dtypes) and a JSON ``header`` as one ``.npz`` entry, atomically."""
        p = self._path(kind, key, "npz")
        if self.enabled:
            blob = np.frombuffer(json.dumps(header, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)
            members = {name: np.ascontiguousarray(a) for name, a in arrays.items()}
            members["__header__"] = blob
            _atomic_write(p, lambda fh: np.savez(fh, allow_pickle=False, **members))
        return p

    # -- bytes (a rendered file, e.g. a PNG) -----------------------------------------------------------------------
    def load_bytes(self, kind: str, key: str, ext: str) -> bytes | None:
        p = self._path(kind, key, ext)
        if not self.enabled or not p.exists():
            self.stats.record(kind, False)
            return None
        try:
            data = p.read_bytes()
        except OSError:
            self.stats.record(kind, False)
            return None
        self.stats.record(kind, True)
        return data

    def save_bytes(self, kind: str, key: str, ext: str, data: bytes) -> Path:
        p = self._path(kind, key, ext)
        if self.enabled:
            atomic_write_bytes(p, data)
        return p

    def memo_json(self, kind: str, key: str, compute: Callable[[], Any]) -> Any:
        """The JSON value stored under ``key``, else ``compute()`` stored there (a pure result, keyed by content)."""
        value = self.load_json(kind, key)
        if value is None:
            value = compute()
            self.save_json(kind, key, value)
        return value

    def dir_for(self, kind: str, key: str) -> Path:
        """A folder for multi-file entries (e.g. a fine-tuned model). Callers write into a temp sibling and rename."""
        _check_entry_name(kind, key, "dir")
        return self.root / kind / key[:2] / key
