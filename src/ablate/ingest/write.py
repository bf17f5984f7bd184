"""The output folder: ``corpus.jsonl``, ``corpus.yaml`` and ``ingest_report.md``, and nothing else.

* ``--out`` may be new, empty, or an earlier ingest's output (its ``corpus.yaml`` has an ``ingest:`` block): a new
  ingest then replaces those three files and keeps everything else there (``queries.jsonl``, ``qrels/``, ...) and
  every key of ``corpus.yaml`` it does not write itself (``name``, ``qrels_unit``, ``identities``, ...; it writes
  ``language``, ``chunker`` and ``ingest``). Any other non-empty folder is refused unless ``force``.
* Files are written to a temporary name in the folder and renamed, so an interrupted ingest leaves the old file or
  the new one. No path is built from a document's name or id: only these three names are written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from ablate.cache import atomic_write_bytes
from ablate.errors import ConfigError
from ablate.ingest.build import Result
from ablate.safenames import inside, name_problem
from ablate.safeyaml import safe_load

MARKER = "ingest"
FILES = ("corpus.jsonl", "corpus.yaml", "ingest_report.md")


def _earlier_manifest(out: Path) -> dict[str, Any] | None:
    """``out``'s corpus.yaml when it is an earlier ingest's (a mapping with an ``ingest:`` block), else ``None``."""
    p = out / "corpus.yaml"
    try:
        m = safe_load(p.read_text(encoding="utf-8")) if p.is_file() else None
    except (yaml.YAMLError, UnicodeDecodeError, OSError):
        return None
    return m if isinstance(m, dict) and isinstance(m.get(MARKER), dict) else None


def check_out(out: Path, docs: Path, force: bool) -> None:
    """Refuse an ``out`` that is a file, the documents folder itself, or a non-empty folder that is not an earlier
    ingest's output (unless ``force``)."""
    if out.exists() and not out.is_dir():
        raise ConfigError("--out", str(out), "it is a file; give a folder (new or empty) for the corpus")
    if out.resolve() == docs.resolve():
        raise ConfigError("--out", str(out), "it is the documents folder itself; give another folder")
    if out.is_dir() and any(out.iterdir()) and _earlier_manifest(out) is None and not force:
        raise ConfigError(
            "--out",
            str(out),
            "it is not empty and not an earlier ablate.ingest output (no corpus.yaml with an ingest: block); give a "
            "new or empty folder, or add --force to write corpus.jsonl, corpus.yaml and ingest_report.md into it",
        )


def manifest(result: Result, out: Path, earlier: dict[str, Any] | None, tables: str) -> dict[str, Any]:
    """corpus.yaml: the earlier ingest's keys kept, then ``name`` (when new), ``language``, ``chunker``, ``ingest``."""
    m: dict[str, Any] = dict(earlier or {})
    if not m.get("name") and name_problem(out.name) is None:
        m["name"] = out.name
    m["language"] = result.language
    m["chunker"] = result.chunker
    m[MARKER] = {
        "source": str(result.docs.resolve()),
        "documents": len(result.documents),
        "skipped": len(result.skipped),
        "tables": tables,
        "report": "ingest_report.md",
    }
    ordered: dict[str, Any] = {k: m[k] for k in ("name", "language", "chunker") if k in m}
    ordered.update({k: v for k, v in m.items() if k not in ordered})
    return ordered


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def report_text(result: Result, tables: str, notes: Sequence[str] = ()) -> str:
    """ingest_report.md: what was read (one row per document), what was skipped and why, and notes."""
    lines = [
        "# Ingest report",
        "",
        f"Documents folder: `{result.docs.resolve()}`; tables as `{tables}`. Read {len(result.documents)} "
        f"document(s), skipped {len(result.skipped)} file(s). Corpus language: {result.language}; chunker: "
        f"{result.chunker.get('kind')}. Formats and section rules: docs/ingest.md.",
        "",
        "## Documents",
        "",
        "| id | file | format | sections | tables (rows) | title | version | effective date | acl |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for d in result.documents:
        r = d.record
        lines.append(
            "| "
            + " | ".join(
                _cell(x)
                for x in (
                    r["_id"],
                    d.file,
                    d.fmt,
                    d.sections,
                    f"{d.tables} ({d.table_rows})",
                    r.get("title", ""),
                    r.get("version", ""),
                    r.get("effective_date", ""),
                    ", ".join(r.get("acl", [])),
                )
            )
            + " |"
        )
    lines += ["", "## Skipped", ""]
    if result.skipped:
        lines += ["| file | why |", "|---|---|"] + [
            f"| {_cell(s.file)} | {_cell(s.reason)} |" for s in result.skipped
        ]
    else:
        lines.append("Nothing: every file was read.")
    every = [*notes, *result.notes, *(f"{d.file}: {n}" for d in result.documents for n in d.notes)]
    if every:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in every]
    return "\n".join(lines) + "\n"


def write_output(result: Result, out: Path, tables: str, notes: Sequence[str] = ()) -> list[Path]:
    """Write the three files into ``out`` (created if needed; checked by :func:`check_out` first); ``notes`` go to
    the report's notes (e.g. stale labels, :mod:`ablate.ingest.labels`)."""
    earlier = _earlier_manifest(out) if out.is_dir() else None
    out.mkdir(parents=True, exist_ok=True)
    jsonl = "".join(json.dumps(d.record, ensure_ascii=False) + "\n" for d in result.documents)
    texts = {
        "corpus.jsonl": jsonl,
        "corpus.yaml": "# written by python -m ablate.ingest (docs/ingest.md); a new ingest keeps the keys it does not "
        "write\n"
        + yaml.safe_dump(manifest(result, out, earlier, tables), allow_unicode=True, sort_keys=False),
        "ingest_report.md": report_text(result, tables, notes),
    }
    written = []
    for name, text in texts.items():
        path = inside(out, name)
        atomic_write_bytes(path, text.encode("utf-8"))
        written.append(path)
    return written
