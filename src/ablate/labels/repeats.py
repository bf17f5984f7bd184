"""Judge noise: an assessor asked several times about one item (``python -m ablate.label judge --repeats R``).

Each repeat is a sampled generation with its own seed (repeat ``r`` uses ``generator.seed + r``); its grade is
recorded (``None``: an output without a score). The assessor's grade of the item is the **majority** of the graded
repeats; a tie goes to the **lower** grade (of two grades equally often given, the less relevant one: a tie is
doubt, and doubt should not add relevance). An item **flips** when its graded repeats are not all the same grade;
the **flip rate** is the share of the items with a grade whose repeats flip.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from ablate.labels.journal import LLM, Judgement, latest


def majority(grades: Sequence[int | None]) -> int | None:
    """The most frequent grade of ``grades`` (``None``s left out; a tie: the lowest of the tied); ``None`` when no
    repeat has a grade."""
    counts = Counter(g for g in grades if g is not None)
    if not counts:
        return None
    top = max(counts.values())
    return min(g for g, n in counts.items() if n == top)


def flipped(grades: Sequence[int | None]) -> bool:
    """Whether the graded repeats disagree (two or more distinct grades)."""
    return len({g for g in grades if g is not None}) > 1


def flip_rate(items: Iterable[Sequence[int | None]]) -> tuple[float | None, int, int]:
    """``(rate, flipped, items)`` over the items that have a grade (at least one graded repeat); rate ``None`` when
    there is none."""
    graded = [g for g in items if any(x is not None for x in g)]
    k = sum(flipped(g) for g in graded)
    return (k / len(graded) if graded else None), k, len(graded)


def flipped_items(lines: Iterable[Judgement]) -> frozenset[tuple[str, str]]:
    """The items whose standing LLM judgement (the latest of any ``llm:`` assessor's) has repeats that flip."""
    standing = latest(j for j in lines if j.who == LLM)
    return frozenset(k for k, j in standing.items() if j.repeats and flipped(j.repeats))
