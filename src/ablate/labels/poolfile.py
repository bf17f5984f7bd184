"""A pool file: the unjudged (question, unit) pairs a set of runs returned, to be judged.

``labels/<corpus>/pools/<name>.tsv`` (tab-separated, one header line)::

    qid     unit            runs    best_rank
    q025    INV-120#check   B,C     4

``runs`` lists the labels of the runs that returned the unit in their first ``depth`` units (comma-separated),
``best_rank`` the best rank (1-based, at the labels' unit after deduplication) any of them gave it. Beside it,
``<name>.json`` (:class:`PoolMeta`) records what the pool was made from, so a pool is never judged against another
corpus, unit or label version than its own.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ablate.cache import atomic_write_bytes
from ablate.errors import InputError

COLUMNS = ("qid", "unit", "runs", "best_rank")


@dataclass(frozen=True)
class PoolEntry:
    qid: str
    unit: str
    runs: tuple[str, ...]
    best_rank: int


@dataclass
class PoolMeta:
    """What a pool was made from: the corpus (name, folder, the corpus settings the runs used, the snapshot
    fingerprint), the labels' ``unit``, the label version and qrels hash the pairs are unjudged against, the split,
    the pooling ``depth``, ``runs`` (label -> MLflow run id), per run the share of its first ``depth`` units the old
    labels judge (``judged_share``), and when."""

    corpus: str
    corpus_path: str
    unit: str
    label_version: str
    qrels_sha256: str
    depth: int
    split: str = ""
    snapshot: str = ""
    runs: dict[str, str] = field(default_factory=dict)
    judged_share: dict[str, float] = field(default_factory=dict)
    corpus_config: dict[str, Any] = field(default_factory=dict)
    created: str = ""


@dataclass
class Pool:
    meta: PoolMeta
    entries: list[PoolEntry]

    @property
    def pairs(self) -> list[tuple[str, str]]:
        return [(e.qid, e.unit) for e in self.entries]


def meta_path(pool_path: Path) -> Path:
    return pool_path.with_suffix(".json")


def write(path: Path, pool: Pool) -> None:
    """Write the pool's TSV and its ``.json`` beside it (each atomically)."""
    buf = io.StringIO()
    w = csv.writer(buf, delimiter="\t", lineterminator="\n")
    w.writerow(COLUMNS)
    for e in pool.entries:
        w.writerow((e.qid, e.unit, ",".join(e.runs), e.best_rank))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, buf.getvalue().encode("utf-8"))
    text = json.dumps(asdict(pool.meta), ensure_ascii=False, indent=2, sort_keys=True) + "\n"
    atomic_write_bytes(meta_path(path), text.encode("utf-8"))


def read(path: Path) -> Pool:
    """A pool file and its ``.json``; a missing, malformed or foreign file raises :class:`InputError` naming it."""
    if not path.is_file():
        raise InputError(
            str(path), "no such pool file", "give a pools/<name>.tsv that python -m ablate.label pool wrote"
        )
    mp = meta_path(path)
    if not mp.is_file():
        raise InputError(
            str(mp),
            "is missing: the pool does not say which corpus and labels it was made from",
            "make the pool with python -m ablate.label pool",
        )
    try:
        raw = json.loads(mp.read_text(encoding="utf-8"))
        meta = PoolMeta(**raw)
    except (json.JSONDecodeError, TypeError, UnicodeDecodeError) as e:
        raise InputError(
            str(mp), f"is not a pool description ({e})", "make the pool with python -m ablate.label pool"
        ) from None
    return Pool(meta, _entries(path))


def _entries(path: Path) -> list[PoolEntry]:
    text = path.read_text(encoding="utf-8")
    rows = list(csv.reader(io.StringIO(text), delimiter="\t"))
    if not rows or tuple(rows[0]) != COLUMNS:
        raise InputError(
            f"{path}:1",
            "the header is not " + repr("\t".join(COLUMNS)),
            "make the pool with python -m ablate.label pool",
        )
    out: list[PoolEntry] = []
    seen: set[tuple[str, str]] = set()
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
        if (qid, unit) in seen:
            raise InputError(f"{path}:{i}", f"({qid}, {unit}) is listed twice", "delete the repeat")
        seen.add((qid, unit))
        out.append(PoolEntry(qid, unit, tuple(r for r in runs.split(",") if r), best))
    return out


def by_question(entries: Sequence[PoolEntry]) -> Mapping[str, list[PoolEntry]]:
    """Entries grouped by question, in file order."""
    out: dict[str, list[PoolEntry]] = {}
    for e in entries:
        out.setdefault(e.qid, []).append(e)
    return out
