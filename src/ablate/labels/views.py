"""The two views of a committed label version: what people said, and what the LLM assessor said.

A pair an LLM assessor judged and a person judged too keeps both judgements in the journal (neither overwrites the
other). A version (``python -m ablate.label commit``) then holds:

* the **headline** qrels, ``<split>.tsv``: the human grade where a pair has one, else the assessor's (what a run on
  the version and ``ablate.report --labels`` score);
* when an ``llm:`` assessor judged any pair, the **assessor view**, ``assessor/<split>.tsv``: the same files where
  every pair an LLM assessor judged carries its grade (the standing one of the latest LLM line; with repeats, their
  majority), all other pairs as in the headline. ``assessor/version.json`` makes the folder a label version of its
  own (``corpus.labels=<version>/assessor`` scores a run on it);
* ``judged.csv`` (``split,qid,unit,human,assessor``): every pair the journal judged, with its standing human grade
  and its standing LLM grade (empty: none), so who judged what is read, not guessed;
* ``answer_grades.csv`` (``qid,answer_sha256,human,assessor``), when the answer journal holds grades: the same for
  answers (the headline grade of an answer is the human one where there is one, else the LLM judge's).

``version.json`` names the assessor view (``"views": {"assessor": "assessor"}``), the random human sample
(``human_sample``, ``answer_human_sample``: :mod:`ablate.labels.sample`), and the sha256 of every file above
(``files``), checked on every read (:func:`ablate.data.labelsets.read_label_version`).

A question is **checked** when it is in the sample and every pair of it that the assessor judged also has a human
judgement (a sampled question the assessor judged nothing of is checked: its two views agree). For answers: every
answer of it the LLM judge graded also has a human grade. :func:`read_views` reads all of it back.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic

from ablate.data.labelsets import read_label_version
from ablate.data.qrels import read_qrels
from ablate.errors import InputError
from ablate.labels.journal import LLM, Line, human, latest
from ablate.labels.kind import ANSWERS, RELEVANCE
from ablate.labels.sample import HumanSample, from_record, hand

#: The assessor view's folder in a version, and the files that say who judged what.
ASSESSOR = "assessor"
JUDGED = "judged.csv"
JUDGED_COLUMNS = ("split", "qid", "unit", "human", "assessor")
ANSWER_GRADES = "answer_grades.csv"
ANSWER_COLUMNS = ("qid", "answer_sha256", "human", "assessor")

Grades = dict[str, dict[str, dict[str, int]]]  # split -> qid -> unit -> grade
Key = tuple[str, str]


@dataclass(frozen=True)
class Standing(Generic[Line]):
    """A journal's standing lines per item: the people's (``human``: the latest of anyone's) and the LLM
    assessors' (``llm``: the latest of any ``llm:`` assessor's)."""

    human: dict[Key, Line]
    llm: dict[Key, Line]

    @property
    def headline(self) -> dict[Key, Line]:
        """The human line where an item has one, else the LLM's."""
        return {**self.llm, **self.human}


def standing(lines: Iterable[Line]) -> Standing[Line]:
    """Split ``lines`` into the people's standing lines and the LLM assessors' (an undo takes back its assessor's
    own line only)."""
    lines = list(lines)
    return Standing(human(lines), latest(j for j in lines if j.who == LLM))


# -------------------------------------------------------------------------------------------------------- writing
def assessor_rows(
    files: Mapping[str, Sequence[tuple[str, str, int]]], llm: Mapping[Key, Line]
) -> dict[str, list[tuple[str, str, int]]]:
    """The headline ``files`` (split -> rows) with every pair in ``llm`` carrying the LLM's grade."""
    return {
        s: [(q, u, int(llm[(q, u)].grade)) if (q, u) in llm else (q, u, g) for q, u, g in rows]  # type: ignore[arg-type]
        for s, rows in files.items()
    }


def _csv(header: Sequence[str], rows: Iterable[Sequence[object]]) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(("" if x is None else x for x in r) for r in rows)
    return buf.getvalue().encode("utf-8")


def judged_csv(files: Mapping[str, Sequence[tuple[str, str, int]]], st: Standing[Line]) -> bytes:
    """``judged.csv``: each pair of ``files`` the journal judged, by split then file order."""
    rows = [
        (s, q, u, _grade(st.human, (q, u)), _grade(st.llm, (q, u)))
        for s in sorted(files)
        for q, u, _ in files[s]
        if (q, u) in st.human or (q, u) in st.llm
    ]
    return _csv(JUDGED_COLUMNS, rows)


def answer_csv(st: Standing[Line]) -> bytes:
    """``answer_grades.csv``: each answer the answer journal graded, by (qid, answer_sha256)."""
    keys = sorted(set(st.human) | set(st.llm))
    return _csv(ANSWER_COLUMNS, [(q, a, _grade(st.human, (q, a)), _grade(st.llm, (q, a))) for q, a in keys])


def _grade(lines: Mapping[Key, Line], key: Key) -> object:
    line = lines.get(key)
    return None if line is None else line.grade


def hand_checked(by_question: Mapping[str, Sequence[tuple[object, object]]]) -> set[str]:
    """The questions people checked without a draw: the assessor judged some of their items, and every one of those
    has a human judgement too (``by_question``: qid -> (human, assessor) grade of each judged item)."""
    return {
        q
        for q, items in by_question.items()
        if any(a is not None for _, a in items) and all(h is not None for h, a in items if a is not None)
    }


def checked(
    sample: HumanSample | None, by_question: Mapping[str, Sequence[tuple[object, object]]]
) -> frozenset[str]:
    """The questions of ``sample`` every item of which the assessor judged also has a human judgement."""
    if sample is None:
        return frozenset()
    return frozenset(
        q for q in sample.questions if all(h is not None for h, a in by_question.get(q, ()) if a is not None)
    )


def sample_record(
    drawn: HumanSample | None, by_question: Mapping[str, Sequence[tuple[object, object]]]
) -> HumanSample | None:
    """What a version records as its human sample: the draw when there is one, else the questions people checked by
    hand (``None`` when none)."""
    if drawn is not None:
        return drawn
    picked = hand_checked(by_question)
    return hand(picked) if picked else None


def items_by_question(rows: Iterable[tuple[str, object, object]]) -> dict[str, list[tuple[object, object]]]:
    """``(qid, human, assessor)`` rows grouped: qid -> its items' (human, assessor) grades."""
    out: dict[str, list[tuple[object, object]]] = {}
    for q, h, a in rows:
        out.setdefault(q, []).append((h, a))
    return out


# -------------------------------------------------------------------------------------------------------- reading
@dataclass(frozen=True)
class AnswerViews:
    """A version's answer grades: ``headline`` ((qid, answer_sha256) -> the human grade where there is one, else the
    LLM judge's), ``assessor`` (the LLM judge's where it graded, else the headline; ``None`` when no LLM graded),
    ``human`` (the human grades alone), the answer sample and its checked questions."""

    headline: dict[Key, str]
    assessor: dict[Key, str] | None
    human: dict[Key, str]
    sample: HumanSample | None
    checked: frozenset[str]


@dataclass(frozen=True)
class LabelViews:
    """A version's views (module docstring): ``headline`` and ``assessor`` (split -> qid -> unit -> grade; assessor
    ``None`` when no LLM judged), the relevance ``sample``, its ``checked`` questions, the pairs with a human
    judgement (``human``), the assessor view's folder (a label version of its own) and the answers' views."""

    headline: Grades
    assessor: Grades | None
    sample: HumanSample | None
    checked: frozenset[str]
    human: frozenset[Key] = frozenset()
    assessor_folder: Path | None = None
    answers: AnswerViews | None = None


def _tsvs(folder: Path, unit: str) -> Grades:
    return {f.stem: dict(read_qrels(f, unit, name=f.stem).judgements) for f in sorted(folder.glob("*.tsv"))}


def _rows(path: Path, columns: Sequence[str]) -> list[dict[str, str]]:
    fix = "restore the version as committed, or commit again (python -m ablate.label commit --version NAME)"
    if not path.is_file():
        raise InputError(str(path), "is missing", fix)
    reader = csv.DictReader(io.StringIO(path.read_text(encoding="utf-8")))
    if tuple(reader.fieldnames or ()) != tuple(columns):
        raise InputError(str(path), f"its header is not {','.join(columns)}", fix)
    return list(reader)


def _int(x: str) -> int | None:
    return int(x) if x != "" else None


def _sample(raw: Mapping[str, object], key: str, where: str) -> HumanSample | None:
    value = raw.get(key)
    return None if value is None else from_record(value, f"{where} {key}")


def read_views(folder: Path) -> LabelViews:
    """The views of the label version at ``folder``, every file checked against its recorded sha256 first (an
    edited file is one line naming it)."""
    lv = read_label_version(folder)
    raw, root = lv.raw, lv.folder
    unit = str(raw.get("unit") or "doc")
    where = str(root / "version.json")
    headline = _tsvs(root, unit)
    view = (raw.get("views") or {}).get(ASSESSOR) if isinstance(raw.get("views"), dict) else None
    sub = root / str(view) if view else None
    assessor = _tsvs(sub, unit) if sub is not None else None
    judged = (
        [
            (r["qid"], r["unit"], _int(r["human"]), _int(r["assessor"]))
            for r in _rows(root / JUDGED, JUDGED_COLUMNS)
        ]
        if (root / JUDGED).is_file()
        else []  # a version made before versions recorded who judged what
    )
    sample = _sample(raw, RELEVANCE.sample_key, where)
    by_q = items_by_question((q, h, a) for q, _, h, a in judged)
    return LabelViews(
        headline=headline,
        assessor=assessor,
        sample=sample,
        checked=checked(sample, by_q),
        human=frozenset((q, u) for q, u, h, _ in judged if h is not None),
        assessor_folder=sub,
        answers=_answer_views(root, raw, where),
    )


def _answer_views(root: Path, raw: Mapping[str, object], where: str) -> AnswerViews | None:
    sample = _sample(raw, ANSWERS.sample_key, where)
    if not (root / ANSWER_GRADES).is_file():
        return None if sample is None else AnswerViews({}, None, {}, sample, frozenset())
    rows = [
        (r["qid"], r["answer_sha256"], r["human"] or None, r["assessor"] or None)
        for r in _rows(root / ANSWER_GRADES, ANSWER_COLUMNS)
    ]
    headline = {(q, a): str(h or j) for q, a, h, j in rows}
    llm = {(q, a): j for q, a, _, j in rows if j is not None}
    return AnswerViews(
        headline=headline,
        assessor={**headline, **llm} if llm else None,
        human={(q, a): h for q, a, h, _ in rows if h is not None},
        sample=sample,
        checked=checked(sample, items_by_question((q, h, j) for q, _, h, j in rows)),
    )
