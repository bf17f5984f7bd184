"""Placement: each query's ranking turned into its deduplicated unit list inside the budget, with the grade at every
position and how many units each top-K window holds (the rules ``dedup``, ``budget`` and ``unjudged`` of
:mod:`ablate.evaluation.rules`). The metrics are then prefix sums over these matrices
(:mod:`ablate.evaluation.metrics`).

Three engines place a block of queries, and all three give the same :class:`Block`:

* :func:`block_coded`: a coded run (:mod:`ablate.evaluation.coded`), placed on integer unit codes.
* :func:`block_vectorised`: ids read once as exact bytes (:mod:`ablate.evaluation.idbytes`), dedup and judgement
  lookup by sorting per query; ``None`` where it cannot vouch for its result (a hash collision).
* :func:`block_python`: the plain Python reference (dicts and sets), used where neither can vouch for a block and
  by ``evaluate(..., vectorised=False)``; tests compare all three.

The two sorting engines share :func:`_place_keyed` (one identity per result and per judgement, sorted per query) and
:func:`_placed_flat` (dedup and budget on flat arrays).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress

import numpy as np

from ablate.data.types import Hit
from ablate.evaluation.idbytes import id_tokens as _tokens

#: Grade-matrix marker for "no judgement for this query" (also fills positions past the end of a list).
UNJUDGED = np.iinfo(np.int32).min


def _place(
    ids: list[str], judged: Mapping[str, int], depth: int, chunks_budget: bool
) -> tuple[int, int, list[int] | None, Sequence[int], Sequence[int]]:
    """Place one ranking: ``(n_distinct, n_window_units, positions, judged_cols, judged_grades)``.

    ``n_window_units`` is the length of the deduplicated unit list inside the max-K budget; ``positions`` is
    ``None`` when unit j's budget position is j itself, else (chunks budget with duplicates) the 0-based position of
    each window unit's first result, from which the top-K window at each K is ``#(positions < K)``. The judged units
    of the window come back as (column, grade) lists. Only C-level passes over the list (this loop runs once per
    query, so it decides the speed on 100k-query sets).
    """
    n = len(ids)
    nd = len(set(ids))
    pos = None
    if nd == n:  # no duplicate units: unit j is result j
        units = ids if n <= depth else ids[:depth]
    elif chunks_budget:
        window = ids[:depth]
        units = list(dict.fromkeys(window))
        if len(units) != len(window):
            first = dict(zip(reversed(window), range(len(window) - 1, -1, -1), strict=True))
            pos = list(map(first.__getitem__, units))
    else:
        units = list(dict.fromkeys(ids))
        if len(units) > depth:
            units = units[:depth]
    nw = len(units)
    if not judged:
        return nd, nw, pos, (), ()
    cols = list(compress(range(nw), map(judged.__contains__, units)))
    grades = list(map(judged.__getitem__, map(units.__getitem__, cols)))
    return nd, nw, pos, cols, grades


class _Placement:
    """The placed rankings of all queries, accumulated as flat lists and turned into matrices."""

    def __init__(self, nq: int) -> None:
        self.lens = np.zeros(nq, dtype=np.int64)
        self.counts = np.zeros(nq, dtype=np.int64)  # judged units per row
        self.cols: list[int] = []
        self.grades: list[int] = []
        self.pos_rows: list[int] = []
        self.pos_counts: list[int] = []
        self.pos_flat: list[int] = []

    def add(self, i: int, nw: int, pos: list[int] | None, cols: Sequence[int], grades: Sequence[int]) -> None:
        self.lens[i] = nw
        if cols:
            self.counts[i] = len(cols)
            self.cols.extend(cols)
            self.grades.extend(grades)
        if pos is not None:
            self.pos_rows.append(i)
            self.pos_counts.append(len(pos))
            self.pos_flat.extend(pos)

    def windows(self, ks: tuple[int, ...]) -> np.ndarray:
        """``W[q, k]``: how many units of query q's deduplicated list are inside the top-K budget window."""
        kv = np.asarray(ks, dtype=np.int64)
        w = np.minimum(self.lens[:, None], kv[None, :])
        if self.pos_rows:
            prow = np.repeat(np.asarray(self.pos_rows, dtype=np.int64), self.pos_counts)
            ppos = np.asarray(self.pos_flat, dtype=np.int64)
            rows = np.asarray(self.pos_rows, dtype=np.int64)
            for c, k in enumerate(ks):
                counts = np.bincount(prow[ppos < k], minlength=len(self.lens))
                w[rows, c] = counts[rows]
        return w

    def matrix(self) -> np.ndarray:
        """Grades by (query, position in the deduplicated list); :data:`UNJUDGED` where there is no judgement."""
        width = max(1, int(self.lens.max()) if self.lens.size else 1)
        g = np.full((len(self.lens), width), UNJUDGED, dtype=np.int32)
        if self.cols:
            rows = np.repeat(np.arange(len(self.lens)), self.counts)
            g[rows, np.asarray(self.cols, dtype=np.int64)] = np.asarray(self.grades, dtype=np.int64)
        return g


@dataclass
class Placed:
    """One block's placed rankings: ``lens`` (units in the max-K window), ``grades`` (query x window position,
    :data:`UNJUDGED` where there is no judgement or no unit) and ``windows`` (units inside the top-K window, per K)."""

    lens: np.ndarray
    grades: np.ndarray
    windows: np.ndarray


@dataclass
class Block:
    """What scoring one block of queries needs: the scored ranking, the full ranking (the same object unless
    ``unjudged=condensed``), distinct units over the whole list, and which queries have unjudged units in the window."""

    scoring: Placed
    full: Placed
    n_units: np.ndarray
    has_unjudged: np.ndarray


def _from_placement(p: _Placement, ks: tuple[int, ...]) -> Placed:
    return Placed(p.lens, p.matrix(), p.windows(ks))


def block_python(
    lists: Sequence[Sequence[Hit]],
    jdicts: Sequence[Mapping[str, int]],
    doc_unit: bool,
    depth: int,
    chunks_budget: bool,
    condensed: bool,
    ks: tuple[int, ...],
) -> Block:
    """The reference placement: one pass per query in plain Python (dicts and sets). Used when the vectorised
    placement cannot vouch for its result (a hash collision, an id holding the separator, non-string ids)."""
    nb = len(lists)
    n_units = np.zeros(nb, dtype=np.int64)
    has_unjudged = np.zeros(nb, dtype=bool)
    full = _Placement(nb)
    scoring = _Placement(nb) if condensed else full
    for i, (hits, judged) in enumerate(zip(lists, jdicts, strict=True)):
        if not hits:
            continue
        ids = [h.doc_id for h in hits] if doc_unit else [h.chunk_id for h in hits]
        nd, nw, pos, placed, grades = _place(ids, judged, depth, chunks_budget)
        n_units[i] = nd
        full.add(i, nw, pos, placed, grades)
        has_unjudged[i] = len(placed) < nw
        if condensed and judged:
            cids = [u for u in ids if u in judged]
            if cids:
                _, cnw, cpos, ccols, cgrades = _place(cids, judged, depth, chunks_budget)
                scoring.add(i, cnw, cpos, ccols, cgrades)
    f = _from_placement(full, ks)
    return Block(_from_placement(scoring, ks) if condensed else f, f, n_units, has_unjudged)


def block_vectorised(
    lists: Sequence[Sequence[Hit]],
    jdicts: Sequence[Mapping[str, int]],
    lab_grades: np.ndarray,
    doc_unit: bool,
    depth: int,
    chunks_budget: bool,
    condensed: bool,
    ks: tuple[int, ...],
) -> Block | None:
    """The placement of a block of queries with no Python work per result beyond reading its id.

    The run's ids and the judged ids of the block are read as exact bytes (:func:`_tokens`) and placed by
    :func:`_place_keyed` with their hash as identity; equal hashes are checked byte for byte there, so a hash
    collision can never merge two ids: it returns ``None`` and the caller places the block with
    :func:`block_python`."""
    nb = len(lists)
    n = np.fromiter(map(len, lists), dtype=np.int64, count=nb)
    m = np.fromiter(map(len, jdicts), dtype=np.int64, count=nb)
    if int(n.sum()) == 0:
        return None
    if doc_unit:
        ids = [h.doc_id for hs in lists for h in hs]
    else:
        ids = [h.chunk_id for hs in lists for h in hs]
    ids.extend([k for j in jdicts for k in j])
    tok = _tokens(ids)
    del ids
    if tok is None:
        return None
    lengths, words, h = tok

    def same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        equal = lengths[a] == lengths[b]
        for word in words:
            equal &= word[a] == word[b]
        return equal

    pbits = int((n + m).max()).bit_length()
    h &= ~np.uint64((1 << pbits) - 1)
    return _place_keyed(h, n, m, lab_grades, pbits, same, depth, chunks_budget, condensed, ks)


def block_coded(
    units: np.ndarray,
    labels: np.ndarray,
    n: np.ndarray,
    m: np.ndarray,
    lab_grades: np.ndarray,
    n_codes: int,
    depth: int,
    chunks_budget: bool,
    condensed: bool,
    ks: tuple[int, ...],
) -> Block | None:
    """The placement of a block of a coded run (:mod:`ablate.evaluation.coded`): the results' and judgements' unit
    codes are the identities :func:`_place_keyed` sorts on. Codes are exact, so nothing is checked byte for byte.
    ``None`` (the caller then places the block from the Hit lists) for an empty block or codes too wide for the
    key."""
    if int(n.sum()) == 0:
        return None
    pbits = int((n + m).max()).bit_length()
    if n_codes >= (1 << (64 - pbits)) - 1:
        return None
    # Narrow keys sort and move twice as fast; they fit whenever the code space is below 2^(32 - pbits) - 1.
    dtype = np.uint32 if n_codes < (1 << (32 - pbits)) - 1 else np.uint64
    ident = np.left_shift(np.concatenate((units, labels)).astype(dtype), dtype(pbits))
    return _place_keyed(ident, n, m, lab_grades, pbits, None, depth, chunks_budget, condensed, ks)


def _place_keyed(
    h: np.ndarray,
    n: np.ndarray,
    m: np.ndarray,
    lab_grades: np.ndarray,
    pbits: int,
    same: Callable[[np.ndarray, np.ndarray], np.ndarray] | None,
    depth: int,
    chunks_budget: bool,
    condensed: bool,
    ks: tuple[int, ...],
) -> Block | None:
    """Place a block from one identity per result and per judgement (``h``: the block's results in query and rank
    order, then its judgements in query order; identities in the bits above the low ``pbits``, which are zero;
    unsigned, 32 or 64 bits).

    Per query, one row holds a sort key per result and per judgement (identity in the high bits, slot in the low
    bits: results first, in rank order, then judgements); sorting the rows puts equal ids next to each other with the
    first result first. Equal neighbours (few: matched judgements and repeated units) are then handled sparsely; when
    identities are hashes, ``same(a, b)`` says whether the ids at flat positions a and b really are equal, and any
    that are not return ``None``. From "first occurrence" and "grade" per result everything else (dedup, condensed
    list, both budgets, windows) is prefix sums over flat arrays (:func:`_placed_flat`).

    Long because it is one vectorised pass: the sort order, run lengths and offsets it computes feed every later
    step, so pieces of it would each take and return half a dozen of the same arrays.
    """
    nb = len(n)
    n_run, n_lab = int(n.sum()), int(m.sum())
    # One row per query: results in slots [0, n), judgements in [n, n + m); pads are all ones and sort last.
    width = int((n + m).max())
    dtype = h.dtype.type
    low = dtype((1 << pbits) - 1)
    pad = dtype(np.iinfo(dtype).max)
    run_off = np.zeros(nb, dtype=np.int64)
    np.cumsum(n[:-1], out=run_off[1:])
    lab_off = np.zeros(nb, dtype=np.int64)
    np.cumsum(m[:-1], out=lab_off[1:])
    run_row = np.repeat(np.arange(nb), n)
    if (n == n[0]).all():
        run_slot = np.tile(np.arange(int(n[0]), dtype=np.int64), nb)
    else:
        run_slot = np.arange(n_run) - run_off[run_row]
    key = np.full(nb * width, pad, dtype=dtype)
    if (n == width).all():  # every row holds results only, all of one length: fill the matrix row-wise
        key.reshape(nb, width)[:] = h[:n_run].reshape(nb, width) | np.arange(width, dtype=dtype)
    elif (n == n[0]).all():
        key.reshape(nb, width)[:, : int(n[0])] = h[:n_run].reshape(nb, int(n[0])) | np.arange(
            int(n[0]), dtype=dtype
        )
    else:
        key[run_row * width + run_slot] = h[:n_run] | run_slot.astype(dtype)
    if n_lab:
        lab_row = np.repeat(np.arange(nb), m)
        lab_slot = np.arange(n_lab) - lab_off[lab_row] + n[lab_row]
        key[lab_row * width + lab_slot] = h[n_run:] | lab_slot.astype(dtype)
    del h
    key.reshape(nb, width).sort(axis=1)  # a view: sorts each row of the flat array in place
    top = key >> dtype(pbits)
    dup = np.flatnonzero(top[1:] == top[:-1]) + 1  # sorted positions equal to their left neighbour (sparse)
    del top
    dup = dup[(dup % width != 0) & (key[dup] != pad)]  # not across rows, not pads
    first = np.ones(n_run, dtype=bool)
    grade = np.full(n_run, UNJUDGED, dtype=np.int64)
    if len(dup):
        row = dup // width
        slot = (key[dup] & low).astype(np.int64)
        # The start of each equal run: step left while the left neighbour is itself a repeat.
        is_dup = np.zeros(len(key), dtype=bool)
        is_dup[dup] = True
        start = dup - 1
        while True:
            more = is_dup[start]
            if not more.any():
                break
            start[more] -= 1
        del is_dup
        first_slot = (key[start] & low).astype(np.int64)
        nrow = n[row]
        if (first_slot >= nrow).any():
            return None  # two judged ids alike: impossible for dict keys unless the hash collides
        a = run_off[row] + first_slot
        b = np.where(slot < nrow, run_off[row] + slot, n_run + lab_off[row] + slot - nrow)
        if same is not None and not same(a, b).all():
            return None  # two different ids share the hash's high bits: place this block exactly instead
        is_run = slot < nrow
        first[b[is_run]] = False
        lab = ~is_run
        # A judgement grades every result of its unit: the results sit between the run's start and the judgement.
        g = lab_grades[b[lab] - n_run]
        pos, stop = dup[lab] - 1, start[lab]
        while len(pos):
            grade[run_off[pos // width] + (key[pos] & low).astype(np.int64)] = g
            keep = pos > stop
            pos, stop, g = pos[keep] - 1, stop[keep], g[keep]
    del key

    repeats = np.flatnonzero(~first)
    no_dups = not len(repeats)
    n_units = n - np.bincount(run_row[repeats], minlength=nb) if len(repeats) else n
    full = _placed_flat(first, grade, run_row, run_slot, n, depth, chunks_budget, ks, None, no_dups)
    judged_units = np.count_nonzero(full.grades != UNJUDGED, axis=1)
    has_unjudged = judged_units < full.lens
    scoring = (
        _placed_flat(first, grade, run_row, run_slot, n, depth, chunks_budget, ks, grade != UNJUDGED, no_dups)
        if condensed
        else full
    )
    return Block(scoring, full, n_units, has_unjudged)


def _row_rank(mask: np.ndarray, row: np.ndarray, nb: int) -> np.ndarray:
    """0-based rank of each flat element among the ``mask`` elements of its row (meaningful where ``mask``)."""
    csum = np.cumsum(mask, dtype=np.int64)
    before = np.bincount(row, weights=mask, minlength=nb).astype(np.int64)
    offset = np.zeros(nb, dtype=np.int64)
    np.cumsum(before[:-1], out=offset[1:])
    return csum - 1 - offset[row]


def _placed_flat(
    first: np.ndarray,
    grade: np.ndarray,
    row: np.ndarray,
    slot: np.ndarray,
    n: np.ndarray,
    depth: int,
    chunks_budget: bool,
    ks: tuple[int, ...],
    kept: np.ndarray | None,
    no_dups: bool,
) -> Placed:
    """Dedup and budget on flat per-result arrays (rows in order, results in rank order; ``slot`` = rank - 1).

    ``kept`` selects the results that stay in the list (``unjudged=condensed``: the judged ones); positions are
    counted in the kept list. A unit is judged at all its results or at none, so "first occurrence" is the same in
    the kept list as in the full one."""
    nb = len(n)
    kv = np.asarray(ks, dtype=np.int64)
    if kept is None and no_dups and nb and 0 < int(n[0]) <= depth and (n == n[0]).all():
        # Every list has the same length within the budget (a fixed-depth run): the grades are already a matrix.
        g = grade.reshape(nb, int(n[0])).astype(np.int32)
        return Placed(n.copy(), g, np.minimum(n[:, None], kv[None, :]))
    if kept is None and no_dups:  # unit j is result j
        lens = np.minimum(n, depth)
        width = max(1, int(lens.max()) if nb else 1)
        g = np.full((nb, width), UNJUDGED, dtype=np.int32)
        inwin = slot < depth
        if inwin.all():
            g[row, slot] = grade
        else:
            g[row[inwin], slot[inwin]] = grade[inwin]
        return Placed(lens, g, np.minimum(lens[:, None], kv[None, :]))
    if kept is None:
        units, pos = first, slot
    else:
        units = first & kept
        pos = _row_rank(kept, row, nb)
    u = pos if (no_dups and kept is None) else _row_rank(units, row, nb)
    inwin = units & ((pos < depth) if chunks_budget else (u < depth))
    wr, wu = row[inwin], u[inwin]
    lens = np.bincount(wr, minlength=nb).astype(np.int64)
    width = max(1, int(lens.max()) if nb else 1)
    g = np.full((nb, width), UNJUDGED, dtype=np.int32)
    g[wr, wu] = grade[inwin]
    if chunks_budget and not no_dups:
        at = np.full((nb, width), depth, dtype=np.int64)  # position of each window unit's first result
        at[wr, wu] = pos[inwin]
        windows = np.stack([np.count_nonzero(at < k, axis=1) for k in ks], axis=1).astype(np.int64)
    else:
        windows = np.minimum(lens[:, None], kv[None, :])
    return Placed(lens, g, windows)
