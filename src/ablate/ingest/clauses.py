"""Numbered clauses at a line start, in English and Chinese, and the section id each one gets.

The rule (docs/ingest.md lists it with examples):

===========================  ===========  =====
line starts with              id           level
===========================  ===========  =====
``4.2``, ``4.2.1``, ``4.``    ``4.2``      parts
``4.2-a``, ``4.2(a)``         ``4.2-a``    parts + 1
``1、``                       ``1``        1
``Article 3``, ``Art. 3``     ``art-3``    3
``Section 5``, ``§ 5``        ``sec-5``    2
``Chapter 2``, ``Part II``    ``ch-2``, ``part-2``  1
``Clause 4.2``                ``4.2``      parts
``第4.2条``                    ``4.2``      parts
``第十二条``, ``第12条``        ``art-12``   3
``第三章``                     ``ch-3``     1
``第二节``                     ``sec-2``    2
``第一部分``, ``第一编``         ``part-1``   1
``一、``                       ``1``        1
===========================  ===========  =====

Guards against running text that merely starts with a number: a number has at most three digits per part and is
followed by white space (or ``、`` / ``.`` and white space, or the end of the line); what follows a number or an
English keyword must not start with a lower-case letter (``3.5 million``, ``Section 5 of the Act``); and a
single-level number (``4 Travel``, ``1) Scope``, ``一、总则``) counts only on a short heading-like line (see
:func:`heading_like`), since ordinary lists number their items the same way. Chinese and Roman numerals are read as
integers (``十二`` -> 12, ``IV`` -> 4).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CN_DIGITS = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_CN_UNITS = {"十": 10, "百": 100, "千": 1000}
_ROMAN = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100}

_CN_NUM = "[0-9０-９零〇一二三四五六七八九十百千两]+"
_RE_CN_MARK = re.compile(rf"^(第\s*({_CN_NUM}(?:\.[0-9]+)*)\s*(章|节|節|条|條|部分|编|篇))\s*(.*)$")
_RE_CN_ENUM = re.compile(r"^(([零〇一二三四五六七八九十百两]+)\s*[、，])\s*(.*)$")
_RE_EN_MARK = re.compile(
    r"^((Article|ARTICLE|Art\.|Section|SECTION|Sec\.|§|Chapter|CHAPTER|Chap\.|Clause|CLAUSE|Part|PART)\s*"
    r"([0-9]{1,3}(?:\.[0-9]{1,3})*|[IVXLC]+|[ivxlc]+)\b\.?)[:.]?\s*(.*)$"
)
_RE_NUM = re.compile(
    r"^(([0-9]{1,3}(?:\.[0-9]{1,3})*)(?:-([a-z])\b|\s?\(([a-z])\))?(?:、|[.)]?(?=\s|$)))\s*(.*)$"
)

_EN_KIND = {"art": "art", "sec": "sec", "§": "sec", "cha": "ch", "cla": "", "par": "part"}
_EN_LEVEL = {"art": 3, "sec": 2, "ch": 1, "part": 1}
_CN_KIND = {"章": ("ch", 1), "节": ("sec", 2), "節": ("sec", 2), "条": ("art", 3), "條": ("art", 3)}
_END_PUNCT = tuple(".。;；:：!！?？,，")

#: a heading-like rest of a line is at most this many characters
HEADING_MAX = 50


@dataclass(frozen=True)
class Clause:
    """A clause found at a line start: its section ``sid``, the ``marker`` as written (``第十二条``, ``4.2-a``), the
    ``rest`` of the line and its ``level`` (1 is the top; for the breadcrumb of titles)."""

    sid: str
    marker: str
    rest: str
    level: int


def cn_int(text: str) -> int | None:
    """``"十二"`` -> 12, ``"一百零五"`` -> 105, ``"12"`` -> 12 (also full-width digits); ``None`` if not a number."""
    if text.isdigit():
        return int(text)
    total = num = 0
    for ch in text:
        if ch in _CN_DIGITS:
            num = _CN_DIGITS[ch]
        elif ch in _CN_UNITS:
            total += (num or 1) * _CN_UNITS[ch]
            num = 0
        else:
            return None
    return total + num


def roman_int(text: str) -> int | None:
    """``"IV"`` -> 4; ``None`` if not a Roman numeral of I, V, X, L, C."""
    vals = [_ROMAN.get(c) for c in text.lower()]
    if not vals or any(v is None for v in vals):
        return None
    nums = [v for v in vals if v is not None]
    return sum(-v if i + 1 < len(nums) and v < nums[i + 1] else v for i, v in enumerate(nums))


def heading_like(rest: str) -> bool:
    """A short rest of a line that reads as a title: at most :data:`HEADING_MAX` characters, not ending like a
    sentence (``.``, ``。``, ``;``, ``:``, ``,`` ...)."""
    rest = rest.strip()
    return bool(rest) and len(rest) <= HEADING_MAX and not rest.endswith(_END_PUNCT)


def _starts_lower(rest: str) -> bool:
    return bool(rest) and rest[0].isascii() and rest[0].islower()


def _number(text: str) -> str | None:
    """A clause number as digits: dotted Arabic kept (``4.2``), Chinese/Roman/full-width read as an integer."""
    if re.fullmatch(r"[0-9]+(?:\.[0-9]+)*", text):
        return ".".join(str(int(p)) for p in text.split("."))
    n = cn_int(text)
    if n is None:
        n = roman_int(text)
    return None if n is None else str(n)


def find_clause(line: str) -> Clause | None:
    """The clause ``line`` starts with (see the module docstring), else ``None``."""
    s = line.strip()
    if not s:
        return None
    if m := _RE_CN_MARK.match(s):
        num, kind, rest = _number(m.group(2)), m.group(3), m.group(4)
        if num is None:
            return None
        if kind in _CN_KIND:
            prefix, level = _CN_KIND[kind]
            if "." in num and prefix == "art":  # 第4.2条: the clause number itself
                return Clause(num, m.group(1), rest, num.count(".") + 1)
            return Clause(f"{prefix}-{num}", m.group(1), rest, level)
        return Clause(f"part-{num}", m.group(1), rest, 1)
    if m := _RE_CN_ENUM.match(s):
        num = _number(m.group(2))
        if num is None or not heading_like(m.group(3)):  # 一、出差人员应当……； is an item of a list
            return None
        return Clause(num, m.group(1), m.group(3), 1)
    if m := _RE_EN_MARK.match(s):
        word, raw, rest = m.group(2), m.group(3), m.group(4)
        num = _number(raw)
        if num is None or _starts_lower(rest):
            return None
        kind = _EN_KIND[word.lower()[:3] if word != "§" else "§"]
        if not kind:  # Clause 4.2: the number itself
            return Clause(num, m.group(1), rest, num.count(".") + 1)
        return Clause(f"{kind}-{num}", m.group(1), rest, _EN_LEVEL[kind])
    if m := _RE_NUM.match(s):
        num, letter, rest = m.group(2), m.group(3) or m.group(4), m.group(5)
        parts = num.split(".")
        if _starts_lower(rest) and not letter:
            return None
        if len(parts) == 1 and not letter and not heading_like(rest):
            return None
        sid = _number(num) or num
        return Clause(
            f"{sid}-{letter}" if letter else sid, m.group(1), rest, len(parts) + (1 if letter else 0)
        )
    return None
