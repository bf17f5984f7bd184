"""``python -m ablate.label judge --pool FILE generator=llama_cpp [generator.model=...] [--map 3:2,2:1,1:0,0:0]``:
an LLM assessor grades every pair of a pool that it has not judged yet (:mod:`ablate.labels.assessor`).

The corpus is the pool's (its ``.json`` records the corpus settings it was made on); the generator is the composed
config's (``generator=llama_cpp`` or ``generator=openai`` with its settings), asked the relevance template
(``--prompt``: a shipped name or a file; default ``relevance_policy``, the corpus language's own:
:mod:`ablate.labels.relevance_prompt`) greedily with at most ``MAX_TOKENS`` tokens unless ``generator.temperature`` /
``generator.max_tokens`` are given. Each judgement is appended to
``labels/<corpus>/journal.jsonl`` as it is made, as ``"assessor": "llm:<model identity>"``; a pair this assessor
already judged is skipped (resume); an unparseable output is no judgement (counted, and asked again next time).
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from collections import Counter
from typing import Any

from ablate.app.label_common import (
    add_labels_dir,
    add_overrides,
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
from ablate.labels.kind import RELEVANCE
from ablate.labels.legend import Legend
from ablate.labels.relevance_prompt import DEFAULT, choose_template


def add_assessor_arguments(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--map`` and ``--prompt`` (judge and validate share them; validate's in its ``--kind relevance`` group)."""
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


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pool", required=True, help="the pool file to judge (labels/<corpus>/pools/<name>.tsv)")
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


def build_assessor(cfg: Any, overrides: list[str], prompt: str, mapping: dict[int, int]) -> Assessor:
    """The composed config's generator (greedy and ``MAX_TOKENS`` unless set) asking the relevance template."""
    from ablate.app.config import build_stage

    node = copy.deepcopy(cfg.generator)
    if not overridden(overrides, "generator.max_tokens"):
        node.max_tokens = MAX_TOKENS
    if not overridden(overrides, "generator.temperature"):
        node.temperature = 0
    node.repeats = 1
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
    )


def run(args: argparse.Namespace) -> int:
    overrides = list(args.overrides)
    choose_template(args.prompt, None)  # a --prompt that names no template is refused before the corpus loads
    loaded = load_pool(args, args.pool, RELEVANCE, lambda cfg: check_generator(cfg, overrides, "judge"))
    cfg, snapshot, pool, pool_path = loaded.cfg, loaded.snapshot, loaded.pool, loaded.path
    check = pair_check(snapshot)
    legend = grade_legend(snapshot)
    mapping = parse_mapping(args.map, legend.values)
    prompt = choose_template(args.prompt, snapshot.language).path
    assessor = build_assessor(cfg, args.overrides, prompt, mapping)
    ws = loaded.workspace
    mine = journal.latest(
        j for j in journal.read(ws.journal, check, legend.values) if j.assessor == assessor.identity
    )
    pending = [p for p in pool.pairs if p not in mine]
    print(f"assessor {assessor.identity}", file=sys.stderr)
    print(describe_mapping(mapping, legend), file=sys.stderr)
    print(
        f"pool {pool_path.name}: {len(pool.entries)} pairs, {len(pool.entries) - len(pending)} already judged by "
        f"this assessor, {len(pending)} to judge -> {ws.journal}",
        file=sys.stderr,
    )
    name = pool_path.stem

    def record(v: Verdict) -> None:
        if v.grade is not None:
            journal.append(ws.journal, journal.judgement(v.qid, v.unit, v.grade, assessor.identity, name))

    t0 = time.perf_counter()
    verdicts = judge_pairs(assessor, snapshot, pending, cache_of(cfg), done=record)
    print(summary(verdicts, legend, time.perf_counter() - t0))
    return 0
