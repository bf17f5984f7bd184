"""Validating the answer judges against human grades (``python -m ablate.label validate-answers``).

Every answer of an answers pool that a person graded (``correct`` / ``partly`` / ``wrong``, the standing human grade of
``answer_journal.jsonl``) is judged by the **rule** (:func:`ablate.evaluation.generation.score_answer`'s ``correct``:
binary) and, given a generator, by the **LLM judge** (``correct`` / ``partly`` / ``wrong``). Per judge:

* **Cohen's kappa** against the human grades: binary (correct vs partly or wrong: "correct" is what every correctness
  figure counts) for both; graded on the three levels (wrong 0 < partly 1 < correct 2, unweighted) for the LLM judge.
  Each with a 95% bootstrap percentile interval that resamples **questions** (the answers to one question move
  together; :func:`ablate.evaluation.stats.agreement.kappa_interval`, seeded).
* **False-positive rate**: of the answers the human did not grade correct (partly or wrong), the share the judge calls
  correct -- what inflates a correctness figure. **False-negative rate**: of the answers the human graded correct,
  the share the judge does not call correct. Each with a Wilson interval (counts, not questions: a rate per answer).
* **Confusion matrices**: human grade (rows) by the judge's (columns).

An LLM verdict without a grade (unparseable output) is counted and left out of the LLM judge's figures. Fewer than
:data:`MIN_GRADED` graded answers gives a warning in the report: an interval that wide cannot tell judges apart.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ablate.cache import atomic_write_bytes
from ablate.evaluation.stats.agreement import confusion, json_finite, kappa_interval
from ablate.evaluation.stats.wilson import wilson_interval
from ablate.labels.answerjournal import GRADES, LEVEL
from ablate.labels.validation import Kappa

VALIDATION_MD = "validation_answers.md"
VALIDATION_JSON = "validation_answers.json"
PAIRS_CSV = "pairs.csv"
PAIRS_COLUMNS = ("qid", "answer_sha256", "human", "rule", "judge", "judge_rationale")
#: Under this many graded answers the report warns that its figures are too uncertain to compare judges.
MIN_GRADED = 30
RESAMPLES = 1000
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Graded:
    """One human-graded answer and the judges' verdicts on it (``judge`` ``None``: no LLM judge, or no grade)."""

    qid: str
    answer_sha256: str
    human: str
    rule: str  # correct | wrong
    judge: str | None = None
    rationale: str = ""  # the LLM judge's one line


@dataclass(frozen=True)
class Rate:
    """``errors`` of ``n`` with its Wilson interval."""

    rate: float
    low: float
    high: float
    errors: int
    n: int


@dataclass(frozen=True)
class JudgeAgreement:
    n: int
    n_questions: int
    binary: Kappa
    graded: Kappa | None  # the rule has no partly: binary only
    false_positive: Rate
    false_negative: Rate
    confusion: list[list[int]]  # rows human (correct, partly, wrong), columns the judge's grades
    columns: tuple[str, ...]
    binary_confusion: list[list[int]]  # rows human correct / not, columns judge correct / not


def _kappa(
    h: Sequence[int], j: Sequence[int], qids: Sequence[str], labels: Sequence[int], seed: int
) -> Kappa:
    k, low, high = kappa_interval(
        h, j, groups=qids, labels=labels, n_resamples=RESAMPLES, confidence=CONFIDENCE, seed=seed
    )
    agree = sum(x == y for x, y in zip(h, j, strict=True)) / len(h) if h else math.nan
    return Kappa(k, low, high, agree)


def _rate(errors: int, n: int) -> Rate:
    p, low, high = wilson_interval(errors, n, CONFIDENCE)
    return Rate(p, low, high, errors, n)


def agreement(rows: Sequence[tuple[str, str, str]], columns: Sequence[str], seed: int) -> JudgeAgreement:
    """The agreement of one judge with the human grades: ``rows`` of ``(qid, human grade, judge grade)``, the
    judge's grades among ``columns`` (``("correct", "wrong")`` for the rule, :data:`GRADES` for the LLM judge)."""
    qids = [r[0] for r in rows]
    hb = [int(r[1] == "correct") for r in rows]
    jb = [int(r[2] == "correct") for r in rows]
    graded = None
    if tuple(columns) == GRADES:
        graded = _kappa([LEVEL[r[1]] for r in rows], [LEVEL[r[2]] for r in rows], qids, [0, 1, 2], seed)
    col = {c: i for i, c in enumerate(columns)}
    matrix = [[0] * len(columns) for _ in GRADES]
    for _, h, j in rows:
        matrix[GRADES.index(h)][col[j]] += 1
    # rows/columns 0 = correct, 1 = not (confusion orders labels ascending: flip to correct first)
    counts = confusion([1 - x for x in hb], [1 - x for x in jb], labels=[0, 1]).counts
    return JudgeAgreement(
        n=len(rows),
        n_questions=len(set(qids)),
        binary=_kappa(hb, jb, qids, [0, 1], seed),
        graded=graded,
        false_positive=_rate(sum(j for h, j in zip(hb, jb, strict=True) if not h), hb.count(0)),
        false_negative=_rate(sum(1 - j for h, j in zip(hb, jb, strict=True) if h), hb.count(1)),
        confusion=matrix,
        columns=tuple(columns),
        binary_confusion=[list(r) for r in counts],
    )


# --------------------------------------------------------------------------------------------------------- report
def _f(v: float | None) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"


def _kappa_row(name: str, k: Kappa | None) -> str:
    if k is None:
        return f"| {name} | - | - | - |"
    if math.isnan(k.kappa):
        return f"| {name} | undefined (one shared grade only) | - | {k.agree:.1%} |"
    return f"| {name} | {_f(k.kappa)} | {_f(k.low)} to {_f(k.high)} | {k.agree:.1%} |"


def _rate_cell(r: Rate) -> str:
    return f"{_f(r.rate)} ({r.errors}/{r.n}) | {_f(r.low)} to {_f(r.high)}"


def _matrix(rows: Sequence[str], columns: Sequence[str], counts: Sequence[Sequence[int]]) -> str:
    head = "| human \\ judge | " + " | ".join(columns) + " | total |"
    rule = "|---" * (len(columns) + 2) + "|"
    body = [
        f"| {r} | " + " | ".join(map(str, c)) + f" | {sum(c)} |" for r, c in zip(rows, counts, strict=True)
    ]
    totals = [sum(col) for col in zip(*counts, strict=True)]
    body.append("| total | " + " | ".join(map(str, totals)) + f" | {sum(totals)} |")
    return "\n".join([head, rule, *body])


def _section(title: str, ag: JudgeAgreement) -> list[str]:
    pct = f"{CONFIDENCE:.0%}"
    return [
        f"## {title}",
        f"{ag.n} graded answers to {ag.n_questions} questions.",
        f"| Cohen's kappa vs human | kappa | {pct} interval (questions resampled) | agree |\n|---|---|---|---|\n"
        + _kappa_row("binary (correct vs partly/wrong)", ag.binary)
        + ("\n" + _kappa_row("graded (correct / partly / wrong)", ag.graded) if ag.graded else ""),
        f"| rate | value (errors/n) | {pct} Wilson interval |\n|---|---|---|\n"
        f"| false positive: judge says correct, human partly/wrong | {_rate_cell(ag.false_positive)} |\n"
        f"| false negative: judge says not correct, human correct | {_rate_cell(ag.false_negative)} |",
        _matrix(GRADES, ag.columns, ag.confusion),
        _matrix(("correct", "not correct"), ("correct", "not correct"), ag.binary_confusion),
    ]


def render_markdown(report: Mapping[str, Any], rule: JudgeAgreement, judge: JudgeAgreement | None) -> str:
    """``validation_answers.md``: what was validated, the warning under :data:`MIN_GRADED`, one section per judge."""
    dist = ", ".join(f"{g} {report['human_grades'].get(g, 0)}" for g in GRADES)
    parts = [
        f"# Answer judges against human grades: {report['pool']} ({report['corpus']})",
        f"Human grades: `{report['journal']}`, the standing human grade of each answer of the pool ({dist}; "
        f"{report['n']} graded of {report['pool_answers']} pooled answers). Rule: `{report['rule']}`. "
        f"LLM judge: `{report['judge'] or 'not run (no generator= given)'}`.",
        f"Command: `{report['command']}`",
    ]
    if report["n"] < MIN_GRADED:
        parts.append(
            f"**Warning: only {report['n']} graded answers (under {MIN_GRADED}).** The intervals below are too wide "
            "to tell the judges apart; grade more answers (python -m ablate.label serve --answers POOL)."
        )
    parts += _section("Rule (binary)", rule)
    if judge is not None:
        parts += _section("LLM judge", judge)
        if report["judge_ungraded"]:
            parts.append(
                f"{report['judge_ungraded']} answer(s) the judge gave no grade (unparseable output): left out above."
            )
    return "\n\n".join(parts) + "\n"


def write_report(
    folder: Path,
    report: dict[str, Any],
    rule: JudgeAgreement,
    judge: JudgeAgreement | None,
    graded: Sequence[Graded],
) -> None:
    """``pairs.csv``, ``validation_answers.md`` then ``validation_answers.json`` in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(PAIRS_COLUMNS)
    w.writerows((g.qid, g.answer_sha256, g.human, g.rule, g.judge or "", g.rationale) for g in graded)
    atomic_write_bytes(folder / PAIRS_CSV, buf.getvalue().encode("utf-8"))
    atomic_write_bytes(folder / VALIDATION_MD, render_markdown(report, rule, judge).encode("utf-8"))
    data = {**report, "rule_agreement": asdict(rule), "judge_agreement": asdict(judge) if judge else None}
    text = json.dumps(json_finite(data), indent=2, ensure_ascii=False) + "\n"
    atomic_write_bytes(folder / VALIDATION_JSON, text.encode("utf-8"))
