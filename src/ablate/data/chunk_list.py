"""``chunks.tsv``: the ids a labels file may name, one chunk a line, written beside ``corpus.jsonl``.

A label's ``corpus-id`` is a chunk id under ``qrels_unit: chunk`` and a document id under ``qrels_unit: doc``;
the chunker makes the chunk ids (``DOC#section``, ``DOC#p0``, ...), so a user cannot see them in the documents.
This file lists them with what a labeller needs to pick one: the chunk id, its document id (the id to write under
``qrels_unit: doc``), the document's version and the start of the chunk's text. ``python -m ablate.ingest`` writes it
with the corpus; ``python -m ablate.init`` writes it when it is missing. It lists the chunks of the chunker in
``corpus.yaml`` when it was written: write it again (delete it, run ``python -m ablate.init``) after changing that.
"""

from __future__ import annotations

from collections.abc import Sequence

from ablate.data.types import Chunk

#: The file's name in a corpus folder.
CHUNKS_FILE = "chunks.tsv"
#: Characters of a chunk's text shown: about one line, enough to tell two clauses of a policy apart.
PREVIEW_CHARS = 80
HEADER = ("chunk-id", "doc-id", "version", "text")


def preview(text: str, n: int = PREVIEW_CHARS) -> str:
    """The first ``n`` characters of ``text`` on one line (white space runs, tabs and line breaks included, become
    one space), with ``…`` when it was cut."""
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[: n - 1].rstrip() + "…"


def chunks_tsv(chunks: Sequence[Chunk]) -> str:
    """The text of ``chunks.tsv`` (see the module docstring): a header line, then one line per chunk."""
    rows = ["\t".join(HEADER)]
    rows += ["\t".join((c.chunk_id, c.doc_id, c.version or "", preview(c.text))) for c in chunks]
    return "\n".join(rows) + "\n"
