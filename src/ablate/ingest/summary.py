"""The lines ``python -m ablate.ingest`` prints after writing, each for a default it chose that a user must know:
which ids the labels name and where they are listed, which language a mixed folder got and why, and which documents
state an effective date in their text that ingest did not read (:mod:`ablate.ingest.dates`)."""

from __future__ import annotations

from pathlib import Path

from ablate.data.chunk_list import CHUNKS_FILE
from ablate.data.language import LanguageMix
from ablate.ingest.build import Result
from ablate.ingest.dates import dates_line


def unit_line(unit: str, n_chunks: int, out: Path) -> str:
    """Where the ids a label names are listed, at the corpus's label unit."""
    listed = f"{out / CHUNKS_FILE} lists the {n_chunks} chunk(s) with their document, version and first words"
    if unit == "chunk":
        return (
            f"labels name chunk ids (qrels_unit: chunk in corpus.yaml): {listed}; write qrels_unit: doc to label "
            "whole documents by their doc-id"
        )
    return (
        f"labels name document ids (qrels_unit: {unit} in corpus.yaml; its doc-id column); {listed}, the ids to "
        "use under qrels_unit: chunk"
    )


def language_line(mix: LanguageMix, encoders: dict[str, str]) -> str:
    """One line for a folder whose documents are in two languages: the counts, the default and why, the override.
    ``encoders``: the dense encoder each language gets by default (``zh`` and ``en``)."""
    return (
        f"the documents mix languages ({mix.describe()}, detected one by one): language {mix.language}, the "
        f"multilingual choice (BM25 cuts Chinese into words and keeps English ones; dense retrieval defaults to "
        f"{encoders[mix.language]}, which reads both, where {encoders['en']} reads English only). Override: "
        "language: en in corpus.yaml, or corpus.language=en on the command line"
    )


def summary_notes(result: Result, unit: str, n_chunks: int, out: Path, encoders: dict[str, str]) -> list[str]:
    """The notes to print after ingest wrote ``out`` (see the module docstring); ``encoders`` as
    :func:`language_line` takes them."""
    lines = [unit_line(unit, n_chunks, out)]
    if result.mix is not None and result.mix.mixed:
        lines.append(language_line(result.mix, encoders))
    dates = dates_line([d.record for d in result.documents])
    if dates:
        lines.append(dates)
    return lines
