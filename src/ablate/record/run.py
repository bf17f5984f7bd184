"""A tracked run read back as plain data (:class:`RecordedRun`, what :mod:`ablate.tracking` returns), and how a
report names the judge of its answers."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ablate.record.keys import metric_key
from ablate.record.names import (
    NONE,
    P_ANSWER_JUDGE,
    P_ANSWER_JUDGE_MODEL,
    P_FUSER,
    P_GENERATOR,
    P_RERANKER,
    P_RETRIEVERS,
    P_SPLIT,
    P_VARIANT,
    T_FAILURE,
    T_FP_PREFIX,
    T_INDEX_SNAPSHOT,
    T_PARAM_SOURCES,
    T_PARENT,
    T_QRELS_HASH,
    T_SNAPSHOT,
    T_SPLIT,
    T_SWEEP_INDEX,
    T_VARIANT,
    T_VARIANT_ORDER,
)
from ablate.record.values import json_list


def judge_label(params: Mapping[str, Any]) -> str | None:
    """How a report names the judge of a run's correctness figures: ``rule``, or ``llm: <model>`` (a ``.gguf`` path
    as its file name); ``None`` for a run without a generator. A run logged before ``answer.judge`` existed was judged
    by the rule."""
    if params.get(P_GENERATOR, NONE) in (None, "", NONE):
        return None
    if str(params.get(P_ANSWER_JUDGE, "rule")) != "llm":
        return "rule"
    model = str(params.get(P_ANSWER_JUDGE_MODEL) or "?").replace("\\", "/").rsplit("/", 1)[-1]
    return f"llm: {model[: -len('.gguf')] if model.endswith('.gguf') else model}"


@dataclass(frozen=True)
class RecordedRun:
    """One tracked run as plain data (what :mod:`ablate.tracking` returns)."""

    run_id: str
    name: str
    experiment_id: str = ""
    status: str = "FINISHED"
    start_time: int = 0
    params: Mapping[str, str] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)
    #: when the run ended (ms since the epoch), None while it runs (or when its process died before ending it)
    end_time: int | None = None

    @property
    def variant(self) -> str:
        return str(self.params.get(P_VARIANT) or self.tags.get(T_VARIANT) or self.name)

    @property
    def variant_order(self) -> float:
        try:
            return float(self.tags.get(T_VARIANT_ORDER, "inf"))
        except ValueError:
            return float("inf")

    @property
    def sweep_index(self) -> int | None:
        """The run's place in its sweep as declared (:data:`T_SWEEP_INDEX`), None outside a sweep."""
        try:
            return int(self.tags[T_SWEEP_INDEX])
        except (KeyError, ValueError):
            return None

    @property
    def split(self) -> str | None:
        return self.tags.get(T_SPLIT) or self.params.get(P_SPLIT)

    @property
    def snapshot(self) -> str | None:
        """The documents the run retrieved from (index snapshot), else the whole corpus fingerprint."""
        return self.tags.get(T_INDEX_SNAPSHOT) or self.tags.get(T_SNAPSHOT)

    @property
    def corpus_files(self) -> str | None:
        """Every corpus file and the chunker (``ablate.snapshot``)."""
        return self.tags.get(T_SNAPSHOT)

    @property
    def qrels_hash(self) -> str | None:
        return self.tags.get(T_QRELS_HASH)

    @property
    def fingerprints(self) -> dict[str, str]:
        """Component -> fingerprint key (stages by name, plus ``snapshot``, ``identity``, ``eval``, ``abstain``)."""
        return {k[len(T_FP_PREFIX) :]: str(v) for k, v in self.tags.items() if k.startswith(T_FP_PREFIX)}

    @property
    def stages(self) -> list[str]:
        """Names of the stages that ran (from the pipeline params)."""
        out = list(json_list(self.params.get(P_RETRIEVERS)))
        for key in (P_FUSER, P_RERANKER, P_GENERATOR):
            v = self.params.get(key)
            if v and v != NONE:
                out.append(v)
        return out

    @property
    def param_sources(self) -> dict[str, str]:
        """Config key a user sets -> the param it feeds (e.g. ``retrieval.window`` -> ``rrf.window``)."""
        raw = self.tags.get(T_PARAM_SOURCES)
        try:
            d = json.loads(raw) if raw else {}
        except ValueError:
            return {}
        return {str(k): str(v) for k, v in d.items()} if isinstance(d, dict) else {}

    @property
    def parent(self) -> str | None:
        return self.tags.get(T_PARENT)

    @property
    def failure(self) -> str:
        return self.tags.get(T_FAILURE, "")

    @property
    def short(self) -> str:
        return f"{self.name} ({self.run_id[:8]})"

    def metric(self, key: str) -> float | None:
        """A library metric key (``ndcg@10``) read back."""
        return self.metrics.get(metric_key(key))
