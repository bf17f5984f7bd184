"""``python -m ablate.ingest DOCS_DIR --out CORPUS_DIR``: a folder of Markdown, text, HTML, Word and PDF documents
as an ablate corpus folder (``corpus.jsonl``, ``corpus.yaml``, ``ingest_report.md``; :mod:`ablate.ingest`,
docs/ingest.md).

Every refusal comes before anything is written (a missing parser, bad metadata, two files with one id, an output
folder that is not ours): one line, exit 2. A file that cannot be read is skipped, named on stderr and in the report;
the command exits 0 when at least one document was read, 2 (writing nothing) when none was.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ablate.app.entry import run_command
from ablate.app.parser import command_parser
from ablate.errors import InputError
from ablate.progress import Progress

#: skipped files named one by one on stderr (the rest are in the report)
SHOW_SKIPPED = 10


def _parser() -> argparse.ArgumentParser:
    from ablate.ingest.tables import TABLE_MODES

    p = command_parser(
        "ingest",
        "Turn a folder of documents (.md, .txt, .html, .docx, .pdf) into an ablate corpus folder: "
        "corpus.jsonl with sections found from headings and numbered clauses, corpus.yaml, and ingest_report.md "
        "naming what could not be read. See docs/ingest.md.",
    )
    p.add_argument("docs", metavar="DOCS_DIR", help="folder of documents (read recursively)")
    p.add_argument(
        "--out",
        required=True,
        metavar="CORPUS_DIR",
        help="corpus folder to write (new or empty, or an earlier ingest's output)",
    )
    p.add_argument(
        "--tables",
        choices=TABLE_MODES,
        default="auto",
        help="a section per table row (rows), per table (sections), or rows when the first column looks like a key "
        "(auto, the default)",
    )
    p.add_argument(
        "--force", action="store_true", help="write into a non-empty folder that is not an ingest output"
    )
    p.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    return p


def run(args: argparse.Namespace) -> int:
    from ablate.ingest.build import plan_ingest, read_documents
    from ablate.ingest.labels import stale_labels
    from ablate.ingest.summary import summary_notes
    from ablate.ingest.write import check_out, write_output
    from ablate.stages.text.defaults import default_encoder

    docs = Path(args.docs).expanduser()
    if not docs.is_dir():
        raise InputError(
            str(docs),
            "is not a folder",
            "give the folder that holds your documents (.md, .txt, .html, .docx, .pdf)",
        )
    docs = docs.resolve()
    out = Path(args.out).expanduser().resolve()
    plan = plan_ingest(docs, exclude=out)
    check_out(out, docs, args.force)
    with Progress("ingest", len(plan.files), unit="files", enabled=not args.quiet) as progress:
        result = read_documents(plan, args.tables, on_file=progress.update)
    for s in result.skipped[:SHOW_SKIPPED]:
        print(f"warning: skipped {s.file}: {s.reason}", file=sys.stderr)
    if len(result.skipped) > SHOW_SKIPPED:
        print(f"warning: ... and {len(result.skipped) - SHOW_SKIPPED} more skipped files", file=sys.stderr)
    if not result.documents:
        raise InputError(
            str(docs),
            f"no document could be read ({len(result.skipped)} file(s) skipped, reasons above)",
            "add .md, .txt, .html, .docx or .pdf files with text (a scanned PDF needs OCR first)",
        )
    stale = stale_labels(out, result) if out.is_dir() else []
    for message in stale:
        print(f"warning: {message}", file=sys.stderr)
    written = write_output(result, out, args.tables, notes=stale)
    n_sections = sum(d.sections for d in result.documents)
    n_rows = sum(d.table_rows for d in result.documents)
    print(
        f"ingested {len(result.documents)} document(s) with {n_sections} section(s) ({n_rows} table row(s)) from "
        f"{docs}; skipped {len(result.skipped)}; language {result.language}, chunker {result.chunker['kind']}"
    )
    encoders = {lang: default_encoder(lang) for lang in ("en", "zh")}
    for line in summary_notes(result, written.unit, written.chunks, out, encoders):
        print(f"note: {line}")
    print(f"wrote {out}/corpus.jsonl, corpus.yaml, chunks.tsv, ingest_report.md")
    print(
        f"next: add questions and labels (python -m ablate.init {out}; docs/your-data.md), then "
        f"python -m ablate corpus=beir corpus.path={out} variant=A"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(_parser(), run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
