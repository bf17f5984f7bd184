"""A split on disk: writing ``split.tsv`` and its report, the used-by-test marker, and reading a split file into a
snapshot (``corpus.split_file``).

A run on a held-out split marks the file as used (:func:`mark_used_by_test`) and :func:`write_split` then refuses to
overwrite it unless forced.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ablate.cache import atomic_write_bytes, key_of
from ablate.data.grouping import merged_judgements
from ablate.data.leakage import report_markdown
from ablate.data.qrels import read_text_lines
from ablate.data.snapshot import Snapshot
from ablate.data.splitting import SplitResult
from ablate.data.types import Qrels
from ablate.errors import AblateError, InputError

#: Split names a split file may assign (the held-out rules know ``test``; the reranker trains on ``train``).
SPLIT_NAMES = ("train", "dev", "test")
SPLIT_FILE, REPORT_JSON, REPORT_MD, USED_MARKER = "split.tsv", "report.json", "report.md", "used_by_test.json"


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
