"""Leakage-safe dev/test splits (seed 000, "防止评测泄漏": near-duplicate questions stay on one side).

A question tuned on dev and a near-copy of it in test make the test score read high. :func:`build_split` therefore
moves *groups* of questions, never single ones:

1. **Evidence**: questions that share any gold (grade >= ``relevance_level``) evidence document are one group.
   Chunk-level labels are lifted to their document, so no gold document *and* no gold clause can sit on both sides;
   versions of one document (the same ``series``) count as one document. A query's declared ``group`` also merges.
2. **Near-duplicates**: questions identical after :func:`~ablate.data.grouping.normalise_question` (NFKC, casefold,
   punctuation removed, whitespace collapsed; works for Chinese) merge, and so do questions whose embedding cosine is
   >= ``threshold`` under the given :class:`Embedder` (``threshold=None``: no embedding, recorded in the report).
3. **Assignment** (:func:`assign_groups`): groups are ordered by sha256 of (seed, their sorted question ids); each in
   turn goes to the side further below its target count (dev: ``dev * n`` questions; ties go to dev). Same inputs
   and seed give byte-identical files.

Questions without gold evidence are assigned too (alone, or with their near-duplicates). The result is written as
``split.tsv`` (``qid<TAB>split<TAB>group``) and a leakage report (``report.json``, ``report.md``) whose
verification section recounts, independently of the grouping, what is shared across the sides (all must be 0).

Grouping lives in :mod:`ablate.data.grouping`, the report's verification and sections in :mod:`ablate.data.leakage`,
the files in :mod:`ablate.data.split_files`: a run reads a split file with ``corpus.split_file``
(:func:`~ablate.data.split_files.apply_split_file`); a run on a held-out split marks the file as used
(:func:`~ablate.data.split_files.mark_used_by_test`) and :func:`~ablate.data.split_files.write_split` then refuses to
overwrite it unless forced.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ablate.data.grouping import (
    EVIDENCE_RULE,
    GROUP_BY,
    NORMALISATION_RULE,
    UNIT_RULE,
    Gold,
    check_gold,
    cosine_pairs,
    gold_evidence,
    normalise_question,
    questions_to_split,
)
from ablate.data.leakage import closest_section, groups_section, verify
from ablate.data.snapshot import Snapshot
from ablate.errors import ConfigError, InputError

FORMAT = "ablate-split-1"
DEFAULT_THRESHOLD = 0.9
HEADER = "qid\tsplit\tgroup"
ASSIGNMENT_RULE = (
    "groups in order of sha256(seed, sorted question ids); each goes whole to the side further below its target "
    "count (dev: dev * questions), ties to dev"
)


@dataclass(frozen=True)
class Embedder:
    """Questions -> unit-norm float32 rows (the inner product is the cosine). ``name`` and ``fingerprint`` (what
    determines a vector: model files, settings, library versions) go into the report."""

    name: str
    fingerprint: str
    encode: Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class SplitParams:
    """``dev``: share of the questions for dev (0 < dev < 1); ``seed``: the assignment's seed; ``threshold``: cosine
    at or above which two questions are near-duplicates (``None`` = no embedding); ``from_splits``: split only these
    existing splits' questions (empty = every question in a split); ``closest``: cross-split pairs reported;
    ``group_by``: see :data:`GROUP_BY`."""

    dev: float = 0.5
    seed: int = 0
    threshold: float | None = DEFAULT_THRESHOLD
    from_splits: tuple[str, ...] = ()
    relevance_level: int = 1
    closest: int = 20
    group_by: str = "doc"

    def __post_init__(self) -> None:
        if self.group_by not in GROUP_BY:
            raise ConfigError("--group-by", self.group_by, f"valid options: {', '.join(GROUP_BY)}")
        if not (isinstance(self.dev, (int, float)) and 0 < self.dev < 1):
            raise ConfigError(
                "--dev", self.dev, "give the dev share as a number between 0 and 1, e.g. --dev 0.5"
            )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError("--seed", self.seed, "give a non-negative integer")
        t = self.threshold
        if t is not None and not (isinstance(t, (int, float)) and 0 < t <= 1):
            raise ConfigError(
                "--threshold", t, "give a cosine in (0, 1], or none to skip the embedding check"
            )


@dataclass
class SplitResult:
    """``side``: qid -> dev/test; ``group``: qid -> its group's id (the group's smallest question id)."""

    side: dict[str, str]
    group: dict[str, str]
    report: dict[str, Any] = field(default_factory=dict)

    def tsv(self) -> str:
        rows = [f"{q}\t{self.side[q]}\t{self.group[q]}" for q in sorted(self.side)]
        return "\n".join([HEADER, *rows]) + "\n"


class _UnionFind:
    def __init__(self, items: Iterable[str]) -> None:
        self.parent = {x: x for x in items}

    def find(self, x: str) -> str:
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: str, b: str) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        lo, hi = sorted((ra, rb))
        self.parent[hi] = lo
        return True

    def groups(self) -> list[list[str]]:
        out: dict[str, list[str]] = {}
        for x in sorted(self.parent):
            out.setdefault(self.find(x), []).append(x)
        return sorted(out.values())


def assign_groups(groups: Sequence[Sequence[str]], dev: float, seed: int) -> dict[str, str]:
    """qid -> ``dev``/``test`` by :data:`ASSIGNMENT_RULE`; whole groups only."""
    n = sum(len(g) for g in groups)
    target = {"dev": dev * n, "test": (1 - dev) * n}
    count = {"dev": 0, "test": 0}

    def order(g: Sequence[str]) -> str:
        return hashlib.sha256("\t".join([str(seed), *sorted(g)]).encode("utf-8")).hexdigest()

    side: dict[str, str] = {}
    for g in sorted(groups, key=order):
        s = "dev" if target["dev"] - count["dev"] >= target["test"] - count["test"] else "test"
        count[s] += len(g)
        side.update(dict.fromkeys(g, s))
    return side


# --------------------------------------------------------------------------------------------------------------------
# The split


def _merge_without_embeddings(
    snapshot: Snapshot, qids: Sequence[str], gold: dict[str, Gold]
) -> tuple[_UnionFind, dict[str, int], list[str], list[tuple[int, int]]]:
    """Steps 1 and the first half of 2: questions that share gold evidence or a declared ``group``, and questions
    identical after :func:`normalise_question`, merged; with the merge counts, the normalised texts and the
    identical pairs (for the report)."""
    uf = _UnionFind(qids)
    merges = dict.fromkeys(("evidence", "declared_group", "same_text", "cosine"), 0)
    by_key: dict[str, str] = {}
    for q in qids:
        keys = sorted(gold[q].keys) + ([f"group:{g}"] if (g := snapshot.queries[q].group) else [])
        for k in keys:
            first = by_key.setdefault(k, q)
            merges["declared_group" if k.startswith("group:") else "evidence"] += uf.union(first, q)
    norm = [normalise_question(snapshot.queries[q].text) for q in qids]
    by_text: dict[str, int] = {}
    same_text: list[tuple[int, int]] = []
    for i, t in enumerate(norm):
        j = by_text.setdefault(t, i)
        if j != i:
            same_text.append((j, i))
            merges["same_text"] += uf.union(qids[j], qids[i])
    return uf, merges, norm, same_text


def evidence_groups(
    snapshot: Snapshot, qids: Sequence[str], relevance_level: int = 1, group_by: str = "doc"
) -> dict[str, str]:
    """Each question's cluster as the split tool forms it (shared gold document or series, declared ``group``,
    identical normalised text; no embedding): qid -> the cluster's smallest question id. Questions that move together
    in a score, for intervals that resample clusters (the regression gate)."""
    gold = gold_evidence(snapshot, list(qids), relevance_level, group_by)
    uf = _merge_without_embeddings(snapshot, list(qids), gold)[0]
    return {q: g[0] for g in uf.groups() for q in g}


def question_clusters(
    snapshot: Snapshot, qids: Sequence[str], relevance_level: int = 1
) -> tuple[dict[str, str], dict[str, str]]:
    """Each question's evidence cluster (:func:`evidence_groups`) and its declared ``group`` ("" if none), for the
    questions of ``qids`` the snapshot has; a question it does not have is its own cluster with no group."""
    known = [q for q in qids if q in snapshot.queries]
    evidence = evidence_groups(snapshot, known, relevance_level) if known else {}
    cluster = {q: evidence.get(q, q) for q in qids}
    declared = {q: (snapshot.queries[q].group or "") if q in snapshot.queries else "" for q in qids}
    return cluster, declared


def build_split(snapshot: Snapshot, params: SplitParams, embedder: Embedder | None = None) -> SplitResult:
    """Group, merge near-duplicates, assign whole groups, verify; see the module docstring."""
    qids = questions_to_split(snapshot, params.from_splits)
    if len(qids) < 2:
        raise InputError(
            str(snapshot.root),
            f"has {len(qids)} question(s) to split",
            "a split needs at least two questions",
        )
    gold = gold_evidence(snapshot, qids, params.relevance_level, params.group_by)
    check_gold(snapshot, qids, gold, params.relevance_level)
    uf, merges, norm, same_text = _merge_without_embeddings(snapshot, qids, gold)
    vectors: np.ndarray | None = None
    near: list[tuple[int, int, float]] = []
    if params.threshold is not None:
        if embedder is None:
            raise ConfigError(
                "--threshold", params.threshold, "an encoder is needed; or pass --threshold none"
            )
        vectors = np.asarray(embedder.encode([snapshot.queries[q].text for q in qids]), dtype=np.float32)
        near = cosine_pairs(vectors, params.threshold)
        for i, j, _ in near:
            merges["cosine"] += uf.union(qids[i], qids[j])
    groups = uf.groups()
    side = assign_groups(groups, params.dev, params.seed)
    group = {q: g[0] for g in groups for q in g}
    result = SplitResult(side, group)
    result.report = _report(
        snapshot, params, embedder, qids, gold, groups, result, merges, norm, same_text, near, vectors
    )
    return result


def _report(
    snapshot: Snapshot,
    params: SplitParams,
    embedder: Embedder | None,
    qids: list[str],
    gold: dict[str, Gold],
    groups: list[list[str]],
    result: SplitResult,
    merges: dict[str, int],
    norm: list[str],
    same_text: list[tuple[int, int]],
    near: list[tuple[int, int, float]],
    vectors: np.ndarray | None,
) -> dict[str, Any]:
    """The leakage report as plain JSON-ready data (no times, so equal inputs give equal bytes)."""
    side = result.side
    n_dev = sum(s == "dev" for s in side.values())
    selected = set(qids)
    outside: dict[str, int] = {}
    for name, members in sorted(snapshot.splits.items()):
        rest = [q for q in members if q not in selected]
        if rest:
            rest_gold = gold_evidence(snapshot, rest, params.relevance_level, params.group_by)
            keys = set().union(*(g.keys for g in rest_gold.values()))
            outside[name] = sum(bool(gold[q].keys & keys) for q in qids)
    return {
        "format": FORMAT,
        "corpus": {
            "name": snapshot.name,
            "path": str(snapshot.root),
            "fingerprint": snapshot.fingerprint,
            "qrels_unit": snapshot.qrels_unit,
        },
        "parameters": {
            "dev": params.dev,
            "seed": params.seed,
            "from": list(params.from_splits) or "every split",
            "relevance_level": params.relevance_level,
            "group_by": params.group_by,
            "evidence_rule": EVIDENCE_RULE if params.group_by == "doc" else UNIT_RULE,
            "normalisation": NORMALISATION_RULE,
            "cosine_threshold": params.threshold,
            "encoder": None
            if embedder is None or params.threshold is None
            else {"name": embedder.name, "fingerprint": embedder.fingerprint},
            "assignment_rule": ASSIGNMENT_RULE,
        },
        "counts": {
            "questions": len(qids),
            "dev": n_dev,
            "test": len(qids) - n_dev,
            "dev_share": round(n_dev / len(qids), 4),
            "with_gold": sum(bool(gold[q].units) for q in qids),
            "without_gold": sum(not gold[q].units for q in qids),
        },
        "groups": groups_section(groups, side, gold, merges),
        "near_duplicate_pairs": {
            "same_text": len(same_text),
            "cosine": None if vectors is None else len(near),
        },
        "closest_cross_pairs": closest_section(snapshot, qids, side, vectors, norm, params.closest),
        "verification": verify(snapshot, side, gold, norm, qids, near, same_text, params.group_by),
        "outside": {
            "note": "questions of the split set whose gold evidence is also gold for a question left out of it",
            "sharing_gold_with": outside,
        },
    }
