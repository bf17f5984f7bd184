"""The journals: every judgement appended as it is made, one JSON object per line; one journal per kind of label
(:mod:`ablate.labels.kind`).

``labels/<corpus>/journal.jsonl`` (relevance)::

    {"qid": "q025", "unit": "INV-120#check", "grade": 1, "assessor": "human:alice", "time": "2026-12-03T19:40:02Z", "pool": "C-top10"}

``grade`` is an integer of the corpus's grade legend (:mod:`ablate.labels.legend`); ``pool`` names the pool the pair
came from (``""`` when none). An LLM assessor asked several times (``judge --repeats R``) adds ``"repeats"``, the grade
of each repeat in order (``null``: an output without a score), and ``grade`` is their majority
(:mod:`ablate.labels.repeats`)::

    {"qid": "q025", "unit": "INV-120#check", "grade": 1, "assessor": "llm:...", "time": "...", "pool": "C-top10", "repeats": [2, 1, 1]}
 ``labels/<corpus>/answer_journal.jsonl`` (answers)::

    {"qid": "q025", "answer_sha256": "9f2c...", "answer": "Answer: 38.5 yuan [1]", "grade": "correct", "assessor": "human:alice", "time": "2026-12-04T05:01:02Z"}

``grade`` is ``correct`` (the answer gives a gold answer and nothing that contradicts it), ``partly`` (part of it:
one part of a multi-part answer, the right value with a wrong unit or condition, the right entity among wrong ones)
or ``wrong`` (anything else, a refusal included). ``answer_sha256`` is the SHA-256 of ``answer``
(:func:`ablate.labels.kind.answer_sha256`): a line is self-contained, so a hand-written journal needs no pool to be
read, and a line whose hash is not that of its answer is refused.

In both, a ``grade`` of ``null`` means the assessor took back their latest judgement of that item (undo);
``assessor`` says who judged: ``human:<name>`` (``human`` alone too, in the answer journal) or ``llm:<model
identity>``. The latest standing line of an item wins (:func:`latest`).

Each judgement is one ``write`` of one whole line to a file opened for appending, under an exclusive lock, followed by
``fsync``: a closed tab, a killed server or a power cut loses at most the judgement being written, and the next start
reads every line before it. A line torn by a crash mid-write (bytes after the last newline) is cut off to a side file
``<journal>.torn-<time>`` the next time the journal is opened, to read or to append, with one ``warning:`` line
naming both files (:func:`cut_torn_tail`), so it is never glued to the next judgement.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from ablate.errors import InputError
from ablate.labels.kind import ANSWER_GRADES, answer_sha256

FIELDS = ("qid", "unit", "grade", "assessor", "time", "pool")
#: Keys a relevance line may add: the grades of an assessor's repeats.
OPTIONAL = ("repeats",)
ANSWER_FIELDS = ("qid", "answer_sha256", "answer", "grade", "assessor", "time")
HUMAN, LLM = "human", "llm"

#: ``check(qid, item)`` returns why a (question, unit or answer) is not the corpus's, or ``None``.
PairCheck = Callable[[str, str], str | None]


class _Line:
    """What both kinds of journal line share: who judged, and the item they judged (``key``)."""

    qid: str
    assessor: str

    @property
    def who(self) -> str:
        """``human`` or ``llm`` (the assessor's prefix)."""
        return LLM if self.assessor.startswith(LLM + ":") else HUMAN


@dataclass(frozen=True)
class Judgement(_Line):
    """A line of the relevance journal."""

    qid: str
    unit: str
    grade: int | None  # None = the assessor's previous judgement of this pair taken back
    assessor: str
    time: str
    pool: str = ""
    repeats: tuple[int | None, ...] | None = None  # each repeat's grade (judge --repeats R, R > 1)

    @property
    def key(self) -> tuple[str, str]:
        return (self.qid, self.unit)


@dataclass(frozen=True)
class AnswerGrade(_Line):
    """A line of the answer journal."""

    qid: str
    answer_sha256: str
    answer: str
    grade: str | None  # None = the assessor's previous grade of this answer taken back
    assessor: str
    time: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.qid, self.answer_sha256)


Line = TypeVar("Line", Judgement, AnswerGrade)


def now() -> str:
    """The current time in UTC, ISO 8601 to the second (``2026-12-03T19:40:02Z``)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def judgement(
    qid: str,
    unit: str,
    grade: int | None,
    assessor: str,
    pool: str = "",
    time: str | None = None,
    repeats: tuple[int | None, ...] | None = None,
) -> Judgement:
    return Judgement(qid, unit, grade, assessor, time or now(), pool, repeats)


def grade(qid: str, answer: str, value: str | None, assessor: str, time: str | None = None) -> AnswerGrade:
    return AnswerGrade(qid, answer_sha256(answer), answer, value, assessor, time or now())


def append(path: Path, lines: Judgement | AnswerGrade | Sequence[Judgement | AnswerGrade]) -> None:
    """Append ``lines`` to the journal at ``path`` (created with its folder when missing): one write under an
    exclusive lock, then fsync, so the lines are on disk when this returns."""
    items = [lines] if isinstance(lines, Judgement | AnswerGrade) else list(lines)
    append_objects(path, [as_object(j) for j in items])


def as_object(line: Judgement | AnswerGrade) -> dict[str, object]:
    """A line as the journal writes it: its fields, an optional one only when set."""
    obj = asdict(line)
    for k in OPTIONAL:
        if obj.get(k, 0) is None:
            del obj[k]
    return obj


def append_objects(path: Path, objects: Sequence[Mapping[str, object]]) -> None:
    """Append each of ``objects`` as one JSON line to ``path`` (created with its folder when missing): under an
    exclusive lock, a torn tail cut off first (:func:`cut_torn_tail`), then one write of the whole lines on a file
    opened for appending, then fsync (both journals are written through here). A write that
    fails part way is taken back before the error is raised, so no line is ever left half-written by this process."""
    if not objects:
        return
    data = "".join(json.dumps(dict(o), ensure_ascii=False) + "\n" for o in objects).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    created = not path.exists()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        cut_torn_tail(fd, path)
        start = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            # one write for a regular file; more only if the kernel takes part of it (a full disk)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, start)
            raise
    finally:
        os.close(fd)  # closing releases the lock
    if created:
        _sync_folder(path.parent)


def _sync_folder(folder: Path) -> None:
    """fsync a folder, so a file just created in it survives a power cut (where the system allows)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _tail(fd: int, size: int) -> bytes:
    """The bytes of the file ``fd`` (``size`` bytes long) after its last newline (all of it when it has none)."""
    block = 1 << 16
    tail = b""
    end = size
    while end > 0:
        start = max(0, end - block)
        chunk = os.pread(fd, end - start, start)
        k = chunk.rfind(b"\n")
        if k >= 0:
            return chunk[k + 1 :] + tail
        tail = chunk + tail
        end = start
    return tail


def cut_torn_tail(fd: int, path: Path) -> Path | None:
    """Make the journal open at ``fd`` (``path``, read-write, locked by the caller) end in a whole line.

    Bytes after its last newline are either a whole JSON value missing only its newline (a file edited by hand):
    the newline is added; or a line torn by a crash mid-append, never acknowledged: they are moved to a side file
    ``<journal>.torn-<UTC time>`` and cut off the journal, and one ``warning:`` line on stderr names both files.
    Either way the next line appended starts a line of its own. Returns the side file, if one was written."""
    size = os.fstat(fd).st_size
    tail = _tail(fd, size)
    if not tail:
        return None
    try:
        if tail.strip():
            json.loads(tail.decode("utf-8"))
        whole = True
    except (UnicodeDecodeError, json.JSONDecodeError):
        whole = False
    if whole:
        os.write(fd, b"\n")
        os.fsync(fd)
        return None
    side = _side_file(path, tail)
    os.ftruncate(fd, size - len(tail))
    os.fsync(fd)
    print(
        f"warning: {path} ended in a partial line of {len(tail)} bytes (a write cut short by a crash, never "
        f"acknowledged): moved it to {side}; every whole line is kept",
        file=sys.stderr,
        flush=True,
    )
    return side


def _side_file(path: Path, data: bytes) -> Path:
    """A new file ``<path>.torn-<UTC time>[-N]`` holding ``data``, on disk when this returns."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for n in range(1000):
        side = path.with_name(f"{path.name}.torn-{stamp}" + (f"-{n}" if n else ""))
        try:
            fd = os.open(side, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        return side
    raise OSError(f"{path}: no free name for its torn tail's side file")


def read_objects(path: Path) -> list[tuple[str, object]]:
    """``(path:line, parsed JSON)`` of every non-blank line of the journal at ``path`` (none when it does not
    exist), read under the journal's lock after a torn tail is cut off (:func:`cut_torn_tail`). A line that is not
    JSON raises :class:`InputError` naming ``path:line``. A journal this process may not write (a read-only copy)
    is read as it is, a torn last line ignored."""
    if not path.exists():
        return []
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND)
        writable = True
    except OSError:  # read-only: read it as it is
        fd = os.open(path, os.O_RDONLY)
        writable = False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if writable else fcntl.LOCK_SH)
        if writable:
            cut_torn_tail(fd, path)
        raw = _read_all(fd)
    finally:
        os.close(fd)
    lines = raw.decode("utf-8", errors="replace").split("\n")
    torn = not raw.endswith(b"\n")
    out: list[tuple[str, object]] = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append((f"{path}:{i}", json.loads(line)))
        except json.JSONDecodeError as e:
            if i == len(lines) and torn:
                break
            raise InputError(
                f"{path}:{i}", f"is not a JSON object ({e.msg})", "fix or delete that line"
            ) from None
    return out


def _read_all(fd: int) -> bytes:
    parts: list[bytes] = []
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        parts.append(chunk)
        offset += len(chunk)
    return b"".join(parts)


def read(
    path: Path,
    check: PairCheck | None = None,
    grades: Iterable[int] | None = None,
) -> list[Judgement]:
    """Every judgement of the relevance journal at ``path`` (none when it does not exist), in order.

    Each line must be a JSON object with the keys of :data:`FIELDS`; ``check`` (when given) must accept its pair and
    ``grades`` (when given) hold its grade. A bad line raises :class:`InputError` naming ``path:line`` and the fix.
    A last line without its newline that does not parse is a write cut short by a crash: it is moved to a side file
    (:func:`cut_torn_tail`; the judgement it held was never acknowledged)."""
    allowed = set(grades) if grades is not None else None
    return [_judgement(obj, where, check, allowed) for where, obj in read_objects(path)]


def read_grades(path: Path, check: PairCheck | None = None) -> list[AnswerGrade]:
    """Every grade of the answer journal at ``path`` (none when it does not exist), in order. A bad line (not the
    keys of :data:`ANSWER_FIELDS`, a grade not in :data:`~ablate.labels.kind.ANSWER_GRADES` or null, a hash that is
    not its answer's, a question ``check`` refuses) raises :class:`InputError` naming ``path:line``; a torn last line
    is moved to a side file first."""
    return [_answer_grade(obj, where, check) for where, obj in read_objects(path)]


def _fields(
    obj: object, where: str, fields: Sequence[str], optional: Sequence[str] = ()
) -> Mapping[str, Any]:
    """``obj`` when it is a JSON object with exactly ``fields`` (and any of ``optional``), each but ``grade`` and
    the optional ones a string."""
    fix = "write {" + ", ".join(f'"{k}"' for k in fields) + "} on each line"
    if not isinstance(obj, Mapping):
        raise InputError(where, "is not a JSON object", fix)
    missing = [k for k in fields if k not in obj]
    if missing:
        raise InputError(where, f"has no {', '.join(repr(k) for k in missing)}", fix)
    extra = sorted(set(obj) - set(fields) - set(optional))
    if extra:
        raise InputError(where, f"has unknown key(s) {', '.join(repr(k) for k in extra)}", fix)
    for k in fields:
        if k != "grade" and not isinstance(obj[k], str):
            raise InputError(where, f"{k} is {obj[k]!r}, not a string", fix)
    return obj


def _judgement(obj: object, where: str, check: PairCheck | None, allowed: set[int] | None) -> Judgement:
    obj = _fields(obj, where, FIELDS, OPTIONAL)
    qid, unit, grade = obj["qid"], obj["unit"], obj["grade"]
    repeats = _repeats(obj.get("repeats"), where, allowed)
    if grade is not None and (isinstance(grade, bool) or not isinstance(grade, int)):
        raise InputError(
            where, f"grade {grade!r} is not an integer", "give one of the legend's grades, or null (undo)"
        )
    if grade is not None and allowed is not None and grade not in allowed:
        legend = ", ".join(str(g) for g in sorted(allowed, reverse=True))
        raise InputError(
            where, f"grade {grade} is not in the corpus's grade legend ({legend})", "give one of those grades"
        )
    if not obj["assessor"]:
        raise InputError(where, "assessor is empty", "name who judged: human:<name> or llm:<model>")
    if check is not None and (problem := check(qid, unit)):
        raise InputError(where, problem, "judge pairs of this corpus's pools; fix or delete that line")
    return Judgement(qid, unit, grade, obj["assessor"], obj["time"], obj["pool"], repeats)


def _repeats(value: object, where: str, allowed: set[int] | None) -> tuple[int | None, ...] | None:
    """The grades of a line's ``repeats`` (absent: ``None``): a list of grades of the legend or null."""
    if value is None:
        return None
    fix = "give repeats as a list of the legend's grades or null, or delete the key"
    if not isinstance(value, list) or not value:
        raise InputError(where, f"repeats {value!r} is not a list of grades", fix)
    for g in value:
        if g is not None and (
            isinstance(g, bool) or not isinstance(g, int) or (allowed is not None and g not in allowed)
        ):
            raise InputError(where, f"repeats holds {g!r}, not a grade of the legend or null", fix)
    return tuple(value)


def _answer_grade(obj: object, where: str, check: PairCheck | None) -> AnswerGrade:
    obj = _fields(obj, where, ANSWER_FIELDS)
    value, sha = obj["grade"], obj["answer_sha256"]
    if value is not None and value not in ANSWER_GRADES:
        raise InputError(
            where,
            f"grade {value!r} is not one of {', '.join(ANSWER_GRADES)}",
            "give one of them, or null (undo)",
        )
    if not (obj["assessor"] == HUMAN or obj["assessor"].startswith((HUMAN + ":", LLM + ":"))):
        raise InputError(
            where,
            f"assessor {obj['assessor']!r} is not human, human:<name> or llm:<model>",
            "name who graded",
        )
    if check is not None and (problem := check(obj["qid"], sha)):
        raise InputError(where, problem, "grade answers to this corpus's questions; fix or delete that line")
    if answer_sha256(obj["answer"]) != sha:
        raise InputError(
            where,
            f"answer_sha256 {sha[:12]!r} is not the SHA-256 of its answer (an unknown answer)",
            "copy the answer_sha256 and answer of one row of the answers pool",
        )
    return AnswerGrade(obj["qid"], sha, obj["answer"], value, obj["assessor"], obj["time"])


def standing(lines: Iterable[Line]) -> tuple[dict[tuple[str, str], Line], list[tuple[str, str]]]:
    """The standing line of each item (``key``), and the items in the order their standing lines were written.

    The last line of an item wins; an undo (grade ``None``) takes back that assessor's latest line of the item, and
    the one before stands again (or none). The order is what an assessor's undo takes back next (its last item)."""
    stacks: dict[tuple[str, str], list[Line]] = {}
    order: list[tuple[str, str]] = []
    for j in lines:
        stack = stacks.setdefault(j.key, [])
        if j.grade is None:
            for k in range(len(stack) - 1, -1, -1):
                if stack[k].assessor == j.assessor:
                    del stack[k]
                    break
            if j.key in order:
                del order[len(order) - 1 - order[::-1].index(j.key)]
        else:
            stack.append(j)
            order.append(j.key)
    return {key: stack[-1] for key, stack in stacks.items() if stack}, order


def latest(lines: Iterable[Line]) -> dict[tuple[str, str], Line]:
    """The standing line of each item (:func:`standing`)."""
    return standing(lines)[0]


def human(lines: Iterable[Line]) -> dict[tuple[str, str], Line]:
    """The standing human line of each item (the latest of any person's; LLM lines left out)."""
    return latest(j for j in lines if j.who == HUMAN)
