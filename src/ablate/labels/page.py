"""The labelling page of ``python -m ablate.label serve``: one Flask app over plain data (a pool's items, the
questions, the passages, the grades, the journal's path and the assessor) -- no Hydra, no MLflow -- for either kind
of label (:mod:`ablate.labels.kind`); only the item differs, drawn by its renderer in ``templates/page.html``.

* relevance: the passage of a (question, unit) pair, with its document title, version and clause; one button per
  grade of the corpus's legend (its digit is its key); pairs question by question, each by ``best_rank``.
* answers: the gold answers, the answer, the passages its run read (folded) and the runs that wrote it; ``correct``
  (key ``c``), ``partly`` (``p``), ``wrong`` (``w``); answers in the pool's order, question by question.

Which items come first (:func:`ordered`): those of the questions of the random human sample (``python -m
ablate.label sample``: what people must check for the report's corrected figures), then the items whose LLM
assessor's repeats flipped (``judge --repeats``: where it is least sure), then the rest.

One item at a time: the question with its persona and date, the item, the grades, skip (``s``), undo (``u`` or
Backspace) and the progress. Every judgement is a POST appended to the kind's journal before the answer returns
(:func:`ablate.labels.journal.append`: one write, fsync); undo appends ``grade: null``. What is done is read back
from the journal on every page (the items this assessor's standing judgements cover), so a reload or a restarted
server opens at the first undone item. Skips are not recorded: a skipped item stays undone and comes round again.
Templates escape every value from data (Jinja autoescape); a POST for an item outside the pool or a grade outside
the page's is refused with 400. Only the page itself can judge: a request naming another host, a POST from another
origin or without the page's token is refused with 403 before anything is written (:mod:`ablate.labels.guard`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flask import Flask, abort, redirect, render_template, request
from werkzeug.wrappers import Response

from ablate.labels import guard, journal
from ablate.labels.kind import ANSWER_GRADES, RELEVANCE, Kind
from ablate.labels.legend import Legend
from ablate.labels.poolfile import AnswerEntry, PoolEntry, by_question


@dataclass(frozen=True)
class QuestionText:
    qid: str
    text: str
    persona: str | None = None
    as_of: str | None = None


@dataclass(frozen=True)
class PassageText:
    """What a judge reads of a unit: its document's title, version and date, the clause (section id and title)."""

    unit: str
    title: str
    text: str
    version: str | None = None
    effective_date: str | None = None
    clause: str | None = None
    clause_title: str | None = None


@dataclass(frozen=True)
class Grade:
    """A grade's button: the value the journal records, the key that presses it, its text on the button, and its
    term and meaning in the legend."""

    value: int | str
    key: str
    label: str
    term: str
    meaning: str


@dataclass(frozen=True)
class PageData:
    kind: Kind
    pool: str  # the pool's name (relevance: written in each judgement's "pool")
    entries: Sequence[PoolEntry] | Sequence[AnswerEntry]
    questions: Mapping[str, QuestionText]
    passages: Mapping[str, PassageText]  # by unit (relevance) or chunk id (the passages an answer read)
    grades: Sequence[Grade]
    journal: Path
    assessor: str  # human:<name>
    language: str = "en"
    sample: frozenset[str] = frozenset()  # the questions of the random human sample: offered first
    flipped: frozenset[tuple[str, str]] = frozenset()  # items whose LLM repeats disagree: offered next


_COMMON: dict[str, dict[str, str]] = {
    "en": {
        "question": "Question",
        "persona": "asked as",
        "as_of": "on",
        "legend": "Grades",
        "skip": "Skip",
        "undo": "Undo",
        "this_question": "this question",
        "overall": "overall",
        "done": "done",
        "left": "left",
        "sampled": "in the random sample: judge every item of this question",
        "flipped": "the LLM assessor's repeats disagree here",
    },
    "zh": {
        "question": "问题",
        "persona": "提问身份",
        "as_of": "日期",
        "legend": "等级",
        "skip": "跳过",
        "undo": "撤销",
        "this_question": "本问题",
        "overall": "全部",
        "done": "已评",
        "left": "剩余",
        "sampled": "随机抽样问题：请评完本问题的所有条目",
        "flipped": "LLM 评审的多次评分在此不一致",
    },
}
STRINGS: dict[str, dict[str, dict[str, str]]] = {
    "relevance": {
        "en": {
            "title": "Judge",
            "passage": "Passage",
            "version": "version",
            "effective": "in force from",
            "clause": "clause",
            "shortcuts": "Keys: a grade's digit judges, s skips, u or Backspace undoes the last judgement.",
            "judged": "judged",
            "finished": "Every pair of this pool is judged.",
            "finished_hint": "Undo takes back the last judgement; stop the server with Ctrl-C.",
            "assessor": "assessor",
            "pool": "pool",
            "returned_by": "returned by",
            "rank": "best rank",
        },
        "zh": {
            "title": "相关性评审",
            "passage": "段落",
            "version": "版本",
            "effective": "生效日期",
            "clause": "条款",
            "shortcuts": "快捷键：按等级数字评审，s 跳过，u 或退格键撤销上一次评审。",
            "judged": "已评为",
            "finished": "本评审池的所有条目均已评审。",
            "finished_hint": "撤销可收回上一次评审；按 Ctrl-C 停止服务。",
            "assessor": "评审人",
            "pool": "评审池",
            "returned_by": "检索来源",
            "rank": "最佳排名",
        },
    },
    "answers": {
        "en": {
            "title": "Grade answers",
            "golds": "Gold answers",
            "answer": "Answer",
            "passages": "Passages it read",
            "correct": "correct",
            "partly": "partly",
            "wrong": "wrong",
            "legend_correct": "gives a gold answer (or the same value) and nothing that contradicts it",
            "legend_partly": "part of it: one part of a multi-part answer, the right value with a wrong unit or "
            "condition, the right one among wrong ones",
            "legend_wrong": "anything else: a wrong value, a refusal, reasoning cut off before an answer",
            "shortcuts": "Keys: c correct, p partly, w wrong, s skips, u or Backspace undoes the last grade.",
            "judged": "graded",
            "finished": "Every answer of this pool is graded.",
            "finished_hint": "Undo takes back the last grade; stop the server with Ctrl-C.",
            "assessor": "assessor",
            "pool": "answers pool",
            "written_by": "written by",
        },
        "zh": {
            "title": "答案评分",
            "golds": "标准答案",
            "answer": "回答",
            "passages": "回答所读段落",
            "correct": "正确",
            "partly": "部分正确",
            "wrong": "错误",
            "legend_correct": "给出标准答案（或相同数值），且没有与之矛盾的内容",
            "legend_partly": "部分正确：多部分答案只答对一部分，数值对但单位或条件错，正确答案混在错误答案中",
            "legend_wrong": "其他情况：数值错误、拒答、推理中断而未给出答案",
            "shortcuts": "快捷键：c 正确，p 部分正确，w 错误，s 跳过，u 或退格键撤销上一次评分。",
            "judged": "已评为",
            "finished": "本答案池的所有回答均已评分。",
            "finished_hint": "撤销可收回上一次评分；按 Ctrl-C 停止服务。",
            "assessor": "评分人",
            "pool": "答案池",
            "written_by": "生成来源",
        },
    },
}
ANSWER_KEYS = {"correct": "c", "partly": "p", "wrong": "w"}


def strings(kind: Kind, language: str) -> dict[str, str]:
    """The page's words for ``kind`` in ``language`` (Chinese for ``zh*``, else English)."""
    lang = "zh" if language.startswith("zh") else "en"
    return {**_COMMON[lang], **STRINGS[kind.name][lang]}


def relevance_grades(legend: Legend) -> list[Grade]:
    """One button per grade of the corpus's legend; its digit is its key."""
    return [Grade(g, str(g), text, str(g), text) for g, text in legend.grades]


def answer_grades(language: str) -> list[Grade]:
    """correct, partly, wrong, with their keys and meanings in ``language``."""
    s = STRINGS["answers"]["zh" if language.startswith("zh") else "en"]
    return [Grade(g, ANSWER_KEYS[g], s[g], s[g], s[f"legend_{g}"]) for g in ANSWER_GRADES]


def ordered(
    entries: Sequence[Any],
    sample: Collection[str] = frozenset(),
    flipped: Collection[tuple[str, str]] = frozenset(),
) -> list[Any]:
    """The items of the questions in ``sample`` first, then the items in ``flipped``, then the rest; within each,
    question by question (the order questions first appear in the pool), a relevance pool's pairs within a question
    by best rank, then unit, an answers pool's answers in the pool's order."""
    out: list[Any] = []
    for group in by_question(entries).values():
        out.extend(
            sorted(group, key=lambda e: (e.best_rank, e.unit)) if isinstance(group[0], PoolEntry) else group
        )
    return sorted(out, key=lambda e: 0 if e.qid in sample else 1 if e.key in flipped else 2)  # stable


class Progress:
    """This assessor's state read from the kind's journal: the standing grade of each pool item, and the order of
    the judgements still standing (the last one is what undo takes back)."""

    def __init__(self, data: PageData, order: Sequence[Any]) -> None:
        keys = {e.key for e in order}
        lines: Sequence[journal.Judgement | journal.AnswerGrade] = (
            journal.read(data.journal) if data.kind is RELEVANCE else journal.read_grades(data.journal)
        )
        mine = [j for j in lines if j.assessor == data.assessor and j.key in keys]
        standing, self.stack = journal.standing(mine)  # type: ignore[type-var]
        self.grade = {key: j.grade for key, j in standing.items()}

    def done(self, e: Any) -> bool:
        return e.key in self.grade


def counts(order: Sequence[Any], i: int | None, done: Callable[[Any], bool]) -> dict[str, dict[str, int]]:
    """The page's progress figures: ``overall`` over ``order`` and, with an item shown (``i``), ``this_question``
    over the items of its question (``done(item)``: judged)."""
    n = sum(done(e) for e in order)
    out = {"overall": {"done": n, "left": len(order) - n, "total": len(order)}}
    if i is not None:
        same = [x for x in order if x.qid == order[i].qid]
        q = sum(done(x) for x in same)
        out["this_question"] = {"done": q, "left": len(same) - q, "total": len(same)}
    return out


def pick(order: Sequence[Any], progress: Progress) -> int | None:
    """Which item to show: ``?at=N`` exactly, ``?after=N`` the next undone one after N (wrapping round), else the first
    undone one; ``None`` when all are done."""
    at = _int(request.args.get("at"))
    if at is not None and 0 <= at < len(order):
        return at
    after = _int(request.args.get("after"))
    start = after + 1 if after is not None else 0
    for k in range(len(order)):
        i = (start + k) % len(order)
        if not progress.done(order[i]):
            return i
    return None


def item_context(data: PageData, e: Any, progress: Progress) -> dict[str, Any]:
    """What the page shows of one item: the question, the item, its current grade and what the kind's renderer needs
    (the unit's passage for relevance; the passages the answer was given for answers)."""
    context: dict[str, Any] = {
        "entry": e,
        "item": e.key[1],
        "question": data.questions.get(e.qid, QuestionText(e.qid, getattr(e, "question", ""))),
        "current": progress.grade.get(e.key),
        "why": "sampled" if e.qid in data.sample else "flipped" if e.key in data.flipped else None,
    }
    if data.kind is RELEVANCE:
        context["passage"] = data.passages.get(e.unit, PassageText(e.unit, e.unit, ""))
    else:
        context["passages"] = [data.passages[c] for c in e.context if c in data.passages]
    return context


def create_app(data: PageData) -> Flask:
    """The Flask app that serves ``data``'s pool to ``data.assessor``."""
    app = Flask(__name__)
    app.config["JSON_AS_ASCII"] = False
    guard.protect(app)  # Host, Origin and the page's token, before any view (CSRF, DNS rebinding)
    order = ordered(data.entries, data.sample, data.flipped)
    index = {e.key: i for i, e in enumerate(order)}
    values = {str(g.value): g.value for g in data.grades}
    words = strings(data.kind, data.language)

    def record(e: Any, grade: int | str | None) -> None:
        line: journal.Judgement | journal.AnswerGrade = (
            journal.judgement(e.qid, e.unit, grade, data.assessor, data.pool)  # type: ignore[arg-type]
            if data.kind is RELEVANCE
            else journal.grade(e.qid, e.answer, grade, data.assessor)  # type: ignore[arg-type]
        )
        journal.append(data.journal, line)

    @app.get("/")
    def page() -> str:
        progress = Progress(data, order)
        i = pick(order, progress)
        context: dict[str, Any] = {
            "s": words,
            "kind": data.kind.name,
            "item_field": data.kind.item,
            "lang": "zh-CN" if data.language.startswith("zh") else "en",
            "grades": data.grades,
            "assessor": data.assessor,
            "pool": data.pool,
            "can_undo": bool(progress.stack),
            "i": i,
            **counts(order, i, progress.done),
        }
        if i is not None:
            context |= item_context(data, order[i], progress)
        return render_template("page.html", **context)

    @app.post("/judge")
    def judge() -> Response:
        key = (request.form.get("qid", ""), request.form.get(data.kind.item, ""))
        if key not in index:
            abort(400, f"({key[0]!r}, {key[1]!r}) is not in pool {data.pool}")
        raw = request.form.get("grade", "")
        if raw not in values:
            abort(400, f"grade {raw!r} is not one of {', '.join(values)}")
        record(order[index[key]], values[raw])
        return redirect(f"/?after={index[key]}", code=303)

    @app.post("/undo")
    def undo() -> Response:
        progress = Progress(data, order)
        if not progress.stack:
            return redirect("/", code=303)
        i = index[progress.stack[-1]]
        record(order[i], None)
        return redirect(f"/?at={i}", code=303)

    return app


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None and value.strip().lstrip("-").isdigit() else None
    except ValueError:
        return None
