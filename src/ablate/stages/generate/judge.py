"""The answer judge: who decides whether an answer is correct (``answer.judge=rule`` or ``answer.judge=llm``).

``rule`` (:class:`RuleJudge`, the default) is the answer rule of :mod:`ablate.evaluation.generation`; it asks no
model. ``llm`` (:class:`AnswerJudge`) asks a generator, for each answer, whether it is right given the question and
the gold answers, and reads back one grade and a one-line rationale:

* ``correct``: the answer's conclusion (the final answer it commits to) is a gold answer or says the same;
* ``partly``: its conclusion is right but incomplete, or right with a wrong detail;
* ``wrong``: its conclusion is not a gold answer, or it names several candidates and concludes a wrong one, or its
  reasoning stops before a conclusion, or it refuses although there is an answer.

The template (``conf/prompts/answer_judge.txt``, ``answer_judge_zh.txt`` for a Chinese corpus: the corpus language
picks it as it picks other defaults; ``answer.judge_prompt=PATH`` names another) has a ``### system`` and a ``### user``
section with ``{question}``, ``{golds}`` and ``{answer}``, and asks first for the answer's conclusion (``Conclusion:
...``, or ``none``), then ``Grade: <word>`` and ``Rationale: <one sentence>``: naming the conclusion first keeps a
small model on it rather than on the gold string's mere presence. :func:`parse_verdict` takes the first grade word the output holds (``Grade: partly``, ``**Wrong**``,
``正确``); an output with none is graded :data:`UNPARSED` (counted, never taken as correct).

The judge asks the run's own generator (the same loaded model: no second load) with its own decoding settings:
greedy, at most :data:`MAX_TOKENS` tokens, seed 0; ``answer.judge_model`` builds another local generator for it.
Every judgement is cached by content: ``key_of("answer-judge/v1", the judge's fingerprint key, sha256 of the rendered
messages)``. The fingerprint (:meth:`AnswerJudge.fingerprint`) holds the model's identity (a GGUF's full sha256, the
backend's settings and build), the template's sha256, the decoding settings, the answer cut, library and code versions:
another model or template judges anew, and a re-run judges nothing. The judge is part of a run's identity like any
stage: its ``params()`` are logged under ``answer.`` (``answer.judge``, ``answer.judge_model``,
``answer.judge_prompt_sha256``) and its fingerprint is the run's ``ablate.fp.answer``.

API (also what ``python -m ablate.label validate --kind answers`` calls)::

    judge = AnswerJudge(generator, template_path)          # a GeneratorBase, a template file
    judge.prepare(StageContext(snapshot, cache))            # resolves the generator's model (a run's session does it)
    verdicts = judge.judge([JudgeItem(question, golds, answer), ...], cache)   # -> list[Verdict]
    judge.fingerprint(), judge.params(), judge.identity     # what it is
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ablate.cache import Cache, key_of
from ablate.progress import Progress
from ablate.stages.base import Fingerprint, StageContext, fingerprint_of
from ablate.stages.generate.base import Generation, GeneratorBase, Messages
from ablate.stages.generate.prompt import PromptTemplate

#: Bump when how a judgement is asked or read changes: part of the judge's fingerprint and of every cache key.
CODE_VERSION = "ablate-answer-judge/1"
#: ``answer.judge`` values.
JUDGES = ("rule", "llm")
#: The grades an LLM judge gives, best first, and the grade of an output that holds none of them.
GRADES = ("correct", "partly", "wrong")
UNPARSED = "unparsed"
#: Fields of the user section of a judge template.
FIELDS = ("{question}", "{golds}", "{answer}")
#: Tokens the judge may write (the conclusion, the grade and a one-sentence rationale).
MAX_TOKENS = 96
#: An answer longer than this (characters) is shown as its head and its tail (the conclusion is at the end).
ANSWER_CHARS = 3000
ANSWER_HEAD = 1000
#: A rationale is cut to this many characters (one line in answers.csv).
RATIONALE_CHARS = 300
#: The shipped templates (in ``conf/prompts/``): by corpus language, else :data:`DEFAULT_TEMPLATE`.
DEFAULT_TEMPLATE = "answer_judge.txt"
TEMPLATES_BY_LANGUAGE: dict[str, str] = {"zh": "answer_judge_zh.txt"}
#: Cache kind of the judgements.
KIND = "answer-judgements"


# ---------------------------------------------------------------------------------------------------- the API types
@dataclass(frozen=True)
class JudgeItem:
    """One answer to judge: the question, its gold answers and the answer as the generator wrote it."""

    question: str
    golds: tuple[str, ...]
    answer: str


@dataclass(frozen=True)
class Verdict:
    """One answer judged: ``grade`` (one of :data:`GRADES`, or :data:`UNPARSED`), a one-line ``rationale``, whether
    it came from the cache, what the model wrote, and the seconds the generation took when it was made."""

    grade: str
    rationale: str
    cached: bool
    output: str = ""
    latency_s: float = math.nan


# ---------------------------------------------------------------------------------------------------- the parser
# Grade words, the longest first at one position ("partly correct" is partly, "incorrect" and "not correct" wrong).
_WORDS: tuple[tuple[str, str], ...] = (
    (r"not\s+(?:fully\s+|entirely\s+|completely\s+)?correct", "wrong"),
    (r"incorrect", "wrong"),
    (r"(?:partly|partially|partial)(?:\s+correct)?", "partly"),
    (r"correct", "correct"),
    (r"wrong", "wrong"),
    (r"部分正确", "partly"),
    (r"不完全正确", "partly"),
    (r"不正确", "wrong"),
    (r"错误", "wrong"),
    (r"正确", "correct"),
)
_GRADE_WORD = re.compile("|".join(f"(?<![A-Za-z])(?:{w})(?![A-Za-z])" for w, _ in _WORDS), re.IGNORECASE)
_GRADE_LINE = re.compile(
    r"^[\W_]*(?:grade|verdict|评分|等级|判定|结论)[\W_]*?[:：](.*)$", re.IGNORECASE | re.MULTILINE
)
_RATIONALE = re.compile(r"(?:rationale|reason|理由|原因)[\W_]*?[:：]\s*(.+)", re.IGNORECASE)


def _grade_of(word: str) -> str:
    for pattern, grade in _WORDS:
        if re.fullmatch(pattern, word, re.IGNORECASE):
            return grade
    raise ValueError(word)  # pragma: no cover - every match of _GRADE_WORD is one of _WORDS


def parse_verdict(text: str) -> tuple[str, str]:
    """``(grade, rationale)`` of a judge's output.

    The grade is read from a ``Grade:`` line when the output has one (``评分：`` too) and that line names exactly one
    grade; else it is the first grade word of the whole output. Grade words: ``correct``, ``partly`` (``partially``,
    ``partly correct``), ``wrong`` (``incorrect``, ``not correct``), any case, or Chinese 正确 / 部分正确 / 错误 /
    不正确. An output with none, or a grade line naming several (the template's list echoed), is :data:`UNPARSED`:
    counted, never taken as correct. The rationale is what follows ``Rationale:`` (``理由：``), else the rest of the
    output after the grade word (an unparsed output's: its first line); one line, at most :data:`RATIONALE_CHARS` characters."""
    text = text or ""
    grade, after = UNPARSED, -1
    line = _GRADE_LINE.search(text)
    named = [m for m in _GRADE_WORD.finditer(line.group(1))] if line else []
    if line and named:
        grades = {_grade_of(m.group(0)) for m in named}
        if len(grades) == 1:
            grade, after = grades.pop(), line.end()
    else:
        first = _GRADE_WORD.search(text)
        if first is not None:
            grade, after = _grade_of(first.group(0)), first.end()
    m = _RATIONALE.search(text)
    if m:
        rationale = m.group(1)
    elif after >= 0:
        rest = text[after:].lstrip(" *:：.。-—\t\n")
        rationale = rest.splitlines()[0] if rest.strip() else ""
    else:  # unparsed: what it said, to read
        rationale = text.strip().splitlines()[0] if text.strip() else ""
    rationale = " ".join(rationale.replace("*", "").split())
    if len(rationale) > RATIONALE_CHARS:
        rationale = rationale[: RATIONALE_CHARS - 1] + "…"
    return grade, rationale


def shown_answer(answer: str) -> str:
    """The answer as the judge reads it: whole, or its first :data:`ANSWER_HEAD` characters and its end when it is
    longer than :data:`ANSWER_CHARS` (a judge template must fit the model's context; the conclusion is at the end)."""
    answer = answer.strip()
    if len(answer) <= ANSWER_CHARS:
        return answer
    tail = ANSWER_CHARS - ANSWER_HEAD
    return f"{answer[:ANSWER_HEAD]} [...] {answer[-tail:]}"


def default_template(language: str, prompts_dir: str | Path) -> str:
    """The shipped judge template for a corpus in ``language`` (``prompts_dir``: ``conf/prompts``)."""
    return str(Path(prompts_dir) / TEMPLATES_BY_LANGUAGE.get(language, DEFAULT_TEMPLATE))


def model_label(generator: Any) -> str:
    """A generator's model as a short name: a shipped name as is, a ``.gguf`` path as its file name without the
    suffix, a served model's name."""
    model = str(getattr(generator, "model", "") or type(generator).__name__)
    name = Path(model).name
    return name[: -len(".gguf")] if name.endswith(".gguf") else name


# ---------------------------------------------------------------------------------------------------- the judges
class RuleJudge:
    """``answer.judge=rule``: the answer rule of :mod:`ablate.evaluation.generation` decides; no model is asked.
    A component of the run like the LLM judge, so a sweep ``answer.judge=rule,llm`` varies one logged factor."""

    kind: ClassVar[str] = "judge"

    def __init__(self, name: str = "answer") -> None:
        self.name = name
        self.stats: dict[str, float] = {}

    def params(self) -> dict[str, Any]:
        return {"judge": "rule"}

    def fingerprint(self) -> Fingerprint:
        return fingerprint_of(self, self.params())

    @property
    def label(self) -> str:
        return "rule"

    def bind(self, snapshot: Any, split: str, generator: Any = None) -> RuleJudge:
        return self

    def prepare(self, context: StageContext) -> None:
        """Nothing to prepare."""


class AnswerJudge:
    """``answer.judge=llm``: ``generator`` grades each answer with the judge template (see the module docstring).

    ``template``: a template file; ``None`` takes the shipped one of the corpus language when the judge is bound
    (``prompts_dir``: the folder of the shipped ones, ``conf/prompts``; English until bound). ``own_model``: the
    generator is the run's own (``answer.judge_model`` unset), so binding follows the run's bound generator.
    ``template_source``: how the template was chosen (``setting``, ``language:<code>``), logged as bookkeeping.
    """

    kind: ClassVar[str] = "judge"

    def __init__(
        self,
        generator: GeneratorBase,
        template: str | None = None,
        *,
        name: str = "answer",
        prompts_dir: str | Path | None = None,
        own_model: bool = True,
        max_tokens: int = MAX_TOKENS,
        template_source: str | None = None,
    ) -> None:
        if template is None and prompts_dir is None:
            raise ValueError("AnswerJudge: give a template file or the folder of the shipped ones")
        self.name = name
        self.generator = generator
        self.setting = template  # what the user named (None: the corpus language's shipped template)
        self.prompts_dir = str(prompts_dir) if prompts_dir is not None else None
        self.own_model = own_model
        self.max_tokens = max_tokens
        path = template if template is not None else default_template("en", str(prompts_dir))
        self.template = PromptTemplate.load(path, f"{name}.judge_prompt", FIELDS)
        self.template_source = template_source or ("setting" if template is not None else "language:en")
        self.stats: dict[str, float] = {"judge_generated": 0.0, "judge_cached": 0.0}

    def _with(self, generator: GeneratorBase, template: str, source: str) -> AnswerJudge:
        out = AnswerJudge(
            generator,
            template,
            name=self.name,
            prompts_dir=self.prompts_dir,
            own_model=self.own_model,
            max_tokens=self.max_tokens,
            template_source=source,
        )
        out.setting = self.setting
        return out

    # -- identity ---------------------------------------------------------------------------------------------------
    @property
    def label(self) -> str:
        """How a report names this judge: ``llm: <model>``."""
        return f"llm: {model_label(self.generator)}"

    def params(self) -> dict[str, Any]:
        return {
            "judge": "llm",
            "judge_model": str(getattr(self.generator, "model", "") or model_label(self.generator)),
            "judge_prompt": self.template.path,
            "judge_prompt_sha256": self.template.sha256,
            "judge_prompt_source": self.template_source,  # bookkeeping (``_source``): the sha256 is what
            "judge_max_tokens": self.max_tokens,
        }

    def fingerprint(self) -> Fingerprint:
        gen = self.generator
        params = {
            k: v for k, v in self.params().items() if k not in ("judge_prompt", "judge_prompt_source")
        }  # the path is where, the sha256 is what
        params.update({"temperature": 0.0, "seed": 0, "answer_chars": ANSWER_CHARS})
        return fingerprint_of(
            self,
            params,
            libraries=getattr(gen, "libraries", ()),
            resources={
                "model": gen.model_identity(),
                "backend": gen.backend_params(),
                "prompt_sha256": self.template.sha256,
            },
        )

    @property
    def identity(self) -> str:
        """A short name that changes with the fingerprint: ``llm:<model>@<template8>+<fingerprint8>``."""
        return f"llm:{model_label(self.generator)}@{self.template.sha256[:8]}+{self.fingerprint().key[:8]}"

    # -- lifecycle --------------------------------------------------------------------------------------------------
    def bind(self, snapshot: Any, split: str, generator: Any = None) -> AnswerJudge:
        """The judge for ``snapshot``: the shipped template of its language when none was named, and (its own model)
        the run's bound ``generator``; this judge itself when nothing changes."""
        template, source = self.template.path, self.template_source
        if self.setting is None:
            language = str(getattr(snapshot, "language", "") or "en")
            template, source = default_template(language, str(self.prompts_dir)), f"language:{language}"
        gen = generator if self.own_model and generator is not None else self.generator
        if gen is self.generator and str(Path(template).resolve()) == self.template.path:
            return self
        return self._with(gen, template, source)

    def using(self, generator: GeneratorBase) -> AnswerJudge:
        """This judge asking ``generator`` (an instance with the same fingerprint: the one a run's session prepared
        and loaded), counting its work in this judge's ``stats``."""
        if generator is self.generator:
            return self
        out = self._with(generator, self.template.path, self.template_source)
        out.stats = self.stats
        return out

    def prepare(self, context: StageContext) -> None:
        """Resolve the generator's model (for a shipped Qwen: assemble it into the cache once); it loads on first use."""
        self.generator.prepare(context)

    # -- judging ----------------------------------------------------------------------------------------------------
    def messages(self, item: JudgeItem) -> Messages:
        golds = " | ".join(g.strip() for g in item.golds if g.strip()) or "(none)"
        return self.template.render_fields(
            question=item.question, golds=golds, answer=shown_answer(item.answer) or "(empty)"
        )

    def _complete(self, messages: Messages) -> Generation:
        """One greedy completion of ``messages`` by the generator, with the judge's decoding settings (the generator's
        own are put back after)."""
        gen = self.generator
        gen.warm()
        saved = (gen.max_tokens, gen.temperature)
        gen.max_tokens, gen.temperature = self.max_tokens, 0.0
        try:
            t0 = time.perf_counter()
            g = gen._complete(messages, 0)
            return Generation(g.text, g.tokens_in, g.tokens_out, time.perf_counter() - t0)
        finally:
            gen.max_tokens, gen.temperature = saved

    def judge(self, items: Sequence[JudgeItem], cache: Cache, show_progress: bool = False) -> list[Verdict]:
        """A :class:`Verdict` for each item, in order: from the cache when this judge has judged the same messages,
        else generated (and cached)."""
        fp = self.fingerprint().key
        out: list[Verdict] = []
        with Progress(
            f"judge ({model_label(self.generator)})", len(items), unit="answers", enabled=show_progress
        ) as progress:
            for item in items:
                messages = self.messages(item)
                msg_sha = hashlib.sha256(json.dumps(messages, ensure_ascii=False).encode("utf-8")).hexdigest()
                key = key_of("answer-judge/v1", fp, msg_sha)
                stored = cache.load_json(KIND, key)
                if isinstance(stored, Mapping) and isinstance(stored.get("text"), str):
                    text, cached = str(stored["text"]), True
                    latency = stored.get("latency_s")
                    latency_s = float(latency) if isinstance(latency, (int, float)) else math.nan
                    self.stats["judge_cached"] += 1
                else:
                    g = self._complete(messages)
                    cache.save_json(
                        KIND,
                        key,
                        {
                            "text": g.text,
                            "tokens_in": g.tokens_in,
                            "tokens_out": g.tokens_out,
                            "latency_s": g.latency_s,
                        },
                    )
                    text, cached, latency_s = g.text, False, g.latency_s
                    self.stats["judge_generated"] += 1
                grade, rationale = parse_verdict(text)
                out.append(Verdict(grade, rationale, cached, text, latency_s))
                progress.update(1)
        return out
