"""What a stage is: a typed protocol per kind, a fingerprint that is its only identity, and checked parameters.

A **stage** is one step of a retrieval pipeline that a config group option builds (Hydra ``_target_``): a retriever
(query -> ranked chunks), a fuser (ranked lists -> one list), a reranker (a list -> the same list reordered); the
answer stage adds a generator. Its constructor takes plain typed parameters, checks them (:func:`check_int` and
friends from :mod:`ablate.checks`, handed on here: one-line :class:`~ablate.errors.ConfigError` naming
``<stage>.<param>``) and does no heavy work, so a whole sweep's configs can be validated before anything runs.

Lifecycle, all driven by :mod:`ablate.runner`:

1. ``bind(snapshot, split)`` returns the stage with everything that depends on the corpus resolved (a tokenizer's
   language, the labels the oracle reads, a trained reranker's training data). Pure and cheap.
2. ``fingerprint()`` (after ``bind``) is the stage's identity: its class, its parameters as they run, the versions of
   the libraries it uses, the ``CODE_VERSION`` its module declares, content fingerprints of the resources it reads
   (model files, tokenizer rules) and :data:`CONTRACT_VERSION` (the rules shared by all stages). Every cache a stage
   feeds (candidate lists, embeddings, reranker scores, trained models) is keyed by it, its parameters are logged under
   its name, and the one-factor check compares it. Bumping a module's ``CODE_VERSION`` or upgrading a library it
   names therefore misses every cache entry it made.
3. ``prepare(context)`` does the heavy work (indexing, model loading, training) once; a runner keeps prepared stages
   for the next job of a sweep.

Every stage keeps ``stats`` (counters of the work it did: ``passages_encoded``, ``pairs_scored``, ...); the runner logs
the per-job increase as ``<stage>.<counter>``.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from importlib import metadata
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from ablate.cache import Cache, key_of

# the checks a stage's constructor calls, kept with every other setting's check and handed on here for stage authors
from ablate.checks import check_bool, check_choice, check_float, check_int, check_str

__all__ = [
    "CONTRACT_VERSION",
    "KINDS",
    "Fingerprint",
    "Fuser",
    "Generator",
    "Reranker",
    "Retriever",
    "Stage",
    "StageContext",
    "check_bool",
    "check_choice",
    "check_float",
    "check_int",
    "check_str",
    "delta",
    "fingerprint_of",
    "kind_of",
    "library_versions",
]

if TYPE_CHECKING:
    from ablate.data.snapshot import Snapshot
    from ablate.data.types import Query, Run
    from ablate.progress import AnswerSink

#: Version of the rules every stage shares (ranks from 1, the tie rule, the permission mask, hit construction).
#: Part of every fingerprint: bump it when one of those rules changes.
CONTRACT_VERSION = "ablate-stage-contract/1"

#: Stage kinds and what each does.
KINDS: dict[str, str] = {
    "retriever": "query -> ranked chunks of the snapshot (permission mask applied inside)",
    "fuser": "several ranked lists -> one list",
    "reranker": "a ranked list -> the same candidates reordered",
    "generator": "a question and the first context_k passages -> an answer that cites them",
}


@functools.cache
def _installed_version(dist: str) -> str | None:
    # importlib.metadata scans the installed distributions on every call (experiments/results/bench_design.md); a
    # process's installed versions do not change under it, and every fingerprint asks for them
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def library_versions(*dists: str) -> dict[str, str | None]:
    """Installed versions of the named distributions (``None`` when not installed)."""
    return {d: _installed_version(d) for d in dists}


@dataclass(frozen=True)
class Fingerprint:
    """The identity of a stage as it runs. :attr:`key` (sha256 of everything but the stage's name) keys its caches;
    two differently named stages with the same class and parameters share cache entries."""

    stage: str
    cls: str
    code_version: str
    params: Mapping[str, Any]
    libraries: Mapping[str, str | None] = field(default_factory=dict)
    resources: Mapping[str, Any] = field(default_factory=dict)
    contract: str = CONTRACT_VERSION

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, everything included (logged as ``components.json``)."""
        return {
            "stage": self.stage,
            "class": self.cls,
            "code_version": self.code_version,
            "params": dict(self.params),
            "libraries": dict(self.libraries),
            "resources": dict(self.resources),
            "contract": self.contract,
        }

    @cached_property
    def key(self) -> str:
        d = self.as_dict()
        d.pop("stage")
        return key_of("stage-fingerprint", d)


def fingerprint_of(
    stage: Any,
    params: Mapping[str, Any],
    libraries: Sequence[str] = (),
    resources: Mapping[str, Any] | None = None,
) -> Fingerprint:
    """The :class:`Fingerprint` of ``stage``: its class, ``params``, the versions of ``libraries`` and the
    ``CODE_VERSION`` declared by the module that defines its class (required: a stage module without one is a bug)."""
    cls = type(stage)
    module = sys.modules[cls.__module__]
    code_version = getattr(module, "CODE_VERSION", None)
    if not isinstance(code_version, str) or not code_version:
        raise TypeError(
            f"{cls.__module__} must declare CODE_VERSION (a string) to define stage {cls.__name__}"
        )
    return Fingerprint(
        stage=str(getattr(stage, "name", cls.__name__)),
        cls=f"{cls.__module__}.{cls.__qualname__}",
        code_version=code_version,
        params=dict(params),
        libraries=library_versions(*libraries),
        resources=dict(resources or {}),
        contract=CONTRACT_VERSION,
    )


@dataclass
class StageContext:
    """What ``prepare`` may use: the bound snapshot, the content cache, and whether to show progress."""

    snapshot: Snapshot
    cache: Cache
    show_progress: bool = False


# ---------------------------------------------------------------------------------------------------------------
# Protocols (one per kind). Stages are plain classes that satisfy them; nothing needs to inherit.


@runtime_checkable
class Stage(Protocol):
    name: str
    kind: ClassVar[str]
    stats: dict[str, float]

    def params(self) -> dict[str, Any]:
        """The parameters as they run (typed, after validation); logged as ``<name>.<key>``."""
        ...

    def fingerprint(self) -> Fingerprint: ...


@runtime_checkable
class Retriever(Stage, Protocol):
    """Ranks the snapshot's chunks for each query. ``cacheable``: whether its candidate lists may be stored (the
    oracle reads the labels, so caching it would only duplicate them)."""

    cacheable: ClassVar[bool]

    def bind(self, snapshot: Snapshot, split: str) -> Retriever: ...

    def prepare(self, context: StageContext) -> None: ...

    def search(self, queries: Sequence[Query], depth: int, allowed: np.ndarray | None = None) -> Run:
        """Top-``depth`` chunks per query, ranked by ``TIE_RULE``; chunks where ``allowed`` is False never appear."""
        ...


@runtime_checkable
class Fuser(Stage, Protocol):
    """Fuses the retrievers' lists, each cut at ``window``; fused scores only rank."""

    window: int

    def fuse(self, runs: Sequence[Run], depth: int) -> Run: ...


@runtime_checkable
class Reranker(Stage, Protocol):
    """Reorders the first ``depth`` candidates of a run (never adds candidates)."""

    depth: int

    def bind(self, snapshot: Snapshot, split: str) -> Reranker: ...

    def prepare(self, context: StageContext) -> None: ...

    def rerank(self, run: Run, query_text: Mapping[str, str], chunk_text: Mapping[str, str]) -> Run: ...


@runtime_checkable
class Generator(Stage, Protocol):
    """Answers each question from the first ``context_k`` passages of the final ranking (the answer stage)."""

    context_k: int
    repeats: int

    def bind(self, snapshot: Snapshot, split: str) -> Generator: ...

    def prepare(self, context: StageContext) -> None: ...

    def generate(
        self,
        prompts: Sequence[Any],
        cache: Cache,
        show_progress: bool = False,
        answers: AnswerSink | None = None,
    ) -> list[list[Any]]: ...

    def cost(self, tokens_in: int, tokens_out: int) -> float | None: ...


def kind_of(stage: object) -> str:
    """The stage kind of an instantiated config node (``retriever``, ``fuser``, ``reranker``), else a TypeError."""
    kind = getattr(type(stage), "kind", None)
    if kind not in KINDS:
        raise TypeError(
            f"{type(stage).__qualname__} is not a stage (its class has no kind among {', '.join(KINDS)})"
        )
    return str(kind)


def delta(after: Mapping[str, float], before: Mapping[str, float]) -> dict[str, float]:
    """Per-counter increase from ``before`` to ``after`` (counters absent before count from 0)."""
    return {k: float(v) - float(before.get(k, 0.0)) for k, v in after.items()}
