"""Document ids from file names: the path below the documents folder, each folder and the file's stem cleaned
(:func:`ablate.ingest.names.clean`) and joined with ``__`` (``hr/Leave Policy.pdf`` -> ``hr__Leave-Policy``).
Two files that get one id (``a.md`` and ``a.pdf``) are refused, naming both; an ``id`` in the front matter or
sidecar settles it. Ids are compared in Unicode NFC (names are NFKC already, :func:`clean`; an ``id`` of the metadata
is turned into NFC), so two ids that look the same are the same; two names that differ only in their normalisation
(``café.md`` written as NFC and as NFD, as macOS writes names) are refused saying so, each shown with escapes."""

from __future__ import annotations

import unicodedata
from pathlib import PurePosixPath

from ablate.errors import InputError
from ablate.ingest.names import clean

JOIN = "__"
ID_MAX = 120


def doc_id_of(rel: PurePosixPath) -> str:
    """The id of the file at ``rel`` (relative to the documents folder)."""
    parts = [clean(p) for p in (*rel.parent.parts, rel.stem)]
    did = JOIN.join(p for p in parts if p)[:ID_MAX]
    return did or "doc"


def check_unique(ids: dict[str, str], source: dict[str, str]) -> None:
    """``ids``: file -> id; refuse the first id two files share, naming both (``source``: file -> where the id came
    from, for the message)."""
    first: dict[str, str] = {}
    for f, did in ids.items():
        did = unicodedata.normalize("NFC", did)
        if did in first:
            other = first[did]
            if unicodedata.normalize("NFKC", other) == unicodedata.normalize("NFKC", f):
                raise InputError(
                    f"{ascii(other)} and {ascii(f)}",
                    "these two file names differ only in their Unicode normalisation (the same letters written "
                    "with other code points: an accented letter as one character (NFC) or as a letter and an accent "
                    f"(NFD), as macOS writes names), so both get the document id {did!r}",
                    "rename or delete one of them (they are likely two copies of one document)",
                )
            raise InputError(
                f"{other} and {f}",
                f"both get the document id {did!r} ({source[other]}; {source[f]})",
                "rename one of them, or give one an id in its front matter or <file>.meta.yaml (id: ...)",
            )
        first[did] = f
