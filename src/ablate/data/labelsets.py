"""A committed label version: a folder of qrels files that replaces a corpus's ``qrels/`` (``corpus.labels``).

``python -m ablate.label commit --version NAME`` writes ``labels/<corpus>/versions/NAME/``: one ``<split>.tsv`` per
split (the old labels plus the journal's judgements; the corpus's own ``qrels/`` is never overwritten),
``CHANGELOG.md`` and ``version.json``::

    {"name": "v3", "corpus": "demo", "parent": "demo-labels-v2", "created": "2026-12-03T19:40:02Z",
     "assessors": {"human:alice": 40, "llm:qwen2.5-...": 12}, "llm_made": 12, "added": 52, "changed": 0, ...}

Loading a corpus with ``labels=<that folder>`` (:func:`ablate.data.corpus.load_corpus`) reads the version's files
instead of ``qrels/`` and records its name as the label version, the version it came from and how many of its labels
an LLM made, so every run and report says so.

``version.json``'s ``files`` holds the sha256 of each ``<split>.tsv`` as committed, and of the files beside them
that say who judged what (the assessor view ``assessor/``, ``judged.csv``, ``answer_grades.csv``:
:mod:`ablate.labels.views`). Every read of the version (:func:`read_label_version`: a run with ``corpus.labels``,
``python -m ablate.report --labels``) checks them: a file edited, removed or added after the commit is one line
naming it, the sha256 recorded and found, and the fix, and nothing is scored. (A version without ``files``, written
before versions recorded them, is read as it is.)
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablate.errors import InputError

VERSION_FILE = "version.json"
CHANGELOG = "CHANGELOG.md"


@dataclass(frozen=True)
class LabelVersion:
    """A label version folder: its ``name``, the ``parent`` version it was made from, its qrels ``files`` and the
    count of standing labels each assessor made (``assessors``); ``llm_made``: those made by ``llm:`` assessors."""

    name: str
    folder: Path
    files: tuple[Path, ...]
    parent: str = ""
    assessors: dict[str, int] = field(default_factory=dict)
    llm_made: int = 0
    raw: dict[str, Any] = field(default_factory=dict)


def read_label_version(folder: str | Path) -> LabelVersion:
    """The label version in ``folder``; one-line :class:`InputError` when it is not one."""
    root = Path(folder).expanduser()
    fix = "give a folder python -m ablate.label commit wrote (labels/<corpus>/versions/<NAME>) or a version's name"
    if not root.is_dir():
        raise InputError(str(root), "is not a label version folder", fix)
    vf = root / VERSION_FILE
    if not vf.is_file():
        raise InputError(str(vf), "is missing", fix)
    try:
        raw = json.loads(vf.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(str(vf), f"is not JSON ({e})", fix) from None
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
        raise InputError(str(vf), "has no name", fix)
    files = tuple(sorted(root.glob("*.tsv")))
    if not files:
        raise InputError(str(root), "holds no <split>.tsv label file", fix)
    check_files(root, files, raw.get("files"))
    assessors = {str(k): int(v) for k, v in (raw.get("assessors") or {}).items()}
    llm = int(raw.get("llm_made", sum(v for k, v in assessors.items() if k.startswith("llm:"))))
    return LabelVersion(
        name=raw["name"],
        folder=root.resolve(),
        files=files,
        parent=str(raw.get("parent") or ""),
        assessors=assessors,
        llm_made=llm,
        raw=raw,
    )


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_files(root: Path, files: tuple[Path, ...], recorded: object) -> None:
    """Each label file of the version at ``root`` against the sha256 ``version.json`` recorded for it at commit
    (``recorded``: its ``files``; nothing is checked without one). One-line :class:`InputError` naming the first file
    that differs, is missing or was added, the sha256 expected and found, and the fix."""
    if not isinstance(recorded, dict) or not recorded:
        return
    vf = root / VERSION_FILE
    restore = (
        "restore it as it was committed, or commit the change as a new version (python -m ablate.label commit "
        "--version NAME); a committed version is never edited in place"
    )
    for name, expected in sorted(recorded.items()):
        path = root / str(name)
        if not path.is_file():
            raise InputError(str(path), f"is missing; {vf} records it with sha256 {expected}", restore)
        found = file_sha256(path)
        if found != expected:
            raise InputError(
                str(path),
                f"was changed after the label version was committed (sha256 {found}, expected {expected} as {vf} "
                "records it)",
                restore,
            )
    beside = [*root.glob("*/*.tsv"), *root.glob("*/version.json"), *root.glob("*.csv")]
    for path in [*files, *sorted(beside)]:
        if path.relative_to(root).as_posix() not in recorded:
            raise InputError(
                str(path),
                f"was added after the label version was committed ({vf} records no such file)",
                "remove it, or commit it as a new version (python -m ablate.label commit --version NAME)",
            )
