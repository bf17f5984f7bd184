"""The small protocol every retriever implements."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from ablate.data.types import Chunk, IdTable, Query, Run, RunCodes
from ablate.errors import ConfigError, InputError


@runtime_checkable
class Retriever(Protocol):
    name: str

    def fingerprint(self) -> dict[str, object]:
        """Everything that determines this retriever's rankings (parameters, model fingerprint, tokenizer)."""
        ...

    def search(self, queries: Sequence[Query], depth: int, allowed: np.ndarray | None = None) -> Run:
        """Top-``depth`` chunks per query, ranked by ``types.TIE_RULE``; chunks where ``allowed`` is False never appear."""
        ...


# Shared helpers of index-backed retrievers (BM25, dense): one chunk table, one mask check, one tie rule.


@dataclass(frozen=True)
class ChunkTable:
    """What an index over ``chunks`` needs besides the text: its content hash and the
    :class:`~ablate.data.types.IdTable` its runs' codes refer to (position = code; it also holds each position's rank
    in plain string order of the chunk ids, for the tie rule)."""

    sha256: str
    ids: IdTable

    @property
    def id_order(self) -> np.ndarray:
        return self.ids.id_order()

    @classmethod
    def of(cls, chunks: Sequence[Chunk], ids: IdTable | None = None) -> ChunkTable:
        """``ids``: the snapshot's table when the index is built over the snapshot's chunks (so runs of every
        retriever share it); it must list exactly ``chunks``. Without it, a table of ``chunks`` is built."""
        if ids is None:
            ids = IdTable.of(chunks)
        elif (
            ids.chunk_ids != [c.chunk_id for c in chunks]
            or ids.doc_ids != [c.doc_id for c in chunks]
            or ids.versions != [c.version for c in chunks]
        ):
            raise ValueError("ChunkTable.of: the id table does not list these chunks")
        return cls(chunks_sha256(chunks), ids)


def chunks_sha256(chunks: Sequence[Chunk]) -> str:
    """Order-sensitive hash of the chunks' ids and texts: what an index was built over."""
    h = hashlib.sha256()
    for c in chunks:
        h.update(c.chunk_id.encode("utf-8") + b"\x00" + hashlib.sha256(c.text.encode("utf-8")).digest())
    return h.hexdigest()


def check_mask(allowed: np.ndarray | None, n: int) -> np.ndarray | None:
    """``allowed`` as a boolean vector of length ``n`` (or None), else an :class:`InputError`."""
    if allowed is None:
        return None
    mask = np.asarray(allowed)
    if mask.shape != (n,):
        raise InputError(
            "allowed mask",
            f"has shape {mask.shape}, expected ({n},)",
            "build it over the snapshot's chunks, in order",
        )
    return mask.astype(bool, copy=False)


def check_depth(depth: int) -> int:
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
        raise ConfigError("depth", depth, "a positive integer")
    return int(depth)


def top_by_tie_rule(scores: np.ndarray, depth: int, id_order: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Indices of the best ``depth`` entries among ``keep`` (bool), ordered by score desc then chunk id asc.

    ``id_order[i]`` is chunk ``i``'s position in plain string order of the chunk ids, so sorting on it is sorting on
    the id (``TIE_RULE``).
    """
    cand = np.flatnonzero(keep)
    if cand.size == 0:
        return cand
    order = np.lexsort((id_order[cand], -scores[cand].astype(np.float64)))
    return cand[order[:depth]]


def coded_run(
    name: str,
    table: IdTable,
    qids: Sequence[str],
    ranked: Mapping[str, tuple[np.ndarray, np.ndarray]],
    meta: dict[str, object],
) -> Run:
    """The run of chunk positions ``ranked[qid] = (idx, scores)`` (rank order; a query absent from ``ranked`` has no
    results), as Hit lists and as the :class:`~ablate.data.types.RunCodes` they were built from."""
    empty = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))
    got = [ranked.get(q, empty) for q in qids]
    codes = RunCodes.from_lists(table, qids, [g[0] for g in got], [g[1] for g in got])
    return Run.from_codes(name, codes, meta)
