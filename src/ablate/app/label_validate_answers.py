"""``python -m ablate.label validate-answers --pool FILE [--grades JOURNAL] [generator=llama_cpp]``: how far the
answer rule and an LLM answer judge agree with human grades (:mod:`ablate.labels.answer_validation`).

The human grades are the standing human grades (``human`` / ``human:<name>``) of the pool's answers in
``labels/<corpus>/answer_journal.jsonl`` (or ``--grades``); every line of that journal is checked first (a question
the corpus does not have, a hash that is not its answer's: ``answer_journal.jsonl:LINE``, exit 2). Each graded answer
is judged by the rule, and with a ``generator=...`` by the LLM judge; the report goes beside the pool, in
``answer_pools/<name>.validation/`` (``validation_answers.md``, ``validation_answers.json``, ``pairs.csv``).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ablate.app.label_answers import Loaded, load_pool, question_check
from ablate.app.label_common import add_labels_dir, add_overrides, plain
from ablate.errors import AblateError, InputError
from ablate.evaluation.generation import score_answer
from ablate.labels import answer_validation as V
from ablate.labels import answerjournal
from ablate.labels.answerpool import AnswerEntry
from ablate.labels.journal import now

#: How the rule is named in the report.
RULE = "ablate.evaluation.generation.score_answer: the short final answer (correct = 1)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--pool", required=True, help="the answers pool: labels/<corpus>/answer_pools/<name>.jsonl"
    )
    p.add_argument(
        "--grades",
        default=None,
        help="the journal of answer grades (default: <labels-dir>/<corpus>/answer_journal.jsonl)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap intervals (0)")
    add_labels_dir(p)
    add_overrides(p, "generator=llama_cpp (the LLM judge; without one, the rule alone)")


def rule_verdict(
    entry: AnswerEntry, candidates: Sequence[str] = (), parts: Sequence[Sequence[str] | str] = ()
) -> str:
    """The rule's verdict on an answer: ``correct`` when it scores correct against the gold answers (its short final
    answer, the question's candidates), else ``wrong`` (the rule has no partly). The answer's passages are not needed
    for correctness."""
    score = score_answer(entry.answer, list(entry.golds), [], [], entry.question, candidates, parts)
    return "correct" if score.correct >= 1.0 else "wrong"


def _has_generator(cfg: Any) -> bool:
    node = cfg.get("generator")
    return node is not None and "_target_" in node


def _human_grades(loaded: Loaded, journal_path: Path) -> tuple[dict[tuple[str, str], str], int]:
    """The standing human grade of each answer of the pool, and how many graded answers are of other pools."""
    if not journal_path.is_file():
        raise InputError(
            str(journal_path),
            "no such journal of answer grades",
            f"grade the pool's answers first: python -m ablate.label serve --answers {loaded.path}",
        )
    standing = answerjournal.human(answerjournal.read(journal_path, question_check(loaded.snapshot)))
    index = loaded.pool.index()
    mine = {k: g.grade for k, g in standing.items() if k in index and g.grade is not None}
    return mine, len(standing) - len(mine)


def run(args: argparse.Namespace) -> int:
    loaded = load_pool(args, args.pool)
    journal_path = (
        Path(args.grades).expanduser().resolve() if args.grades else loaded.workspace.answer_journal
    )
    humans, elsewhere = _human_grades(loaded, journal_path)
    if not humans:
        raise AblateError(
            f"{journal_path}: holds no human grade of an answer of pool {loaded.path.name}"
            + (f" ({elsewhere} of other pools)" if elsewhere else "")
            + f". Fix: grade them first: python -m ablate.label serve --answers {loaded.path}"
        )
    entries = [e for e in loaded.pool.entries if e.key in humans]
    judge_name: str | None = None
    verdicts: list[tuple[str | None, str]] = [(None, "")] * len(entries)
    if _has_generator(loaded.cfg):
        judge_name, verdicts = _judge(loaded, entries)
    queries = loaded.snapshot.queries
    graded = [
        V.Graded(
            e.qid,
            e.answer_sha256,
            humans[e.key],
            rule_verdict(e, queries[e.qid].candidates, queries[e.qid].answer_parts),
            v,
            why,
        )
        for e, (v, why) in zip(entries, verdicts, strict=True)
    ]
    rule = V.agreement([(g.qid, g.human, g.rule) for g in graded], ("correct", "wrong"), args.seed)
    judged = [(g.qid, g.human, g.judge) for g in graded if g.judge is not None]
    judge = V.agreement(judged, answerjournal.GRADES, args.seed) if judged else None
    report: dict[str, Any] = {
        "pool": loaded.path.name,
        "corpus": loaded.snapshot.name,
        "journal": str(journal_path),
        "pool_answers": len(loaded.pool.entries),
        "n": len(graded),
        "graded_elsewhere": elsewhere,
        "human_grades": dict(Counter(g.human for g in graded)),
        "rule": RULE,
        "judge": judge_name,
        "judge_ungraded": sum(g.judge is None for g in graded) if judge_name else 0,
        "warning": len(graded) < V.MIN_GRADED,
        "seed": args.seed,
        "command": "python -m ablate.label " + shlex.join(sys.argv[1:]),
        "created": now(),
    }
    folder = loaded.path.with_suffix(".validation")
    V.write_report(folder, report, rule, judge, graded)
    print(_summary(report, rule, judge))
    print(f"report: {folder / V.VALIDATION_MD}")
    return 0


def _judge(loaded: Loaded, entries: list[AnswerEntry]) -> tuple[str, list[tuple[str | None, str]]]:
    """The LLM judge the composed ``generator`` and ``answer.judge_model`` / ``answer.judge_prompt`` make (as a run
    with ``answer.judge=llm`` makes it: :func:`ablate.runner.judge.build_judge`, the corpus language's template),
    its identity, and its (grade, rationale) of each answer (grade ``None``: unparseable output)."""
    from ablate.app.config import build_stage
    from ablate.app.label_judge import cache_of
    from ablate.app.paths import CONF_DIR
    from ablate.runner.judge import build_judge
    from ablate.stages.base import StageContext
    from ablate.stages.generate.judge import AnswerJudge, JudgeItem

    cfg = loaded.cfg
    generator = build_stage("generator", cfg.generator)
    block = {**plain(cfg, "answer"), "judge": "llm"}
    judge = build_judge(block, generator, CONF_DIR / "prompts")
    assert isinstance(judge, AnswerJudge)
    judge = judge.bind(loaded.snapshot, loaded.pool.meta.split)
    cache = cache_of(cfg)
    judge.prepare(StageContext(loaded.snapshot, cache, False))
    print(f"LLM judge {judge.identity}: {len(entries)} answers", file=sys.stderr)
    verdicts = judge.judge(
        [JudgeItem(e.question, e.golds, e.answer) for e in entries], cache, show_progress=True
    )
    return judge.identity, [
        (v.grade if v.grade in answerjournal.GRADES else None, v.rationale) for v in verdicts
    ]


def _summary(report: dict[str, Any], rule: V.JudgeAgreement, judge: V.JudgeAgreement | None) -> str:
    def k(x: V.Kappa | None) -> str:
        return "-" if x is None else f"{x.kappa:.3f} [{x.low:.3f}, {x.high:.3f}]"

    def r(x: V.Rate) -> str:
        return f"{x.rate:.3f} ({x.errors}/{x.n})"

    lines = [f"{report['n']} human-graded answers of {report['pool']} ({report['corpus']})"]
    if report["warning"]:
        lines.append(
            f"WARNING: under {V.MIN_GRADED} graded answers: the intervals are too wide to compare judges"
        )
    lines.append(
        f"rule: kappa binary {k(rule.binary)}; false positives {r(rule.false_positive)}, "
        f"false negatives {r(rule.false_negative)}"
    )
    if judge is not None:
        lines.append(
            f"LLM judge {report['judge']}: kappa graded {k(judge.graded)}, binary {k(judge.binary)}; false positives "
            f"{r(judge.false_positive)}, false negatives {r(judge.false_negative)}"
            + (f"; {report['judge_ungraded']} ungraded" if report["judge_ungraded"] else "")
        )
    return "\n".join(lines)
