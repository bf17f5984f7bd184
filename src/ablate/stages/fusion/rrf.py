"""Rank fusion: pure functions ``Run[] -> Run``.

Reciprocal Rank Fusion (Cormack, Clarke & Büttcher, SIGIR 2009):

    RRF(d) = sum over lists L_j containing d of 1 / (k + rank_{L_j}(d)),   ranks counted from 1.

Only ranks are used, never the retrievers' raw scores (BM25's unbounded scores and cosine similarities are not on
one scale). Every input list is cut to its first ``window`` results before fusion, and every result is identified by
its chunk id — all retrievers index the same snapshot chunks, so one clause is one id in every list. The fused score
only orders results; it is not a probability that a result is relevant. Ties are broken by ``types.TIE_RULE``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from ablate.data.types import Hit, Run, RunCodes
from ablate.stages.base import Fingerprint, check_float, check_int, fingerprint_of

#: Bump when the fusion rule changes (part of the stage fingerprint).
CODE_VERSION = "ablate-rrf/1"


#: RRF's constant as the paper sets it: it damps the weight of the first ranks so that no single list dominates
DEFAULT_K = 60.0
#: How many candidates each retriever hands to fusion unless told: ``retrieval.window``'s default in conf/config.yaml
DEFAULT_WINDOW = 100


def check_k(k: object, key: str = "rrf.k") -> float:
    """``k`` as RRF takes it: a finite number >= 0 (0 gives plain reciprocal ranks), else one ConfigError naming
    ``key``. The one check of k: the stage (``<name>.k``), :func:`rrf` (through the stage) and :func:`rrf_scores`."""
    return check_float(key, k, 0.0, hint=f" ({DEFAULT_K:g} is the usual default)")


def rrf_scores(rankings: Sequence[Sequence[str]], k: float = DEFAULT_K) -> dict[str, float]:
    """RRF score of every id in any of the ``rankings`` (each a list of ids in rank order, rank 1 first)."""
    k = check_k(k)
    longest = max((len(r) for r in rankings), default=0)
    return _scores(rankings, [1.0 / (k + rank) for rank in range(1, longest + 1)])


def _scores(rankings: Sequence[Sequence[str]], inv: Sequence[float]) -> dict[str, float]:
    """RRF scores with ``inv[rank - 1] = 1 / (k + rank)`` precomputed (the same floats, summed in list order)."""
    scores: dict[str, float] = {}
    get = scores.get
    for ranking in rankings:
        seen: set[str] = set()
        rank = 0
        for uid in ranking:
            if uid in seen:  # a list that names one id twice counts it once, at its best rank
                continue
            seen.add(uid)
            scores[uid] = get(uid, 0.0) + inv[rank]
            rank += 1
    return scores


def rrf(
    runs: Sequence[Run],
    k: float = DEFAULT_K,
    window: int = DEFAULT_WINDOW,
    depth: int | None = None,
    name: str = "rrf",
) -> Run:
    """Fuse ``runs`` by RRF over each run's top-``window`` chunks; return the top ``depth`` (default: all). ``k`` and
    ``window`` are checked as the stage checks them (``rrf.k``, ``retrieval.window``)."""
    stage = RRF(k=k, window=window)
    return _fuse(runs, stage.k, stage.window, depth, name, k)


def _fuse(runs: Sequence[Run], kf: float, window: int, depth: int | None, name: str, k: float) -> Run:
    """RRF with ``kf`` and ``window`` already checked (by :class:`RRF`, once, when it was built); ``k`` as given,
    for the fused run's ``meta``."""
    inv = [1.0 / (kf + rank) for rank in range(1, window + 1)]
    qids = list(dict.fromkeys(q for r in runs for q in r.results))  # first appearance, in run order
    meta = {"fusion": "rrf", "rrf.k": k, "window": window, "inputs": [r.name for r in runs]}
    fused = _coded_rrf(runs, qids, np.asarray(inv, dtype=np.float64), window, depth)
    if fused is not None:
        return Run.from_codes(name, fused, meta)
    out: dict[str, list[Hit]] = {}
    for qid in qids:
        lists = [r.get(qid)[:window] for r in runs]
        info: dict[str, Hit] = {}
        for hits in lists:
            for h in hits:
                info.setdefault(h.chunk_id, h)
        scores = _scores([[h.chunk_id for h in hits] for hits in lists], inv)
        ranked = sorted(scores.items(), key=lambda cs: (-cs[1], cs[0]))  # types.TIE_RULE
        if depth:
            ranked = ranked[:depth]
        out[qid] = [Hit(c, info[c].doc_id, s, info[c].version) for c, s in ranked]
    return Run(name=name, results=out, meta=meta)


def _coded_rrf(
    runs: Sequence[Run], qids: list[str], inv: np.ndarray, window: int, depth: int | None
) -> RunCodes | None:
    """:func:`rrf` on integer codes when every input run carries codes over one table and covers ``qids`` in
    order; None otherwise (the caller fuses the Hit lists). Same hits, scores and order as the loop: each id's
    terms are summed in run order (``np.bincount`` adds its weights in input order), a list naming an id twice
    counts it at its first rank with later ranks closing up, ties go by chunk id (the table's id order)."""
    codes = [r.codes for r in runs if r.codes is not None]
    if not codes or len(codes) != len(runs):
        return None
    table = codes[0].table
    if any(c.table is not table for c in codes) or any(c.qids != qids for c in codes):
        return None
    n_runs, n_q, n_ids = len(codes), len(qids), len(table)
    # every (query, run) list cut at the window, query-major then run order
    lens = np.stack([np.minimum(c.lengths(), window) for c in codes], axis=1).reshape(-1)
    starts = np.stack([c.offsets[:-1] for c in codes], axis=1).reshape(-1)
    which = np.repeat(np.arange(n_q * n_runs), lens)
    rank0 = np.arange(len(which)) - np.repeat(np.cumsum(lens) - lens, lens)
    src_run = which % n_runs
    pos = np.repeat(starts, lens) + rank0
    flat = np.empty(len(which), dtype=np.int64)
    for j, c in enumerate(codes):
        m = src_run == j
        flat[m] = c.codes[pos[m]]
    key = which * n_ids + flat
    _, firsts = np.unique(key, return_index=True)
    if len(firsts) < len(key):  # an id twice in one list: its first rank counts, later ranks close up
        keep = np.zeros(len(key), dtype=bool)
        keep[firsts] = True
        before = np.cumsum(keep) - keep
        rank0 = before - before[np.repeat(np.cumsum(lens) - lens, lens)]
        sel = np.flatnonzero(keep)
        which, flat, rank0 = which[sel], flat[sel], rank0[sel]
    qkey = (which // n_runs) * n_ids + flat
    fused, inverse = np.unique(qkey, return_inverse=True)
    scores = np.bincount(inverse.reshape(-1), weights=inv[rank0], minlength=len(fused))
    fq, fc = fused // n_ids, fused % n_ids
    order = np.lexsort((table.id_order()[fc], -scores, fq))
    counts = np.bincount(fq, minlength=n_q)
    if depth:
        rank = np.arange(len(order)) - np.repeat(np.cumsum(counts) - counts, counts)
        order = order[rank < depth]
        counts = np.minimum(counts, depth)
    offsets = np.zeros(n_q + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return RunCodes(table, qids, offsets, fc[order], scores[order])


class RRF:
    """The RRF fusion stage (``conf/fusion/rrf.yaml``): ``k`` (>= 0, finite; default 60) and ``window`` (how many
    candidates each retriever hands to fusion; set by ``retrieval.window``)."""

    kind: ClassVar[str] = "fuser"

    def __init__(self, name: str = "rrf", k: float = DEFAULT_K, window: int = DEFAULT_WINDOW) -> None:
        self.name = name
        self.k = check_k(k, f"{name}.k")
        # the config feeds rrf.window from retrieval.window (conf/fusion/rrf.yaml), so a refusal names that key
        self.window = check_int("retrieval.window", window, 1)
        self.stats: dict[str, float] = {}

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "window": self.window}

    def fingerprint(self) -> Fingerprint:
        return fingerprint_of(self, self.params())

    def fuse(self, runs: Sequence[Run], depth: int) -> Run:
        """RRF over each run's top ``window``; the fused list is cut at ``depth``."""
        return _fuse(runs, self.k, self.window, depth, self.name, self.k)
