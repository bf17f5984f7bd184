"""The leakage report's parts: the verification that recounts what the two sides share, the groups, the closest
cross-split pairs, and the report in Markdown.

:func:`verify` works from the labels and the near-duplicate pairs alone, independently of the grouping that made the
split, so a grouping bug shows as a non-zero count. :func:`ablate.data.splitting.build_split` assembles
``report.json`` from these parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ablate.data.grouping import Gold
from ablate.data.snapshot import Snapshot

SIDES = ("dev", "test")


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


def groups_section(
    groups: list[list[str]], side: dict[str, str], gold: dict[str, Gold], merges: dict[str, int]
) -> dict[str, Any]:
    """The report's ``groups`` section: counts per side, the size histogram, the merges, the largest groups."""
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


def closest_section(
    snapshot: Snapshot,
    qids: list[str],
    side: dict[str, str],
    vectors: np.ndarray | None,
    norm: list[str],
    n: int,
) -> dict[str, Any]:
    """The report's ``closest_cross_pairs`` section: the ``n`` closest (dev, test) questions, with texts."""
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
