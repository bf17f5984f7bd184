"""Which version of a document is in force on a date.

Rules (logged with every run that uses dates; see docs/architecture.md, "Who asks, and when"):

* A date is ISO ``YYYY-MM-DD`` (its basic form ``YYYYMMDD`` is read the same). A document's ``effective_date`` is
  the first day it applies.
* A document with no ``effective_date`` is in force on every date.
* A document whose ``effective_date`` is after the date is **not yet in force**.
* Documents sharing a ``series`` are versions of one document: on a date, the one with the latest
  ``effective_date`` on or before that date is in force and every earlier one is **superseded**. Ties (two versions
  of one series effective the same day) are an input error: the corpus cannot say which applies.
* A document without a series is in force from its effective date on (nothing supersedes it).

"Out of force" means superseded or not yet in force. Nothing here looks at the text or the version string: only
``effective_date`` and ``series`` decide.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping

from ablate.data.types import Document
from ablate.errors import ConfigError, InputError

IN_FORCE_RULE = (
    "a document is in force on date D when its effective_date is on or before D (or it has none) and no later "
    "version of its series is effective on or before D; superseded and not-yet-effective versions are out of force"
)


_ISO_DATE = re.compile(r"([0-9]{4})-?([0-9]{2})-?([0-9]{2})")


def iso_date(value: object) -> dt.date | None:
    """``YYYY-MM-DD`` or its ISO basic form ``YYYYMMDD`` (what ``corpus.as_of=20260415`` arrives as: Hydra reads it
    as a number) as a date; ``None`` for anything else. Explicit, so every Python accepts the same dates
    (``date.fromisoformat`` takes more forms from 3.11 on)."""
    text = str(value).strip()
    m = _ISO_DATE.fullmatch(text)
    if m is None or ("-" in text and text.count("-") != 2):
        return None
    try:
        return dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return None


def parse_date(value: str, where: str, key: str = "as_of") -> dt.date:
    """``YYYY-MM-DD`` (or ``YYYYMMDD``) as a date, or :class:`InputError` naming ``where``."""
    d = iso_date(value)
    if d is None:
        raise InputError(where, f"{key} {value!r} is not a date", "write it as YYYY-MM-DD, e.g. 2026-04-15")
    return d


def check_config_date(key: str, value: str) -> str:
    """A date given in config (``corpus.as_of=2026-04-15``, or ``20260415``): normalised to ``YYYY-MM-DD``, the one
    form every record writes, or :class:`ConfigError`."""
    d = iso_date(value)
    if d is None:
        raise ConfigError(key, value, "give per_query, a date YYYY-MM-DD, or null (dates ignored)")
    return d.isoformat()


class VersionIndex:
    """The in-force rule over one snapshot's documents, with the answer per date memoised."""

    def __init__(self, documents: Mapping[str, Document]) -> None:
        self._effective: dict[str, dt.date | None] = {}
        series: dict[str, list[tuple[dt.date, str]]] = {}
        for doc_id, doc in documents.items():
            eff = (
                parse_date(doc.effective_date, f"corpus.jsonl ({doc_id})", "effective_date")
                if doc.effective_date
                else None
            )
            self._effective[doc_id] = eff
            if doc.series and eff is not None:
                series.setdefault(doc.series, []).append((eff, doc_id))
        self._series: dict[str, list[tuple[dt.date, str]]] = {}
        for name, versions in series.items():
            versions.sort()
            for (d1, a), (d2, b) in zip(versions, versions[1:], strict=False):
                if d1 == d2:
                    raise InputError(
                        f"corpus.jsonl ({a}, {b})",
                        f"two versions of series {name!r} take effect on the same day {d1.isoformat()}",
                        "give each version of a series its own effective_date",
                    )
            self._series[name] = versions
        self._series_of = {d: doc.series for d, doc in documents.items() if doc.series}
        self._memo: dict[dt.date, frozenset[str]] = {}
        self.has_dates = any(v is not None for v in self._effective.values())

    def out_of_force(self, date: dt.date) -> frozenset[str]:
        """The documents out of force on ``date`` (superseded or not yet effective)."""
        hit = self._memo.get(date)
        if hit is not None:
            return hit
        out = {d for d, eff in self._effective.items() if eff is not None and eff > date}
        for versions in self._series.values():
            current = [doc for eff, doc in versions if eff <= date]
            out.update(current[:-1])  # every earlier version is superseded by the latest effective one
        frozen = frozenset(out)
        self._memo[date] = frozen
        return frozen

    def superseded(self, date: dt.date) -> frozenset[str]:
        """The documents superseded on ``date`` by a later version of their series (a subset of out of force)."""
        out: set[str] = set()
        for versions in self._series.values():
            current = [doc for eff, doc in versions if eff <= date]
            out.update(current[:-1])
        return frozenset(out)
