"""The grade legend a judge sees: what each grade of a corpus's labels means.

A corpus states it in ``corpus.yaml``::

    grades:
      2: answers directly
      1: helps
      0: not relevant

Without one, the legend follows the labels and the corpus's language: the grades its label files use (0 always
included: a judge must be able to say "not relevant"), with a default text for the usual scales (binary 1/0, graded
2/1/0, TREC's 3/2/1/0) in English or Chinese, else ``grade N``. A judgement outside the legend is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ablate.data.qrels import MAX_GRADE, MIN_GRADE
from ablate.errors import InputError

_TEXT = {
    "en": {
        (1, 0): {1: "relevant", 0: "not relevant"},
        (2, 1, 0): {2: "answers directly", 1: "helps", 0: "not relevant"},
        (3, 2, 1, 0): {3: "answers perfectly", 2: "highly relevant", 1: "related", 0: "not relevant"},
    },
    "zh": {
        (1, 0): {1: "相关", 0: "不相关"},
        (2, 1, 0): {2: "直接回答", 1: "有帮助", 0: "不相关"},
        (3, 2, 1, 0): {3: "完整回答", 2: "高度相关", 1: "有关", 0: "不相关"},
    },
}


@dataclass(frozen=True)
class Legend:
    """Grades from highest to lowest with their meaning; ``source`` says where it came from."""

    grades: tuple[tuple[int, str], ...]
    source: str  # "corpus.yaml" or "labels"

    @property
    def values(self) -> list[int]:
        return [g for g, _ in self.grades]

    def text(self, grade: int) -> str:
        return dict(self.grades)[grade]

    def as_dict(self) -> dict[str, str]:
        return {str(g): t for g, t in self.grades}


def legend(
    manifest: Mapping[str, Any], used: Iterable[int], language: str = "en", where: str = "corpus.yaml"
) -> Legend:
    """The corpus's legend: ``manifest["grades"]`` when given (validated: integer grades in the qrels range, a
    text each, 0 included), else one built from the grades ``used`` by its labels."""
    declared = manifest.get("grades")
    if declared is not None:
        return Legend(_declared(declared, where), "corpus.yaml")
    grades = sorted({int(g) for g in used if g >= 0} | {0}, reverse=True)
    if len(grades) == 1:
        grades = [1, 0]
    texts = _TEXT.get("zh" if language.startswith("zh") else "en", _TEXT["en"])
    known = texts.get(tuple(grades))
    word = "等级" if language.startswith("zh") else "grade"
    return Legend(tuple((g, known[g] if known else f"{word} {g}") for g in grades), "labels")


def _declared(declared: object, where: str) -> tuple[tuple[int, str], ...]:
    fix = "write grades: as a mapping from integer grade to its meaning, e.g. {2: answers directly, 1: helps, 0: not relevant}"
    if not isinstance(declared, Mapping) or not declared:
        raise InputError(where, f"grades is {declared!r}, not a mapping", fix)
    out: dict[int, str] = {}
    for k, v in declared.items():
        try:
            g = int(k)
        except (TypeError, ValueError):
            raise InputError(where, f"grade {k!r} is not an integer", fix) from None
        if isinstance(k, bool) or str(g) != str(k).strip() or not MIN_GRADE <= g <= MAX_GRADE:
            raise InputError(where, f"grade {k!r} is not an integer in [{MIN_GRADE}, {MAX_GRADE}]", fix)
        if not isinstance(v, str) or not v.strip():
            raise InputError(where, f"grade {g} has no text", fix)
        out[g] = v.strip()
    if 0 not in out:
        raise InputError(
            where, "grades has no 0 (not relevant)", "add 0: not relevant, so a judge can say so"
        )
    return tuple(sorted(out.items(), reverse=True))
