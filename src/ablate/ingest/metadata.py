"""What a document's front matter (Markdown) or sidecar file (``<file>.meta.yaml``, any format) may say, validated.

Keys (all optional):

* ``id``: the document id (else made from the file name, :mod:`ablate.ingest.ids`); no white space, no ``#``;
* ``title``: the title (else the file's own: front matter, HTML ``<title>``, Word's title, the first heading);
* ``version``: a version label, e.g. ``"2026"`` (quote numbers such as ``"1.10"``: YAML reads ``1.10`` as 1.1);
* ``effective_date``: ``YYYY-MM-DD``, the day the version takes effect;
* ``series``: what versions of one document share (``POL-TRAVEL``);
* ``acl``: a list of groups allowed to see it, e.g. ``[finance]`` (absent = everyone);
* ``lang``: ``en`` or ``zh``;
* ``metadata``: a mapping kept as the document's metadata.

Any other key is kept in the document's ``metadata`` too (front matter often carries ``author`` or ``tags``), except
a near-miss of a known key (``effective-date``, ``verison``), which is refused so a typo is not silently ignored.
A sidecar's values win over the front matter's. Every problem is one :class:`InputError` naming the file and the key.
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ablate.errors import InputError
from ablate.safeyaml import YamlLimitError, loader_with, safe_load

KEYS = ("id", "title", "version", "effective_date", "series", "acl", "lang", "metadata")
LANGS = ("en", "zh")
SIDECAR = ".meta.yaml"
#: The most bytes a front matter or a sidecar file may hold, and the most characters its YAML aliases may repeat:
#: they are metadata (an id, a title, dates, groups), a few hundred bytes; 64 KiB leaves room for long titles and
#: many groups while a crafted file (an alias bomb: 274 bytes that expand to 28 MB) is refused before it is used.
META_MAX = 64 * 1024
_FRONT = re.compile(
    r"\A(?:\ufeff)?---[ \t]*\r?\n(.*?)(?:\r?\n)?^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S | re.M
)


@dataclass(frozen=True)
class DocMeta:
    """Validated metadata of one document (``None``/empty = not given)."""

    id: str | None = None
    title: str | None = None
    version: str | None = None
    effective_date: str | None = None
    series: str | None = None
    acl: tuple[str, ...] | None = None
    lang: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def split_front_matter(text: str) -> tuple[str | None, str, int]:
    """``(yaml text or None, the rest, the line the rest starts on)`` of a Markdown text."""
    m = _FRONT.match(text)
    if not m:
        return None, text, 1
    return m.group(1), text[m.end() :], text[: m.end()].count("\n") + 1


class _Loader(yaml.SafeLoader):
    """YAML's safe loader without its date rule: ``2026-13-45`` stays a text that :func:`_date` refuses by name
    (PyYAML would fail inside its parser), and a date is checked one way whichever way it was written."""


_Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
#: :class:`_Loader` whose aliases may repeat at most :data:`META_MAX` characters (:mod:`ablate.safeyaml`).
_LimitedLoader = loader_with(_Loader, META_MAX)


def too_long(where: str, size: int) -> InputError:
    """The refusal of a front matter or sidecar of ``size`` bytes (more than :data:`META_MAX`)."""
    return InputError(
        where,
        f"is {size:,} bytes long; front matter and sidecar files are metadata (id, title, version, dates, acl) and "
        f"may hold at most {META_MAX:,} bytes",
        "keep only the metadata keys there and move any text into the document itself",
    )


def load_yaml(text: str, where: str, first_line: int = 1) -> dict[str, Any]:
    """A YAML mapping (empty for an empty text), else :class:`InputError` at ``where:line``: also for a text longer
    than :data:`META_MAX` bytes and for aliases that repeat more than that (:mod:`ablate.safeyaml`)."""
    size = len(text.encode("utf-8"))
    if size > META_MAX:
        raise too_long(where, size)
    try:
        data = safe_load(text, _LimitedLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f"{where}:{mark.line + first_line}" if mark else where
        if isinstance(e, YamlLimitError):
            raise InputError(at, str(e.problem), e.fix) from None
        raise InputError(at, f"invalid YAML ({getattr(e, 'problem', e)})", "fix the YAML syntax") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(
            where, "is not a YAML mapping", "write key: value lines (version, effective_date, acl, ...)"
        )
    return {str(k): v for k, v in data.items()}


def _text(where: str, key: str, v: Any) -> str | None:
    if v is None or v == "":
        return None
    if isinstance(v, float):
        raise InputError(
            where,
            f"{key} {v!r} was read as a number (YAML drops a trailing zero: 1.10 becomes 1.1)",
            f'quote it: {key}: "{v}"',
        )
    if isinstance(v, (dict, list, bool)):
        raise InputError(where, f"{key} {v!r} is not a text", f"write {key}: followed by one value")
    return str(v)


def _date(where: str, v: Any) -> str | None:
    if v is None or v == "":
        return None
    if isinstance(v, dt.datetime):
        v = v.date()
    if isinstance(v, dt.date):
        return v.isoformat()
    try:
        if isinstance(v, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", v.strip()):
            return dt.date.fromisoformat(v.strip()).isoformat()
    except ValueError:
        pass
    raise InputError(
        where,
        f"effective_date {v!r} is not a date",
        "write it as YYYY-MM-DD, e.g. effective_date: 2026-04-01",
    )


def _acl(where: str, v: Any) -> tuple[str, ...] | None:
    if v is None:
        return None
    if not isinstance(v, list) or not all(isinstance(g, str) and g.strip() for g in v):
        raise InputError(
            where,
            f"acl {v!r} is not a list of group names",
            "write e.g. acl: [finance, hr] (leave acl out for a document everyone sees)",
        )
    return tuple(g.strip() for g in v)


def _doc_id(where: str, v: Any) -> str | None:
    s = _text(where, "id", v)
    if s is not None and (not s.strip() or any(c.isspace() for c in s) or "#" in s):
        raise InputError(
            where,
            f"id {s!r} contains white space or '#'",
            "give an id without spaces or '#', e.g. POL-TRAVEL-2026",
        )
    return None if s is None else unicodedata.normalize("NFC", s)


def check_meta(raw: dict[str, Any], where: str) -> DocMeta:
    """``raw`` (a front matter's or sidecar's mapping) validated; ``where`` names the file in errors."""
    for key in raw:
        if key not in KEYS:
            close = difflib.get_close_matches(key.replace("-", "_").lower(), KEYS, n=1, cutoff=0.8)
            if close and close[0] != key:
                raise InputError(
                    where, f"unknown key {key!r}", f"did you mean {close[0]}? (keys: {', '.join(KEYS)})"
                )
    lang = _text(where, "lang", raw.get("lang"))
    if lang is not None and lang not in LANGS:
        raise InputError(
            where, f"lang {lang!r} is not one of {', '.join(LANGS)}", "write lang: en or lang: zh"
        )
    extra = raw.get("metadata") or {}
    if not isinstance(extra, dict):
        raise InputError(
            where, "metadata is not a mapping", "write metadata: {owner: Finance} or leave it out"
        )
    extra = {str(k): v for k, v in extra.items()}
    extra.update({k: v for k, v in raw.items() if k not in KEYS})
    return DocMeta(
        id=_doc_id(where, raw.get("id")),
        title=_text(where, "title", raw.get("title")),
        version=_text(where, "version", raw.get("version")),
        effective_date=_date(where, raw.get("effective_date")),
        series=_text(where, "series", raw.get("series")),
        acl=_acl(where, raw.get("acl")),
        lang=lang,
        extra=_plain(extra),
    )


def _plain(v: Any) -> Any:
    """Values YAML made (dates) as JSON-safe values."""
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, (dt.date, dt.datetime)):
        return v.isoformat()
    return v


def sidecar_of(path: Path) -> Path:
    """``policy.pdf`` -> ``policy.pdf.meta.yaml``."""
    return path.with_name(path.name + SIDECAR)


def merge(front: DocMeta | None, side: DocMeta | None) -> DocMeta:
    """The sidecar's values over the front matter's."""
    if front is None:
        return side or DocMeta()
    if side is None:
        return front
    pick = {k: getattr(side, k) if getattr(side, k) is not None else getattr(front, k) for k in KEYS[:-1]}
    return DocMeta(**pick, extra={**front.extra, **side.extra})


def read_sidecar(path: Path) -> DocMeta | None:
    """The validated sidecar of ``path``, or ``None`` when it has none."""
    side = sidecar_of(path)
    if not side.is_file():
        return None
    size = side.stat().st_size
    if size > META_MAX:
        raise too_long(str(side), size)
    try:
        text = side.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(str(side), "is not UTF-8", "save the sidecar file as UTF-8") from None
    return check_meta(load_yaml(text, str(side)), str(side))
