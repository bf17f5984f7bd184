"""Which script a text is written in: the one rule that picks a corpus's language and a chunker's tokens."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

#: Threshold of :func:`detect_language`: share of Han ideographs among non-space characters.
ZH_SHARE = 0.2

HAN_RANGES = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef\U00030000-\U0003134f"
HAN_CHAR_RE = re.compile(rf"[{HAN_RANGES}]")


def _non_space(text: str) -> int:
    """How many characters of ``text`` are not whitespace (``str.isspace``; ``str.split()`` splits on exactly
    those, in C, so a whole corpus is counted without a Python step per character)."""
    return sum(map(len, text.split()))


def han_share(text: str) -> float:
    """Share of Han ideographs among the non-space characters of ``text`` (0 for an empty text)."""
    n = _non_space(text)
    return len(HAN_CHAR_RE.findall(text)) / n if n else 0.0


def detect_language(texts: str | Iterable[str]) -> Literal["en", "zh"]:
    """``"zh"`` when Han ideographs are more than 20% of the non-space characters of ``texts`` (pooled), else ``"en"``.

    Pooling counts every character once, so a corpus of long English documents with a few Chinese titles stays
    ``"en"``. Accepts one text or many.
    """
    if isinstance(texts, str):
        texts = (texts,)
    han = total = 0
    for t in texts:
        han += len(HAN_CHAR_RE.findall(t))
        total += _non_space(t)
    return "zh" if total and han / total > ZH_SHARE else "en"
