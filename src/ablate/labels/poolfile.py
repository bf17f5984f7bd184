"""Pool files: what some runs returned that the labels do not judge yet, to be judged, one file per pool; one
format per kind of label (:mod:`ablate.labels.kind`).

Relevance, ``labels/<corpus>/pools/<name>.tsv`` (tab-separated, one header line)::

    qid     unit            runs    best_rank
    q025    INV-120#check   B,C     4

``runs`` lists the labels of the runs that returned the unit in their first ``depth`` units (comma-separated),
``best_rank`` the best rank (1-based, at the labels' unit after deduplication) any of them gave it.

Answers, ``labels/<corpus>/answer_pools/<name>.jsonl``, one JSON object per distinct (question, answer text)::

    {"qid": "q025", "question": "...", "golds": ["38.5 yuan"], "answer": "Answer: 38.5 yuan [1]",
     "answer_sha256": "9f2c...", "runs": ["C", "oracle"], "context": ["POL-SH-TRAVEL-2025#4.2-a"]}

``golds`` are the question's gold answers (alternatives: any one is enough), ``runs`` the labels of the runs that
wrote that exact text (identical answers are pooled once, whatever run wrote them), ``context`` the chunk ids of the
passages the first of those runs gave the generator, ``answer_sha256`` the answer's name in the answer journal.

Beside either, ``<name>.json`` (:class:`PoolMeta`) records what the pool was made from, so a pool is never judged
against another corpus, unit or label version than its own.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from ablate.cache import atomic_write_bytes
from ablate.errors import InputError
from ablate.labels.kind import ANSWERS, RELEVANCE, Kind, answer_sha256

COLUMNS = ("qid", "unit", "runs", "best_rank")
ANSWER_FIELDS = ("qid", "question", "golds", "answer", "answer_sha256", "runs", "context")


@dataclass(frozen=True)
class PoolEntry:
    """A (question, unit) pair of a relevance pool."""

    qid: str
    unit: str
    runs: tuple[str, ...]
    best_rank: int

    @property
    def key(self) -> tuple[str, str]:
        return (self.qid, self.unit)


@dataclass(frozen=True, slots=True)
class AnswerEntry:
    """A distinct answer of an answers pool (slots: a pool holds every distinct answer text of its runs)."""

    qid: str
    question: str
    golds: tuple[str, ...]
    answer: str
    answer_sha256: str
    runs: tuple[str, ...]
    context: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return (self.qid, self.answer_sha256)


@dataclass
class PoolMeta:
    """What a pool was made from: the corpus (name, folder, the corpus settings the runs used, the snapshot
    fingerprint), the split, ``runs`` (label -> MLflow run id), and when. A relevance pool adds the labels' ``unit``,
    the label version and qrels hash the pairs are unjudged against, the pooling ``depth`` and per run the share of
    its first ``depth`` units the old labels judge (``judged_share``); an answers pool the corpus's ``language`` and
    how many answers were read (``answers_read``)."""

    corpus: str
    corpus_path: str
    unit: str = ""
    label_version: str = ""
    qrels_sha256: str = ""
    depth: int = 0
    split: str = ""
    snapshot: str = ""
    runs: dict[str, str] = field(default_factory=dict)
    judged_share: dict[str, float] = field(default_factory=dict)
    corpus_config: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    language: str = "en"
    answers_read: int = 0


#: The fields of :class:`PoolMeta` only one kind writes.
_ONLY = {
    RELEVANCE.name: {"unit", "label_version", "qrels_sha256", "depth", "judged_share"},
    ANSWERS.name: {"language", "answers_read"},
}

Entry = TypeVar("Entry", PoolEntry, AnswerEntry)


@dataclass
class Pool(Generic[Entry]):
    meta: PoolMeta
    entries: list[Entry]

    @property
    def kind(self) -> Kind:
        """Which kind of pool, by its entries (an empty pool is never written)."""
        return ANSWERS if self.entries and isinstance(self.entries[0], AnswerEntry) else RELEVANCE

    @property
    def pairs(self) -> list[tuple[str, str]]:
        return [e.key for e in self.entries]

    def index(self) -> dict[tuple[str, str], Entry]:
        return {e.key: e for e in self.entries}


def meta_path(pool_path: Path) -> Path:
    return pool_path.with_suffix(".json")


def _fix(kind: Kind) -> str:
    return "make the pool with python -m ablate.label pool" + ("" if kind is RELEVANCE else " --kind answers")


def collect(
    answers: Mapping[str, Sequence[tuple[str, str, tuple[str, ...]]]],
    questions: Mapping[str, tuple[str, tuple[str, ...]]],
) -> list[AnswerEntry]:
    """The distinct answers of ``answers`` (run label -> ``(qid, answer text, context ids)`` in the run's order),
    for the questions of ``questions`` (qid -> (text, gold answers)); in question order of ``questions``, then the
    order answers were first seen. An identical text for the same question is one entry listing every run."""
    found: dict[tuple[str, str], tuple[str, list[str], tuple[str, ...]]] = {}
    for label, rows in answers.items():
        for qid, text, context in rows:
            if qid in questions:
                _, runs, _ = found.setdefault((qid, answer_sha256(text)), (text, [], tuple(context)))
                if label not in runs:
                    runs.append(label)
    order = {q: i for i, q in enumerate(questions)}
    out = []
    for qid, sha in sorted(found, key=lambda k: order[k[0]]):  # stable: first-seen order within a question
        text, runs, context = found[(qid, sha)]
        question, golds = questions[qid]
        out.append(AnswerEntry(qid, question, tuple(golds), text, sha, tuple(runs), context))
    return out


def write(path: Path, pool: Pool[PoolEntry] | Pool[AnswerEntry]) -> None:
    """Write the pool's rows and its ``.json`` beside it (each atomically)."""
    buf = io.StringIO()
    if pool.kind is RELEVANCE:
        w = csv.writer(buf, delimiter="\t", lineterminator="\n")
        w.writerow(COLUMNS)
        w.writerows(
            (e.qid, e.unit, ",".join(e.runs), e.best_rank) for e in pool.entries if isinstance(e, PoolEntry)
        )
    else:
        buf.writelines(json.dumps(asdict(e), ensure_ascii=False) + "\n" for e in pool.entries)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, buf.getvalue().encode("utf-8"))
    other = _ONLY[ANSWERS.name if pool.kind is RELEVANCE else RELEVANCE.name]
    meta = {k: v for k, v in asdict(pool.meta).items() if k not in other}
    text = json.dumps(meta, ensure_ascii=False, indent=2, sort_keys=True) + "\n"
    atomic_write_bytes(meta_path(path), text.encode("utf-8"))


def _meta(path: Path, kind: Kind) -> PoolMeta:
    """The ``.json`` of the pool at ``path``; a missing or malformed pool raises :class:`InputError` naming it."""
    if not path.is_file():
        raise InputError(
            str(path),
            f"no such {'answers ' if kind is ANSWERS else ''}pool file",
            f"give a {kind.pools}/<name>{kind.suffix} that python -m ablate.label pool"
            + ("" if kind is RELEVANCE else " --kind answers")
            + " wrote",
        )
    mp = meta_path(path)
    if not mp.is_file():
        raise InputError(
            str(mp), "is missing: the pool does not say which corpus and labels it was made from", _fix(kind)
        )
    try:
        raw = json.loads(mp.read_text(encoding="utf-8"))
        if not isinstance(raw, dict):
            raise TypeError("not a JSON object")
        foreign = sorted(set(raw) & _ONLY[ANSWERS.name if kind is RELEVANCE else RELEVANCE.name])
        if foreign:
            raise TypeError(f"{', '.join(foreign)}: not a {kind.name} pool's")
        return PoolMeta(**raw)
    except (json.JSONDecodeError, TypeError, UnicodeDecodeError) as e:
        raise InputError(str(mp), f"is not a pool description ({e})", _fix(kind)) from None


def _unique(entries: list[tuple[int, Entry]], path: Path) -> list[Entry]:
    """``entries`` (with their file lines), refused when one item is listed twice."""
    seen: set[tuple[str, str]] = set()
    for line, e in entries:
        if e.key in seen:
            raise InputError(
                f"{path}:{line}", f"({e.key[0]}, {e.key[1]}) is listed twice", "delete the repeat"
            )
        seen.add(e.key)
    return [e for _, e in entries]


def read(path: Path) -> Pool[PoolEntry]:
    """A relevance pool file and its ``.json``; a missing, malformed or foreign file raises :class:`InputError`
    naming it (and the line)."""
    meta = _meta(path, RELEVANCE)
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8")), delimiter="\t"))
    if not rows or tuple(rows[0]) != COLUMNS:
        raise InputError(f"{path}:1", "the header is not " + repr("\t".join(COLUMNS)), _fix(RELEVANCE))
    out = []
    for i, row in enumerate(rows[1:], 2):
        if not row:
            continue
        if len(row) != len(COLUMNS):
            raise InputError(
                f"{path}:{i}", f"has {len(row)} fields, not {len(COLUMNS)}", "fix or delete that line"
            )
        qid, unit, runs, rank = row
        try:
            best = int(rank)
        except ValueError:
            raise InputError(
                f"{path}:{i}", f"best_rank {rank!r} is not an integer", "fix or delete that line"
            ) from None
        out.append((i, PoolEntry(qid, unit, tuple(r for r in runs.split(",") if r), best)))
    return Pool(meta, _unique(out, path))


def read_answers(path: Path) -> Pool[AnswerEntry]:
    """An answers pool and its ``.json``; a missing or malformed file raises :class:`InputError` naming it (and the
    line)."""
    meta = _meta(path, ANSWERS)
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            out.append((i, _answer_entry(line, f"{path}:{i}")))
    return Pool(meta, _unique(out, path))


def _answer_entry(line: str, where: str) -> AnswerEntry:
    fix = _fix(ANSWERS)
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise InputError(where, f"is not a JSON object ({e.msg})", fix) from None
    if not isinstance(obj, dict) or set(obj) != set(ANSWER_FIELDS):
        raise InputError(where, f"is not an answers pool row (keys {', '.join(ANSWER_FIELDS)})", fix)
    texts = ("qid", "question", "answer", "answer_sha256")
    lists = ("golds", "runs", "context")
    if not all(isinstance(obj[k], str) for k in texts) or not all(
        isinstance(obj[k], list) and all(isinstance(x, str) for x in obj[k]) for k in lists
    ):
        raise InputError(
            where, f"{', '.join(texts)} must be strings, {', '.join(lists)} lists of strings", fix
        )
    if answer_sha256(obj["answer"]) != obj["answer_sha256"]:
        raise InputError(where, "answer_sha256 is not the SHA-256 of its answer", fix)
    qid, question, answer, sha = (obj[k] for k in texts)
    return AnswerEntry(
        qid, question, tuple(obj["golds"]), answer, sha, tuple(obj["runs"]), tuple(obj["context"])
    )


def by_question(entries: Sequence[Entry]) -> Mapping[str, list[Entry]]:
    """Entries grouped by question, in file order."""
    out: dict[str, list[Entry]] = {}
    for e in entries:
        out.setdefault(e.qid, []).append(e)
    return out
