"""Scoring generated answers: correctness, citations, refusals, and whether a wrong answer is retrieval's fault.

Per question (:func:`score_answer`), against the gold answers (alternatives: matching any one is enough):

* **Normalisation** (:func:`normalize_answer`): Unicode NFKC (full-width digits and punctuation become ASCII),
  case-folded, citations ``[n]`` and the refusal marker removed, punctuation dropped except inside numbers, English
  articles dropped (as SQuAD's evaluation does), whitespace collapsed.
* **Exact match** (``em``): the normalised answer equals a normalised gold answer.
* **Token F1** (``f1``): SQuAD's bag-of-tokens F1, with every Han character a token (Chinese has no spaces).
* **Numbers with units** (:func:`quantities`): ``38.50 yuan``, ``38.5 元``, ``¥38.5`` and ``RMB 38.5`` are the same
  quantity; ``10%`` and ``10 percent`` too. Values are compared as numbers.
* **Correct** (``correct``): when a gold answer holds quantities, every one of them appears in the answer (value
  equal, unit equal when the gold has one); otherwise the normalised gold answer occurs in the normalised answer.
  LLM answers are sentences, so exact match alone would read almost every right answer as wrong; both are reported.
* **Answer parts** (:func:`score_parts`, questions with ``answer_parts``, one gold answer per sub-question):
  ``parts_covered`` = share of the parts the answer contains by the ``correct`` rule, ``parts_all`` = 1 when it
  contains every part (``answers`` are alternatives, any one is enough; parts are all needed). A refusal covers none.
* **Refusal** (``refused``): the answer holds the prompt's refusal marker (``NO_ANSWER``) or a plain refusal ("I don't
  know", "cannot be answered", "无法回答", ...).
* **Citations** (:func:`citations`): ``[1]``, ``[1][3]``, ``[1, 3]`` name context passages (1-based). Citation
  precision = cited passages that are gold evidence / cited passages; an answer's citations *support* it when it
  cites at least one passage and one of them is gold evidence.
* **Diagnosis** (answerable questions): a wrong or refused answer is a *generation failure* when the evidence was in
  the context (a gold passage among the context passages, or a gold answer string in their text), else a *retrieval
  failure*. The Oracle row hands the generator the gold evidence, so all its failures are generation failures.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass

REFUSAL_MARKER = "NO_ANSWER"
_REFUSALS = (
    "no_answer",
    "i don't know",
    "i do not know",
    "cannot be answered",
    "can't be answered",
    "not mentioned in the context",
    "not in the context",
    "the context does not",
    "无法回答",
    "无法确定",
    "没有提到",
    "未提及",
    "不知道",
)
_CITE = re.compile(r"\[\s*(\d+(?:\s*[,，、]\s*\d+)*)\s*\]")
_HAN_CHARS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_HAN_CHARS}]|[^\W_{_HAN_CHARS}]+(?:\.\d+)?", re.UNICODE)
_ARTICLES = {"a", "an", "the"}
_NUMBER = r"[-+]?\d[\d,]*(?:\.\d+)?"
#: unit spellings -> canonical unit; currency symbols may also precede the number
UNITS: dict[str, str] = {
    "yuan": "CNY",
    "元": "CNY",
    "rmb": "CNY",
    "cny": "CNY",
    "¥": "CNY",
    "块": "CNY",
    "人民币": "CNY",
    "usd": "USD",
    "$": "USD",
    "dollars": "USD",
    "dollar": "USD",
    "美元": "USD",
    "eur": "EUR",
    "€": "EUR",
    "euro": "EUR",
    "euros": "EUR",
    "%": "%",
    "percent": "%",
    "per cent": "%",
    "百分之": "%",
    "km": "km",
    "kilometre": "km",
    "kilometres": "km",
    "kilometer": "km",
    "kilometers": "km",
    "公里": "km",
    "day": "day",
    "days": "day",
    "calendar days": "day",
    "天": "day",
    "日": "day",
    "night": "night",
    "nights": "night",
    "晚": "night",
    "hour": "hour",
    "hours": "hour",
    "小时": "hour",
    "month": "month",
    "months": "month",
    "个月": "month",
    "year": "year",
    "years": "year",
    "年": "year",
}
_UNIT_RE = "|".join(sorted((re.escape(u) for u in UNITS), key=len, reverse=True))
_QUANTITY = re.compile(
    rf"(?P<pre>[¥$€]|rmb|cny|usd|eur)?\s*(?P<num>{_NUMBER})\s*(?P<unit>{_UNIT_RE})?", re.IGNORECASE
)


def _nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def citations(answer: str) -> list[int]:
    """Passage numbers an answer cites, in order of first mention (``[1][3]``, ``[1, 3]``, ``[2，4]``)."""
    out: list[int] = []
    for m in _CITE.finditer(unicodedata.normalize("NFKC", answer)):
        for n in re.split(r"\s*[,，、]\s*", m.group(1)):
            if n and int(n) not in out:
                out.append(int(n))
    return out


def is_refusal(answer: str) -> bool:
    text = _nfkc(answer)
    return not text.strip() or any(r in text for r in _REFUSALS)


def normalize_answer(text: str) -> str:
    """See the module docstring."""
    text = _CITE.sub(" ", _nfkc(text)).replace(REFUSAL_MARKER.casefold(), " ")
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # 1,500 -> 1500
    text = re.sub(r"(?<!\d)\.|\.(?!\d)", " ", text)  # a dot is punctuation unless it sits inside a number
    text = "".join(
        " " if unicodedata.category(c).startswith(("P", "S")) and c not in ".%¥$€" else c for c in text
    )
    words = [w for w in text.split() if w not in _ARTICLES]
    return " ".join(words)


def tokens(text: str) -> list[str]:
    """Tokens for F1: words, numbers (with their decimals) and single Han characters."""
    return _TOKEN.findall(normalize_answer(text))


def token_f1(answer: str, gold: str) -> float:
    a, g = tokens(answer), tokens(gold)
    if not a or not g:
        return float(a == g)
    common = sum((Counter(a) & Counter(g)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(a), common / len(g)
    return 2 * precision * recall / (precision + recall)


def quantities(text: str) -> list[tuple[float, str | None]]:
    """``(value, canonical unit or None)`` for every number in ``text`` (thousands separators and full-width digits
    handled; a currency symbol before or a unit after the number)."""
    norm = unicodedata.normalize("NFKC", text).casefold()
    out = []
    for m in _QUANTITY.finditer(norm):
        value = float(m.group("num").replace(",", ""))
        unit = m.group("unit") or m.group("pre")
        out.append((value, UNITS.get(unit.strip(), unit.strip()) if unit else None))
    return out


def numbers_match(answer: str, gold: str) -> bool | None:
    """None when ``gold`` holds no number; else whether every gold quantity appears in ``answer``."""
    want = quantities(gold)
    if not want:
        return None
    have = quantities(answer)
    for value, unit in want:
        if not any(
            abs(v - value) <= 1e-9 * max(1.0, abs(value)) and (unit is None or u == unit) for v, u in have
        ):
            return False
    return True


def answer_contains(answer: str, gold: str) -> bool:
    """The ``correct`` rule for one gold string (refusals aside): when ``gold`` holds quantities, every one of them
    appears in ``answer``; otherwise the normalised gold occurs in the normalised answer. An empty gold never
    matches."""
    if not normalize_answer(gold):
        return False
    nm = numbers_match(answer, gold)
    return nm if nm is not None else normalize_answer(gold) in normalize_answer(answer)


def score_parts(answer: str, parts: Sequence[Sequence[str] | str]) -> tuple[float, float]:
    """``(parts_covered, parts_all)`` of a multi-condition question's ``answer_parts`` (each part given as its
    aliases): the share of parts the answer contains by the ``correct`` rule (:func:`answer_contains`; a part is
    found when any one of its aliases is), and 1.0 when it contains all of them (RGB's own correctness rule). A
    refusal covers no part. ``(nan, nan)`` when there are no parts."""
    if not parts:
        return float("nan"), float("nan")
    if is_refusal(answer):
        return 0.0, 0.0
    found = [any(answer_contains(answer, a) for a in ((p,) if isinstance(p, str) else p)) for p in parts]
    return sum(found) / len(found), float(all(found))


@dataclass(frozen=True)
class AnswerScore:
    em: float
    f1: float
    correct: float
    refused: bool
    cited: int  # passages cited (valid numbers)
    cited_gold: int  # of which gold evidence
    citations_support: (
        float  # 1 when it cites at least one gold passage, 0 when it cites none of them or nothing
    )
    evidence_in_context: bool
    answer_in_context: bool

    def as_dict(self) -> dict[str, float | int | bool]:
        return asdict(self)


def score_answer(
    answer: str,
    golds: Sequence[str],
    context_gold: Sequence[bool],
    context_text: Sequence[str],
) -> AnswerScore:
    """Score one answer. ``context_gold[i]`` says whether context passage ``i + 1`` is gold evidence;
    ``context_text[i]`` is its text."""
    golds = [g for g in golds if g and g.strip()]
    refused = is_refusal(answer)
    em = max((float(normalize_answer(answer) == normalize_answer(g)) for g in golds), default=0.0)
    f1 = max((token_f1(answer, g) for g in golds), default=0.0)
    correct = 0.0 if refused else float(any(answer_contains(answer, g) for g in golds))
    cited = [n for n in citations(answer) if 1 <= n <= len(context_gold)]
    cited_gold = sum(1 for n in cited if context_gold[n - 1])
    normalized_context = [normalize_answer(t) for t in context_text]
    answer_in_ctx = any(
        normalize_answer(g) and normalize_answer(g) in t for g in golds for t in normalized_context
    )
    return AnswerScore(
        em=em,
        f1=f1,
        correct=correct,
        refused=refused,
        cited=len(cited),
        cited_gold=cited_gold,
        citations_support=float(cited_gold > 0),
        evidence_in_context=any(context_gold) or answer_in_ctx,
        answer_in_context=answer_in_ctx,
    )


def diagnosis(score: AnswerScore, answerable: bool) -> str:
    """``correct``, ``generation_failure``, ``retrieval_failure`` for answerable questions; ``correct_refusal`` or
    ``wrong_answer`` for questions without an answer."""
    if not answerable:
        return "correct_refusal" if score.refused else "wrong_answer"
    if score.correct:
        return "correct"
    return "generation_failure" if score.evidence_in_context else "retrieval_failure"
