"""Ids made from text: section ids from headings without a number (slugs) and the deduplication every id of a
document goes through. An id never holds white space or ``#`` (``#`` separates a document id from a section id in a
chunk id, ``DOC#4.2``) and reads like its source."""

from __future__ import annotations

import re
import unicodedata

_NOT_ID = re.compile(r"[^\w.\-]+")
SLUG_MAX = 48


def clean(text: str) -> str:
    """``text`` as an id part: NFKC, every run of characters other than letters (any script), digits, ``_``, ``.`` and
    ``-`` (white space, ``#``, ``/``, brackets ...) becomes one ``-``; no leading or trailing ``-`` or ``.``."""
    s = _NOT_ID.sub("-", unicodedata.normalize("NFKC", text))
    return re.sub(r"-{2,}", "-", s).strip("-.")


def slug(text: str, fallback: str = "section") -> str:
    """``"Purpose and Scope"`` -> ``purpose-and-scope``; ``"总 则"`` -> ``总-则``: :func:`clean` in lower case, at
    most :data:`SLUG_MAX` characters; ``fallback`` when nothing is left."""
    return clean(text.lower())[:SLUG_MAX].strip("-.") or fallback


class UniqueIds:
    """Hands out ids unique within one document: the first ``4.2`` keeps its id, the next ones get ``4.2-2``,
    ``4.2-3`` (skipping any already taken), in document order, so the result is deterministic."""

    def __init__(self) -> None:
        self.taken: set[str] = set()

    def take(self, base: str) -> str:
        sid, n = base, 2
        while sid in self.taken:
            sid, n = f"{base}-{n}", n + 1
        self.taken.add(sid)
        return sid
