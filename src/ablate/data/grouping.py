"""Which questions must sit on one side of a split: their gold evidence and their near-duplicates.

Questions that share gold evidence (:func:`gold_evidence`, keyed by :data:`GROUP_BY`), read the same after
:func:`normalise_question`, or embed at a cosine at or above the threshold (:func:`cosine_pairs`) are merged into one
group by :func:`ablate.data.splitting.build_split`; :func:`check_gold` refuses a question set that cannot be grouped by
its evidence at all.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ablate.data.snapshot import Snapshot
from ablate.errors import ConfigError, InputError

#: What shared evidence merges: ``doc`` (default) a gold document (or series); ``unit`` only the same gold label unit
#: (for chunk labels: a clause), so two clauses of one document may sit on different sides.
GROUP_BY = ("doc", "unit")
EVIDENCE_RULE = (
    "questions sharing a gold (grade >= relevance_level) document are one group; chunk labels count as their "
    "document; versions of one series count as one document; a declared query group merges too"
)
UNIT_RULE = (
    "questions sharing a gold (grade >= relevance_level) label unit (document or clause, as labelled) are one "
    "group; a declared query group merges too"
)
NORMALISATION_RULE = "NFKC, casefold, punctuation removed, whitespace collapsed"
_BLOCK = 1024  # rows of the cosine matrix computed at once


def normalise_question(text: str) -> str:
    """NFKC, casefold, punctuation (Unicode category P*) removed, whitespace collapsed: what two questions must share
    to count as the same text. NFKC folds full-width forms, so Chinese punctuation goes too."""
    t = unicodedata.normalize("NFKC", text).casefold()
    t = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in t)
    return " ".join(t.split())


def questions_to_split(snapshot: Snapshot, from_splits: Sequence[str] = ()) -> list[str]:
    """Every question in a split (judged in a qrels file or declaring ``split``), or those of ``from_splits``."""
    for s in from_splits:
        if s not in snapshot.splits:
            have = ", ".join(sorted(snapshot.splits)) or "none"
            raise ConfigError(
                "--from", s, f"the corpus {snapshot.name!r} has splits: {have}; choose among them"
            )
    chosen = from_splits or tuple(snapshot.splits)
    return sorted({q for s in chosen for q in snapshot.splits[s]})


def merged_judgements(snapshot: Snapshot) -> dict[str, dict[str, int]]:
    """Every query's judgements over all qrels splits (a unit judged twice keeps its highest grade)."""
    out: dict[str, dict[str, int]] = {}
    for name in sorted(snapshot.qrels):
        for qid, judged in snapshot.qrels[name].judgements.items():
            mine = out.setdefault(qid, {})
            for uid, g in judged.items():
                mine[uid] = max(g, mine.get(uid, g))
    return out


@dataclass(frozen=True)
class Gold:
    """A question's gold evidence: label units (doc or chunk ids), their documents, and the grouping keys."""

    units: frozenset[str]
    docs: frozenset[str]
    keys: frozenset[str]


def gold_evidence(
    snapshot: Snapshot, qids: Iterable[str], relevance_level: int = 1, group_by: str = "doc"
) -> dict[str, Gold]:
    judged = merged_judgements(snapshot)
    c2d = snapshot.chunk_to_doc
    out: dict[str, Gold] = {}
    for q in qids:
        units = frozenset(u for u, g in judged.get(q, {}).items() if g >= relevance_level)
        docs = frozenset(c2d[u] if snapshot.qrels_unit == "chunk" else u for u in units)
        if group_by == "unit":
            keys = frozenset(f"unit:{u}" for u in units)
        else:
            keys = frozenset(
                f"series:{d.series}" if (d := snapshot.documents[doc]).series else f"doc:{doc}"
                for doc in docs
            )
        out[q] = Gold(units, docs, keys)
    return out


def cosine_pairs(vectors: np.ndarray, threshold: float) -> list[tuple[int, int, float]]:
    """Index pairs ``i < j`` whose rows' inner product is >= ``threshold``, with it (rows are unit-norm)."""
    out: list[tuple[int, int, float]] = []
    n = vectors.shape[0]
    for i0 in range(0, n, _BLOCK):
        sims = vectors[i0 : i0 + _BLOCK] @ vectors.T
        for i, j in np.argwhere(sims >= threshold):
            if i0 + i < j:
                out.append((int(i0 + i), int(j), float(sims[i, j])))
    return out


def check_gold(snapshot: Snapshot, qids: Sequence[str], gold: dict[str, Gold], relevance_level: int) -> None:
    """Refuse a split set in which no question has gold evidence: questions could not be grouped by what answers
    them, so the main leakage check could not run, and a report saying "no leakage found" would claim what was never
    checked. Nothing is lost: a split without any usable label cannot be scored either (a run refuses it)."""
    if any(gold[q].units for q in qids):
        return
    merged = merged_judgements(snapshot)
    judged = sum(len(merged.get(q, {})) for q in qids)
    raise InputError(
        str(snapshot.root / "qrels"),
        f"none of the {len(qids)} questions to split has a gold label (a grade >= {relevance_level}"
        + (f"; their {judged} judgements are all below it" if judged else "; they have no judgement")
        + "), so questions cannot be grouped by their evidence and leakage cannot be checked",
        "add graded labels (qrels/<split>.tsv: query-id<TAB>corpus-id<TAB>score) for the questions"
        + (", or lower --relevance-level" if judged else ""),
    )
