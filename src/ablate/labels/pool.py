"""TREC depth-k pooling of the results the labels do not judge.

Per question, a run's *top units* are the first ``depth`` distinct units of its ranking at the labels' unit (chunk
ids, or the documents of the chunks for document labels), each at the rank of its first result: the ranking as the
run saw it (its permission and date filtering already happened inside retrieval). The pool holds, per question,
every unit in the top units of any run that the labels do not judge for that question (any grade counts as judged:
0 and the negative grades too), with the runs that returned it and the best rank any of them gave it.

Each run's *judged share* is the share of its top units, over all its questions, that the labels judge: the part
of the ranking its metrics rest on. Pure: plain typed arguments (the entry point reads the runs and the labels).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from ablate.errors import ConfigError
from ablate.labels.poolfile import PoolEntry


@dataclass(frozen=True)
class RunShare:
    """One run's top units over all its questions (``units``) and how many of them the labels judge."""

    units: int
    judged: int

    @property
    def share(self) -> float:
        """``judged / units``; 1.0 for a run with no result (nothing of it is unknown)."""
        return self.judged / self.units if self.units else 1.0


@dataclass
class Pooled:
    """The pool's entries (by question, then best rank, then unit) and each run's judged share."""

    entries: list[PoolEntry]
    shares: dict[str, RunShare]

    @property
    def questions(self) -> int:
        return len({e.qid for e in self.entries})


def check_depth(depth: int) -> int:
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ConfigError(
            "--depth", depth, "give the number of top units of each run to pool, e.g. --depth 10"
        )
    return depth


def top_units(ranked: Sequence[str], depth: int) -> list[str]:
    """The first ``depth`` distinct units of ``ranked`` (a unit repeated later keeps its first rank)."""
    out: dict[str, None] = {}
    for u in ranked:
        if u not in out:
            out[u] = None
            if len(out) == depth:
                break
    return list(out)


def pool(
    rankings: Mapping[str, Mapping[str, Sequence[str]]],
    judged: Mapping[str, Collection[str]],
    depth: int,
) -> Pooled:
    """Pool ``rankings`` (run label -> question -> its ranked units at the labels' unit) against ``judged``
    (question -> the units the labels judge for it) to ``depth``: see the module docstring. The ``runs`` of an
    entry follow the order of ``rankings``."""
    check_depth(depth)
    found: dict[tuple[str, str], tuple[int, list[str]]] = {}
    shares: dict[str, RunShare] = {}
    for label, per_question in rankings.items():
        units = hits = 0
        for qid, ranked in per_question.items():
            known = judged.get(qid, ())
            top = top_units(ranked, depth)
            units += len(top)
            for rank, unit in enumerate(top, start=1):
                if unit in known:
                    hits += 1
                    continue
                best, runs = found.setdefault((qid, unit), (rank, []))
                runs.append(label)
                if rank < best:
                    found[(qid, unit)] = (rank, runs)
        shares[label] = RunShare(units, hits)
    entries = [PoolEntry(qid, unit, tuple(runs), best) for (qid, unit), (best, runs) in found.items()]
    entries.sort(key=lambda e: (e.qid, e.best_rank, e.unit))
    return Pooled(entries, shares)
