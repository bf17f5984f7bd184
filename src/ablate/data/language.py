"""Which script a text is written in: the one rule that picks a corpus's language and a chunker's tokens."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

#: Threshold of :func:`detect_language`: share of Han ideographs among non-space characters.
ZH_SHARE = 0.2
#: A corpus is a mix when each language holds at least this share of its documents: one Chinese memo among twenty
#: English policies is a stray, not a second language the defaults must serve.
MIX_SHARE = 0.1

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


@dataclass(frozen=True)
class LanguageMix:
    """The languages of a corpus, counted per document (:func:`corpus_language`).

    ``counts``: documents detected as each language; ``language``: the corpus default that follows from them (for a
    real mix ``zh``, whose tokenizer rules keep English words and stopwords and whose encoder, multilingual, reads
    both); ``mixed``: each language holds at least :data:`MIX_SHARE` of the documents."""

    counts: dict[str, int]
    language: Literal["en", "zh"]
    mixed: bool

    def describe(self) -> str:
        """``3 Chinese and 4 English documents`` (the counts, in words)."""
        names = {"zh": "Chinese", "en": "English"}
        return " and ".join(f"{n} {names[k]}" for k, n in sorted(self.counts.items(), reverse=True) if n) + (
            " documents"
        )


def language_mix(languages: Iterable[str]) -> LanguageMix:
    """The corpus's language from each document's (``en``/``zh``, detected or declared): the language of every
    document; for a mix beyond :data:`MIX_SHARE` of either side, ``zh`` (the multilingual choice: see
    :class:`LanguageMix`); below it, the language of most documents. No document: ``en``."""
    counts = {"zh": 0, "en": 0}
    for one in languages:
        counts["zh" if one == "zh" else "en"] += 1
    n = sum(counts.values())
    mixed = n > 0 and min(counts.values()) >= MIX_SHARE * n
    lang: Literal["en", "zh"] = "zh" if mixed or counts["zh"] > counts["en"] else "en"
    return LanguageMix(counts, lang, mixed)


def corpus_language(texts: Iterable[str]) -> LanguageMix:
    """:func:`language_mix` of each text's :func:`detect_language`: a corpus's language, detected per document."""
    return language_mix(detect_language(t) for t in texts)
