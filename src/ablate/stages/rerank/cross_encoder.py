"""Cross-encoder reranking: ``Run -> Run``, with every (query, chunk) score cached by content.

A cross-encoder reads the query and a chunk together and returns one relevance logit (Nogueira & Cho, 2019,
"Passage Re-ranking with BERT", arXiv:1901.04085). It is far slower than a retriever (a transformer pass per pair; figures
in ``experiments/README.md``, "Figures behind the stages' docstrings"), so it only rescores
the top ``depth`` hits of a run, and each score is computed once per (query text, chunk text, model, max_length) and
kept in the :class:`~ablate.cache.Cache`.

Reranked hits carry the raw cross-encoder logit (no sigmoid, which saturates to ties in float32). The output order,
the tail rule and the score cache are :mod:`ablate.stages.rerank.pair_scores`'s; this scorer's fingerprint holds the
model files' content fingerprint, ``max_length``, the score form, the versions of sentence-transformers /
transformers / torch and this module's ``CODE_VERSION``: an upgrade misses the cache.

``precision`` (``fp32`` | ``bf16``) and ``num_threads`` apply to scoring as to dense encoding
(:mod:`ablate.stages.text.compute`): bf16 scores are keyed apart from fp32 ones; the thread count is logged but is in
no key (it changes no score beyond float rounding). ``train.precision`` is the precision of fine-tuning
(``model: trained``), which runs with ``num_threads`` too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ablate.cache import Cache
from ablate.data.types import Run
from ablate.errors import ConfigError
from ablate.models.quiet import quiet_transformers
from ablate.progress import batches
from ablate.stages.base import (
    Fingerprint,
    StageContext,
    check_choice,
    check_int,
    check_str,
    fingerprint_of,
    library_versions,
)
from ablate.stages.rerank.pair_scores import STAT_KEYS, CachedPairScorer
from ablate.stages.rerank.training import MIN_MAX_LENGTH
from ablate.stages.text.compute import PRECISIONS, Compute, resolve_compute
from ablate.stages.text.defaults import SETTING, encoder_choice
from ablate.stages.text.encoders import resolve_base_model
from ablate.stages.text.models import ResolvedModel, resolve_model

if TYPE_CHECKING:
    from ablate.data.snapshot import Snapshot

#: Bump when scoring or the output order rule changes: part of the stage fingerprint and of every score cache key.
CODE_VERSION = "ablate-cross-encoder/2"
LIBRARIES = ("sentence-transformers", "transformers", "torch")
_ACTIVATION = "logit"  # raw logits: monotone in the sigmoid probability, without its float32 saturation ties


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


class CrossEncoderScorer(CachedPairScorer):
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
        show_progress: bool = False,
        compute: Compute | None = None,
    ) -> None:
        self.compute = compute or Compute()
        self.resolved: ResolvedModel = resolve_model(model, kind="cross-encoder", setting=setting)
        check_cross_encoder_checkpoint(self.resolved, setting)
        self.model_label = self.resolved.name
        self.batch_size = batch_size
        self.max_length = max_length
        self.setting = setting
        self.show_progress = show_progress
        self._model: Any = None
        super().__init__(cache)

    # -- identity -------------------------------------------------------------------------------------------------
    def fingerprint(self) -> dict[str, object]:
        """Everything that determines the scores: model content fingerprint, max_length, the score form, the
        libraries that compute them and this module's code version."""
        return {
            "code_version": CODE_VERSION,
            "model_fingerprint": self.resolved.fingerprint,
            "max_length": self.max_length,
            "score": _ACTIVATION,
            "libraries": library_versions(*LIBRARIES),
            **self.compute.fingerprint_part(),
        }

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
        loop = "sentence_transformers.cross_encoder.model"
        with (
            batches(loop, "rerank pairs", len(pairs), self.batch_size, self.show_progress and len(pairs) > 1),
            self.compute.running(),
        ):
            scores = model.predict(
                list(pairs),
                batch_size=self.batch_size,
                show_progress_bar=False,
                activation_fn=torch.nn.Identity(),
                convert_to_numpy=True,
            )
        return [float(s) for s in scores.reshape(-1)]


#: Defaults of ``rerank.train`` (fine-tuning used when ``model: trained``).
TRAIN_DEFAULTS: dict[str, Any] = {
    "split": "train",
    "base_model": None,  # None = the corpus language's (ablate.stages.text.defaults), resolved in bind
    "epochs": 1,
    "max_negatives": 7,
    "max_length": 128,
    "seed": 13,
    "min_steps": 100,
    "precision": "fp32",
}


class CrossEncoderReranker:
    """The cross-encoder reranker stage (``conf/reranker/cross_encoder.yaml``).

    ``model``: a hub name already in the offline cache, a local folder, or ``trained`` (fine-tune one on the corpus's
    ``train.split`` with BM25 hard negatives: :mod:`ablate.stages.rerank.training`); ``depth``: how many fused
    candidates are rescored; ``batch_size``, ``max_length``; ``precision`` and ``num_threads`` of scoring (and of
    training); ``train``: the fine-tuning settings (used only when ``model`` is ``trained``, and logged only then).
    ``num_threads`` is logged but kept out of the fingerprint: it changes no score and no trained weight beyond
    float rounding, so a sweep over it reuses both caches.

    ``train.base_model`` left ``None`` follows the corpus language (:mod:`ablate.stages.text.defaults`:
    ``multilingual-e5-small`` for ``zh``, else ``all-MiniLM-L6-v2``), resolved in :meth:`bind`; the bound stage logs
    it with ``train.base_model_source`` (``setting`` / ``language:<code>``, not in the fingerprint). A trained stage
    whose base model follows the language has no fingerprint before it is bound.
    """

    kind: ClassVar[str] = "reranker"

    def __init__(
        self,
        name: str = "rerank",
        model: str = "cross-encoder/ms-marco-MiniLM-L-6-v2",
        depth: int = 50,
        batch_size: int = 32,
        max_length: int = 256,
        train: Mapping[str, Any] | None = None,
        precision: str = "fp32",
        num_threads: int | None = None,
    ) -> None:
        self.name = name
        self.model = str(check_str(f"{name}.model", model))
        self.depth = check_int(f"{name}.depth", depth, 1)
        self.batch_size = check_int(f"{name}.batch_size", batch_size, 1)
        self.max_length = check_int(f"{name}.max_length", max_length, MIN_MAX_LENGTH)
        self.compute = resolve_compute(
            f"{name}.precision", precision, f"{name}.num_threads", num_threads, "score"
        )
        self.train = self._check_train(dict(train or {}))
        self.stats: dict[str, float] = dict.fromkeys(STAT_KEYS, 0.0)
        self._snapshot: Snapshot | None = None
        self._scorer: CrossEncoderScorer | None = None
        self._resolved: ResolvedModel | None = None
        self._base: ResolvedModel | None = None
        self.base_model_source: str | None = None
        if self.trained:
            if self.train["base_model"] is not None:
                self._base = resolve_base_model(self.train["base_model"], f"{name}.train.base_model")
                self.base_model_source = SETTING
            self.train_compute = resolve_compute(
                f"{name}.train.precision",
                self.train["precision"],
                f"{name}.num_threads",
                num_threads,
                "train",
            )
        else:  # resolve (offline) and check now: a missing or wrong model fails before any work
            self._resolved = resolve_model(self.model, kind="cross-encoder", setting=f"{name}.model")
            check_cross_encoder_checkpoint(self._resolved, f"{name}.model")

    @property
    def trained(self) -> bool:
        return self.model == "trained"

    def _check_train(self, train: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(train) - set(TRAIN_DEFAULTS))
        if unknown:
            raise ConfigError(
                f"{self.name}.train.{unknown[0]}",
                train[unknown[0]],
                f"known keys: {', '.join(TRAIN_DEFAULTS)}",
            )
        t = {**TRAIN_DEFAULTS, **train}
        p = f"{self.name}.train"
        return {
            "split": str(check_str(f"{p}.split", t["split"])),
            "base_model": check_str(f"{p}.base_model", t["base_model"], allow_none=True),
            "epochs": check_int(f"{p}.epochs", t["epochs"], 1),
            "max_negatives": check_int(f"{p}.max_negatives", t["max_negatives"], 0),
            "max_length": check_int(f"{p}.max_length", t["max_length"], MIN_MAX_LENGTH),
            "seed": check_int(f"{p}.seed", t["seed"]),
            "min_steps": check_int(f"{p}.min_steps", t["min_steps"], 0),
            "precision": check_choice(f"{p}.precision", t["precision"], PRECISIONS),
        }

    def params(self) -> dict[str, Any]:
        p: dict[str, Any] = {
            "model": self.model,
            "depth": self.depth,
            "batch_size": self.batch_size,
            "max_length": self.max_length,
            **self.compute.log_params(),
        }
        if self.trained:
            p["train"] = {**self.train, "base_model_source": self.base_model_source}
            if self.train_compute.bf16:
                p["train"]["precision_native"] = self.train_compute.native
        return p

    def fingerprint(self) -> Fingerprint:
        res: dict[str, Any] = {"activation": _ACTIVATION}
        libs: tuple[str, ...] = LIBRARIES
        if self.trained:
            from ablate.stages.rerank import training, training_pairs

            if self._base is None:
                raise RuntimeError(
                    f"stage {self.name}: its train.base_model follows the corpus language; bind(snapshot, split) "
                    "first"
                )
            res["base_model"] = self._base.fingerprint
            res["recipe"] = training.RECIPE
            res["training_code"] = training.CODE_VERSION
            if self._snapshot is not None:
                res["train_data"] = training_pairs.training_data_fingerprint(self._snapshot, self.train)
        elif self._resolved is not None:
            res["model"] = self._resolved.fingerprint
        params = {k: v for k, v in self.params().items() if k != "num_threads"}  # threads change no score
        if (
            "train" in params
        ):  # where the base model's name came from: the same checkpoint trains the same model
            params["train"] = {k: v for k, v in params["train"].items() if k != "base_model_source"}
        return fingerprint_of(self, params, libraries=libs, resources=res)

    def bind(self, snapshot: Snapshot, split: str) -> CrossEncoderReranker:
        if not self.trained:
            return self
        if self.train["split"] not in snapshot.splits:
            raise ConfigError(
                f"{self.name}.train.split",
                self.train["split"],
                f"the corpus {snapshot.name!r} has splits {', '.join(sorted(snapshot.splits)) or 'none'}; fine-tuning "
                f"needs a split with labelled questions (or a cross-encoder folder as {self.name}.model)",
            )
        base_model, source = encoder_choice(self.train["base_model"], snapshot.language)
        bound = type(self)(
            self.name,
            self.model,
            self.depth,
            self.batch_size,
            self.max_length,
            {**self.train, "base_model": base_model},
            self.compute.precision,
            self.compute.num_threads,
        )
        bound.base_model_source = source
        bound._snapshot = snapshot
        return bound

    def prepare(self, context: StageContext) -> None:
        if self._scorer is not None:
            return
        path = self.model
        if self.trained:
            from ablate.stages.rerank import training

            if self._base is None:
                raise RuntimeError(f"stage {self.name}: bind(snapshot, split) before prepare()")

            path = training.trained_reranker_path(
                context.snapshot,
                self.train,
                context.cache,
                show_progress=context.show_progress,
                num_threads=self.compute.num_threads,
            )
        self._scorer = CrossEncoderScorer(
            path,
            cache=context.cache,
            batch_size=self.batch_size,
            max_length=self.max_length,
            setting=f"{self.name}.model",
            show_progress=context.show_progress,
            compute=self.compute,
        )

    def rerank(self, run: Run, query_text: Mapping[str, str], chunk_text: Mapping[str, str]) -> Run:
        if self._scorer is None:
            raise RuntimeError(f"stage {self.name}: prepare() before rerank()")
        out = self._scorer.rerank(run, query_text, chunk_text, self.depth)
        self.stats.update(self._scorer.stats)
        return out
