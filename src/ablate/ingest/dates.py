"""Effective dates a document's text states but its metadata does not give.

Ingest dates a document only from its front matter or sidecar (``effective_date``): a date in the body
("This policy takes effect on 2026-03-01", "本规定自2026年1月1日起生效") is not read, because a body names many dates
(deadlines, examples, the dates of other documents) and a wrong one silently changes which version is in force.
:func:`stated_dates` finds the undated documents whose text states one, so the console can say so in one line
(:func:`dates_line`) with the override, instead of leaving a user to believe the document is dated.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

#: A date beside a word that says "takes effect", in one sentence (English or Chinese; ISO or 年月日 form).
_DATE = r"(?:\d{4}-\d{1,2}-\d{1,2}|\d{4}年\d{1,2}月\d{1,2}日)"
_EFFECT = r"(?:effective|takes? effect|in force|生效|施行|实施)"
STATED_RE = re.compile(
    rf"{_EFFECT}[^.。;；\n]{{0,40}}?{_DATE}|{_DATE}[^.。;；\n]{{0,40}}?{_EFFECT}", re.IGNORECASE
)
#: Documents a line names before it says "and N more".
SHOWN = 3


def stated_dates(records: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """``(document id, the words stating the date)`` of each record without ``effective_date`` whose text states
    one (see the module docstring)."""
    out = []
    for r in records:
        if r.get("effective_date"):
            continue
        m = STATED_RE.search(str(r.get("text", "")))
        if m is not None:
            out.append((str(r["_id"]), " ".join(m.group().split())))
    return out


def dates_line(records: Sequence[dict[str, Any]]) -> str | None:
    """One line naming the documents whose text states an effective date their metadata does not give (``None``
    when there are none): how many, which, and how to date them."""
    stated = stated_dates(records)
    if not stated:
        return None
    dated = sum(1 for r in records if r.get("effective_date"))
    shown = "; ".join(f"{d}: {words!r}" for d, words in stated[:SHOWN])
    more = f"; and {len(stated) - SHOWN} more" if len(stated) > SHOWN else ""
    return (
        f"{len(stated)} document(s) state an effective date in their text ({shown}{more}), which ingest does not "
        f"read ({dated} document(s) are dated, from their front matter or sidecar): to date one, give it "
        "effective_date: YYYY-MM-DD in its front matter or a <file>.meta.yaml sidecar (docs/ingest.md)"
    )
