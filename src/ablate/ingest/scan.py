"""Which files of a documents folder are read: every file below it in path order, except hidden files and folders
(``.git``, ``.DS_Store``), sidecar files (``*.meta.yaml``) and the output folder when it lies inside. A file whose
suffix no reader takes is skipped with the reason (``.doc``: save as .docx; anything else: unknown extension).

Links are never followed out of the folder: a link (to a file or a folder) whose target lies outside it is refused,
naming the link and its target, before anything is read. A link to a file inside the folder is read like a file
(under the link's name); a link to a folder inside it is not walked (its files are read where they are, once), so
no link can make a loop."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ablate.errors import InputError
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
    root = docs.resolve()
    for folder, dirs, files in os.walk(docs, followlinks=False):
        here = Path(folder)
        dirs[:] = sorted(
            d for d in dirs if not d.startswith(".") and (exclude is None or here / d != exclude)
        )
        for d in [d for d in dirs if (here / d).is_symlink()]:
            _check_link(here / d, root, "folder")
            notes.append(
                f"{(here / d).relative_to(docs).as_posix()}: a link to a folder inside the documents folder, not "
                "walked (its files are read where they are)"
            )
            dirs.remove(d)
        for name in sorted(files):
            path = here / name
            rel = PurePosixPath(path.relative_to(docs).as_posix())
            if name.startswith("."):
                continue
            if path.is_symlink():
                _check_link(path, root, "file")
                try:
                    os.path.realpath(path, strict=True)
                except (OSError, RuntimeError):
                    skipped.append(
                        Skipped(str(rel), "a link that leads nowhere (its target is missing, or a loop)")
                    )
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


def _check_link(link: Path, root: Path, kind: str) -> None:
    """Refuse ``link`` when its target (followed to the end) lies outside ``root`` (the resolved documents folder)."""
    target = Path(os.path.realpath(link))
    if target != root and root not in target.parents:
        raise InputError(
            str(link),
            f"is a link to {target}, outside the documents folder {root}; ingest never follows a link out of it",
            f"copy the {kind} into the documents folder instead of linking to it",
        )
