"""CombSUM fusion (Fox & Shaw 1994): a candidate's fused score is the sum of its scores over the lists, each list's
scores min-max normalised to [0, 1] first (``normalize=minmax``) or taken as they are (``none``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ablate.data.types import Hit, Run, rank_hits
from ablate.stages.base import Fingerprint, check_choice, check_int, fingerprint_of

CODE_VERSION = "ablate-combsum/1"


def _normalised(hits: Sequence[Hit], how: str) -> dict[str, float]:
    scores = {h.chunk_id: h.score for h in hits}
    if how == "none" or not scores:
        return scores
    lo, hi = min(scores.values()), max(scores.values())
    return {c: (s - lo) / (hi - lo) if hi > lo else 1.0 for c, s in scores.items()}


class CombSUM:
    """The CombSUM fusion stage (``conf/fusion/combsum.yaml``): ``window`` (candidates each retriever hands to fusion)
    and ``normalize`` (``minmax`` | ``none``)."""

    kind: ClassVar[str] = "fuser"

    def __init__(self, name: str = "combsum", window: int = 100, normalize: str = "minmax") -> None:
        self.name = name
        self.window = check_int(f"{name}.window", window, 1)
        self.normalize = check_choice(f"{name}.normalize", normalize, ("minmax", "none"))
        self.stats: dict[str, float] = {}

    def params(self) -> dict[str, Any]:
        return {"window": self.window, "normalize": self.normalize}

    def fingerprint(self) -> Fingerprint:
        return fingerprint_of(self, self.params())

    def fuse(self, runs: Sequence[Run], depth: int) -> Run:
        out: dict[str, list[Hit]] = {}
        for qid in dict.fromkeys(q for r in runs for q in r.results):
            total: dict[str, float] = {}
            first: dict[str, Hit] = {}
            for r in runs:
                hits = r.get(qid)[: self.window]
                for c, s in _normalised(hits, self.normalize).items():
                    total[c] = total.get(c, 0.0) + s
                for h in hits:
                    first.setdefault(h.chunk_id, h)
            fused = [Hit(c, first[c].doc_id, s, first[c].version) for c, s in total.items()]
            out[qid] = rank_hits(fused)[:depth]
        return Run(self.name, out, {"fusion": "combsum", "inputs": [r.name for r in runs]})
