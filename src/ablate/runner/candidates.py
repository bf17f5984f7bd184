"""Each retriever's candidate lists, computed once per content and reused as prefixes.

A retriever's ranked list for a (snapshot, retriever fingerprint, identity, query set) does not depend on how deep a
later stage reads it, so it is computed once at ``cache_depth`` (at least the depth asked for), stored in the content
cache (kind ``candidates``) and in the session, and a shallower request takes its prefix. That is what makes a sweep
over windows and fusion constants cheap: only fusion and evaluation re-run.

Key: ``key_of("candidates/v2", snapshot fingerprint, retriever fingerprint key, visibility, sha256 of the queries'
ids and texts)``; the visibility is the identity's groups, plus the documents filtered as out of force when
``versions.policy=in_force`` filters any (:class:`ablate.runner.access.Cohort`). The retriever fingerprint carries its class, parameters, library and code versions and
the content of the models and tokenizer rules it uses, so no entry outlives a change to any of them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ablate.cache import Cache, key_of, sha256_text
from ablate.data.snapshot import Snapshot
from ablate.data.types import Query, Run, RunCodes
from ablate.runner.session import Session
from ablate.stages.base import Retriever

KIND = "candidates"


def queries_key(queries: Sequence[Query]) -> str:
    return sha256_text("\n".join(f"{q.qid}\t{q.text}" for q in queries))


def _to_json(run: Run) -> dict[str, list[list[Any]]]:
    return {q: [[h.chunk_id, h.score] for h in hits] for q, hits in run.results.items()}


def _from_json(name: str, data: dict[str, list[list[Any]]], snapshot: Snapshot) -> Run:
    """The stored lists as a coded run over the snapshot's :class:`~ablate.data.types.IdTable` (chunk id -> code
    once per hit; the Hit lists are then built from the codes). A chunk id the snapshot does not have is a
    ``KeyError``, as before: the key includes the snapshot fingerprint, so that means a damaged entry."""
    table = snapshot.id_table
    index = table.index
    qids = list(data)
    codes = [[index[c] for c, _ in hits] for hits in data.values()]
    scores = [[float(s) for _, s in hits] for hits in data.values()]
    return Run.from_codes(name, RunCodes.from_lists(table, qids, codes, scores))


class CandidateSource:
    """Serves candidate lists from the session, then the disk cache, then the retriever (prepared on first use)."""

    def __init__(
        self, snapshot: Snapshot, cache: Cache, session: Session, show_progress: bool = False
    ) -> None:
        self.snapshot = snapshot
        self.cache = cache
        self.session = session
        self.show_progress = show_progress
        self.timings: dict[str, float] = {}
        self.counters: dict[str, float] = {"candidate_cache_hits": 0.0, "candidate_cache_misses": 0.0}

    def _add(self, d: dict[str, float], key: str, value: float) -> None:
        d[key] = d.get(key, 0.0) + value

    def _prepared(self, retriever: Retriever) -> Retriever:
        t0 = time.perf_counter()
        r = self.session.prepared(retriever, self.snapshot, self.cache, self.show_progress)
        self._add(self.timings, f"prepare_{retriever.name}_seconds", time.perf_counter() - t0)
        return r

    def candidates(
        self,
        retriever: Retriever,
        queries: Sequence[Query],
        depth: int,
        groups: Any,
        cache_depth: int,
        mask: np.ndarray | None = None,
    ) -> Run:
        """``retriever``'s top ``depth`` for ``queries`` inside a visibility: ``groups`` keys it (the identity's
        groups, or a cohort's key from :class:`ablate.runner.access.Cohort`; None = no filter) and ``mask`` (when
        given) is it, else the mask of an identity holding ``groups``."""
        if mask is None and groups is not None:
            mask = self.snapshot.allowed_mask(groups)
        if not retriever.cacheable:
            return self._prepared(retriever).search(queries, depth, mask)
        ckey = key_of(
            "candidates/v2",
            self.snapshot.fingerprint,
            retriever.fingerprint().key,
            groups,
            queries_key(queries),
        )
        memo = self.session.candidates.get(ckey)
        if memo is not None and int(memo.meta.get("depth", 0)) >= depth:  # type: ignore[call-overload]
            self._add(self.counters, "candidate_cache_hits", 1)
            return memo.truncated(depth)
        stored = self.cache.load_json(KIND, ckey)
        if isinstance(stored, dict) and int(stored.get("depth", 0)) >= depth:
            self._add(self.counters, "candidate_cache_hits", 1)
            run = _from_json(retriever.name, stored["results"], self.snapshot)
            run.meta["depth"] = int(stored["depth"])
            self.session.candidates[ckey] = run
            return run.truncated(depth)
        self._add(self.counters, "candidate_cache_misses", 1)
        r = self._prepared(retriever)
        deep = max(depth, cache_depth)
        t0 = time.perf_counter()
        run = r.search(queries, deep, mask)
        self._add(self.timings, f"search_{retriever.name}_seconds", time.perf_counter() - t0)
        self.cache.save_json(KIND, ckey, {"depth": deep, "results": _to_json(run)})
        run.meta["depth"] = deep
        self.session.candidates[ckey] = run
        return run.truncated(depth)
