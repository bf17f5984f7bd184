"""``python -m ablate.label validate [--kind relevance|answers]``: how far a judge agrees with human labels
(:mod:`ablate.labels.validation`).

``validate generator=llama_cpp --holes 0.2 --seed 0 [corpus=...] [--split dev] [--parent SWEEP_RUN_ID] [--map ...]``:
how far an LLM assessor agrees with the human labels of relevance.

Punches seeded, grade-stratified holes in the split's labels, has the assessor (as ``judge`` builds it) re-judge them
blind, and writes ``labels/<corpus>/validation/<assessor>/`` (``validation.md``, ``validation.json``, ``pairs.csv``):
Cohen's kappa (graded and binary, intervals over questions), the confusion matrix, time per judgement, unparseable
outputs. With ``--parent``: each run of that sweep re-scored on the human labels and on the labels where the holes
take the assessor's grades, and Kendall's tau of the runs' order. The journal is not touched: these are
re-judgements of labelled pairs, not new labels.

``validate --kind answers --pool FILE [--grades JOURNAL] [generator=llama_cpp]``: how far the answer rule and an LLM
answer judge agree with human grades. The human grades are the standing human grades (``human`` / ``human:<name>``)
of the pool's answers in ``labels/<corpus>/answer_journal.jsonl`` (or ``--grades``); every line of that journal is
checked first (a question the corpus does not have, a hash that is not its answer's: ``answer_journal.jsonl:LINE``,
exit 2). Each graded answer is judged by the rule, and with a ``generator=...`` by the LLM judge; the report goes
beside the pool, in ``answer_pools/<name>.validation/``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from ablate.app.label_common import (
    Loaded,
    add_kind,
    add_labels_dir,
    add_overrides,
    compose,
    corpus_spec,
    grade_legend,
    load,
    load_pool,
    open_store,
    pair_check,
    plain,
    workspace,
)
from ablate.app.label_judge import (
    add_assessor_arguments,
    build_assessor,
    cache_of,
    check_generator,
    check_repeats,
    describe_mapping,
    describe_repeats,
    judge_answers,
)
from ablate.data.corpus import label_folder
from ablate.data.snapshot import Snapshot
from ablate.errors import AblateError, ConfigError, InputError
from ablate.evaluation.generation import score_answer
from ablate.labels import journal
from ablate.labels import validation as V
from ablate.labels.assessor import judge_pairs, mapping_text, parse_mapping, time_per_judgement
from ablate.labels.commit import VALIDATION_FILE
from ablate.labels.journal import now
from ablate.labels.kind import ANSWER_GRADES, ANSWERS, KINDS, RELEVANCE
from ablate.labels.poolfile import AnswerEntry
from ablate.labels.relevance_prompt import choose_template
from ablate.labels.workspace import assessor_folder

#: The runs' metrics compared under both label versions.
METRICS = ("ndcg@10", "recall@10")
#: The share of the split's judged pairs re-judged unless --holes says: enough pairs for kappa, few to judge.
DEFAULT_HOLES = 0.2
#: How the answer rule is named in the report.
RULE = "ablate.evaluation.generation.score_answer: the short final answer (correct = 1)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_kind(p, "an LLM relevance assessor against the human labels, or the answer rule and an LLM answer judge "
             "against the human grades of an answers pool")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="seed of the holes and of the bootstrap intervals (0)")
    rel = p.add_argument_group("--kind relevance")
    rel.add_argument(
        "--holes",
        type=float,
        default=None,
        help=f"share of the split's judged pairs to re-judge ({DEFAULT_HOLES})",
    )
    rel.add_argument("--split", default=None, help="the split whose labels are holed (default: corpus.split)")
    rel.add_argument(
        "--parent", default=None, help="a sweep's run id: re-score its runs on human and assessor labels"
    )
    rel.add_argument(
        "--tracking-uri", help="MLflow store of --parent (default: $MLFLOW_TRACKING_URI, else ./mlflow.db)"
    )
    add_assessor_arguments(rel)
    ans = p.add_argument_group("--kind answers")
    ans.add_argument("--pool", help="the answers pool: labels/<corpus>/answer_pools/<name>.jsonl (required)")
    ans.add_argument(
        "--grades",
        default=None,
        help="the journal of answer grades (default: <labels-dir>/<corpus>/answer_journal.jsonl)",
    )
    add_labels_dir(p)
    add_overrides(p, "generator=llama_cpp corpus=demo_zh (answers: without a generator, the rule alone)")


def run(args: argparse.Namespace) -> int:
    kind = KINDS[args.kind]
    other = {
        RELEVANCE.name: {"--pool": args.pool, "--grades": args.grades},
        ANSWERS.name: {
            "--holes": args.holes,
            "--split": args.split,
            "--parent": args.parent,
            "--tracking-uri": args.tracking_uri,
            "--map": args.map,
            "--repeats": args.repeats,
            "--prompt": args.prompt,
        },
    }[kind.name]
    for key, value in other.items():
        if value is not None:
            raise ConfigError(key, value, f"it is not an option of validate --kind {kind.name}: drop it")
    if kind is ANSWERS:
        if args.pool is None:
            raise ConfigError(
                "--pool", None, "validate --kind answers needs the answers pool: give --pool FILE"
            )
        return _answers(args)
    return _relevance(args)


def _sweep(args: argparse.Namespace) -> tuple[Any, list[Any]]:
    """The tracker and the runs of ``--parent`` (checked before anything is judged)."""
    tracker = open_store(args.tracking_uri)
    runs = [r for r in tracker.children(args.parent) if r.status == "FINISHED"]
    if not runs:
        raise ConfigError(
            "--parent",
            args.parent,
            f"no finished run of a sweep with that id in {tracker.uri}; give a sweep's run id",
        )
    return tracker, sorted(runs, key=lambda r: (int(r.variant_order or 0), r.variant or r.name))


def _sources(snapshot: Snapshot, labels: str | None) -> list[Path]:
    """The label files the snapshot was loaded from (its qrels/ or its label version's)."""
    folder = label_folder(labels, snapshot.name) if labels else snapshot.root / "qrels"
    return sorted(folder.glob("*.tsv"))


def _rescore_runs(
    tracker: Any,
    runs: list[Any],
    snapshot: Snapshot,
    labels: str | None,
    grades: dict[tuple[str, str], int],
    assessor: str,
) -> list[V.RunRow]:
    """Each run re-scored on a copy of the human labels and on the copy where the holes take ``grades``."""
    from ablate.runner.rescore import rescore

    sources = _sources(snapshot, labels)
    parent = snapshot.label_version
    tmp = Path(tempfile.mkdtemp(prefix="ablate-validate-"))
    human = V.write_version(tmp / "human", "validate-human", sources, {}, snapshot.name, parent)
    llm = V.write_version(
        tmp / "assessor",
        f"validate-{assessor_folder(assessor)}",
        sources,
        grades,
        snapshot.name,
        parent,
        assessor,
    )
    rows = []
    for r in runs:
        if r.params.get("corpus.name") not in (None, snapshot.name):
            raise InputError(
                f"run {r.run_id}",
                f"was made on corpus {r.params.get('corpus.name')!r}, not {snapshot.name!r}",
                "give the id of a sweep on the validated corpus, or validate with its corpus=...",
            )
        a = rescore(tracker, r.run_id, labels=human).metrics
        b = rescore(tracker, r.run_id, labels=llm).metrics
        rows.append(
            V.RunRow(
                r.variant or r.name,
                r.run_id,
                {m: a[m] for m in METRICS if m in a},
                {m: b[m] for m in METRICS if m in b},
            )
        )
    return rows


def _labels(cfg: Any, split: str | None) -> tuple[Any, Snapshot, dict[str, dict[str, int]]]:
    """The corpus settings (``--split`` applied), the loaded snapshot and the split's human labels."""
    spec = corpus_spec(cfg)
    if split:
        spec = replace(spec, split=split)
    snapshot = load(spec)
    if snapshot.projection is not None:
        raise InputError(
            str(snapshot.root / "qrels"),
            "its labels were made on another chunking than corpus.chunker (projected)",
            "validate with the corpus's own chunker (drop corpus.chunker)",
        )
    judged = snapshot.split_qrels(spec.split).judgements
    if not any(judged.values()):
        raise ConfigError(
            "--split", spec.split, f"it has no judged pair in {snapshot.name}'s labels; choose another"
        )
    return spec, snapshot, judged


def _judge_holes(
    assessor: Any, snapshot: Snapshot, holes: list[V.Hole], cfg: Any
) -> tuple[list[Any], list[tuple[str, str, int, int]], list[dict[str, str]], float]:
    """The assessor's verdicts on the holes (blind), the (qid, unit, human, assessor) pairs it graded, the pairs whose
    output was unparseable, and the seconds it took; refused when it graded none."""
    t0 = time.perf_counter()
    verdicts = judge_pairs(
        assessor, snapshot, [(h.qid, h.unit) for h in holes], cache_of(cfg), label="validate"
    )
    seconds = time.perf_counter() - t0
    pairs = [
        (h.qid, h.unit, h.human, v.grade) for h, v in zip(holes, verdicts, strict=True) if v.grade is not None
    ]
    bad = [{"qid": v.qid, "unit": v.unit, "output": v.output} for v in verdicts if v.grade is None]
    if not pairs:
        raise AblateError(
            f"validate: the assessor's output was unparseable for every one of the {len(holes)} pairs (e.g. "
            f"{bad[0]['output'][:80]!r}). Fix: a model that follows the template (generator.model=...), or "
            "raise generator.max_tokens"
        )
    return verdicts, pairs, bad, seconds


def _relevance(args: argparse.Namespace) -> int:
    share = V.check_share(DEFAULT_HOLES if args.holes is None else args.holes)
    cfg = compose(args.overrides)
    check_generator(cfg, args.overrides, "validate")
    choose_template(args.prompt, None)  # a --prompt that names no template is refused before the corpus loads
    sweep = _sweep(args) if args.parent else None
    spec, snapshot, judged = _labels(cfg, args.split)
    split = spec.split
    legend = grade_legend(snapshot)
    mapping = parse_mapping(args.map, legend.values)
    prompt = choose_template(args.prompt, snapshot.language).path
    assessor = build_assessor(cfg, args.overrides, prompt, mapping, check_repeats(args.repeats))
    level = int(plain(cfg, "eval").get("relevance_level", 1))
    holes = V.holes(judged, share, args.seed)
    print(f"assessor {assessor.identity}", file=sys.stderr)
    print(describe_mapping(mapping, legend), file=sys.stderr)
    if assessor.generator.repeats > 1:
        print(describe_repeats(assessor), file=sys.stderr)
    n_judged = sum(len(v) for v in judged.values())
    print(
        f"holes: {len(holes)} of {n_judged} judged pairs of {snapshot.name}/{split} (share {share:g}, seed "
        f"{args.seed}), re-judged blind",
        file=sys.stderr,
    )
    verdicts, pairs, bad, seconds = _judge_holes(assessor, snapshot, holes, cfg)
    ag = V.agreement(pairs, legend.values, level, args.seed)
    rows: list[V.RunRow] = []
    if sweep is not None:
        grades = {
            (h.qid, h.unit): v.grade for h, v in zip(holes, verdicts, strict=True) if v.grade is not None
        }
        rows = _rescore_runs(sweep[0], sweep[1], snapshot, spec.labels, grades, assessor.identity)
    report: dict[str, Any] = {
        "assessor": assessor.identity,
        "details": assessor.details,
        "corpus": snapshot.name,
        "label_version": snapshot.label_version,
        "split": split,
        "legend": legend.as_dict(),
        "mapping": mapping_text(mapping),
        "holes": share,
        "seed": args.seed,
        "judged_pairs": n_judged,
        "n_holes": len(holes),
        "n": len(pairs),
        "kappa": ag.graded.kappa,
        "kappa_binary": ag.binary.kappa,
        "unparseable": len(bad),
        **V.flip_record([v.repeats for v in verdicts]),
        "unparseable_pairs": bad,
        "time_per_judgement_s": time_per_judgement(verdicts),
        "seconds": seconds,
        "parent": args.parent,
        "runs": [
            {"run": r.label, "run_id": r.run_id, "human": r.human, "assessor": r.assessor} for r in rows
        ],
        "tau": V.taus(rows, METRICS) if rows else {},
        "command": "python -m ablate.label " + shlex.join(sys.argv[1:]),
        "created": now(),
    }
    folder = workspace(args, snapshot).validation(assessor.identity)
    markdown = V.relevance_markdown(report, ag, rows, METRICS)
    data = {**report, "agreement": asdict(ag)}
    V.write_report(
        folder,
        (V.VALIDATION_MD, VALIDATION_FILE),
        ("qid", "unit", "human", "assessor"),
        pairs,
        markdown,
        data,
    )
    print(_summary(report, ag))
    print(f"report: {folder / V.VALIDATION_MD}")
    return 0


def _k(x: V.Kappa | None) -> str:
    return "-" if x is None else f"{x.kappa:.3f} [{x.low:.3f}, {x.high:.3f}]"


def _summary(report: dict[str, Any], ag: V.Agreement) -> str:
    per = report["time_per_judgement_s"]
    line = (
        f"kappa graded {_k(ag.graded)}, binary {_k(ag.binary)} on {report['n']} pairs "
        f"({report['unparseable']} unparseable)"
        + (
            f"; flip rate {V.fmt(report['flip_rate'])} over {report['repeats']} repeats"
            if "flip_rate" in report
            else ""
        )
        + "; time per judgement "
        + ("-" if per is None else f"{per:.2f} s")
    )
    if report["tau"]:
        line += "; Kendall tau " + ", ".join(f"{m} {t:.3f}" for m, t in report["tau"].items())
    return line


# -- answers ---------------------------------------------------------------------------------------------------------
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
            f"grade the pool's answers first: python -m ablate.label serve --pool {loaded.path}",
        )
    standing = journal.human(journal.read_grades(journal_path, pair_check(loaded.snapshot, ANSWERS)))
    index = loaded.pool.index()
    mine = {k: g.grade for k, g in standing.items() if k in index and g.grade is not None}
    return mine, len(standing) - len(mine)


def _answers(args: argparse.Namespace) -> int:
    loaded = load_pool(args, args.pool, ANSWERS)
    journal_path = (
        Path(args.grades).expanduser().resolve() if args.grades else loaded.workspace.journal_of(ANSWERS)
    )
    humans, elsewhere = _human_grades(loaded, journal_path)
    if not humans:
        raise AblateError(
            f"{journal_path}: holds no human grade of an answer of pool {loaded.path.name}"
            + (f" ({elsewhere} of other pools)" if elsewhere else "")
            + f". Fix: grade them first: python -m ablate.label serve --pool {loaded.path}"
        )
    entries = [e for e in loaded.pool.entries if e.key in humans]
    judge_name: str | None = None
    verdicts: list[tuple[str | None, str]] = [(None, "")] * len(entries)
    if _has_generator(loaded.cfg):
        judge_name, verdicts = judge_answers(loaded, entries)
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
    rule = V.judge_agreement([(g.qid, g.human, g.rule) for g in graded], ("correct", "wrong"), args.seed)
    judged = [(g.qid, g.human, g.judge) for g in graded if g.judge is not None]
    judge = V.judge_agreement(judged, ANSWER_GRADES, args.seed) if judged else None
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
    markdown = V.answers_markdown(report, rule, judge)
    data = {**report, "rule_agreement": asdict(rule), "judge_agreement": asdict(judge) if judge else None}
    pairs = [(g.qid, g.answer_sha256, g.human, g.rule, g.judge or "", g.rationale) for g in graded]
    V.write_report(folder, (V.ANSWERS_MD, V.ANSWERS_JSON), V.ANSWER_PAIRS_COLUMNS, pairs, markdown, data)
    print(_answers_summary(report, rule, judge))
    print(f"report: {folder / V.ANSWERS_MD}")
    return 0


def _answers_summary(report: dict[str, Any], rule: V.JudgeAgreement, judge: V.JudgeAgreement | None) -> str:
    def r(x: V.Rate) -> str:
        return f"{x.rate:.3f} ({x.errors}/{x.n})"

    lines = [f"{report['n']} human-graded answers of {report['pool']} ({report['corpus']})"]
    if report["warning"]:
        lines.append(
            f"WARNING: under {V.MIN_GRADED} graded answers: the intervals are too wide to compare judges"
        )
    lines.append(
        f"rule: kappa binary {_k(rule.binary)}; false positives {r(rule.false_positive)}, "
        f"false negatives {r(rule.false_negative)}"
    )
    if judge is not None:
        lines.append(
            f"LLM judge {report['judge']}: kappa graded {_k(judge.graded)}, binary {_k(judge.binary)}; false positives "
            f"{r(judge.false_positive)}, false negatives {r(judge.false_negative)}"
            + (f"; {report['judge_ungraded']} ungraded" if report["judge_ungraded"] else "")
        )
    return "\n".join(lines)
