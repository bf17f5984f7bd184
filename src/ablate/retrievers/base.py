"""The small protocol every retriever implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from ablate.types import Query, Run


@runtime_checkable
class Retriever(Protocol):
    name: str

    def fingerprint(self) -> dict[str, object]:
        """Everything that determines this retriever's rankings (parameters, model fingerprint, tokenizer)."""
        ...

    def search(self, queries: Sequence[Query], depth: int, allowed: np.ndarray | None = None) -> Run:
        """Top-``depth`` chunks per query, ranked by ``types.TIE_RULE``; chunks where ``allowed`` is False never appear."""
        ...
