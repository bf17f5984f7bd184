"""Pairwise reranking with a content cache: ``Run -> Run``, each (query text, passage text) score computed once.

:class:`CachedPairScorer` is what every pointwise reranker shares (the cross-encoder's
:class:`~ablate.stages.rerank.cross_encoder.CrossEncoderScorer`, the LLM judge's
:class:`~ablate.stages.rerank.llm.LlmJudgeScorer`); a subclass says how a batch of pairs is scored
(:meth:`CachedPairScorer._predict`), what determines the scores (:meth:`CachedPairScorer.fingerprint`) and how its
model is named in the run's metadata (``model_label``).

Output order: the top ``depth`` hits of each query, ordered by score (ties: :data:`~ablate.data.types.TIE_RULE`,
chunk id asc), then the hits below ``depth`` in their original order. Tail hits carry ``lowest reranked score - i``
(i = 1, 2, ...), strictly below every reranked hit, keeping the tail order. Scores only rank.

Score cache layout (``Cache`` kind ``rerank-scores``, one JSON entry per query text and scorer)::

    <cache>/rerank-scores/<key[:2]>/<key>.json
      key   = key_of("rerank-scores", scorer fingerprint, sha256(query text))
      value = {"query_sha256": ..., "fingerprint": {...}, "scores": {sha256(chunk text): score, ...}}

Missing pairs are scored in batches of whole queries (``flush_pairs``) and each batch's entries are written as soon as
it is scored, so an interrupted run keeps the queries it finished. When a call scores new pairs for a query, the entry
is re-read, merged with the new scores and rewritten atomically
(temp file + rename). A sweep over ``rerank.depth`` = 10, 20, 50 therefore scores each pair once: depth 20 finds the
top 10 cached and scores 10 more. Two processes that extend the same entry at once can drop each other's new scores
(last rename wins); a dropped score is simply recomputed later, never read half-written.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from ablate.cache import Cache, key_of, sha256_text
from ablate.data.types import TIE_RULE, Hit, Run, rank_hits
from ablate.errors import ConfigError, InputError

SCORE_KIND = "rerank-scores"
STAT_KEYS = ("pairs_scored", "pairs_cached", "score_seconds", "model_loads")


class CachedPairScorer:
    """See the module docstring. Subclasses set ``model_label`` and implement :meth:`fingerprint` and
    :meth:`_predict`; they call ``super().__init__(cache)`` once their fingerprint can be computed."""

    model_label: str = ""
    # Pairs per model call before the scores are written to the cache (whole queries are never split). Large for a
    # fast batched model (one call, one progress bar); an LLM judge sets 1 so every finished query survives an
    # interruption.
    flush_pairs: int = 1 << 30

    def __init__(self, cache: Cache | None = None) -> None:
        self.cache = cache
        # Cumulative over this scorer's calls: pairs_scored = pairs run through the model, pairs_cached = pairs served
        # from the cache (disk or memory), score_seconds = model wall time (loading included), model_loads = 0 on a
        # warm cache.
        self.stats: dict[str, float] = dict.fromkeys(STAT_KEYS, 0)
        self._score_fp = self.fingerprint()
        # In-process memo: query sha -> {chunk sha -> score}; mirrors what was read from or written to the cache,
        # so a sweep scores each pair once even with the disk cache disabled.
        self._memo: dict[str, dict[str, float]] = {}

    def fingerprint(self) -> dict[str, object]:
        """Everything that determines the scores (model content, input limits, score form, libraries, code)."""
        raise NotImplementedError

    def _predict(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """One score per (query text, passage text) pair, in order; higher = more relevant."""
        raise NotImplementedError

    def _entry_key(self, query_sha: str) -> str:
        return key_of(SCORE_KIND, self._score_fp, query_sha)

    # -- cache ----------------------------------------------------------------------------------------------------
    def _cached_scores(self, query_sha: str) -> dict[str, float]:
        memo = self._memo.get(query_sha)
        if memo is not None:
            return memo
        memo = {}
        if self.cache is not None:
            entry = self.cache.load_json(SCORE_KIND, self._entry_key(query_sha))
            if isinstance(entry, dict) and isinstance(entry.get("scores"), dict):
                memo = {k: float(v) for k, v in entry["scores"].items() if isinstance(v, (int, float))}
        self._memo[query_sha] = memo
        return memo

    def _store(self, query_sha: str, new: Mapping[str, float]) -> None:
        memo = self._memo.setdefault(query_sha, {})
        memo.update(new)
        if self.cache is None or not self.cache.enabled:
            return
        key = self._entry_key(query_sha)
        on_disk = self.cache.load_json(
            SCORE_KIND, key
        )  # re-read: another process may have added pairs meanwhile
        merged: dict[str, float] = {}
        if isinstance(on_disk, dict) and isinstance(on_disk.get("scores"), dict):
            merged.update({k: float(v) for k, v in on_disk["scores"].items() if isinstance(v, (int, float))})
        merged.update(memo)
        memo.update(merged)
        self.cache.save_json(
            SCORE_KIND,
            key,
            {
                "query_sha256": query_sha,
                "fingerprint": self._score_fp,
                "scores": dict(sorted(merged.items())),
            },
        )

    def _plan(
        self, run: Run, query_text: Mapping[str, str], chunk_text: Mapping[str, str], depth: int
    ) -> tuple[dict[str, tuple[str, list[str]]], dict[str, dict[str, tuple[str, str]]]]:
        """Which pairs each query's head needs (``qid -> (query sha, chunk shas)``) and which are not cached yet
        (``query sha -> chunk sha -> (query text, chunk text)``); every text is checked before any model work."""
        plan: dict[str, tuple[str, list[str]]] = {}
        todo: dict[str, dict[str, tuple[str, str]]] = {}
        for qid, hits in run.results.items():
            head = hits[:depth]
            if not head:
                continue
            if qid not in query_text:
                raise InputError(
                    f"rerank of run {run.name!r}",
                    f"query {qid!r} has hits but no text",
                    "pass the text of every query in the run (query id -> text)",
                )
            qtext = query_text[qid]
            qsha = sha256_text(qtext)
            shas = []
            cached = self._cached_scores(qsha)
            for h in head:
                if h.chunk_id not in chunk_text:
                    raise InputError(
                        f"rerank of run {run.name!r}",
                        f"chunk {h.chunk_id!r} (query {qid!r}) has no text",
                        "pass the text of every chunk the run can return (chunk id -> indexed text)",
                    )
                ctext = chunk_text[h.chunk_id]
                csha = sha256_text(ctext)
                shas.append(csha)
                if csha in cached or csha in todo.get(
                    qsha, {}
                ):  # cached, or the same pair twice in this call
                    self.stats["pairs_cached"] += 1
                else:
                    todo.setdefault(qsha, {})[csha] = (qtext, ctext)
            plan[qid] = (qsha, shas)
        return plan, todo

    def _score_missing(self, todo: dict[str, dict[str, tuple[str, str]]]) -> None:
        """Score the missing pairs in batches of whole queries (at least ``flush_pairs`` pairs each), writing each
        batch's cache entries as soon as it is scored: an interrupted run keeps what it finished."""
        batch: list[tuple[str, str, tuple[str, str]]] = []
        for qsha, d in todo.items():
            batch.extend((qsha, csha, pair) for csha, pair in d.items())
            if len(batch) >= self.flush_pairs:
                self._score_batch(batch)
                batch = []
        if batch:
            self._score_batch(batch)

    def _score_batch(self, flat: list[tuple[str, str, tuple[str, str]]]) -> None:
        t0 = time.perf_counter()
        scores = self._predict([pair for _, _, pair in flat])
        self.stats["score_seconds"] += time.perf_counter() - t0
        self.stats["pairs_scored"] += len(flat)
        new: dict[str, dict[str, float]] = {}
        for (qsha, csha, _), score in zip(flat, scores, strict=True):
            new.setdefault(qsha, {})[csha] = score
        for qsha, d in new.items():
            self._store(qsha, d)

    # -- the stage ------------------------------------------------------------------------------------------------
    def rerank(
        self, run: Run, query_text: Mapping[str, str], chunk_text: Mapping[str, str], depth: int
    ) -> Run:
        """A new run: per query, the top ``depth`` hits by cross-encoder score, then the rest in their old order.

        ``query_text`` maps query id -> text and ``chunk_text`` chunk id -> the chunk's indexed text (title prefix
        included). The input run is not modified. See the module docstring for the tail scores and the cache.
        """
        if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
            raise ConfigError("rerank.depth", depth, "must be a positive integer (e.g. 10, 20, 50)")

        plan, todo = self._plan(run, query_text, chunk_text, depth)
        self._score_missing(todo)

        # 3. Build the new run.
        results: dict[str, list[Hit]] = {}
        for qid, hits in run.results.items():
            if qid not in plan:
                results[qid] = list(hits)
                continue
            qsha, shas = plan[qid]
            memo = self._memo[qsha]
            head = rank_hits(replace(h, score=memo[csha]) for h, csha in zip(hits[:depth], shas, strict=True))
            floor = head[-1].score
            tail = [replace(h, score=floor - float(i)) for i, h in enumerate(hits[depth:], start=1)]
            results[qid] = head + tail

        meta = copy.deepcopy(run.meta)
        meta["rerank"] = {
            "depth": depth,
            "model": self.model_label,
            "fingerprint": self.fingerprint(),
            "input_run": run.name,
            "tie_rule": TIE_RULE,
            "tail": "original order, scores below the lowest reranked score",
        }
        return Run(f"{run.name}>rerank", results, meta)
