"""A committed label version: a folder of qrels files that replaces a corpus's ``qrels/`` (``corpus.labels``).

``python -m ablate.label commit --version NAME`` writes ``labels/<corpus>/versions/NAME/``: one ``<split>.tsv`` per
split (the old labels plus the journal's judgements; the corpus's own ``qrels/`` is never overwritten),
``CHANGELOG.md`` and ``version.json``::

    {"name": "v3", "corpus": "demo", "parent": "demo-labels-v2", "created": "2026-12-03T19:40:02Z",
     "assessors": {"human:alice": 40, "llm:qwen2.5-...": 12}, "llm_made": 12, "added": 52, "changed": 0, ...}

Loading a corpus with ``labels=<that folder>`` (:func:`ablate.data.corpus.load_corpus`) reads the version's files
instead of ``qrels/`` and records its name as the label version, the version it came from and how many of its labels
an LLM made, so every run and report says so.
"""

from __future__ import annotations

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
