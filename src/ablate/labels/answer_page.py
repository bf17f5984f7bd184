"""The answer grading page of ``python -m ablate.label serve --answers``: a Flask app over plain data (an answers
pool, the questions' persona and date, the passages the answers read, the journal's path and the assessor).

One answer at a time, in the pool's order (question by question): the question with its persona and date, the gold
answers, the answer, the passages its run read (folded), the runs that wrote it; one button per grade
(``correct`` key ``c``, ``partly`` ``p``, ``wrong`` ``w``), skip (``s``), undo (``u`` or Backspace) and the progress.
Every grade is a POST appended to ``answer_journal.jsonl`` before the answer returns
(:func:`ablate.labels.answerjournal.append`: one write, fsync); undo appends ``grade: null``. What is done is read
back from the journal on every page, so a reload or a restarted server opens at the first ungraded answer. Skips are
not recorded. Templates escape every value (Jinja autoescape); a POST for an answer outside the pool or a grade
outside correct/partly/wrong is refused with 400. The same page machinery as :mod:`ablate.labels.page`, and the
same guard (:mod:`ablate.labels.guard`: 403 for another host, another origin or a POST without the page's token).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flask import Flask, abort, redirect, render_template, request
from werkzeug.wrappers import Response

from ablate.labels import answerjournal, guard
from ablate.labels.answerpool import AnswerEntry
from ablate.labels.page import _int, counts


@dataclass(frozen=True)
class Asked:
    """Who asked a question and when (the corpus's persona and date), as the relevance page shows them."""

    persona: str | None = None
    as_of: str | None = None


@dataclass(frozen=True)
class Passage:
    chunk_id: str
    title: str
    text: str


@dataclass(frozen=True)
class AnswerPageData:
    pool: str
    entries: Sequence[AnswerEntry]
    asked: Mapping[str, Asked]
    passages: Mapping[str, Passage]
    journal: Path
    assessor: str  # human:<name>
    language: str = "en"


STRINGS: dict[str, dict[str, str]] = {
    "en": {
        "title": "Grade answers",
        "question": "Question",
        "persona": "asked as",
        "as_of": "on",
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
        "skip": "Skip",
        "undo": "Undo",
        "shortcuts": "Keys: c correct, p partly, w wrong, s skips, u or Backspace undoes the last grade.",
        "this_question": "this question",
        "overall": "overall",
        "done": "done",
        "left": "left",
        "graded": "graded",
        "finished": "Every answer of this pool is graded.",
        "finished_hint": "Undo takes back the last grade; stop the server with Ctrl-C.",
        "assessor": "assessor",
        "pool": "answers pool",
        "written_by": "written by",
        "legend": "Grades",
    },
    "zh": {
        "title": "答案评分",
        "question": "问题",
        "persona": "提问身份",
        "as_of": "日期",
        "golds": "标准答案",
        "answer": "回答",
        "passages": "回答所读段落",
        "correct": "正确",
        "partly": "部分正确",
        "wrong": "错误",
        "legend_correct": "给出标准答案（或相同数值），且没有与之矛盾的内容",
        "legend_partly": "部分正确：多部分答案只答对一部分，数值对但单位或条件错，正确答案混在错误答案中",
        "legend_wrong": "其他情况：数值错误、拒答、推理中断而未给出答案",
        "skip": "跳过",
        "undo": "撤销",
        "shortcuts": "快捷键：c 正确，p 部分正确，w 错误，s 跳过，u 或退格键撤销上一次评分。",
        "this_question": "本问题",
        "overall": "全部",
        "done": "已评",
        "left": "剩余",
        "graded": "已评为",
        "finished": "本答案池的所有回答均已评分。",
        "finished_hint": "撤销可收回上一次评分；按 Ctrl-C 停止服务。",
        "assessor": "评分人",
        "pool": "答案池",
        "written_by": "生成来源",
        "legend": "等级",
    },
}
KEYS = {"correct": "c", "partly": "p", "wrong": "w"}


class Progress:
    """This assessor's standing grades of the pool's answers (from the journal) and the order of the grades still
    standing (the last one is what undo takes back)."""

    def __init__(self, data: AnswerPageData) -> None:
        keys = {e.key for e in data.entries}
        mine = [g for g in answerjournal.read(data.journal) if g.assessor == data.assessor and g.key in keys]
        self.grade = {k: g.grade for k, g in answerjournal.latest(mine).items()}
        stack: list[tuple[str, str]] = []
        for g in mine:
            if g.grade is None:
                if g.key in stack:
                    del stack[len(stack) - 1 - stack[::-1].index(g.key)]
            else:
                stack.append(g.key)
        self.stack = stack

    def done(self, e: AnswerEntry) -> bool:
        return e.key in self.grade


def create_app(data: AnswerPageData) -> Flask:
    """The Flask app that serves ``data``'s answers to ``data.assessor``."""
    app = Flask(__name__)
    guard.protect(app)  # Host, Origin and the page's token, before any view (CSRF, DNS rebinding)
    order = list(data.entries)
    index = {e.key: i for i, e in enumerate(order)}
    zh = data.language.startswith("zh")
    strings = STRINGS["zh" if zh else "en"]
    buttons = [(g, KEYS[g], strings[g], strings[f"legend_{g}"]) for g in answerjournal.GRADES]

    def pick(progress: Progress) -> int | None:
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

    @app.get("/")
    def page() -> str:
        progress = Progress(data)
        i = pick(progress)
        context: dict[str, Any] = {
            "s": strings,
            "lang": "zh-CN" if zh else "en",
            "buttons": buttons,
            "assessor": data.assessor,
            "pool": data.pool,
            "can_undo": bool(progress.stack),
            "i": i,
            **counts(order, i, progress.done),
        }
        if i is not None:
            e = order[i]
            context |= {
                "entry": e,
                "asked": data.asked.get(e.qid, Asked()),
                "passages": [data.passages[c] for c in e.context if c in data.passages],
                "current": progress.grade.get(e.key),
            }
        return render_template("grade_answers.html", **context)

    @app.post("/grade")
    def grade() -> Response:
        key = (request.form.get("qid", ""), request.form.get("answer_sha256", ""))
        if key not in index:
            abort(400, f"answer {key[1][:12]!r} of {key[0]!r} is not in answers pool {data.pool}")
        value = request.form.get("grade", "")
        if value not in answerjournal.GRADES:
            abort(400, f"grade {value!r} is not one of {', '.join(answerjournal.GRADES)}")
        e = order[index[key]]
        answerjournal.append(data.journal, answerjournal.grade(e.qid, e.answer, value, data.assessor))
        return redirect(f"/?after={index[key]}", code=303)

    @app.post("/undo")
    def undo() -> Response:
        progress = Progress(data)
        if not progress.stack:
            return redirect("/", code=303)
        e = order[index[progress.stack[-1]]]
        answerjournal.append(data.journal, answerjournal.grade(e.qid, e.answer, None, data.assessor))
        return redirect(f"/?at={index[e.key]}", code=303)

    return app
