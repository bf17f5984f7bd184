"""Ids as exact bytes, read without a Python object per id: what evaluation compares ids with.

:func:`id_tokens` joins a list of ids into one string (one C-level pass), encodes it and cuts it at the separators,
giving each id's byte length, its bytes as little-endian 8-byte words, and a 64-bit hash of both. Two ids are equal
exactly when their lengths and all their words are equal; the hash only groups candidates.
"""

from __future__ import annotations

import numpy as np

_SEP = "\x1f"  # unit separator: joins the ids of a block into one string (refused if any id contains it)
SEP = _SEP
_BYTE_MASKS = np.array([(1 << (8 * v)) - 1 for v in range(8)] + [0xFFFFFFFFFFFFFFFF], dtype=np.uint64)
_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))


def id_tokens(ids: list[str]) -> tuple[np.ndarray, list[np.ndarray], np.ndarray] | None:
    """Each id's exact UTF-8 content as ``(byte length, [8-byte words], 64-bit hash of both)``, without a Python
    object per id: the ids are joined into one string (one C-level pass), encoded, and cut at the separators.
    ``None`` when an id is not a string or contains the separator (the caller then uses the reference path)."""
    if not ids:
        return None
    try:
        joined = _SEP.join(ids)
    except TypeError:
        return None
    return joined_tokens(joined, len(ids))


def joined_tokens(joined: str, count: int) -> tuple[np.ndarray, list[np.ndarray], np.ndarray] | None:
    """:func:`id_tokens` of ``count`` ids the caller already joined with :data:`SEP` (one join can then read ids
    straight out of their containers); ``None`` when the separators do not number ``count - 1`` (an id holds one)."""
    if count < 1 or joined.count(_SEP) != count - 1:
        return None
    data = joined.encode("utf-8", "surrogatepass")
    buf = np.frombuffer(data + bytes(8), dtype=np.uint8)
    nbytes = len(data)
    ends = np.flatnonzero(buf[:nbytes] == 0x1F)
    starts = np.empty(count, dtype=np.int64)
    starts[0] = 0
    starts[1:] = ends + 1
    lengths = np.empty(count, dtype=np.int64)
    lengths[:-1] = ends
    lengths[-1] = nbytes
    lengths -= starts
    # Every byte offset read as a little-endian 8-byte word (overlapping, unaligned view; 8 zero bytes of padding).
    view = np.ndarray(shape=(nbytes + 1,), dtype="<u8", buffer=buf, strides=(1,))
    longest = int(lengths.max())
    if longest <= 8:  # one word holds every id (numeric and short ids): the hash is one multiplication
        word = view[starts] & _BYTE_MASKS[lengths]
        return lengths, [word], word * _MIX[1]
    h = lengths.astype(np.uint64) * _MIX[0]
    words: list[np.ndarray] = []
    for w in range(-(-longest // 8)):
        valid = np.clip(lengths - 8 * w, 0, 8)
        word = view[np.minimum(starts + 8 * w, nbytes)] & _BYTE_MASKS[valid]
        words.append(word)
        h = (h ^ word) * _MIX[1]
        h ^= h >> np.uint64(31)
    h *= _MIX[2]
    return lengths, words, h
