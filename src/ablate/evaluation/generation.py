"""Scoring generated answers: the short final answer, correctness, citations, refusals, and whether a wrong answer is
retrieval's fault.

Per question (:func:`score_answer`), against the gold answers (alternatives: matching any one is enough):

* **The final answer** (:func:`final_answer`): the answer templates ask for the short answer first, on a line of its
  own (``Answer: 38.5 yuan [1]``, ``答案：38.5元 [1]``). The rule scores the text after the *last* line that starts
  with ``Answer:``, ``Final answer:``, ``答案：``, ``最终答案：`` or ``回答：`` (any case, ASCII or full-width colon,
  markdown such as ``**Answer:**`` or a list bullet tolerated), to the end of that line (when that line holds nothing
  after the marker, the next non-empty line). The rest of the text (the support sentence, a quoted passage, a chain
  of reasoning) is never scored: an answer that quotes the passage holding the gold string, or reasons toward it and
  is cut off by ``max_tokens``, has not answered. An answer with no such line has **no final answer**: scored as not
  answered (``correct`` 0, EM 0, F1 0) and counted apart (``no_final``; the run's ``answer_no_final``).
* **Normalisation** (:func:`normalize_answer`): Unicode NFKC (full-width digits and punctuation become ASCII),
  case-folded, citations ``[n]`` and the refusal marker removed, punctuation dropped except inside numbers, English
  articles dropped (as SQuAD's evaluation does), whitespace collapsed.
* **Exact match** (``em``): the normalised short answer equals a normalised gold answer.
* **Token F1** (``f1``): SQuAD's bag-of-tokens F1 of the short answer, with every Han character a token (Chinese has
  no spaces).
* **Numbers with units** (:func:`quantities`): ``38.50 yuan``, ``38.5 元``, ``¥38.5`` and ``RMB 38.5`` are the same
  quantity; ``10%`` and ``10 percent`` too. Values are compared as numbers; units must agree when both sides have one
  (a bare ``600`` answers a cap of ``600 元``; ``600 dollars`` does not); a citation ``[1]`` is not a number.
* **Correct** (``correct``): when a gold answer holds quantities, every one of them appears in the short answer
  (value equal, unit equal when the gold has one); otherwise the normalised gold answer occurs in the normalised
  short answer. A short answer is still a phrase or a sentence ("The cap is 600 yuan"), so exact match alone would
  read many right answers as wrong; both are reported.
* **Candidates** (:func:`question_candidates`): a question that offers a choice ("which came out earlier, X or Y?",
  "between X and Y", "X还是Y", "X或Y", "X和Y哪个…", names in 《》 or quotes; plus the question's optional
  ``candidates`` list in ``queries.jsonl``) is answered by naming one of them. When a gold answer matches one of the
  candidates (one contains the other), a short answer that also names another candidate is not correct: naming both
  hedges, it does not choose. When no gold answer matches a candidate (the extraction found something else), the rule
  does not apply, so a failed extraction never marks a right answer wrong. The same rule in every language.
* **Answer parts** (:func:`score_parts`, questions with ``answer_parts``, one gold answer per sub-question):
  ``parts_covered`` = share of the parts the short answer contains by the ``correct`` rule, ``parts_all`` = 1 when
  it contains every part (``answers`` are alternatives, any one is enough; parts are all needed). A refusal, or an
  answer with no final answer, covers none. Such a question is ``correct`` only when its short answer holds every
  part: "550 yuan" to "what is the hotel cap and the meal allowance?" answers half of it.
* **Brackets** (:func:`unbracket`): only ``[number]`` is a citation; the template's placeholder ``[n]`` is dropped and
  a word a model put in brackets (``80 [USD]``, ``3 [days]``) is read as a word.
* **Refusal** (``refused``): the answer holds the prompt's refusal marker (``NO_ANSWER``) anywhere, or its short
  answer is a plain refusal ("I don't know", "cannot be answered", "无法回答", ...); an answer with no final answer
  line is a refusal when its text is one. A refusal is never also counted as having no final answer.
* **Citations** (:func:`citations`): ``[1]``, ``[1][3]``, ``[1, 3]`` anywhere in the answer name context passages
  (1-based). Citation precision = cited passages that are gold evidence / cited passages; an answer's citations
  *support* it when it cites at least one passage and one of them is gold evidence.
* **Diagnosis** (answerable questions): a wrong, refused or unfinished answer is a *generation failure* when the
  evidence was in the context (a gold passage among the context passages, or a gold answer string in their text),
  else a *retrieval failure*. The Oracle row hands the generator the gold evidence, so all its failures are
  generation failures.
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
    """Whether ``answer`` (a text as it stands: a short answer, or a whole answer without a final line) is empty,
    holds the refusal marker or says it cannot answer."""
    text = _nfkc(answer)
    return not text.strip() or any(r in text for r in _REFUSALS)


def refuses(answer: str, short: str | None) -> bool:
    """The refusal rule over a whole answer and its short final answer (:func:`final_answer`): the marker anywhere,
    else the short answer refuses, else (no final answer line) the whole text refuses."""
    if REFUSAL_MARKER.casefold() in _nfkc(answer):
        return True
    return is_refusal(short if short is not None else answer)


#: A line that starts the short final answer: optional markdown (``**``, ``#``, ``>``, a bullet), the marker, an ASCII
#: or full-width colon (inside or outside the bold), the answer.
_FINAL = re.compile(
    r"^[ \t]*(?:[-*+>#][ \t]*)*(?:\*\*|__)?[ \t]*"
    r"(?:final[ \t]+answer|answer|(?:最终答案|答案|回答)是?)"
    r"[ \t]*(?:\*\*|__)?[ \t]*[:：][ \t]*(?:\*\*|__)?(?P<rest>.*)$",
    re.IGNORECASE | re.MULTILINE,
)


def _clean_final(text: str) -> str:
    """A final-answer line without the markdown around it (``**38.5 yuan**``)."""
    return text.strip().strip("*_").strip()


def final_answer(text: str) -> str | None:
    """The short final answer of ``text``: what follows the last line-initial ``Answer:`` / ``Final answer:`` /
    ``答案：`` / ``最终答案：`` / ``回答：`` marker (any case, ASCII or full-width colon, markdown tolerated) to the end
    of that line, or the next non-empty line when that one holds nothing after the marker; ``None`` when ``text`` has
    no such line (or nothing follows its last marker). Citations stay in (scoring strips them)."""
    matches = list(_FINAL.finditer(text))
    if not matches:
        return None
    last = matches[-1]
    rest = _clean_final(last.group("rest"))
    if rest:
        return rest
    for line in text[last.end() :].splitlines():
        if _clean_final(line):
            return _clean_final(line)
    return None


_CHOICE_QUOTED = re.compile(r"《([^》]+)》|“([^”]+)”|\"([^\"]+)\"")
_EN_BETWEEN = re.compile(r"\bbetween\s+(.+?)\s+and\s+(.+?)\s*(?:[,;:?!]|\.(?:\s|$)|$)", re.IGNORECASE)
_EN_OR = re.compile(r"\s+or\s+", re.IGNORECASE)
_EN_LEAD = re.compile(
    r"^(?:(?:which|who|what|whose|whom|where|when|is|was|are|were|did|does|do|has|have|had|can|could|will|would|"
    r"should|came|come|born)\b\s*)+",
    re.IGNORECASE,
)
#: Small words a name may hold ("Bank of China", "Leonardo da Vinci"), never at its end.
_JOINING = frozenset("of the a an de da la le von van and in on for to is at".split())
_ZH_CHOICE = re.compile(r"(.+?)(?:还是|或者|或是|或)(.+)")
_ZH_WHICH = re.compile(r"(.+?)(?:和|与)(.+?)(?:哪个|哪一|哪部|哪位|哪家|哪本|哪首|哪座|哪条|哪种)")
_ZH_STOP = "？?，,。！!；;：:"
_ZH_LEAD = re.compile(r"^(?:请问|那么|是)")
_ZH_TAIL = re.compile(r"哪|谁|先|更|比|较|最")


def _capitalised_run(words: list[str], from_end: bool) -> str:
    """The longest run of name-like words (capitalised, or a number) at the end (or the start) of ``words``, small
    joining words ("of", "the", "de") allowed inside a run."""
    seq = list(reversed(words)) if from_end else list(words)
    run: list[str] = []
    for w in seq:
        core = w.strip("\"'“”‘’()[],.?!:;")
        if core and (core[0].isupper() or core[0].isdigit()):
            run.append(w)
        elif core.lower() in _JOINING and (run or core.lower() in _ARTICLES):
            run.append(w)
        else:
            break
    while run and run[-1].strip("\"'“”‘’()[],.?!:;").lower() in _JOINING:
        run.pop()  # a run never ends on a joining word
    return " ".join(reversed(run) if from_end else run)


def _strip_candidate(text: str) -> str:
    return text.strip().strip("\"'“”‘’《》()（）[]").strip(" ,.;:?!，。；：？！").strip()


def _english_candidates(question: str) -> list[str]:
    m = _EN_BETWEEN.search(question)
    if m:
        return [m.group(1), m.group(2)]
    if not _EN_OR.search(question):
        return []
    body = question.strip().rstrip("?!. ")
    for sep in (",", ":", ";"):
        if sep in body:
            tail = body.rsplit(sep, 1)[1]
            if _EN_OR.search(tail):
                return [_EN_LEAD.sub("", p) for p in _EN_OR.split(tail)]
    left, right = _EN_OR.split(body, maxsplit=1)
    x = _EN_LEAD.sub("", _capitalised_run(left.split(), from_end=True))
    y = _capitalised_run(right.split(), from_end=False)
    return [x, y]


def _chinese_candidates(question: str) -> list[str]:
    clause = re.split(f"[{_ZH_STOP}]", question.strip().rstrip(_ZH_STOP))
    for part in reversed(clause):
        m = _ZH_WHICH.search(part) or _ZH_CHOICE.search(part)
        if m:
            return [_ZH_LEAD.sub("", m.group(1)), _ZH_TAIL.split(m.group(2), maxsplit=1)[0]]
    return []


def question_candidates(question: str, extra: Sequence[str] = ()) -> tuple[str, ...]:
    """The answers a question offers to choose from, for the candidates rule (module docstring): the names in 《》 or
    quotes when the question offers a choice and quotes two or more; else English ``..., X or Y?`` / ``X or Y`` /
    ``between X and Y``, Chinese ``X还是Y`` / ``X或Y`` / ``X和Y哪个…``; plus ``extra`` (a question's declared
    ``candidates``). Empty when the question offers no choice. An extraction may be loose (a trailing predicate
    kept): the rule applies only when a gold answer matches a candidate, so a loose one never marks a right answer
    wrong."""
    q = unicodedata.normalize("NFKC", question)
    found: list[str] = []
    has_choice = bool(_EN_OR.search(q) or _EN_BETWEEN.search(q) or re.search("还是|或|哪", q))
    quoted = [next(g for g in m.groups() if g) for m in _CHOICE_QUOTED.finditer(question)]
    if has_choice and len(quoted) >= 2:
        found = quoted
    elif re.search(f"[{_HAN_CHARS}]", q):
        found = _chinese_candidates(q)
    else:
        found = _english_candidates(q)
    out: list[str] = []
    for c in [*found, *extra]:
        c = _strip_candidate(c)
        if c and normalize_answer(c) and c not in out:
            out.append(c)
    return tuple(out)


def _matches(candidate: str, gold: str) -> bool:
    """A candidate and a gold answer name the same thing: one contains the other by the ``correct`` rule."""
    return answer_contains(candidate, gold) or answer_contains(gold, candidate)


def names_other_candidate(short: str, golds: Sequence[str], candidates: Sequence[str]) -> bool:
    """The candidates rule (module docstring): a gold answer matches one of ``candidates`` and ``short`` also names
    a candidate that matches no gold answer."""
    gold_ones = [c for c in candidates if any(_matches(c, g) for g in golds)]
    if not gold_ones:
        return False
    others = [c for c in candidates if c not in gold_ones]
    return any(answer_contains(short, c) for c in others)


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
    """None when ``gold`` holds no number; else whether every gold quantity appears in ``answer``: the same value,
    and the same unit unless one of the two has none (``600`` answers "what is the cap?" as ``600 元`` does;
    ``600 dollars`` does not). Citations (``[1]``) are not numbers of the answer."""
    want = quantities(gold)
    if not want:
        return None
    have = quantities(_CITE.sub(" ", answer))
    for value, unit in want:
        if not any(
            abs(v - value) <= 1e-9 * max(1.0, abs(value)) and (unit is None or u is None or u == unit)
            for v, u in have
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


_PLACEHOLDER = re.compile(r"\[\s*n\s*\]", re.IGNORECASE)
_WORD_IN_BRACKETS = re.compile(r"\[\s*([^\]\d\s][^\]]*?)\s*\]")


def unbracket(short: str) -> str:
    """A short answer with the template's placeholder ``[n]`` left out and a word a model put in square brackets
    (``3 [days]``, ``80 [USD]``) kept as a word: only ``[number]`` is a citation."""
    return _WORD_IN_BRACKETS.sub(r"\1", _PLACEHOLDER.sub(" ", short))


def score_parts(answer: str, parts: Sequence[Sequence[str] | str]) -> tuple[float, float]:
    """``(parts_covered, parts_all)`` of a multi-condition question's ``answer_parts`` (each part given as its
    aliases): the share of parts the short final answer of ``answer`` (:func:`final_answer`) contains by the
    ``correct`` rule (:func:`answer_contains`; a part is found when any one of its aliases is), and 1.0 when it
    contains all of them (RGB's own correctness rule). A refusal, or an answer without a final answer, covers no
    part. ``(nan, nan)`` when there are no parts."""
    if not parts:
        return float("nan"), float("nan")
    short = final_answer(answer)
    if short is None or refuses(answer, short):
        return 0.0, 0.0
    short = unbracket(short)
    found = [any(answer_contains(short, a) for a in ((p,) if isinstance(p, str) else p)) for p in parts]
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
    no_final: bool = False  # no final answer line (and not a refusal): scored as not answered
    final: str = ""  # the short final answer the rule scored ("" when there is none)

    def as_dict(self) -> dict[str, float | int | bool | str]:
        return asdict(self)


def score_answer(
    answer: str,
    golds: Sequence[str],
    context_gold: Sequence[bool],
    context_text: Sequence[str],
    question: str = "",
    candidates: Sequence[str] = (),
    parts: Sequence[Sequence[str] | str] = (),
) -> AnswerScore:
    """Score one answer (the generator's whole text) by the module docstring's rule: EM, F1 and ``correct`` on its
    short final answer (:func:`final_answer`), the candidates rule over ``question``'s candidates
    (:func:`question_candidates`, ``candidates``: the question's declared ones), and for a question with
    ``parts`` (its ``answer_parts``) every part. ``context_gold[i]`` says whether context passage ``i + 1`` is gold
    evidence; ``context_text[i]`` is its text."""
    golds = [g for g in golds if g and g.strip()]
    short = final_answer(answer)
    short = None if short is None else unbracket(short)
    refused = refuses(answer, short)
    no_final = short is None and not refused
    scored = "" if short is None or refused else short
    em = max((float(normalize_answer(scored) == normalize_answer(g)) for g in golds), default=0.0)
    f1 = max((token_f1(scored, g) for g in golds), default=0.0) if scored else 0.0
    correct = float(bool(scored) and any(answer_contains(scored, g) for g in golds))
    if correct and names_other_candidate(scored, golds, question_candidates(question, candidates)):
        correct = 0.0
    if correct and parts and score_parts(answer, parts)[1] < 1.0:
        correct = 0.0  # one part of a multi-part answer is not the answer
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
        no_final=no_final,
        final=short or "",
    )


def diagnosis(score: AnswerScore, answerable: bool) -> str:
    """``correct``, ``generation_failure``, ``retrieval_failure`` for answerable questions; ``correct_refusal`` or
    ``wrong_answer`` for questions without an answer."""
    if not answerable:
        return "correct_refusal" if score.refused else "wrong_answer"
    if score.correct:
        return "correct"
    return "generation_failure" if score.evidence_in_context else "retrieval_failure"
