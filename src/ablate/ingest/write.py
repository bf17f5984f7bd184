"""The output folder: ``corpus.jsonl``, ``corpus.yaml``, ``chunks.tsv`` and ``ingest_report.md``, and nothing else.

* ``--out`` may be new, empty, or an earlier ingest's output (its ``corpus.yaml`` has an ``ingest:`` block): a new
  ingest then replaces those four files and keeps everything else there (``queries.jsonl``, ``qrels/``, ...) and
  every key of ``corpus.yaml`` it does not write itself (``name``, ``qrels_unit``, ``identities``, ...; it writes
  ``language``, ``chunker`` and ``ingest``, and ``qrels_unit`` when it is not there yet: :func:`label_unit`). Any
  other non-empty folder is refused unless ``force``.
* ``chunks.tsv`` lists the ids the labels name (:mod:`ablate.data.chunk_list`).
* Files are written to a temporary name in the folder and renamed, so an interrupted ingest leaves the old file or
  the new one. No path is built from a document's name or id: only these three names are written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ablate.cache import atomic_write_bytes
from ablate.data.chunk_list import CHUNKS_FILE, chunks_tsv
from ablate.data.chunking import ChunkerSpec, chunk_corpus
from ablate.data.corpus_files import load_documents
from ablate.errors import ConfigError
from ablate.ingest.build import Result
from ablate.safenames import inside, name_problem
from ablate.safeyaml import safe_load

MARKER = "ingest"
FILES = ("corpus.jsonl", "corpus.yaml", CHUNKS_FILE, "ingest_report.md")


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


def label_unit(chunker: dict[str, Any]) -> str:
    """The unit the labels use when ``corpus.yaml`` does not say yet: ``chunk`` under the ``clause`` chunker (the
    sections ingest found are what a question's evidence is), else ``doc`` (token windows and paragraphs are cut
    by settings that may change; a document id stays)."""
    return "chunk" if chunker.get("kind") == "clause" else "doc"


def manifest(result: Result, out: Path, earlier: dict[str, Any] | None, tables: str) -> dict[str, Any]:
    """corpus.yaml: the earlier ingest's keys kept, then ``name`` (when new), ``language``, ``chunker``,
    ``qrels_unit`` (when new), ``ingest``."""
    m: dict[str, Any] = dict(earlier or {})
    if not m.get("name") and name_problem(out.name) is None:
        m["name"] = out.name
    m["language"] = result.language
    m["chunker"] = result.chunker
    m.setdefault("qrels_unit", label_unit(result.chunker))
    m[MARKER] = {
        "source": str(result.docs.resolve()),
        "documents": len(result.documents),
        "skipped": len(result.skipped),
        "tables": tables,
        "report": "ingest_report.md",
    }
    ordered: dict[str, Any] = {k: m[k] for k in ("name", "language", "chunker", "qrels_unit") if k in m}
    ordered.update({k: v for k, v in m.items() if k not in ordered})
    return ordered


def _comments(result: Result) -> dict[str, str]:
    """The comment lines written above keys of corpus.yaml: why the language and what the label unit means."""
    out = {
        "qrels_unit": f"# the ids your labels (qrels/*.tsv, corpus-id column) name: chunk = a chunk id ({CHUNKS_FILE} "
        "lists them), doc = a document id (_id);\n# chunk labels can still be scored per document (eval.unit=doc)",
    }
    mix = result.mix
    if mix is not None and mix.mixed:
        out["language"] = (
            f"# detected per document: {mix.describe()}; zh is the multilingual choice (en: English only)"
        )
    return out


def manifest_text(result: Result, m: dict[str, Any]) -> str:
    """corpus.yaml as written: the manifest ``m`` (:func:`manifest`), one key at a time, with :func:`_comments` above
    their keys."""
    comments = _comments(result)
    lines = [
        "# written by python -m ablate.ingest (docs/ingest.md); a new ingest keeps the keys it does not write\n"
    ]
    for key, value in m.items():
        if key in comments:
            lines.append(comments[key] + "\n")
        lines.append(yaml.safe_dump({key: value}, allow_unicode=True, sort_keys=False))
    return "".join(lines)


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
        "| id | file | format | language | sections | tables (rows) | title | version | effective date | acl |",
        "|---|---|---|---|---|---|---|---|---|---|",
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
                    r["metadata"]["lang"],
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


@dataclass(frozen=True)
class Written:
    """What :func:`write_output` wrote: the files, the label unit in ``corpus.yaml`` and how many chunks
    ``chunks.tsv`` lists."""

    paths: list[Path]
    unit: str
    chunks: int


def write_output(result: Result, out: Path, tables: str, notes: Sequence[str] = ()) -> Written:
    """Write the four files into ``out`` (created if needed; checked by :func:`check_out` first); ``notes`` go to
    the report's notes (e.g. stale labels, :mod:`ablate.ingest.labels`). ``corpus.jsonl`` first: ``chunks.tsv`` lists
    the chunks the corpus loader makes of it."""
    earlier = _earlier_manifest(out) if out.is_dir() else None
    out.mkdir(parents=True, exist_ok=True)
    jsonl = "".join(json.dumps(d.record, ensure_ascii=False) + "\n" for d in result.documents)
    written = [inside(out, "corpus.jsonl")]
    atomic_write_bytes(written[0], jsonl.encode("utf-8"))
    chunks = chunk_corpus(load_documents(written[0]), ChunkerSpec(**result.chunker))
    m = manifest(result, out, earlier, tables)
    texts = {
        "corpus.yaml": manifest_text(result, m),
        CHUNKS_FILE: chunks_tsv(chunks),
        "ingest_report.md": report_text(result, tables, notes),
    }
    for name, text in texts.items():
        path = inside(out, name)
        atomic_write_bytes(path, text.encode("utf-8"))
        written.append(path)
    return Written(written, str(m["qrels_unit"]), len(chunks))
