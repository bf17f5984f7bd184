"""The answer grades journal: every grade of an answer appended as it is made, one JSON object per line.

``labels/<corpus>/answer_journal.jsonl``::

    {"qid": "q025", "answer_sha256": "9f2c...", "answer": "Answer: 38.5 yuan [1]", "grade": "correct", "assessor": "human:alice", "time": "2026-12-04T05:01:02Z"}

``grade`` is ``correct`` (the answer gives a gold answer and nothing that contradicts it), ``partly`` (part of it:
one part of a multi-part answer, the right value with a wrong unit or condition, the right entity among wrong ones)
or ``wrong`` (anything else, a refusal included), or ``null``: the assessor took back their latest grade of that
answer (undo). ``assessor`` says who graded: ``human`` or ``human:<name>`` (a person, by hand or through the page of
``python -m ablate.label serve --answers``), ``llm:<identity>`` (an LLM judge). ``answer_sha256`` is the SHA-256 of
``answer`` (:func:`ablate.labels.answerpool.answer_sha256`): a line is self-contained, so a hand-written journal
needs no pool to be read, and a line whose hash is not that of its answer is refused.

Written and read like the relevance journal, by the same code (:func:`ablate.labels.journal.append_objects`: one
write under an exclusive lock, then fsync, before the page hears OK; a line torn by a crash is cut off to a side file
``answer_journal.jsonl.torn-<time>`` when the journal is next opened, :func:`ablate.labels.journal.cut_torn_tail`);
the latest standing line of an (qid, answer) wins (:func:`latest`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ablate.errors import InputError
from ablate.labels.answerpool import answer_sha256
from ablate.labels.journal import HUMAN, LLM, append_objects, now, read_objects

FIELDS = ("qid", "answer_sha256", "answer", "grade", "assessor", "time")
#: The grades, best first, with their order for the graded (3-level) agreement.
GRADES = ("correct", "partly", "wrong")
LEVEL = {"correct": 2, "partly": 1, "wrong": 0}
#: ``check(qid)`` returns why a question is not the corpus's, or ``None``.
QuestionCheck = Callable[[str], str | None]
_FIX = 'write {"qid", "answer_sha256", "answer", "grade", "assessor", "time"} on each line'


@dataclass(frozen=True)
class AnswerGrade:
    qid: str
    answer_sha256: str
    answer: str
    grade: str | None  # None = the assessor's previous grade of this answer taken back
    assessor: str
    time: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.qid, self.answer_sha256)

    @property
    def kind(self) -> str:
        """``human`` or ``llm`` (the assessor's prefix)."""
        return LLM if self.assessor.startswith(LLM + ":") else HUMAN


def grade(qid: str, answer: str, value: str | None, assessor: str, time: str | None = None) -> AnswerGrade:
    return AnswerGrade(qid, answer_sha256(answer), answer, value, assessor, time or now())


def append(path: Path, grades: AnswerGrade | Sequence[AnswerGrade]) -> None:
    """Append ``grades`` to the journal at ``path``: one write under a lock, then fsync (on disk on return)."""
    items = [grades] if isinstance(grades, AnswerGrade) else list(grades)
    append_objects(path, [asdict(g) for g in items])


def read(path: Path, check: QuestionCheck | None = None) -> list[AnswerGrade]:
    """Every grade of the journal at ``path`` (none when it does not exist), in order. A bad line (not the keys of
    :data:`FIELDS`, a grade not in :data:`GRADES` or null, a hash that is not its answer's, a question ``check``
    refuses) raises :class:`InputError` naming ``path:line``; a torn last line (a crash mid-write) is moved to a side
    file first."""
    return [_grade(obj, where, check) for where, obj in read_objects(path)]


def _grade(obj: object, where: str, check: QuestionCheck | None) -> AnswerGrade:
    if not isinstance(obj, Mapping):
        raise InputError(where, "is not a JSON object", _FIX)
    missing = [k for k in FIELDS if k not in obj]
    if missing:
        raise InputError(where, f"has no {', '.join(repr(k) for k in missing)}", _FIX)
    extra = sorted(set(obj) - set(FIELDS))
    if extra:
        raise InputError(where, f"has unknown key(s) {', '.join(repr(k) for k in extra)}", _FIX)
    for k in ("qid", "answer_sha256", "answer", "assessor", "time"):
        if not isinstance(obj[k], str):
            raise InputError(where, f"{k} is {obj[k]!r}, not a string", _FIX)
    value = obj["grade"]
    if value is not None and value not in GRADES:
        raise InputError(
            where, f"grade {value!r} is not one of {', '.join(GRADES)}", "give one of them, or null (undo)"
        )
    if not (obj["assessor"] == HUMAN or obj["assessor"].startswith((HUMAN + ":", LLM + ":"))):
        raise InputError(
            where,
            f"assessor {obj['assessor']!r} is not human, human:<name> or llm:<model>",
            "name who graded",
        )
    if check is not None and (problem := check(obj["qid"])):
        raise InputError(where, problem, "grade answers to this corpus's questions; fix or delete that line")
    if answer_sha256(obj["answer"]) != obj["answer_sha256"]:
        raise InputError(
            where,
            f"answer_sha256 {obj['answer_sha256'][:12]!r} is not the SHA-256 of its answer (an unknown answer)",
            "copy the answer_sha256 and answer of one row of the answers pool",
        )
    return AnswerGrade(obj["qid"], obj["answer_sha256"], obj["answer"], value, obj["assessor"], obj["time"])


def latest(grades: Iterable[AnswerGrade]) -> dict[tuple[str, str], AnswerGrade]:
    """The standing grade of each (qid, answer_sha256): the last line wins; an undo (grade ``None``) takes back that
    assessor's latest grade of the answer, and the one before stands again (or none)."""
    stacks: dict[tuple[str, str], list[AnswerGrade]] = {}
    for g in grades:
        stack = stacks.setdefault(g.key, [])
        if g.grade is None:
            for k in range(len(stack) - 1, -1, -1):
                if stack[k].assessor == g.assessor:
                    del stack[k]
                    break
        else:
            stack.append(g)
    return {key: stack[-1] for key, stack in stacks.items() if stack}


def human(grades: Iterable[AnswerGrade]) -> dict[tuple[str, str], AnswerGrade]:
    """The standing human grade of each answer (the latest of any person's; LLM grades left out)."""
    return latest(g for g in grades if g.kind == HUMAN)
