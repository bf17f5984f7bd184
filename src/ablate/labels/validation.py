"""Validating judges against human labels (``python -m ablate.label validate``): one kappa, one report writer, for
either kind of label (:mod:`ablate.labels.kind`).

Relevance: an LLM assessor against the human labels.

**Holes.** A seeded share of the split's judged pairs is set aside (:func:`holes`), stratified by grade: each grade
of the human labels gives ``round(share * its pairs)`` of them, at least one, so every grade is represented; the
draw is ``numpy.random.default_rng(seed)`` over the pairs sorted by (qid, unit), so the same labels, share and seed
give the same holes. The assessor re-judges them blind.

**Agreement.** Cohen's kappa between the human grade and the assessor's (mapped) grade of each hole, on the graded
labels and on the binary ones (relevant: grade >= the relevance level the metrics use), each with a 95% bootstrap
interval that resamples **questions** (a question's pairs move together), the confusion matrix and the raw share
graded alike. An unparseable output is no judgement: the pair is counted and listed, and left out of kappa. An
assessor asked several times per pair (``--repeats R``) is compared by its majority grade, and its **flip rate** (the
share of the holes whose repeats disagree: :mod:`ablate.labels.repeats`) is reported beside kappa.

**Runs.** With a sweep, each run is re-scored on two label versions that differ only in the holes: the human labels,
and the same labels with the holes' grades replaced by the assessor's (:func:`write_version`); the table of each
run's main metrics under both and Kendall's tau-b of the runs' order by each metric say whether the assessor's
labels would change a conclusion.

The report (``labels/<corpus>/validation/<assessor>/``): ``validation.md``, ``validation.json`` (what
:func:`ablate.labels.commit.validation_report` reads) and ``pairs.csv`` (``qid, unit, human, assessor``: the pairs
kappa is computed on).

Answers (``--kind answers``): every answer of an answers pool that a person graded (the standing human grade of
``answer_journal.jsonl``) is judged by the **rule** (:func:`ablate.evaluation.generation.score_answer`'s
``correct``: binary) and, given a generator, by the **LLM judge** (``correct`` / ``partly`` / ``wrong``). Per judge:
Cohen's kappa against the human grades, binary (correct vs partly or wrong: "correct" is what every correctness
figure counts) for both and graded on the three levels (wrong 0 < partly 1 < correct 2, unweighted) for the LLM
judge, with intervals over questions as above; the **false-positive rate** (of the answers the human did not grade
correct, the share the judge calls correct: what inflates a correctness figure) and the **false-negative rate**, each
with a Wilson interval (counts, not questions: a rate per answer); the confusion matrices. An LLM verdict without a
grade is counted and left out. Fewer than :data:`MIN_GRADED` graded answers gives a warning in the report: an
interval that wide cannot tell judges apart. The report goes beside the pool, ``answer_pools/<name>.validation/``
(``validation_answers.md``, ``validation_answers.json``, ``pairs.csv``).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ablate.cache import atomic_write_bytes
from ablate.errors import ConfigError
from ablate.evaluation.stats.agreement import confusion, json_finite, kappa_interval, kendall_tau
from ablate.evaluation.stats.wilson import wilson_interval
from ablate.labels.kind import ANSWER_GRADES, ANSWER_LEVEL
from ablate.labels.repeats import flip_rate

PAIRS_CSV = "pairs.csv"
VALIDATION_MD = "validation.md"
ANSWERS_MD = "validation_answers.md"
ANSWERS_JSON = "validation_answers.json"
ANSWER_PAIRS_COLUMNS = ("qid", "answer_sha256", "human", "rule", "judge", "judge_rationale")
#: Bootstrap resamples of the kappa intervals: enough for a stable 95% percentile interval at these sizes.
RESAMPLES = 1000
CONFIDENCE = 0.95
#: Under this many graded answers the report warns that its figures are too uncertain to compare judges.
MIN_GRADED = 30


@dataclass(frozen=True)
class Hole:
    qid: str
    unit: str
    human: int


def check_share(share: float, key: str = "--holes") -> float:
    if not (isinstance(share, float | int) and 0 < share <= 1):
        raise ConfigError(key, share, "give the share of judged pairs to re-judge, in (0, 1], e.g. 0.2")
    return float(share)


def holes(judgements: Mapping[str, Mapping[str, int]], share: float, seed: int) -> list[Hole]:
    """A seeded share of the judged pairs, stratified by grade (module docstring), sorted by (qid, unit)."""
    share = check_share(share)
    by_grade: dict[int, list[Hole]] = {}
    for qid in sorted(judgements):
        for unit in sorted(judgements[qid]):
            g = int(judgements[qid][unit])
            by_grade.setdefault(g, []).append(Hole(qid, unit, g))
    rng = np.random.default_rng(seed)
    out: list[Hole] = []
    for g in sorted(by_grade, reverse=True):
        pairs = by_grade[g]
        n = min(len(pairs), max(1, round(share * len(pairs))))
        out += [pairs[i] for i in sorted(rng.choice(len(pairs), size=n, replace=False).tolist())]
    return sorted(out, key=lambda h: (h.qid, h.unit))


# ------------------------------------------------------------------------------------------------------ agreement
@dataclass(frozen=True)
class Kappa:
    kappa: float
    low: float
    high: float
    agree: float


@dataclass(frozen=True)
class Agreement:
    n: int
    n_questions: int
    relevance_level: int
    labels: tuple[int, ...]
    graded: Kappa
    binary: Kappa
    confusion: list[list[int]]
    binary_confusion: list[list[int]]


@dataclass(frozen=True)
class Rate:
    """``errors`` of ``n`` with its Wilson interval."""

    rate: float
    low: float
    high: float
    errors: int
    n: int


def kappa(h: Sequence[int], a: Sequence[int], qids: Sequence[str], labels: Sequence[int], seed: int) -> Kappa:
    """Cohen's kappa of ``h`` and ``a`` with its bootstrap interval over the questions ``qids``, and the share
    graded alike."""
    k, low, high = kappa_interval(
        h, a, groups=qids, labels=labels, n_resamples=RESAMPLES, confidence=CONFIDENCE, seed=seed
    )
    agree = sum(x == y for x, y in zip(h, a, strict=True)) / len(h) if h else math.nan
    return Kappa(k, low, high, agree)


def agreement(
    pairs: Sequence[tuple[str, str, int, int]], labels: Sequence[int], relevance_level: int, seed: int
) -> Agreement:
    """Kappa (graded and binary, intervals over questions) and confusion matrices of ``(qid, unit, human,
    assessor)`` pairs over the legend ``labels``."""
    qids = [p[0] for p in pairs]
    h = [p[2] for p in pairs]
    a = [p[3] for p in pairs]
    legend = sorted(set(labels))
    hb = [int(x >= relevance_level) for x in h]
    ab = [int(x >= relevance_level) for x in a]
    return Agreement(
        n=len(pairs),
        n_questions=len(set(qids)),
        labels=tuple(legend),
        relevance_level=relevance_level,
        graded=kappa(h, a, qids, legend, seed),
        binary=kappa(hb, ab, qids, [0, 1], seed),
        confusion=[list(r) for r in confusion(h, a, labels=legend).counts],
        binary_confusion=[list(r) for r in confusion(hb, ab, labels=[0, 1]).counts],
    )


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


def _rate(errors: int, n: int) -> Rate:
    p, low, high = wilson_interval(errors, n, CONFIDENCE)
    return Rate(p, low, high, errors, n)


def judge_agreement(
    rows: Sequence[tuple[str, str, str]], columns: Sequence[str], seed: int
) -> JudgeAgreement:
    """The agreement of one answer judge with the human grades: ``rows`` of ``(qid, human grade, judge grade)``,
    the judge's grades among ``columns`` (``("correct", "wrong")`` for the rule, the three grades for the LLM)."""
    qids = [r[0] for r in rows]
    hb = [int(r[1] == "correct") for r in rows]
    jb = [int(r[2] == "correct") for r in rows]
    graded = None
    if tuple(columns) == ANSWER_GRADES:
        levels = [0, 1, 2]
        graded = kappa(
            [ANSWER_LEVEL[r[1]] for r in rows], [ANSWER_LEVEL[r[2]] for r in rows], qids, levels, seed
        )
    col = {c: i for i, c in enumerate(columns)}
    matrix = [[0] * len(columns) for _ in ANSWER_GRADES]
    for _, h, j in rows:
        matrix[ANSWER_GRADES.index(h)][col[j]] += 1
    # rows/columns 0 = correct, 1 = not (confusion orders labels ascending: flip to correct first)
    counts = confusion([1 - x for x in hb], [1 - x for x in jb], labels=[0, 1]).counts
    return JudgeAgreement(
        n=len(rows),
        n_questions=len(set(qids)),
        binary=kappa(hb, jb, qids, [0, 1], seed),
        graded=graded,
        false_positive=_rate(sum(j for h, j in zip(hb, jb, strict=True) if not h), hb.count(0)),
        false_negative=_rate(sum(1 - j for h, j in zip(hb, jb, strict=True) if h), hb.count(1)),
        confusion=matrix,
        columns=tuple(columns),
        binary_confusion=[list(r) for r in counts],
    )


# ----------------------------------------------------------------------------------------------------------- runs
@dataclass(frozen=True)
class RunRow:
    """One run of the sweep: its label, id and metrics under the human labels and under the assessor's."""

    label: str
    run_id: str
    human: dict[str, float]
    assessor: dict[str, float]


def taus(rows: Sequence[RunRow], metrics: Sequence[str]) -> dict[str, float]:
    """Kendall's tau-b of the runs' order under the two label versions, per metric."""
    out = {}
    for m in metrics:
        h = {r.label: r.human[m] for r in rows if m in r.human and m in r.assessor}
        a = {r.label: r.assessor[m] for r in rows if m in r.human and m in r.assessor}
        out[m] = kendall_tau(h, a)
    return out


def write_version(
    folder: Path,
    name: str,
    sources: Sequence[Path],
    grades: Mapping[tuple[str, str], int],
    corpus: str,
    parent: str,
    assessor: str = "",
) -> Path:
    """A label version folder (:mod:`ablate.data.labelsets`) at ``folder``: a copy of each label file of
    ``sources`` with the grade of each pair in ``grades`` replaced (every other line as it was), and its
    ``version.json``. Replaced lines are counted as ``assessor``'s."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    replaced = 0
    for src in sources:
        lines = []
        for line in src.read_text(encoding="utf-8").splitlines(keepends=True):
            parts = re.split(r"(\s+)", line.rstrip("\r\n"))
            words = parts[::2]
            if len(words) >= 3 and (words[0], words[-2]) in grades:
                parts[-1] = str(grades[(words[0], words[-2])])
                line = "".join(parts) + "\n"
                replaced += 1
            lines.append(line)
        (folder / src.name).write_text("".join(lines), encoding="utf-8")
    meta = {
        "name": name,
        "parent": parent,
        "corpus": corpus,
        "assessors": {assessor: replaced} if assessor and replaced else {},
        "llm_made": replaced if assessor.startswith("llm:") else 0,
        "note": "made by python -m ablate.label validate to re-score runs; not a committed version",
        # every read of the version checks its files against these (ablate.data.labelsets)
        "files": {src.name: hashlib.sha256((folder / src.name).read_bytes()).hexdigest() for src in sources},
    }
    (folder / "version.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return folder


def flip_record(repeats: Sequence[Sequence[int | None]]) -> dict[str, Any]:
    """The judge noise of a validation (``repeats``: each verdict's repeat grades): ``repeats`` (per pair),
    ``flip_rate``, ``flipped`` and ``flip_items`` (the pairs with a grade); nothing for single judgements."""
    if not any(repeats):
        return {}
    rate, k, n = flip_rate(repeats)
    return {"repeats": max(len(r) for r in repeats), "flip_rate": rate, "flipped": k, "flip_items": n}


# --------------------------------------------------------------------------------------------------------- report
def fmt(v: float | None) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"


_fmt = fmt


def _seeds(report: Mapping[str, Any]) -> str:
    """``0 to 2``: the seeds of a repeated judgement (repeat r: the generator's seed + r)."""
    seed = int(report["details"]["params"].get("seed") or 0)
    return f"{seed} to {seed + int(report['repeats']) - 1}"


def _kappa_row(name: str, k: Kappa) -> str:
    if math.isnan(k.kappa):
        return f"| {name} | undefined (one shared grade only) | - | {k.agree:.1%} |"
    return f"| {name} | {_fmt(k.kappa)} | {_fmt(k.low)} to {_fmt(k.high)} | {k.agree:.1%} |"


def _matrix(
    judge: str, rows: Sequence[object], columns: Sequence[object], counts: Sequence[Sequence[int]]
) -> str:
    """A confusion matrix as a Markdown table: human grades ``rows`` by the ``judge``'s ``columns``, with totals."""
    head = f"| human \\ {judge} | " + " | ".join(map(str, columns)) + " | total |"
    rule = "|---" * (len(columns) + 2) + "|"
    body = [
        f"| {r} | " + " | ".join(map(str, c)) + f" | {sum(c)} |" for r, c in zip(rows, counts, strict=True)
    ]
    totals = [sum(col) for col in zip(*counts, strict=True)]
    body.append("| total | " + " | ".join(map(str, totals)) + f" | {sum(totals)} |")
    return "\n".join([head, rule, *body])


def relevance_markdown(
    report: Mapping[str, Any], ag: Agreement, rows: Sequence[RunRow], metrics: Sequence[str]
) -> str:
    """``validation.md``: what was validated, kappa, confusion matrices, unparseable outputs, the runs' table."""
    pct = f"{CONFIDENCE:.0%}"
    legend = ", ".join(f"{g} {t}" for g, t in report["legend"].items())
    parts = [
        f"# Validation of {report['assessor']} on {report['corpus']}",
        f"Assessor: `{report['assessor']}` (model {report['details']['model']}, template "
        f"`{Path(report['details']['template']).name}` sha256 {report['details']['template_sha256'][:12]}, "
        f"max_tokens {report['details']['params'].get('max_tokens')}, temperature "
        f"{report['details']['params'].get('temperature')}).",
        f"Labels: {report['corpus']} version {report['label_version'] or '(corpus qrels)'}, split "
        f"{report['split']}; legend {legend}. Holes: {report['holes']:.0%} of the split's "
        f"{report['judged_pairs']} judged pairs, stratified by grade, seed {report['seed']}: "
        f"{report['n_holes']} pairs re-judged blind.",
        f"Mapping of the assessor's 0-3 scale to the legend: `{report['mapping']}`.",
        f"Judged: {report['n']} pairs on {ag.n_questions} questions; unparseable outputs (no judgement, left out): "
        f"{report['unparseable']}. Time per judgement: {_fmt(report['time_per_judgement_s'])} s (generation "
        "time when made; cached judgements keep theirs).",
        f"Command: `{report['command']}`",
        "## Agreement",
        f"Cohen's kappa, {pct} bootstrap percentile intervals over {RESAMPLES} resamples of questions (a "
        "question's pairs move together), seed as above. 'agree': share of pairs graded alike.",
        "| labels | Cohen's kappa | interval | agree |\n|---|---|---|---|\n"
        + _kappa_row(f"graded ({', '.join(map(str, ag.labels))})", ag.graded)
        + "\n"
        + _kappa_row(f"binary (relevant: grade >= {ag.relevance_level})", ag.binary),
        *(
            [
                f"Judge noise: each pair asked {report['repeats']} times (temperature "
                f"{report['details']['params'].get('temperature')}, seeds {_seeds(report)}), the majority graded (a "
                f"tie: the lower grade); flip rate {_fmt(report['flip_rate'])}: the repeats of {report['flipped']} of "
                f"{report['flip_items']} pairs disagree."
            ]
            if "flip_rate" in report
            else []
        ),
        "## Confusion (rows human, columns assessor)",
        _matrix("assessor", ag.labels, ag.labels, ag.confusion),
        f"Binary (1 = grade >= {ag.relevance_level}):",
        _matrix("assessor", (0, 1), (0, 1), ag.binary_confusion),
    ]
    if report["unparseable_pairs"]:
        lines = [f"- {u['qid']} {u['unit']}: {u['output'][:120]!r}" for u in report["unparseable_pairs"]]
        parts += ["## Unparseable outputs", "\n".join(lines)]
    parts.append("## Runs under human and assessor labels")
    if not rows:
        parts.append(
            "Not measured: this needs a sweep. Run validate with --parent SWEEP_RUN_ID to re-score each of its runs "
            "on the human labels and on the labels where the holes take the assessor's grades."
        )
    else:
        cols = [f"{m} {side}" for m in metrics for side in ("human", "assessor")]
        table = ["| run | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
        for r in rows:
            cells = [_fmt(getattr(r, side).get(m)) for m in metrics for side in ("human", "assessor")]
            table.append(f"| {r.label} | " + " | ".join(cells) + " |")
        tau = report["tau"]
        parts += [
            f"Sweep {report['parent']}: each run re-scored from its run.trec on the two label versions (they differ "
            "only in the holes).",
            "\n".join(table),
            "Kendall's tau-b of the runs' order: " + ", ".join(f"{m} {_fmt(tau[m])}" for m in metrics) + ".",
        ]
    return "\n\n".join(parts) + "\n"


def _section(title: str, ag: JudgeAgreement) -> list[str]:
    pct = f"{CONFIDENCE:.0%}"
    return [
        f"## {title}",
        f"{ag.n} graded answers to {ag.n_questions} questions.",
        f"| Cohen's kappa vs human | kappa | {pct} interval (questions resampled) | agree |\n|---|---|---|---|\n"
        + _kappa_row("binary (correct vs partly/wrong)", ag.binary)
        + ("\n" + _kappa_row("graded (correct / partly / wrong)", ag.graded) if ag.graded else ""),
        f"| rate | value (errors/n) | {pct} Wilson interval |\n|---|---|---|\n"
        + "".join(
            f"| {what} | {_fmt(r.rate)} ({r.errors}/{r.n}) | {_fmt(r.low)} to {_fmt(r.high)} |\n"
            for what, r in (
                ("false positive: judge says correct, human partly/wrong", ag.false_positive),
                ("false negative: judge says not correct, human correct", ag.false_negative),
            )
        ).rstrip("\n"),
        _matrix("judge", ANSWER_GRADES, ag.columns, ag.confusion),
        _matrix("judge", ("correct", "not correct"), ("correct", "not correct"), ag.binary_confusion),
    ]


def answers_markdown(report: Mapping[str, Any], rule: JudgeAgreement, judge: JudgeAgreement | None) -> str:
    """``validation_answers.md``: what was validated, the warning under :data:`MIN_GRADED`, one section per judge."""
    dist = ", ".join(f"{g} {report['human_grades'].get(g, 0)}" for g in ANSWER_GRADES)
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
            "to tell the judges apart; grade more answers (python -m ablate.label serve --pool POOL)."
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
    names: tuple[str, str],
    columns: Sequence[str],
    rows: Sequence[Sequence[object]],
    markdown: str,
    data: Mapping[str, Any],
) -> None:
    """``pairs.csv`` (``columns``, ``rows``), then the Markdown report, then the JSON one (last: the commit's gate
    reads it), in ``folder``; ``names`` are the Markdown's and the JSON's file names."""
    folder.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    w.writerows(rows)
    atomic_write_bytes(folder / PAIRS_CSV, buf.getvalue().encode("utf-8"))
    atomic_write_bytes(folder / names[0], markdown.encode("utf-8"))
    text = json.dumps(json_finite(dict(data)), indent=2, ensure_ascii=False) + "\n"
    atomic_write_bytes(folder / names[1], text.encode("utf-8"))
