"""Coded runs in evaluation: a run that carries integer codes (:class:`~ablate.data.types.RunCodes`) is scored on
integers only.

What :func:`ablate.evaluation.evaluate` needs from a coded run is, per query in the declared order, the unit code of
every result (``table.unit_codes(unit)[codes]``) and the unit code of every judgement. Judged ids are strings, so each
is mapped once into the table's unit code space (:func:`judged_lookup`, block by block): an id the table does not have
gets a fresh code beyond it, so it can never equal a result. Results and judgements are then compared as integers,
exactly, with no id string read per result.

The mapping joins the judged ids straight out of the judgement dicts, reads them as bytes
(:func:`~ablate.evaluation.idbytes.joined_tokens`) and looks them up in an open-addressing table over the unit ids'
bytes, built once per (table, unit) and kept with the table (:meth:`~ablate.data.types.IdTable.memo`). Every match
is checked byte for byte, so a hash collision can only cost a probe, never a wrong code. Where the bytes cannot be
read (non-string ids, an id holding the separator), a plain dict lookup does the same job.

:func:`coded_inputs` returns ``None`` whenever it cannot vouch that the codes describe the run's Hit lists for the
declared queries (no codes, a query present in one and not the other, a different number of results); the caller then
scores the Hit lists as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import methodcaller

import numpy as np

from ablate.data.types import IdTable, Run
from ablate.evaluation.idbytes import SEP, id_tokens, joined_tokens

_values = methodcaller("values")
_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))


@dataclass(frozen=True)
class CodedInputs:
    """The integer form of one evaluation's run, queries in the declared order: query i's results are the chunk
    codes ``codes[offsets[i]:offsets[i + 1]]`` (rank order). Unit codes and judged ids are turned into integers block
    by block (:meth:`units`, :meth:`labels`), so the working arrays stay bounded like the rest of evaluation."""

    table: IdTable
    unit: str
    codes: np.ndarray
    offsets: np.ndarray
    unit_of: np.ndarray | None  # chunk code -> unit code; None when they are the same
    n_units: int

    def units(self, a: int, b: int) -> np.ndarray:
        """Unit codes of the results of queries ``a`` to ``b - 1``, in order."""
        codes = self.codes[int(self.offsets[a]) : int(self.offsets[b])]
        return codes if self.unit_of is None else self.unit_of[codes]

    def labels(self, jdicts: Sequence[Mapping[str, int]], count: int) -> tuple[np.ndarray, np.ndarray, int]:
        """``(unit codes, grades, size of the code space)`` of the judgements ``jdicts`` (``count`` in all, in dict
        order). A judged id the table does not have gets its own fresh code beyond the table's units: it equals no
        result, and no other judgement of its query."""
        grades = judged_grades(jdicts, count)
        labels = judged_lookup(self.table, self.unit, jdicts, count)
        absent = labels < 0
        n_absent = int(absent.sum())
        if n_absent:
            labels[absent] = self.n_units + np.arange(n_absent, dtype=np.int64)
        return labels, grades, self.n_units + n_absent


def judged_grades(jdicts: Sequence[Mapping[str, int]], count: int) -> np.ndarray:
    """The grades of ``jdicts`` in dict order (``count`` in all), as int64. Grades 0-255 (nearly every qrels file)
    are read in one pass through a ``bytearray`` (faster than ``np.fromiter``: experiments/results/bench_eval.md); any
    other value (negative, large, not an int) takes ``np.fromiter``, which converts every value exactly."""
    try:
        raw = bytearray(chain.from_iterable(map(_values, jdicts)))
    except (ValueError, TypeError):
        return np.fromiter(chain.from_iterable(map(_values, jdicts)), dtype=np.int64, count=count)
    if len(raw) != count:
        raise ValueError(f"{len(raw)} grades for {count} judgements")
    return np.frombuffer(raw, dtype=np.uint8).astype(np.int64)


def _hash(lengths: np.ndarray, words: list[np.ndarray]) -> np.ndarray:
    """A 64-bit hash of each id's bytes that depends only on the id (the rounds stop at the id's own last word)."""
    h = lengths.astype(np.uint64) * _MIX[0]
    for w, word in enumerate(words):
        mixed = (h ^ word) * _MIX[1]
        mixed ^= mixed >> np.uint64(31)
        h = np.where(lengths > 8 * w, mixed, h)
    return h * _MIX[2]


#: Words of an id kept inside its slot row: a probe then reads one row (one or two cache lines) for ids up to
#: 8 * _ROW_WORDS bytes; longer ids compare their further words from the per-code arrays.
_ROW_WORDS = 3


@dataclass(frozen=True)
class _ByteIndex:
    """Open addressing over the unit ids' bytes. Row ``hash >> shift`` (then the next rows, up to an empty one) of
    ``rows`` holds ``(code + 1, byte length, first words...)`` of an id (0 in the first column: empty).
    ``lengths``/``words`` are per code, for the words beyond the row."""

    rows: np.ndarray  # uint64, (slots, 2 + row words)
    lengths: np.ndarray
    words: list[np.ndarray]
    shift: np.uint64


def _byte_index(ids: list[str]) -> _ByteIndex | None:
    """Linear probing without wrap-around: ids sorted by home row take the first free row at or after it (row
    ``i + cummax(home_j - j)`` for the i-th of them); the table is extended past the last taken row by one empty row,
    so every probe sequence ends. Load factor between 3/8 and 3/4."""
    tok = id_tokens(ids)
    if tok is None:
        return None
    lengths, words, _ = tok
    bits = max(4, (len(ids) + len(ids) // 3).bit_length())
    shift = np.uint64(64 - bits)
    home = (_hash(lengths, words) >> shift).astype(np.int64)
    order = np.argsort(home, kind="stable")
    rank = np.arange(len(ids), dtype=np.int64)
    taken = rank + np.maximum.accumulate(home[order] - rank)
    inside = words[:_ROW_WORDS]
    rows = np.zeros((max(1 << bits, int(taken[-1]) + 1) + 1, 2 + len(inside)), dtype=np.uint64)
    rows[taken, 0] = (order + 1).astype(np.uint64)
    rows[taken, 1] = lengths[order].astype(np.uint64)
    for w, word in enumerate(inside):
        rows[taken, 2 + w] = word[order]
    return _ByteIndex(rows, lengths, words, shift)


def _index_of(table: IdTable, unit: str) -> _ByteIndex | None:
    units = table.unit_codes(unit)[1]
    index: _ByteIndex | None = table.memo(("evaluation.byte_index", unit), lambda: _byte_index(units))
    return index


def _dict_lookup(table: IdTable, unit: str, ids: list[str]) -> np.ndarray:
    """The plain path: a dict over the unit ids (built once per table and unit)."""
    units = table.unit_codes(unit)[1]
    by_id: dict[str, int] = table.memo(
        ("evaluation.unit_index", unit), lambda: {u: i for i, u in enumerate(units)}
    )
    return np.fromiter((by_id.get(i, -1) for i in ids), dtype=np.int64, count=len(ids))


def unit_lookup(table: IdTable, unit: str, ids: list[str]) -> np.ndarray:
    """The unit code of every id in ``ids`` (``-1`` where the table has no such unit), exact."""
    if not ids:
        return np.zeros(0, dtype=np.int64)
    index = _index_of(table, unit)
    tok = id_tokens(ids) if index is not None else None
    if index is None or tok is None:
        return _dict_lookup(table, unit, ids)
    return _probe(index, tok[0], tok[1])


def judged_lookup(table: IdTable, unit: str, jdicts: Sequence[Mapping[str, int]], count: int) -> np.ndarray:
    """:func:`unit_lookup` of every judged id of ``jdicts`` in order (``count`` in all). The ids are joined straight
    out of the judgement dicts (one join per dict, then one over those), which reads each id string once."""
    if not count:
        return np.zeros(0, dtype=np.int64)
    index = _index_of(table, unit)
    tok = None
    if index is not None:
        try:
            joined = SEP.join(map(SEP.join, filter(None, jdicts)))
        except TypeError:
            joined = None
        tok = joined_tokens(joined, count) if joined is not None else None
    if index is None or tok is None:
        return _dict_lookup(table, unit, list(chain.from_iterable(jdicts)))
    return _probe(index, tok[0], tok[1])


def _probe(index: _ByteIndex, lengths: np.ndarray, words: list[np.ndarray]) -> np.ndarray:
    """Codes of the ids given as bytes (``-1`` for ids the index does not hold): hash, then linear probing with
    every candidate compared byte for byte."""
    out = np.full(len(lengths), -1, dtype=np.int64)
    todo = np.arange(len(lengths), dtype=np.int64)
    pos = (_hash(lengths, words) >> index.shift).astype(np.int64)
    inside = index.rows.shape[1] - 2
    # Words beyond the shorter side's last word are zero padding on both sides when the lengths are equal.
    nw_in = min(len(words), inside)
    nw_out = min(len(words), len(index.words))
    while len(todo):
        rec = np.take(index.rows, pos, axis=0)
        code = rec[:, 0].astype(np.int64) - 1
        occupied = code >= 0
        same = occupied & (rec[:, 1] == lengths[todo].astype(np.uint64))
        for w in range(nw_in):
            same &= rec[:, 2 + w] == words[w][todo]
        if nw_out > inside:
            long = np.flatnonzero(same & (lengths[todo] > 8 * inside))
            for w in range(inside, nw_out):
                same[long] &= index.words[w][code[long]] == words[w][todo[long]]
        out[todo[same]] = code[same]
        # A different id in this row: probe the next one; an empty row ends the search.
        more = occupied & ~same
        todo, pos = todo[more], pos[more] + 1
    return out


def _run_order(run: Run, qlist: Sequence[str], n_results: np.ndarray) -> tuple[bool, np.ndarray | None]:
    """``(ok, order)``: whether the codes describe the run (the same queries in the same order, and for the declared
    queries the same numbers of results), and the indices into ``run.codes.codes`` of the declared queries' results
    in declared order (``None`` when that is all of them, as stored)."""
    codes = run.codes
    if codes is None or codes.qids != list(run.results):
        return False, None
    lens = codes.lengths()
    if codes.qids == list(qlist):
        return bool(np.array_equal(lens, n_results)), None
    where = {q: i for i, q in enumerate(codes.qids)}
    pos = np.fromiter((where.get(q, -1) for q in qlist), dtype=np.int64, count=len(qlist))
    present = pos >= 0
    got = np.where(present, lens[np.maximum(pos, 0)], 0)
    if not np.array_equal(got, n_results):
        return False, None
    starts = np.where(present, codes.offsets[:-1][np.maximum(pos, 0)], 0)
    before = np.zeros(len(qlist), dtype=np.int64)
    np.cumsum(got[:-1], out=before[1:])
    return True, np.arange(int(got.sum()), dtype=np.int64) + np.repeat(starts - before, got)


def coded_inputs(run: Run, qlist: Sequence[str], n_results: np.ndarray, unit: str) -> CodedInputs | None:
    """The integer form of scoring ``run`` on ``qlist`` at ``unit``, or ``None`` when the run carries no codes or
    they cannot be vouched for (see the module docstring)."""
    ok, order = _run_order(run, qlist, n_results)
    if not ok or run.codes is None:
        return None
    table = run.codes.table
    unit_of, unit_ids = table.unit_codes(unit)
    codes = run.codes.codes if order is None else run.codes.codes[order]
    # One chunk per unit (chunk unit, or documents indexed whole): the chunk codes are the unit codes.
    identity = table.memo(
        ("evaluation.unit_is_chunk", unit),
        lambda: bool(np.array_equal(unit_of, np.arange(len(unit_of)))),
    )
    offsets = np.zeros(len(qlist) + 1, dtype=np.int64)
    np.cumsum(n_results, out=offsets[1:])
    return CodedInputs(table, unit, codes, offsets, None if identity else unit_of, len(unit_ids))
