"""An answers pool: the distinct answers some runs wrote, to be graded by hand (``python -m ablate.label serve
--answers``) and to validate the answer judges against (``python -m ablate.label validate-answers``).

``labels/<corpus>/answer_pools/<name>.jsonl``, one JSON object per distinct (question, answer text)::

    {"qid": "q025", "question": "...", "golds": ["38.5 yuan"], "answer": "Answer: 38.5 yuan [1]",
     "answer_sha256": "9f2c...", "runs": ["C", "oracle"], "context": ["POL-SH-TRAVEL-2025#4.2-a"]}

``golds`` are the question's gold answers (alternatives: any one is enough), ``runs`` the labels of the runs that
wrote that exact text (identical answers are pooled once, whatever run wrote them), ``context`` the chunk ids of the
passages the first of those runs gave the generator. ``answer_sha256`` is the SHA-256 of the answer's UTF-8 text: it
names the answer in the grades journal (:mod:`ablate.labels.answerjournal`). Beside it, ``<name>.json``
(:class:`AnswerPoolMeta`) records the corpus the answers were written on, so they are graded and validated against
that corpus's questions only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ablate.cache import atomic_write_bytes
from ablate.errors import InputError

FIELDS = ("qid", "question", "golds", "answer", "answer_sha256", "runs", "context")
_FIX = "make the pool with python -m ablate.label pool-answers"


def answer_sha256(answer: str) -> str:
    """The name of an answer: the SHA-256 of its UTF-8 text (exactly as the run wrote it)."""
    return hashlib.sha256(answer.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class AnswerEntry:
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
class AnswerPoolMeta:
    """What an answers pool was made from: the corpus (name, folder, the runs' corpus settings, snapshot
    fingerprint), the split, the runs (label -> MLflow run id), how many answers were read and pooled, when."""

    corpus: str
    corpus_path: str
    split: str = ""
    snapshot: str = ""
    language: str = "en"
    runs: dict[str, str] = field(default_factory=dict)
    answers_read: int = 0
    corpus_config: dict[str, Any] = field(default_factory=dict)
    created: str = ""


@dataclass
class AnswerPool:
    meta: AnswerPoolMeta
    entries: list[AnswerEntry]

    def index(self) -> dict[tuple[str, str], AnswerEntry]:
        return {e.key: e for e in self.entries}


def meta_path(pool_path: Path) -> Path:
    return pool_path.with_suffix(".json")


def collect(
    answers: Mapping[str, Sequence[tuple[str, str, tuple[str, ...]]]],
    questions: Mapping[str, tuple[str, tuple[str, ...]]],
) -> list[AnswerEntry]:
    """The distinct answers of ``answers`` (run label -> ``(qid, answer text, context ids)`` in the run's order),
    for the questions of ``questions`` (qid -> (text, gold answers)); in question order of ``questions``, then the
    order answers were first seen. An identical text for the same question is one entry listing every run."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for label, rows in answers.items():
        for qid, text, context in rows:
            if qid not in questions:
                continue
            sha = answer_sha256(text)
            row = found.setdefault((qid, sha), {"answer": text, "runs": [], "context": context})
            if label not in row["runs"]:
                row["runs"].append(label)
    order = {q: i for i, q in enumerate(questions)}
    keys = sorted(found, key=lambda k: order[k[0]])  # stable: first-seen order within a question
    return [
        AnswerEntry(
            qid,
            questions[qid][0],
            tuple(questions[qid][1]),
            found[(qid, sha)]["answer"],
            sha,
            tuple(found[(qid, sha)]["runs"]),
            tuple(found[(qid, sha)]["context"]),
        )
        for qid, sha in keys
    ]


def write(path: Path, pool: AnswerPool) -> None:
    """The pool's JSONL and its ``.json`` beside it (each atomically)."""
    lines = []
    for e in pool.entries:
        row = asdict(e)
        row["golds"], row["runs"], row["context"] = list(e.golds), list(e.runs), list(e.context)
        lines.append(json.dumps(row, ensure_ascii=False) + "\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, "".join(lines).encode("utf-8"))
    text = json.dumps(asdict(pool.meta), ensure_ascii=False, indent=2, sort_keys=True) + "\n"
    atomic_write_bytes(meta_path(path), text.encode("utf-8"))


def read(path: Path) -> AnswerPool:
    """An answers pool and its ``.json``; a missing or malformed file raises :class:`InputError` naming it (and
    the line)."""
    if not path.is_file():
        raise InputError(
            str(path),
            "no such answers pool",
            "give an answer_pools/<name>.jsonl that python -m ablate.label pool-answers wrote",
        )
    mp = meta_path(path)
    if not mp.is_file():
        raise InputError(str(mp), "is missing: the pool does not say which corpus its answers are of", _FIX)
    try:
        meta = AnswerPoolMeta(**json.loads(mp.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, TypeError, UnicodeDecodeError) as e:
        raise InputError(str(mp), f"is not an answers pool description ({e})", _FIX) from None
    entries: list[AnswerEntry] = []
    seen: set[tuple[str, str]] = set()
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        entry = _entry(line, f"{path}:{i}")
        if entry.key in seen:
            raise InputError(
                f"{path}:{i}", f"answer {entry.answer_sha256[:12]} of {entry.qid} is listed twice", _FIX
            )
        seen.add(entry.key)
        entries.append(entry)
    return AnswerPool(meta, entries)


def _entry(line: str, where: str) -> AnswerEntry:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise InputError(where, f"is not a JSON object ({e.msg})", _FIX) from None
    if not isinstance(obj, dict) or set(obj) != set(FIELDS):
        raise InputError(where, f"is not an answers pool row (keys {', '.join(FIELDS)})", _FIX)
    texts = ("qid", "question", "answer", "answer_sha256")
    lists = ("golds", "runs", "context")
    if not all(isinstance(obj[k], str) for k in texts) or not all(
        isinstance(obj[k], list) and all(isinstance(x, str) for x in obj[k]) for k in lists
    ):
        raise InputError(
            where, f"{', '.join(texts)} must be strings, {', '.join(lists)} lists of strings", _FIX
        )
    if answer_sha256(obj["answer"]) != obj["answer_sha256"]:
        raise InputError(where, "answer_sha256 is not the SHA-256 of its answer", _FIX)
    return AnswerEntry(
        obj["qid"],
        obj["question"],
        tuple(obj["golds"]),
        obj["answer"],
        obj["answer_sha256"],
        tuple(obj["runs"]),
        tuple(obj["context"]),
    )
