"""How a run is scored: :class:`EvalSettings` (K values, unit, budget, gain, unjudged results, relevance level,
queries missing from the run), checked when built. What each setting means is in :mod:`ablate.evaluation.rules`."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from ablate.errors import ConfigError

_OPTIONS: dict[str, tuple[str, ...]] = {
    "unit": ("auto", "doc", "chunk"),
    "budget": ("chunks", "docs"),
    "gain": ("exponential", "linear"),
    "unjudged": ("nonrelevant", "condensed"),
    "missing": ("zero", "exclude"),
}


@dataclass(frozen=True)
class EvalSettings:
    """How a run is scored. Invalid values raise :class:`~ablate.errors.ConfigError`; ``ks`` is stored sorted and
    deduplicated."""

    ks: tuple[int, ...] = (1, 3, 5, 10, 20, 50, 100)
    unit: Literal["auto", "doc", "chunk"] = "auto"  # auto = the qrels' unit
    budget: Literal["chunks", "docs"] = "chunks"
    gain: Literal["exponential", "linear"] = "exponential"
    unjudged: Literal["nonrelevant", "condensed"] = "nonrelevant"
    relevance_level: int = 1  # grade >= this counts as relevant (trec_eval's -l)
    missing: Literal["zero", "exclude"] = (
        "zero"  # queries absent from the run: scored 0 or excluded; always counted
    )

    def __post_init__(self) -> None:
        ks: Any = self.ks
        if isinstance(ks, int) and not isinstance(ks, bool):
            ks = (ks,)
        try:
            items = list(ks)
        except TypeError:
            raise ConfigError(
                "eval.ks", self.ks, "give a list of positive integers, e.g. [1, 5, 10]"
            ) from None
        if not items or not all(
            isinstance(k, (int, np.integer)) and not isinstance(k, bool) and k > 0 for k in items
        ):
            raise ConfigError(
                "eval.ks", self.ks, "give a non-empty list of positive integers, e.g. [1, 5, 10]"
            )
        object.__setattr__(self, "ks", tuple(sorted({int(k) for k in items})))
        for key, options in _OPTIONS.items():
            value = getattr(self, key)
            if value not in options:
                raise ConfigError(f"eval.{key}", value, f"valid options: {', '.join(options)}")
        lvl = self.relevance_level
        if not isinstance(lvl, (int, np.integer)) or isinstance(lvl, bool) or lvl < 1:
            raise ConfigError(
                "eval.relevance_level", lvl, "give an integer >= 1 (grade 0 means judged non-relevant)"
            )

    @property
    def max_k(self) -> int:
        return self.ks[-1]

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ks"] = list(self.ks)
        return d


DEFAULT_SETTINGS = EvalSettings()
