"""Lexical tokenization for BM25: English words, Chinese (jieba) words and identifiers kept whole.

The rules are keyed on the *script of each token*, never on a guess about the whole text, so a word that appears in
a query and in a document always becomes the same tokens, whatever language the two texts were detected as:

1. **Normalise.** Unicode NFKC (full-width ``ＩＮＶ－１０２`` becomes ``INV-102``), typographic apostrophes become
   ``'``.
2. **Split by script.** Runs of Han ideographs go to jieba; everything else is matched by a word pattern (runs of
   letters/digits, joined by ``-``, ``.``, ``/`` or ``_``). Punctuation, symbols and whitespace never become tokens,
   so the Chinese "stopword/punct" list only needs words.
3. **Identifiers.** A joined run is an *identifier* when it contains a digit (``INV-102``, ``4.2-a``, ``A-17/3``,
   ``ISO-9001``, ``v2.1``, ``COVID-19``) or is a mixed-case / acronym code (``SARS-CoV``, ``ISO-IEC``, ``MAX_VALUE``:
   some part has an upper-case letter after its first character). An identifier is emitted **whole** (lowercased,
   never stemmed, never a stopword) **and also as its parts**, each part treated like an ordinary word. Why both:
   the whole token makes an exact code match outscore a near miss (query ``INV-102`` shares ``inv-102`` and ``102``
   with the right document but only ``inv`` with ``INV-120``), while the parts let ``ISO 9001`` or ``clause 4.2``
   still match ``ISO-9001`` / ``4.2-a``. The cost is one extra token per identifier occurrence (slightly longer
   documents), which BM25's length normalisation absorbs. A joined run that is *not* an identifier (``well-known``,
   ``e.g``, ``x-ray``) is just its parts.
4. **Words.** Lowercased (``lowercase=True``); a trailing possessive ``'s`` is dropped and other apostrophes removed
   (``patient's`` → ``patient``, ``don't`` → ``dont``), as Lucene's EnglishPossessiveFilter does; stopwords removed
   (checked case-insensitively, before stemming, as in Lucene's analysis chain); then stemmed with PyStemmer when
   ``stemmer`` names a Snowball algorithm (``"english"`` = Porter2, ``"porter"`` = the original Porter stemmer that
   Lucene's ``EnglishAnalyzer`` and Anserini use).
5. **Chinese.** Han runs are segmented by a private, lazily initialised jieba tokenizer (no log output; a private
   instance so words other code adds to jieba's global dictionary cannot change our tokens). Mode ``"search"``
   (``cut_for_search``, the default) also emits the shorter words inside long ones (``中华人民共和国`` →
   ``中华``, ``华人``, ``人民``, ``共和``, ``共和国``, ``中华人民共和国``), which is what jieba recommends for search
   indexing: a query ``人民`` still matches. ``"precise"`` uses ``lcut`` (one segmentation). Stemming never applies
   to Han tokens.

6. **Chinese-corpus rules** (``language="zh"`` only, so English corpora tokenize exactly as before). They make
   BM25 match what people type in Chinese enterprise text (policies, invoices, clauses, amounts):

   * *Thousands separators.* An ASCII comma between digit groups of a number (``1,200``, ``12,345.50``) is
     removed before anything else: ``1,200元`` → ``1200``, ``元``, so it matches ``1200元``. Only well-formed
     groups (1–3 digits, then groups of exactly 3) join; the full-width ``，`` is the Chinese comma and never joins
     (``100，200`` stays two numbers).
   * *Percentages.* ``10%`` / ``１０％`` → ``10%``, ``10``: the whole form makes a query ``10%`` prefer a ``10%``
     over a ``10天``, the bare number still matches ``10 %`` or ``10个百分点``.
   * *Dotted numbers inside identifiers.* A section/decimal number that is part of a longer identifier is also
     emitted: ``4.2-a`` → ``4.2-a``, ``4.2``, ``4``, ``2``, so a query ``第4.2条`` or ``4.2`` matches clause
     ``4.2-a`` by ``4.2`` (its parts alone would tie it with ``2.4``).
   * *Capitals are codes.* A Latin word written in capitals (``A``类, ``IT``部门, ``NO.``) is never an English
     stopword: in Chinese text such words are grades, departments and codes, not English articles or pronouns.

What is deliberately *not* done (documented so nobody is surprised): decimals are not canonicalised (``118.50``
and ``118.5`` share only ``118``: clause ``4.10`` is not clause ``4.1``); a number and its unit stay two tokens
(``80元``, ``80 元`` and ``８０元`` all give ``80``, ``元``, so they match each other whatever the spacing); Chinese
numerals are not converted (``第十二条`` is not ``第12条``); a code written without its separator (``INV102``) is one
token and does not match ``INV-102``; the ordinal ``第`` is a (low-idf) token.

**jieba is deterministic and offline:** a private ``jieba.Tokenizer`` over the dictionary shipped inside the
package (no download; the prefix-dictionary cache it writes to the temp dir is derived from that file), with HMM
new-word discovery on (jieba's default, explicit here; Viterbi decoding has no randomness), and it only ever sees
Han runs, never digits or Latin letters, so an identifier is segmented the same way whatever surrounds it.

``language`` chooses the stopword lists and rule 6: ``"en"`` the English list; ``"zh"`` the Chinese list *and* the
English one (Chinese corpora are full of English words) and rule 6; ``"auto"`` picks per text with
:func:`detect_language` (Han ideographs > 20% of the non-space characters → ``zh``). The BM25 stage never runs
``auto``: it resolves it to the corpus's language (declared in ``corpus.yaml`` or detected over the whole corpus),
so a corpus's queries and documents always follow the same rules. Run per text, ``auto`` can differ from ``zh`` on a
mostly-English text (Chinese stopwords kept, rule 6 off).

The English list is Lucene's ``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`` (33 words), the list Anserini/Pyserini use for
the BEIR BM25 baselines, so our figures are comparable with theirs.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Literal

from ablate.data.language import HAN_CHAR_RE, HAN_RANGES, ZH_SHARE, detect_language, han_share
from ablate.errors import ConfigError

__all__ = ["ZH_SHARE", "Tokenizer", "detect_language", "han_share", "is_identifier"]

#: Bump when any rule above changes: it is part of :meth:`Tokenizer.fingerprint`, so BM25 cache keys change too.
TOKENIZER_VERSION = "ablate-tokenizer/2"

LANGUAGES = ("en", "zh", "auto")
JIEBA_MODES = ("search", "precise")

#: Lucene's EnglishAnalyzer default stop set (also bm25s' ``STOPWORDS_EN`` and Anserini's default).
ENGLISH_STOPWORDS = frozenset(
    """a an and are as at be but by for if in into is it no not of on or such that the their then there these they
    this to was will with""".split()
)

#: A small Chinese list: particles, pronouns, conjunctions and question words that carry no topic.
CHINESE_STOPWORDS = frozenset(
    """的 地 得 了 着 过 和 与 及 或 而 并 且 也 都 就 还 又 才 是 为 在 于 以 之 其 此 该 这 那 这个 那个 这些 那些
    这样 那样 一个 一些 一种 有 没有 被 把 让 给 对 从 向 由 将 跟 比 等 等等 吗 呢 吧 啊 呀 哦 嘛 么 个 我 你 他 她 它
    我们 你们 他们 她们 它们 自己 什么 怎么 怎样 如何 哪 哪个 哪些 哪里 多少 几 为什么 是否 吗 可以 可 能 会 要 应 应该
    所 所以 因为 如果 但 但是 而且 或者 以及 然后 其中 其他 各 每 很 非常 更 最 已 已经 不 没 请 请问""".split()
)

_ALNUM = rf"[^\W_{HAN_RANGES}]"  # a letter or digit of any script except Han
_SEP = "-./_"
_TOKEN_RE = re.compile(rf"[{HAN_RANGES}]+|{_ALNUM}+(?:['{re.escape(_SEP)}]{_ALNUM}+)*")
_LATIN_RE = re.compile(rf"[^\W_]+(?:['{re.escape(_SEP)}][^\W_]+)*")  # _TOKEN_RE for texts without Han
_SPLIT_RE = re.compile(rf"[{re.escape(_SEP)}]")
# Rule 6 (language "zh"): the same patterns with an optional trailing "%"; grouped numbers; dotted numbers.
_TOKEN_ZH_RE = re.compile(rf"[{HAN_RANGES}]+|{_ALNUM}+(?:['{re.escape(_SEP)}]{_ALNUM}+)*%?")
_LATIN_ZH_RE = re.compile(rf"[^\W_]+(?:['{re.escape(_SEP)}][^\W_]+)*%?")
_GROUPED_RE = re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3})+(?!\d|,\d)")
_DOTTED_RE = re.compile(r"(?<![^\W_])\d+(?:\.\d+)+(?![^\W_])")
_NUMBER_RE = re.compile(r"\d+(?:\.\d+)*")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\uff07": "'"})


def is_identifier(run: str) -> bool:
    """True for a joined run that is a code rather than a compound word (see rule 3 of the module docstring)."""
    parts = _SPLIT_RE.split(run)
    if len(parts) < 2:
        return False
    if any(c.isdigit() for c in run):
        return True
    return any(any(c.isupper() for c in p[1:]) for p in parts)


# -- jieba: one private instance, initialised once, quietly ---------------------------------------------------------
_jieba_lock = threading.Lock()
_jieba_tok: Any = None


def _jieba() -> Any:
    global _jieba_tok
    if _jieba_tok is None:
        with _jieba_lock:
            if _jieba_tok is None:
                import jieba

                jieba.setLogLevel(logging.WARNING)  # "Building prefix dict ..." goes to jieba's own logger
                tok = jieba.Tokenizer()
                tok.initialize()
                _jieba_tok = tok
    return _jieba_tok


# -- stemmers: PyStemmer objects are not thread-safe, so one per thread and algorithm ---------------------------------
_stemmers = threading.local()


def _stemmer(name: str) -> Any:
    cache = getattr(_stemmers, "by_name", None)
    if cache is None:
        cache = _stemmers.by_name = {}
    st = cache.get(name)
    if st is None:
        import Stemmer

        st = cache[name] = Stemmer.Stemmer(name)
    return st


@functools.cache
def _version(dist: str) -> str | None:  # read once per process: a fingerprint asks on every call
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class Tokenizer:
    """Turns text into BM25 terms by the rules in the module docstring. Deterministic; safe to share across threads.

    ``stemmer`` is a PyStemmer (Snowball) algorithm name such as ``"english"`` or ``"porter"``; ``None`` = no stemming.
    """

    language: Literal["en", "zh", "auto"] = "en"
    lowercase: bool = True
    stopwords: bool = True
    stemmer: str | None = None
    jieba_mode: Literal["search", "precise"] = "search"

    def __post_init__(self) -> None:
        if self.language not in LANGUAGES:
            raise ConfigError("tokenizer.language", self.language, f"valid options: {', '.join(LANGUAGES)}")
        if self.jieba_mode not in JIEBA_MODES:
            raise ConfigError(
                "tokenizer.jieba_mode", self.jieba_mode, f"valid options: {', '.join(JIEBA_MODES)}"
            )
        if self.stemmer is not None:
            import Stemmer

            algos = Stemmer.algorithms()
            if self.stemmer not in algos:
                raise ConfigError(
                    "bm25.stemmer",
                    self.stemmer,
                    f"valid options: null (no stemming), {', '.join(sorted(algos))}",
                )

    # -- public API ------------------------------------------------------------------------------------------------
    def tokenize(self, text: str) -> list[str]:
        """Terms of one text, in text order (an identifier's whole form comes just before its parts)."""
        lang = self.language if self.language != "auto" else detect_language(text)
        zh = lang == "zh"
        if zh and "," in text:  # before NFKC, which would turn the Chinese comma "，" into ","
            text = _GROUPED_RE.sub(lambda m: m.group().replace(",", ""), text)
        if not unicodedata.is_normalized("NFKC", text):
            text = unicodedata.normalize("NFKC", text)
        text = text.translate(_APOSTROPHES)
        has_han = HAN_CHAR_RE.search(text) is not None
        zh_stop = self.stopwords and zh
        en_stop = ENGLISH_STOPWORDS if self.stopwords else frozenset()
        lower = self.lowercase
        out: list[str] = []
        fixed: list[
            tuple[int, str]
        ] = []  # (position, token) the stemmer must not change: identifiers, Han words
        # Texts without Han (most) use a simpler, faster pattern; both give the same runs on such texts.
        if zh:
            pattern = _TOKEN_ZH_RE if has_han else _LATIN_ZH_RE
        else:
            pattern = _TOKEN_RE if has_han else _LATIN_RE
        for run in pattern.findall(text):
            if run.isalnum():
                if has_han and HAN_CHAR_RE.match(run):
                    for w in self._segment(run):
                        if not (zh_stop and w in CHINESE_STOPWORDS):
                            fixed.append((len(out), w))
                            out.append(w)
                    continue
                low = run.lower()  # the common case: a plain word (no separator, no apostrophe)
                if low not in en_stop or (zh and run.isupper()):
                    out.append(low if lower else run)
                continue
            if run[-1] == "%":  # only the zh patterns let a run end in "%"
                run = run[:-1]
                if _NUMBER_RE.fullmatch(run):
                    fixed.append((len(out), run + "%"))
                    out.append(run + "%")
                if run.isalnum():
                    w = self._word(run, en_stop, zh)
                    if w:
                        out.append(w)
                    continue
            if is_identifier(run):
                whole = run.lower() if lower else run
                fixed.append((len(out), whole))
                out.append(whole)
                if zh:
                    for num in _DOTTED_RE.findall(run):
                        if num != run:
                            fixed.append((len(out), num))
                            out.append(num)
            for part in _SPLIT_RE.split(run):
                w = self._word(part, en_stop, zh)
                if w:
                    out.append(w)
        if self.stemmer is not None and out:
            stemmed = _stemmer(self.stemmer).stemWords(out)
            for i, w in fixed:
                stemmed[i] = w
            out = [w for w in stemmed if w]  # Porter stems a lone "s" (``U.S``, ``patients' s``) to nothing
        return out

    def tokenize_many(self, texts: Iterable[str]) -> list[list[str]]:
        """:meth:`tokenize` over many texts (order kept)."""
        return [self.tokenize(t) for t in texts]

    __call__ = tokenize

    def fingerprint(self) -> dict[str, object]:
        """Everything that determines the tokens: parameters, rule version and the versions of jieba / PyStemmer."""
        return {
            "version": TOKENIZER_VERSION,
            "language": self.language,
            "lowercase": self.lowercase,
            "stopwords": self.stopwords,
            "stemmer": self.stemmer,
            "jieba_mode": self.jieba_mode,
            "jieba": _version("jieba"),
            "pystemmer": _version("PyStemmer") if self.stemmer else None,
        }

    # -- internals -------------------------------------------------------------------------------------------------
    def _word(self, part: str, en_stop: frozenset[str], zh: bool = False) -> str:
        """A part of a joined run, as a word (possessive dropped, apostrophes removed, stopword check); unstemmed.
        ``zh``: a word in capitals is a code, never a stopword (rule 6)."""
        if "'" in part:
            if part[-2:].lower() == "'s":
                part = part[:-2]
            part = part.replace("'", "")
        if not part or (part.lower() in en_stop and not (zh and part.isupper())):
            return ""
        return part.lower() if self.lowercase else part

    def _segment(self, run: str) -> Sequence[str]:
        tok = _jieba()
        words = tok.lcut_for_search(run, HMM=True) if self.jieba_mode == "search" else tok.lcut(run, HMM=True)
        return [w for w in words if w.strip()]
