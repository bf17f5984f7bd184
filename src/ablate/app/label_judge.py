"""``python -m ablate.label judge --pool FILE generator=llama_cpp [generator.model=...] [--map 3:2,2:1,1:0,0:0]``:
an LLM assessor grades every pair of a pool that it has not judged yet (:mod:`ablate.labels.assessor`).

The corpus is the pool's (its ``.json`` records the corpus settings it was made on); the generator is the composed
config's (``generator=llama_cpp`` or ``generator=openai`` with its settings), asked the relevance template
(``--prompt``: a shipped name or a file; default ``relevance_policy``, the corpus language's own:
:mod:`ablate.labels.relevance_prompt`) greedily with at most ``MAX_TOKENS`` tokens unless ``generator.temperature`` /
``generator.max_tokens`` are given. Each judgement is appended to
``labels/<corpus>/journal.jsonl`` as it is made, as ``"assessor": "llm:<model identity>"``; a pair this assessor
already judged is skipped (resume); an unparseable output is no judgement (counted, and asked again next time).

``--repeats R`` (R > 1) asks the assessor R times per pair, sampling (``generator.temperature``, default
:data:`SAMPLING_TEMPERATURE`; greedy decoding would repeat itself and is refused) with the seeds ``generator.seed``
to ``generator.seed + R - 1``; each repeat's grade goes into the pair's journal line (``"repeats"``), its grade is
their majority (a tie: the lower grade), and the flip rate (the share of pairs whose repeats disagree) is printed.
R = 1, the default, is one greedy generation per pair, as before.

An answers pool (``answer_pools/<name>.jsonl``, or ``--kind answers``) is graded by the LLM answer judge a run with
``answer.judge=llm`` uses (the composed generator, or ``answer.judge_model``; ``answer.judge_prompt``): each grade
(correct / partly / wrong) is appended to ``answer_journal.jsonl`` as ``llm:<judge identity>``, beside any person's
grade of the same answer (neither overwrites the other); an answer this judge graded is skipped, an unparseable
output is no grade. The judgements are cached by content, so answers a run's judge already graded cost nothing.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from collections import Counter
from typing import Any

from ablate.app.label_common import (
    Loaded,
    add_labels_dir,
    add_overrides,
    add_pool_kind,
    grade_legend,
    load_pool,
    overridden,
    pair_check,
    plain,
)
from ablate.cache import Cache
from ablate.errors import ConfigError
from ablate.labels import journal
from ablate.labels.assessor import (
    MAX_TOKENS,
    SCALE,
    Assessor,
    Verdict,
    judge_pairs,
    make_assessor,
    mapping_text,
    parse_mapping,
    time_per_judgement,
)
from ablate.labels.kind import ANSWER_GRADES, ANSWERS, KINDS, RELEVANCE
from ablate.labels.legend import Legend
from ablate.labels.relevance_prompt import DEFAULT, choose_template
from ablate.labels.repeats import flip_rate

#: The default ``--prompt``: the shipped relevance template in the corpus language (:mod:`ablate.labels.relevance_prompt`).
DEFAULT_PROMPT = DEFAULT
#: The temperature of repeated judgements unless ``generator.temperature`` says: enough to show where the assessor
#: is unsure, the usual value for sampled self-consistency.
SAMPLING_TEMPERATURE = 0.7
#: The most repeats per pair (the generator's own limit).
MAX_REPEATS = 20


def add_assessor_arguments(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--map``, ``--prompt`` and ``--repeats`` (judge and validate share them; validate's in its ``--kind
    relevance`` group)."""
    p.add_argument(
        "--map",
        default=None,
        metavar="S:G,...",
        help="the assessor's 0-3 scores to the corpus's grades, e.g. 3:2,2:1,1:0,0:0 (default: from the legend; "
        "docs/labels.md)",
    )
    p.add_argument(
        "--prompt",
        default=None,
        help="the relevance template: a shipped name (conf/prompts/relevance*.txt, e.g. relevance_umbrela) or a file "
        f"({{question}}, {{passage}}, optional {{reference}}); default {DEFAULT}, the corpus language's own",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=None,
        metavar="R",
        help=f"ask the assessor R times per pair, sampling (temperature {SAMPLING_TEMPERATURE} unless "
        "generator.temperature says) with seeds generator.seed + 0..R-1; the majority is its grade (a tie: the "
        "lower), the flip rate is reported (default 1: greedy, once)",
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--pool",
        required=True,
        help="the pool file to judge (labels/<corpus>/pools/<name>.tsv; an answers pool answer_pools/<name>.jsonl "
        "is graded by the LLM answer judge)",
    )
    add_pool_kind(p)
    add_assessor_arguments(p)
    add_labels_dir(p)
    add_overrides(p, "generator=llama_cpp generator.model=smollm2-135m-instruct")


def cache_of(cfg: Any) -> Cache:
    block = plain(cfg, "cache")
    return Cache(block.get("dir") or None, enabled=bool(block.get("enabled", True)))


def check_generator(cfg: Any, overrides: list[str], command: str) -> None:
    """Before the corpus loads: a generator is configured, and its prompt is not set (the assessor's is --prompt)."""
    node = cfg.get("generator")
    if node is None or "_target_" not in node:
        raise ConfigError(
            "generator",
            "none",
            f"{command} needs a generator to judge with: give generator=llama_cpp (a local GGUF, e.g. "
            "generator.model=qwen2.5-coder-1.5b-instruct) or generator=openai with its settings",
        )
    if overridden(overrides, "generator.prompt"):
        raise ConfigError(
            "generator.prompt",
            plain(cfg, "generator").get("prompt"),
            f"{command} asks a relevance template ({{question}}, {{passage}}): give it with --prompt FILE",
        )


def check_repeats(repeats: object) -> int:
    """``--repeats``: 1 when not given, else a whole number from 1 to :data:`MAX_REPEATS`."""
    if repeats is None:
        return 1
    if isinstance(repeats, bool) or not isinstance(repeats, int) or not 1 <= repeats <= MAX_REPEATS:
        raise ConfigError(
            "--repeats", repeats, f"give how many times to ask per pair, 1 to {MAX_REPEATS}, e.g. 3 or 5"
        )
    return repeats


def build_assessor(
    cfg: Any, overrides: list[str], prompt: str, mapping: dict[int, int], repeats: int = 1
) -> Assessor:
    """The composed config's generator (greedy and ``MAX_TOKENS`` unless set; with ``repeats`` > 1 sampling at
    :data:`SAMPLING_TEMPERATURE` unless set) asking the relevance template ``repeats`` times per pair."""
    from ablate.app.config import build_stage

    node = copy.deepcopy(cfg.generator)
    if not overridden(overrides, "generator.max_tokens"):
        node.max_tokens = MAX_TOKENS
    if not overridden(overrides, "generator.temperature"):
        node.temperature = 0 if repeats == 1 else SAMPLING_TEMPERATURE
    elif repeats > 1 and not float(node.temperature) > 0:
        raise ConfigError(
            "generator.temperature",
            node.temperature,
            f"--repeats {repeats} asks the assessor {repeats} times with different seeds, and greedy decoding gives "
            f"the same output every time: give a temperature above 0 (e.g. {SAMPLING_TEMPERATURE}, the default "
            "with --repeats), or drop --repeats",
        )
    node.repeats = repeats
    generator = build_stage("generator", node)
    return make_assessor(generator, prompt, mapping)


def describe_mapping(mapping: dict[int, int], legend: Legend) -> str:
    """``mapping 3:2,2:1,1:0,0:0 (3 dedicated ... -> 2 answers directly; ...)``."""
    scale = dict(SCALE)
    return (
        f"mapping {mapping_text(mapping)} ("
        + "; ".join(
            f"{s} {scale[s]} -> {mapping[s]} {legend.text(mapping[s])}" for s in sorted(mapping, reverse=True)
        )
        + ")"
    )


def describe_repeats(assessor: Assessor) -> str:
    """``repeats 3 per pair: temperature 0.7, seeds 0 to 2; the majority is the grade (a tie: the lower)``."""
    g = assessor.generator
    return (
        f"repeats {g.repeats} per pair: temperature {g.temperature:g}, seeds {g.seed} to {g.seed + g.repeats - 1}; "
        "the majority is the grade (a tie: the lower)"
    )


def summary(verdicts: list[Verdict], legend: Legend, seconds: float) -> str:
    """Counts per grade, unparseable outputs, time per judgement."""
    counts = Counter(v.grade for v in verdicts if v.grade is not None)
    bad = sum(v.grade is None for v in verdicts)
    per = time_per_judgement(verdicts)
    cached = sum(v.cached for v in verdicts)
    grades = ", ".join(f"{g} ({legend.text(g)}): {counts.get(g, 0)}" for g in legend.values)
    return (
        f"judged {len(verdicts) - bad} of {len(verdicts)} pairs in {seconds:.1f} s ({cached} from the cache); "
        f"grades {grades}; unparseable (not judged): {bad}; time per judgement "
        + ("-" if per is None else f"{per:.2f} s")
        + flips(verdicts)
    )


def flips(verdicts: list[Verdict]) -> str:
    """``; flip rate 0.250 (2 of 8 pairs' repeats disagree, 3 repeats each)`` for repeated verdicts, else ``""``."""
    if not any(v.repeats for v in verdicts):
        return ""
    rate, k, n = flip_rate(v.repeats for v in verdicts)
    r = max(len(v.repeats) for v in verdicts)
    shown = "-" if rate is None else f"{rate:.3f}"
    return f"; flip rate {shown} ({k} of {n} pairs' repeats disagree, {r} repeats each)"


def run(args: argparse.Namespace) -> int:
    overrides = list(args.overrides)
    if (KINDS[args.kind] if args.kind else None) is ANSWERS or (
        args.kind is None and args.pool.endswith(ANSWERS.suffix)
    ):
        return _answers(args, overrides)
    choose_template(args.prompt, None)  # a --prompt that names no template is refused before the corpus loads
    repeats = check_repeats(args.repeats)
    loaded = load_pool(args, args.pool, RELEVANCE, lambda cfg: check_generator(cfg, overrides, "judge"))
    cfg, snapshot, pool, pool_path = loaded.cfg, loaded.snapshot, loaded.pool, loaded.path
    check = pair_check(snapshot)
    legend = grade_legend(snapshot)
    mapping = parse_mapping(args.map, legend.values)
    prompt = choose_template(args.prompt, snapshot.language).path
    assessor = build_assessor(cfg, args.overrides, prompt, mapping, repeats)
    ws = loaded.workspace
    mine = journal.latest(
        j for j in journal.read(ws.journal, check, legend.values) if j.assessor == assessor.identity
    )
    pending = [p for p in pool.pairs if p not in mine]
    print(f"assessor {assessor.identity}", file=sys.stderr)
    print(describe_mapping(mapping, legend), file=sys.stderr)
    if repeats > 1:
        print(describe_repeats(assessor), file=sys.stderr)
    print(
        f"pool {pool_path.name}: {len(pool.entries)} pairs, {len(pool.entries) - len(pending)} already judged by "
        f"this assessor, {len(pending)} to judge -> {ws.journal}",
        file=sys.stderr,
    )
    name = pool_path.stem

    def record(v: Verdict) -> None:
        if v.grade is not None:
            line = journal.judgement(
                v.qid, v.unit, v.grade, assessor.identity, name, repeats=v.repeats or None
            )
            journal.append(ws.journal, line)

    t0 = time.perf_counter()
    verdicts = judge_pairs(assessor, snapshot, pending, cache_of(cfg), done=record)
    print(summary(verdicts, legend, time.perf_counter() - t0))
    return 0


# -- answers ---------------------------------------------------------------------------------------------------------
def answer_judge(loaded: Loaded) -> Any:
    """The LLM judge the composed ``generator`` and ``answer.judge_model`` / ``answer.judge_prompt`` make (as a run
    with ``answer.judge=llm`` makes it: :func:`ablate.runner.judge.build_judge`, the corpus language's template),
    bound to the pool's corpus and prepared."""
    from ablate.app.config import build_stage
    from ablate.app.paths import CONF_DIR
    from ablate.runner.judge import build_judge
    from ablate.stages.base import StageContext
    from ablate.stages.generate.judge import AnswerJudge

    cfg = loaded.cfg
    generator = build_stage("generator", cfg.generator)
    judge = build_judge({**plain(cfg, "answer"), "judge": "llm"}, generator, CONF_DIR / "prompts")
    assert isinstance(judge, AnswerJudge)
    judge = judge.bind(loaded.snapshot, loaded.pool.meta.split)
    judge.prepare(StageContext(loaded.snapshot, cache_of(cfg), False))
    return judge


def judge_answers(
    loaded: Loaded, entries: list[Any], judge: Any = None, done: Any = None
) -> tuple[str, list[tuple[str | None, str]]]:
    """The answer judge's identity and its (grade, rationale) of each of ``entries`` (grade ``None``: unparseable
    output), one at a time, ``done(entry, grade)`` called as each is made."""
    from ablate.progress import Progress
    from ablate.stages.generate.judge import JudgeItem

    judge = judge or answer_judge(loaded)
    cache = cache_of(loaded.cfg)
    print(f"LLM judge {judge.identity}: {len(entries)} answers", file=sys.stderr)
    out: list[tuple[str | None, str]] = []
    with Progress("judge", len(entries), unit="answers") as progress:
        for e in entries:
            (v,) = judge.judge([JudgeItem(e.question, e.golds, e.answer)], cache)
            out.append((v.grade if v.grade in ANSWER_GRADES else None, v.rationale))
            if done is not None:
                done(e, out[-1][0])
            progress.update(1)
    return judge.identity, out


def _answers(args: argparse.Namespace, overrides: list[str]) -> int:
    """``judge --kind answers``: the LLM answer judge grades the pool's answers into the answer journal."""
    other = {
        "--map": args.map,
        "--repeats": args.repeats,
        "--prompt": None if args.prompt == DEFAULT_PROMPT else args.prompt,
    }
    for key, value in other.items():
        if value is not None:
            raise ConfigError(
                key,
                value,
                "it is not an option of judge --kind answers (its template is answer.judge_prompt): drop it",
            )
    loaded = load_pool(args, args.pool, ANSWERS, lambda cfg: check_generator(cfg, [], "judge --kind answers"))
    path = loaded.workspace.journal_of(ANSWERS)
    judge = answer_judge(loaded)
    graded = journal.read_grades(path, pair_check(loaded.snapshot, ANSWERS))
    mine = journal.latest(g for g in graded if g.assessor == judge.identity)
    pending = [e for e in loaded.pool.entries if e.key not in mine]
    print(
        f"answers pool {loaded.path.name}: {len(loaded.pool.entries)} answers, {len(loaded.pool.entries) - len(pending)} "
        f"already graded by this judge, {len(pending)} to grade -> {path}",
        file=sys.stderr,
    )

    def record(e: Any, grade: str | None) -> None:
        if grade is not None:
            journal.append(path, journal.grade(e.qid, e.answer, grade, judge.identity))

    t0 = time.perf_counter()
    _, verdicts = judge_answers(loaded, pending, judge, record)
    counts = Counter(g for g, _ in verdicts if g is not None)
    bad = sum(g is None for g, _ in verdicts)
    print(
        f"graded {len(verdicts) - bad} of {len(verdicts)} answers in {time.perf_counter() - t0:.1f} s; "
        + ", ".join(f"{g}: {counts.get(g, 0)}" for g in ANSWER_GRADES)
        + f"; unparseable (not graded): {bad}"
    )
    return 0
