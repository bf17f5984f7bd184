"""Leakage-safe dev/test splits (seed 000, "防止评测泄漏": near-duplicate questions stay on one side).

A question tuned on dev and a near-copy of it in test make the test score read high. :func:`build_split` therefore
moves *groups* of questions, never single ones:

1. **Evidence**: questions that share any gold (grade >= ``relevance_level``) evidence document are one group.
   Chunk-level labels are lifted to their document, so no gold document *and* no gold clause can sit on both sides;
   versions of one document (the same ``series``) count as one document. A query's declared ``group`` also merges.
2. **Near-duplicates**: questions identical after :func:`normalise_question` (NFKC, casefold, punctuation removed,
   whitespace collapsed; works for Chinese) merge, and so do questions whose embedding cosine is >= ``threshold``
   under the given :class:`Embedder` (``threshold=None``: no embedding, recorded in the report).
3. **Assignment** (:func:`assign_groups`): groups are ordered by sha256 of (seed, their sorted question ids); each in
   turn goes to the side further below its target count (dev: ``dev * n`` questions; ties go to dev). Same inputs
   and seed give byte-identical files.

Questions without gold evidence are assigned too (alone, or with their near-duplicates). The result is written as
``split.tsv`` (``qid<TAB>split<TAB>group``) and a leakage report (``report.json``, ``report.md``) whose
verification section recounts, independently of the grouping, what is shared across the sides (all must be 0).

A run reads a split file with ``corpus.split_file`` (:func:`apply_split_file`); a run on a held-out split marks the
file as used (:func:`mark_used_by_test`) and :func:`write_split` then refuses to overwrite it unless forced.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from ablate.cache import atomic_write_bytes, key_of
from ablate.data.corpus import Snapshot
from ablate.data.qrels import read_text_lines
from ablate.data.types import Qrels
from ablate.errors import AblateError, ConfigError, InputError

FORMAT = "ablate-split-1"
SIDES = ("dev", "test")
#: Split names a split file may assign (the held-out rules know ``test``; the reranker trains on ``train``).
SPLIT_NAMES = ("train", "dev", "test")
DEFAULT_THRESHOLD = 0.9
#: What shared evidence merges: ``doc`` (default) a gold document (or series); ``unit`` only the same gold label unit
#: (for chunk labels: a clause), so two clauses of one document may sit on different sides.
GROUP_BY = ("doc", "unit")
SPLIT_FILE, REPORT_JSON, REPORT_MD, USED_MARKER = "split.tsv", "report.json", "report.md", "used_by_test.json"
HEADER = "qid\tsplit\tgroup"
ASSIGNMENT_RULE = (
    "groups in order of sha256(seed, sorted question ids); each goes whole to the side further below its target "
    "count (dev: dev * questions), ties to dev"
)
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


# --------------------------------------------------------------------------------------------------------------------
# Building blocks


def normalise_question(text: str) -> str:
    """NFKC, casefold, punctuation (Unicode category P*) removed, whitespace collapsed: what two questions must share
    to count as the same text. NFKC folds full-width forms, so Chinese punctuation goes too."""
    t = unicodedata.normalize("NFKC", text).casefold()
    t = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in t)
    return " ".join(t.split())


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


def _bigrams(text: str) -> frozenset[str]:
    t = text.replace(" ", "")
    return frozenset(t[i : i + 2] for i in range(max(len(t) - 1, 1)))


def closest_cross_pairs(
    dev: Sequence[int], test: Sequence[int], vectors: np.ndarray | None, norm: Sequence[str], n: int
) -> tuple[str, list[tuple[int, int, float]]]:
    """The ``n`` most similar (dev, test) index pairs: by cosine with vectors, else by character-bigram Jaccard of
    the normalised texts. Ties: lower indices first."""
    if not dev or not test or n <= 0:
        return ("cosine" if vectors is not None else "bigram_jaccard"), []
    if vectors is not None:
        sims = vectors[list(dev)] @ vectors[list(test)].T
        measure = "cosine"
    else:
        grams = {i: _bigrams(norm[i]) for i in (*dev, *test)}
        sims = np.array(
            [[len(grams[a] & grams[b]) / max(len(grams[a] | grams[b]), 1) for b in test] for a in dev]
        )
        measure = "bigram_jaccard"
    flat = [(-float(sims[a, b]), dev[a], test[b]) for a in range(len(dev)) for b in range(len(test))]
    best = sorted(flat)[:n]
    return measure, [(i, j, -s) for s, i, j in best]


# --------------------------------------------------------------------------------------------------------------------
# The split


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


def verify(
    snapshot: Snapshot,
    side: dict[str, str],
    gold: dict[str, Gold],
    norm: Sequence[str],
    qids: Sequence[str],
    near: Sequence[tuple[int, int, float]],
    same_text: Sequence[tuple[int, int]],
    group_by: str = "doc",
) -> dict[str, Any]:
    """Recount, from the labels and pairs alone, what the two sides share (every count must be 0; with
    ``group_by="unit"`` shared documents are reported but allowed)."""

    def shared(attr: str) -> int:
        on: dict[str, set[str]] = {s: set() for s in SIDES}
        for q, s in side.items():
            on[s] |= getattr(gold[q], attr)
        return len(on["dev"] & on["test"])

    declared: dict[str, set[str]] = {}
    for q in qids:
        if g := snapshot.queries[q].group:
            declared.setdefault(g, set()).add(side[q])
    checks = {
        "gold_documents_shared": shared("docs"),
        "gold_units_shared": shared("units"),
        "same_text_pairs_split": sum(side[qids[i]] != side[qids[j]] for i, j in same_text),
        "cosine_pairs_split": sum(side[qids[i]] != side[qids[j]] for i, j, _ in near),
        "declared_groups_split": sum(len(s) > 1 for s in declared.values()),
    }
    by_text: dict[str, set[str]] = {}
    for q, t in zip(qids, norm, strict=True):
        by_text.setdefault(t, set()).add(side[q])
    checks["same_text_across_sides"] = sum(len(s) > 1 for s in by_text.values())
    allowed = {"gold_documents_shared"} if group_by == "unit" else set()
    return {**checks, "ok": not any(v for k, v in checks.items() if k not in allowed)}


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
        "groups": _groups_section(groups, side, gold, merges),
        "near_duplicate_pairs": {
            "same_text": len(same_text),
            "cosine": None if vectors is None else len(near),
        },
        "closest_cross_pairs": _closest_section(snapshot, qids, side, vectors, norm, params.closest),
        "verification": verify(snapshot, side, gold, norm, qids, near, same_text, params.group_by),
        "outside": {
            "note": "questions of the split set whose gold evidence is also gold for a question left out of it",
            "sharing_gold_with": outside,
        },
    }


def _groups_section(
    groups: list[list[str]], side: dict[str, str], gold: dict[str, Gold], merges: dict[str, int]
) -> dict[str, Any]:
    sizes: dict[int, int] = {}
    for g in groups:
        sizes[len(g)] = sizes.get(len(g), 0) + 1
    largest = sorted(groups, key=lambda g: (-len(g), g[0]))[:10]
    return {
        "count": len(groups),
        "dev": sum(side[g[0]] == "dev" for g in groups),
        "test": sum(side[g[0]] == "test" for g in groups),
        "size_histogram": [[k, sizes[k]] for k in sorted(sizes)],
        "merges": merges,
        "largest": [
            {
                "group": g[0],
                "size": len(g),
                "side": side[g[0]],
                "evidence": sorted(set().union(*(gold[q].keys for q in g)))[:8],
                "questions": g[:12],
            }
            for g in largest
        ],
    }


def _closest_section(
    snapshot: Snapshot,
    qids: list[str],
    side: dict[str, str],
    vectors: np.ndarray | None,
    norm: list[str],
    n: int,
) -> dict[str, Any]:
    index = {q: i for i, q in enumerate(qids)}
    dev_i = [index[q] for q in qids if side[q] == "dev"]
    test_i = [index[q] for q in qids if side[q] == "test"]
    measure, pairs = closest_cross_pairs(dev_i, test_i, vectors, norm, n)
    return {
        "measure": measure,
        "pairs": [
            {
                "dev": qids[i],
                "test": qids[j],
                "similarity": round(s, 4),
                "dev_text": snapshot.queries[qids[i]].text,
                "test_text": snapshot.queries[qids[j]].text,
            }
            for i, j, s in pairs
        ],
    }


def report_markdown(report: dict[str, Any]) -> str:
    """The leakage report for people (the same content as ``report.json``)."""
    p, c, g, v = report["parameters"], report["counts"], report["groups"], report["verification"]
    enc = p["encoder"]
    lines = [
        f"# Split of {report['corpus']['name']}: dev {p['dev']}, seed {p['seed']}",
        "",
        f"- corpus: `{report['corpus']['path']}` (snapshot {report['corpus']['fingerprint'][:12]}, "
        f"labels at {report['corpus']['qrels_unit']} level); questions from: {p['from']}",
        f"- evidence: {p['evidence_rule']} (relevance level {p['relevance_level']})",
        f"- near-duplicates: same text after {p['normalisation']}; "
        + (
            f"cosine >= {p['cosine_threshold']} with `{enc['name']}` (encoder {enc['fingerprint'][:12]})"
            if enc
            else "no embedding check (threshold none)"
        ),
        f"- assignment: {p['assignment_rule']}",
        "",
        "## Counts",
        "",
        f"{c['questions']} questions: dev {c['dev']} ({c['dev_share']:.1%}), test {c['test']}; "
        f"{c['with_gold']} with gold evidence, {c['without_gold']} without.",
        f"{g['count']} groups: dev {g['dev']}, test {g['test']}. Sizes (size: groups): "
        + ", ".join(f"{k}: {n}" for k, n in g["size_histogram"])
        + ".",
        "Merges: " + ", ".join(f"{k} {n}" for k, n in g["merges"].items()) + ".",
        f"Near-duplicate pairs found: same text {report['near_duplicate_pairs']['same_text']}, cosine "
        f"{_or(report['near_duplicate_pairs']['cosine'], 'not checked')}.",
        "",
        "## Largest groups",
        "",
        "| group | size | side | evidence | questions |",
        "|---|---|---|---|---|",
        *(
            f"| {x['group']} | {x['size']} | {x['side']} | {', '.join(x['evidence'])} | {', '.join(x['questions'])} |"
            for x in g["largest"]
        ),
        "",
        f"## Closest cross-split pairs ({report['closest_cross_pairs']['measure']})",
        "",
        "| similarity | dev | test |",
        "|---|---|---|",
        *(
            f"| {x['similarity']:.4f} | {x['dev']}: {_cell(x['dev_text'])} | {x['test']}: {_cell(x['test_text'])} |"
            for x in report["closest_cross_pairs"]["pairs"]
        ),
        "",
        "## Verification (every count must be 0)",
        "",
        *(
            f"- {k}: {val}"
            + (
                " (allowed: grouped by label unit)"
                if k == "gold_documents_shared" and p["group_by"] == "unit"
                else ""
            )
            for k, val in v.items()
            if k != "ok"
        ),
        f"- verdict: {'no leakage found' if v['ok'] else 'LEAKAGE: do not use this split'}",
        "",
        f"Outside the split set: {report['outside']['note']}: "
        + (", ".join(f"{k} {n}" for k, n in report["outside"]["sharing_gold_with"].items()) or "none")
        + ".",
    ]
    return "\n".join(lines) + "\n"


def _or(value: object, default: str) -> str:
    return default if value is None else str(value)


def _cell(text: str, width: int = 120) -> str:
    t = " ".join(text.split()).replace("|", "\\|")
    return t if len(t) <= width else t[: width - 1] + "…"


# --------------------------------------------------------------------------------------------------------------------
# Files: writing a split, the used-by-test marker, reading a split into a snapshot


def used_by_test(folder: Path) -> list[dict[str, Any]]:
    """The test runs recorded in ``folder/used_by_test.json`` (empty when none)."""
    p = folder / USED_MARKER
    if not p.is_file():
        return []
    lines, _ = read_text_lines(p)
    try:
        data = json.loads("\n".join(lines))
    except json.JSONDecodeError as e:
        raise InputError(
            str(p), f"invalid JSON ({e.msg})", "restore the file; it records test runs"
        ) from None
    uses = data.get("uses") if isinstance(data, dict) else None
    return [u for u in uses if isinstance(u, dict)] if isinstance(uses, list) else []


def write_split(result: SplitResult, out: Path, force: bool = False) -> list[Path]:
    """Write ``split.tsv``, ``report.json`` and ``report.md`` into ``out`` atomically. A folder whose split a test
    run already used is refused unless ``force`` (which then drops the marker and records the runs in the report)."""
    uses = used_by_test(out)
    if uses and not force:
        runs = ", ".join(f"{u.get('run_id')} ({u.get('split')}, {u.get('time')})" for u in uses[:5])
        raise AblateError(
            f"{out / SPLIT_FILE}: was used by test run(s) {runs}; a redrawn split would reuse the held-out set. "
            "Fix: write to another --out, or pass --force to overwrite it anyway"
        )
    report = dict(result.report)
    if uses:
        report["overwrote_split_used_by"] = uses
    written = [out / SPLIT_FILE, out / REPORT_JSON, out / REPORT_MD]
    blobs = [
        result.tsv(),
        json.dumps(report, indent=2, ensure_ascii=False) + "\n",
        report_markdown(report),
    ]
    try:
        for path, text in zip(written, blobs, strict=True):
            atomic_write_bytes(path, text.encode("utf-8"))
        if uses:
            (out / USED_MARKER).unlink()
    except OSError as e:
        raise AblateError(
            f"{out}: cannot write the split ({e.strerror}). Fix: give a writable --out"
        ) from None
    return written


def mark_used_by_test(split_file: str | Path, run_id: str, split: str) -> Path:
    """Record, next to ``split_file``, that a run on the held-out ``split`` used it (appended; atomic)."""
    path = Path(split_file).expanduser().resolve()
    marker = path.parent / USED_MARKER
    uses = used_by_test(path.parent)
    uses.append(
        {
            "run_id": run_id,
            "split": split,
            "split_file": path.name,
            "split_file_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
    )
    atomic_write_bytes(marker, (json.dumps({"uses": uses}, indent=2) + "\n").encode("utf-8"))
    return marker


_NAME = re.compile(r"^\S+$")


def file_stamp(path: str | Path | None) -> tuple[int, int]:
    """``(mtime_ns, size)`` of a split file (``(0, -1)`` when absent): what an in-process memo of it is keyed by."""
    try:
        st = Path(path).stat() if path else None
    except OSError:
        st = None
    return (st.st_mtime_ns, st.st_size) if st else (0, -1)


def read_split_file(path: str | Path, snapshot: Snapshot) -> tuple[dict[str, str], str]:
    """``{qid: split}`` from a split file (header optional; a third column, the group, is informational) and the
    file's sha256; every problem names ``file:line`` and the fix."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise InputError(
            str(p), "does not exist", "set corpus.split_file to a split.tsv written by python -m ablate.split"
        )
    lines, sha = read_text_lines(p)
    fix_make = f"make the split for this corpus: python -m ablate.split {snapshot.root}"
    out: dict[str, str] = {}
    where_of: dict[str, str] = {}
    for lineno, line in enumerate(lines, start=1):
        if not line.strip() or (lineno == 1 and line.split("\t")[0] == "qid"):
            continue
        where = f"{p}:{lineno}"
        cols = line.split("\t")
        if len(cols) not in (2, 3) or not all(_NAME.match(c) for c in cols):
            raise InputError(where, f"expected qid<TAB>split<TAB>group, got {line!r}", fix_make)
        qid, split = cols[0], cols[1]
        if split not in SPLIT_NAMES:
            raise InputError(where, f"split {split!r} is not one of {', '.join(SPLIT_NAMES)}", fix_make)
        if qid not in snapshot.queries:
            raise InputError(
                where,
                f"query id {qid!r} is not in {snapshot.root / 'queries.jsonl'}",
                f"{fix_make} (wrong corpus?)",
            )
        if qid in out:
            raise InputError(
                where,
                f"query {qid!r} is already assigned at {where_of[qid]} (to {out[qid]!r})",
                "keep each question on one side",
            )
        out[qid], where_of[qid] = split, where
    if not out:
        raise InputError(str(p), "assigns no question", fix_make)
    return out, sha


def apply_split_file(snapshot: Snapshot, path: str | Path) -> Snapshot:
    """A new snapshot whose splits follow the split file: each listed question moves to its side with all its
    judgements (the corpus's qrels merged); unlisted questions keep their split; emptied splits disappear. The
    file's sha256 enters the snapshot's files, so its fingerprint and manifest change with it."""
    side, sha = read_split_file(path, snapshot)
    judged = merged_judgements(snapshot)
    splits: dict[str, list[str]] = {
        s: [q for q in qids if q not in side] for s, qids in snapshot.splits.items()
    }
    for qid in sorted(side):
        splits.setdefault(side[qid], []).append(qid)
    splits = {s: qids for s, qids in splits.items() if qids}
    qrels: dict[str, Qrels] = {}
    for s, qids in splits.items():
        old = snapshot.qrels.get(s)
        j: dict[str, dict[str, int]] = {}
        for q in qids:
            src = judged.get(q) if q in side else (old.judgements.get(q) if old is not None else None)
            if src is not None:
                j[q] = dict(src)
        sources = sorted(x.source_sha256 for x in snapshot.qrels.values())
        qrels[s] = Qrels(
            j, unit=snapshot.qrels_unit, name=s, source_sha256=key_of("split-file", sha, sources)
        )
    queries = {
        q: dataclasses.replace(query, split=side[q]) if q in side else query
        for q, query in snapshot.queries.items()
    }
    return dataclasses.replace(
        snapshot, splits=splits, qrels=qrels, queries=queries, files={**snapshot.files, "split_file": sha}
    )
