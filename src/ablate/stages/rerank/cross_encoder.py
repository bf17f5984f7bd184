"""Cross-encoder reranking: ``Run -> Run``, with every (query, chunk) score cached by content.

A cross-encoder reads the query and a chunk together and returns one relevance logit (Nogueira & Cho, 2019,
"Passage Re-ranking with BERT", arXiv:1901.04085). It is far slower than a retriever (about 24 pairs/s at 256 tokens
on an idle 2-core CPU; 3-6 pairs/s when other processes load it, 5-8 then with one torch thread), so it only rescores
the top ``depth`` hits of a run, and each score is computed once per (query text, chunk text, model, max_length) and
kept in the :class:`~ablate.cache.Cache`.

Output order: the top ``depth`` hits of each query, ordered by cross-encoder score (ties: :data:`~ablate.types.TIE_RULE`,
chunk id asc), then the hits below ``depth`` in their original order. Reranked hits carry the raw cross-encoder logit
(no sigmoid, which saturates to ties in float32); tail hits carry ``lowest reranked score - i`` (i = 1, 2, ...), which
sits strictly below every reranked hit and keeps the tail order. As everywhere in ablate, scores only rank: they are not
probabilities and they are not comparable across queries.

Score cache layout (``Cache`` kind ``rerank-scores``, one JSON entry per query text and model)::

    <cache>/rerank-scores/<key[:2]>/<key>.json
      key   = key_of("rerank-scores/v1", sha256(query text), model fingerprint, max_length, "logit")
      value = {"query_sha256": ..., "model_fingerprint": ..., "max_length": ..., "activation": "logit",
               "scores": {sha256(chunk text): logit, ...}}

When a rerank call scores new pairs for a query, the entry is re-read, merged with the new scores and rewritten
atomically (temp file + rename). A sweep over ``rerank.depth`` = 10, 20, 50 therefore scores each pair once: depth 20
finds the top 10 cached and scores 10 more. Two processes that extend the same entry at once can drop each other's new
scores (last rename wins); a dropped score is simply recomputed later, never read half-written.
"""

from __future__ import annotations

import contextlib
import copy
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ablate.cache import Cache, key_of, sha256_text
from ablate.errors import ConfigError, InputError
from ablate.stages.text.models import ResolvedModel, resolve_model
from ablate.data.types import TIE_RULE, Hit, Run, rank_hits

SCORE_KIND = "rerank-scores"
_SCORE_VERSION = "rerank-scores/v1"
_ACTIVATION = "logit"  # raw logits: monotone in the sigmoid probability, without its float32 saturation ties


STAT_KEYS = ("pairs_scored", "pairs_cached", "score_seconds", "model_loads")


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' per-load weight reports and progress bars, restoring the previous settings after."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - transformers is a dependency of sentence-transformers
        yield
        return
    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _architectures(path: str) -> list[str]:
    try:
        cfg = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    arch = cfg.get("architectures") if isinstance(cfg, dict) else None
    return [a for a in arch if isinstance(a, str)] if isinstance(arch, list) else []


def check_cross_encoder_checkpoint(resolved: ResolvedModel, setting: str) -> None:
    """Refuse a plain encoder checkpoint (e.g. the bi-encoder all-MiniLM-L6-v2): as a cross-encoder its scoring head
    would be randomly initialised, and its "reranking" would be noise. Checkpoints with a classification or
    causal-LM head pass; a folder without ``config.json`` is let through (sentence-transformers decides)."""
    arch = _architectures(resolved.path)
    if arch and all(a.endswith("Model") for a in arch):
        raise ConfigError(
            setting,
            resolved.name,
            f"it is a plain encoder checkpoint (architectures {', '.join(arch)}), not a cross-encoder: its relevance "
            f"head would be random. Use {setting}=trained to fine-tune a cross-encoder from it on the corpus's train "
            f"split, or {setting}=/path/to/a/cross-encoder (e.g. a local copy of cross-encoder/ms-marco-MiniLM-L6-v2)",
        )


class CrossEncoderReranker:
    """Rescore the top ``depth`` hits of a run with a sentence-transformers ``CrossEncoder``.

    The model is resolved offline at construction (a missing model fails fast, naming both remedies: a local path or
    ``rerank.model=trained``) but only loaded when a score is not already cached, so a warm cache reranks without
    touching torch weights.
    """

    name = "rerank"

    def __init__(
        self,
        model: str,
        cache: Cache | None = None,
        batch_size: int = 32,
        max_length: int = 256,
        setting: str = "rerank.model",
    ) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ConfigError("rerank.batch_size", batch_size, "must be a positive integer (e.g. 32)")
        if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 8:
            raise ConfigError("rerank.max_length", max_length, "must be an integer >= 8 tokens (e.g. 256)")
        self.resolved: ResolvedModel = resolve_model(model, kind="cross-encoder", setting=setting)
        check_cross_encoder_checkpoint(self.resolved, setting)
        self.cache = cache
        self.batch_size = batch_size
        self.max_length = max_length
        self.setting = setting
        # Cumulative over this reranker's calls (a plain dict, like the retrievers' ``stats``): pairs_scored = pairs run
        # through the model, pairs_cached = pairs served from the cache (disk or memory), score_seconds = model wall
        # time (loading included), model_loads = 0 on a warm cache.
        self.stats: dict[str, float] = dict.fromkeys(STAT_KEYS, 0)
        self._model: Any = None
        # In-process memo: query sha -> {chunk sha -> score}; mirrors what was read from or written to the cache,
        # so a sweep scores each pair once even with the disk cache disabled.
        self._memo: dict[str, dict[str, float]] = {}

    # -- identity -------------------------------------------------------------------------------------------------
    def fingerprint(self) -> dict[str, object]:
        """Everything that determines the scores: model content fingerprint, max_length and the score form."""
        return {
            "reranker": "cross-encoder",
            "model_fingerprint": self.resolved.fingerprint,
            "max_length": self.max_length,
            "score": _ACTIVATION,
        }

    def _entry_key(self, query_sha: str) -> str:
        return key_of(_SCORE_VERSION, query_sha, self.resolved.fingerprint, self.max_length, _ACTIVATION)

    # -- model ----------------------------------------------------------------------------------------------------
    def _load(self) -> Any:
        if self._model is None:
            from sentence_transformers import CrossEncoder

            with quiet_transformers():
                self._model = CrossEncoder(self.resolved.path, device="cpu", max_length=self.max_length)
            self.stats["model_loads"] += 1
        return self._model

    def _predict(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        import torch

        model = self._load()
        scores = model.predict(
            list(pairs),
            batch_size=self.batch_size,
            show_progress_bar=False,
            activation_fn=torch.nn.Identity(),
            convert_to_numpy=True,
        )
        return [float(s) for s in scores.reshape(-1)]

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
                "model_fingerprint": self.resolved.fingerprint,
                "max_length": self.max_length,
                "activation": _ACTIVATION,
                "scores": dict(sorted(merged.items())),
            },
        )

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

        # 1. Collect the pairs to score; check every text is there before any model work.
        plan: dict[str, tuple[str, list[str]]] = {}  # qid -> (query sha, chunk shas of the head)
        todo: dict[str, dict[str, tuple[str, str]]] = {}  # query sha -> chunk sha -> (query text, chunk text)
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
                if csha in cached:
                    self.stats["pairs_cached"] += 1
                elif csha in todo.get(qsha, {}):
                    self.stats["pairs_cached"] += (
                        1  # the same pair twice in this call (same texts): scored once
                    )
                else:
                    todo.setdefault(qsha, {})[csha] = (qtext, ctext)
            plan[qid] = (qsha, shas)

        # 2. Score what is missing, in one batched pass over all queries, then write one entry per query.
        flat = [(qsha, csha, pair) for qsha, d in todo.items() for csha, pair in d.items()]
        if flat:
            t0 = time.perf_counter()
            scores = self._predict([pair for _, _, pair in flat])
            self.stats["score_seconds"] += time.perf_counter() - t0
            self.stats["pairs_scored"] += len(flat)
            new: dict[str, dict[str, float]] = {}
            for (qsha, csha, _), s in zip(flat, scores, strict=True):
                new.setdefault(qsha, {})[csha] = s
            for qsha, d in new.items():
                self._store(qsha, d)

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
            "model": self.resolved.name,
            "fingerprint": self.fingerprint(),
            "input_run": run.name,
            "tie_rule": TIE_RULE,
            "tail": "original order, scores below the lowest reranked score",
        }
        return Run(f"{run.name}>rerank", results, meta)
