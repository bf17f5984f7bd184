"""One reader per format, each a well-kept parser imported only when a file of its format is read
(``pip install 'ablate[ingest]'`` brings them): Markdown (markdown-it-py), HTML (Beautiful Soup with lxml), Word
.docx (python-docx), PDF text layers (pypdf); plain text needs none. Each turns a file into
:class:`~ablate.ingest.blocks.Parsed` or raises :class:`~ablate.ingest.blocks.Unreadable`."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from pathlib import Path

from ablate.errors import AblateError
from ablate.ingest.blocks import Parsed

#: file suffix (lower case) -> format
FORMATS = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".html": "html",
    ".htm": "html",
    ".docx": "docx",
    ".pdf": "pdf",
}
#: format -> (module, the package that installs it) it needs
NEEDS: dict[str, tuple[tuple[str, str], ...]] = {
    "markdown": (("markdown_it", "markdown-it-py"),),
    "text": (),
    "html": (("bs4", "beautifulsoup4"), ("lxml", "lxml")),
    "docx": (("docx", "python-docx"),),
    "pdf": (("pypdf", "pypdf"),),
}
#: suffixes that are known but not read, and what to do instead
NOT_READ = {
    ".doc": "old binary Word format: save it as .docx",
    ".rtf": "RTF is not read: save it as .docx",
    ".odt": "OpenDocument is not read: save it as .docx",
    ".xlsx": "spreadsheets are not read: save the sheet as .html or paste the table into a .md file",
    ".xls": "spreadsheets are not read: save the sheet as .html or paste the table into a .md file",
    ".pptx": "slides are not read: export them as PDF",
}


def check_parsers(formats: Iterable[str]) -> None:
    """Every parser the given formats need imports, else one :class:`AblateError` naming what to install."""
    missing: dict[str, list[str]] = {}
    for fmt in sorted(set(formats)):
        for module, package in NEEDS[fmt]:
            try:
                importlib.import_module(module)
            except ImportError:
                missing.setdefault(package, []).append(fmt)
    if missing:
        what = ", ".join(f"{pkg} (for {'/'.join(sorted(set(f)))})" for pkg, f in missing.items())
        raise AblateError(
            f"reading these documents needs {what}, which is not installed. Fix: pip install 'ablate[ingest]'"
        )


def reader(fmt: str) -> Callable[[Path], Parsed]:
    """The read function of ``fmt`` (its parser imported now)."""
    if fmt == "markdown":
        from ablate.ingest.readers.md import read_markdown

        return read_markdown
    if fmt == "html":
        from ablate.ingest.readers.htmlpage import read_html

        return read_html
    if fmt == "docx":
        from ablate.ingest.readers.word import read_docx

        return read_docx
    if fmt == "pdf":
        from ablate.ingest.readers.pdf import read_pdf

        return read_pdf
    from ablate.ingest.readers.text import read_text

    return read_text
