"""Which files of a documents folder are read: every file below it in path order, except hidden files and folders
(``.git``, ``.DS_Store``), sidecar files (``*.meta.yaml``) and the output folder when it lies inside. A file whose
suffix no reader takes is skipped with the reason (``.doc``: save as .docx; anything else: unknown extension)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ablate.ingest.metadata import SIDECAR
from ablate.ingest.readers import FORMATS, NOT_READ


@dataclass(frozen=True)
class Source:
    """A file to read: its path, its path below the documents folder (posix) and its format."""

    path: Path
    rel: PurePosixPath
    fmt: str


@dataclass(frozen=True)
class Skipped:
    """A file that was not read, and why (shown in the report and on the console)."""

    file: str
    reason: str


def scan(docs: Path, exclude: Path | None = None) -> tuple[list[Source], list[Skipped], list[str]]:
    """``(sources, skipped, notes)`` of ``docs``: notes name sidecar files without their document."""
    sources: list[Source] = []
    skipped: list[Skipped] = []
    notes: list[str] = []
    known = ", ".join(FORMATS)
    for folder, dirs, files in os.walk(docs, followlinks=False):
        here = Path(folder)
        dirs[:] = sorted(
            d for d in dirs if not d.startswith(".") and (exclude is None or here / d != exclude)
        )
        for name in sorted(files):
            path = here / name
            rel = PurePosixPath(path.relative_to(docs).as_posix())
            if name.startswith("."):
                continue
            if name.endswith(SIDECAR):
                if not (here / name[: -len(SIDECAR)]).is_file():
                    notes.append(f"{rel}: a sidecar without its document {name[: -len(SIDECAR)]} (not used)")
                continue
            if name.startswith("~$"):
                skipped.append(Skipped(str(rel), "a Word lock file (the document is open in Word)"))
                continue
            suffix = path.suffix.lower()
            if suffix in FORMATS:
                sources.append(Source(path, rel, FORMATS[suffix]))
            elif suffix in NOT_READ:
                skipped.append(Skipped(str(rel), NOT_READ[suffix]))
            else:
                what = f"unknown extension {suffix!r}" if suffix else "no extension"
                skipped.append(Skipped(str(rel), f"{what} (ingest reads {known})"))
    return sources, skipped, notes
