"""The content identity of model files: a file's full sha256 (remembered in the user cache folder by path, size and
mtime, so a model is read once) and a folder's fingerprint over every file's relative path and sha256. Every cache of
model outputs is keyed by these, so a model changed in any byte misses them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

#: Bump when the folder fingerprint's definition changes.
FINGERPRINT_VERSION = "ablate-folder-sha256/2"


def _hash_memo_dir() -> Path:
    from ablate.cache import default_cache_dir

    return default_cache_dir() / "file-sha256"


def file_sha256(path: Path) -> str:
    """Full-content sha256 of ``path``, remembered by (absolute path, size, mtime_ns) in the user cache folder, so a
    model folder is read once and a file changed in place (any byte) is hashed again."""
    st = path.stat()
    stamp = json.dumps([str(path.resolve()), st.st_size, st.st_mtime_ns])
    memo = _hash_memo_dir() / (hashlib.sha256(stamp.encode()).hexdigest() + ".txt")
    try:
        cached = memo.read_text(encoding="ascii").strip()
        if len(cached) == 64:
            return cached
    except OSError:
        pass
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    digest = h.hexdigest()
    try:  # best effort: the memo only saves time; a failed write is never an error
        from ablate.cache import atomic_write_bytes

        atomic_write_bytes(memo, digest.encode("ascii"))
    except OSError:
        pass
    return digest


def folder_fingerprint(folder: Path) -> str:
    """sha256 over every file's relative path and full-content sha256 (hidden files skipped), so two folders have
    the same fingerprint exactly when they hold the same bytes under the same names."""
    h = hashlib.sha256(FINGERPRINT_VERSION.encode())
    for f in sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")):
        rel = f.relative_to(folder).as_posix()
        if any(part.startswith(".") for part in Path(rel).parts):
            continue
        h.update(f"{rel}\t{file_sha256(f)}\n".encode())
    return h.hexdigest()
