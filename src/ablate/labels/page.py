"""The judging page of ``python -m ablate.label serve``: a Flask app over plain data (a pool's pairs, the questions,
the passages, the grade legend, the journal's path and the assessor) -- no Hydra, no MLflow.

One pair at a time, question by question (the pool's question order) and within a question by ``best_rank``: the
question with its persona and date, the passage with its document title, version and clause, the legend, one button
per grade (its digit is its key), skip (``s``), undo (``u`` or Backspace) and the progress. Every judgement is a POST
appended to the journal before the answer returns (:func:`ablate.labels.journal.append`: one write, fsync); undo
appends ``grade: null``. What is done is read back from the journal on every page (the pairs this assessor's
standing judgements cover), so a reload or a restarted server opens at the first undone pair. Skips are not
recorded: a skipped pair stays undone and comes round again. Templates escape every value from data (Jinja
autoescape); a POST for a pair outside the pool or a grade outside the legend is refused with 400. Only the page
itself can judge: a request naming another host, a POST from another origin or without the page's token is refused
with 403 before anything is written (:mod:`ablate.labels.guard`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flask import Flask, abort, redirect, render_template, request
from werkzeug.wrappers import Response

from ablate.labels import guard, journal
from ablate.labels.legend import Legend
from ablate.labels.poolfile import PoolEntry, by_question


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
class PageData:
    pool: str  # the pool's name, written in each judgement's "pool"
    entries: Sequence[PoolEntry]
    questions: Mapping[str, QuestionText]
    passages: Mapping[str, PassageText]
    legend: Legend
    journal: Path
    assessor: str  # human:<name>
    language: str = "en"


STRINGS: dict[str, dict[str, str]] = {
    "en": {
        "title": "Judge",
        "question": "Question",
        "persona": "asked as",
        "as_of": "on",
        "passage": "Passage",
        "version": "version",
        "effective": "in force from",
        "clause": "clause",
        "legend": "Grades",
        "skip": "Skip",
        "undo": "Undo",
        "shortcuts": "Keys: a grade's digit judges, s skips, u or Backspace undoes the last judgement.",
        "this_question": "this question",
        "overall": "overall",
        "done": "done",
        "left": "left",
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
        "question": "问题",
        "persona": "提问身份",
        "as_of": "日期",
        "passage": "段落",
        "version": "版本",
        "effective": "生效日期",
        "clause": "条款",
        "legend": "等级",
        "skip": "跳过",
        "undo": "撤销",
        "shortcuts": "快捷键：按等级数字评审，s 跳过，u 或退格键撤销上一次评审。",
        "this_question": "本问题",
        "overall": "全部",
        "done": "已评",
        "left": "剩余",
        "judged": "已评为",
        "finished": "本评审池的所有条目均已评审。",
        "finished_hint": "撤销可收回上一次评审；按 Ctrl-C 停止服务。",
        "assessor": "评审人",
        "pool": "评审池",
        "returned_by": "检索来源",
        "rank": "最佳排名",
    },
}


def ordered(entries: Sequence[PoolEntry]) -> list[PoolEntry]:
    """Question by question (the order questions first appear in the pool), each by best rank, then unit."""
    out: list[PoolEntry] = []
    for group in by_question(entries).values():
        out.extend(sorted(group, key=lambda e: (e.best_rank, e.unit)))
    return out


class Progress:
    """This assessor's state read from the journal: the standing grade of each pool pair, and the order of the
    judgements still standing (the last one is what undo takes back)."""

    def __init__(self, data: PageData, order: Sequence[PoolEntry]) -> None:
        pairs = {(e.qid, e.unit) for e in order}
        mine = [
            j for j in journal.read(data.journal) if j.assessor == data.assessor and (j.qid, j.unit) in pairs
        ]
        self.grade = {pair: j.grade for pair, j in journal.latest(mine).items()}
        stack: list[tuple[str, str]] = []
        for j in mine:
            pair = (j.qid, j.unit)
            if j.grade is None:
                if pair in stack:
                    del stack[len(stack) - 1 - stack[::-1].index(pair)]
            else:
                stack.append(pair)
        self.stack = stack

    def done(self, e: PoolEntry) -> bool:
        return (e.qid, e.unit) in self.grade


def counts(order: Sequence[Any], i: int | None, done: Any) -> dict[str, dict[str, int]]:
    """The page's progress figures: ``overall`` over ``order`` and, with an item shown (``i``), ``this_question``
    over the items of its question (``done(item)``: graded)."""
    n = sum(done(e) for e in order)
    out = {"overall": {"done": n, "left": len(order) - n, "total": len(order)}}
    if i is not None:
        same = [x for x in order if x.qid == order[i].qid]
        q = sum(done(x) for x in same)
        out["this_question"] = {"done": q, "left": len(same) - q, "total": len(same)}
    return out


def create_app(data: PageData) -> Flask:
    """The Flask app that serves ``data``'s pool to ``data.assessor``."""
    app = Flask(__name__)
    app.config["JSON_AS_ASCII"] = False
    guard.protect(app)  # Host, Origin and the page's token, before any view (CSRF, DNS rebinding)
    order = ordered(data.entries)
    index = {(e.qid, e.unit): i for i, e in enumerate(order)}
    grades = set(data.legend.values)
    strings = STRINGS["zh" if data.language.startswith("zh") else "en"]

    def pick(progress: Progress) -> int | None:
        """Which pair to show: ``?at=N`` exactly, ``?after=N`` the next undone one after N (wrapping round), else
        the first undone one; ``None`` when all are done."""
        at = _int(request.args.get("at"))
        if at is not None and 0 <= at < len(order):
            return at
        after = _int(request.args.get("after"))
        start = after + 1 if after is not None else 0
        for k in range(len(order)):
            i = (start + k) % len(order) if order else 0
            if not progress.done(order[i]):
                return i
        return None

    @app.get("/")
    def page() -> str:
        progress = Progress(data, order)
        i = pick(progress)
        context: dict[str, Any] = {
            "s": strings,
            "lang": "zh-CN" if data.language.startswith("zh") else "en",
            "legend": data.legend.grades,
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
                "question": data.questions.get(e.qid, QuestionText(e.qid, "")),
                "passage": data.passages.get(e.unit, PassageText(e.unit, e.unit, "")),
                "current": progress.grade.get((e.qid, e.unit)),
            }
        return render_template("judge.html", **context)

    @app.post("/judge")
    def judge() -> Response:
        qid, unit = request.form.get("qid", ""), request.form.get("unit", "")
        if (qid, unit) not in index:
            abort(400, f"({qid!r}, {unit!r}) is not a pair of pool {data.pool}")
        grade = _int(request.form.get("grade"))
        if grade is None or grade not in grades:
            legend = ", ".join(str(g) for g in data.legend.values)
            abort(400, f"grade {request.form.get('grade')!r} is not in the grade legend ({legend})")
        journal.append(data.journal, journal.judgement(qid, unit, grade, data.assessor, data.pool))
        return redirect(f"/?after={index[(qid, unit)]}", code=303)

    @app.post("/undo")
    def undo() -> Response:
        progress = Progress(data, order)
        if not progress.stack:
            return redirect("/", code=303)
        qid, unit = progress.stack[-1]
        journal.append(data.journal, journal.judgement(qid, unit, None, data.assessor, data.pool))
        return redirect(f"/?at={index[(qid, unit)]}", code=303)

    return app


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None and value.strip().lstrip("-").isdigit() else None
    except ValueError:
        return None
