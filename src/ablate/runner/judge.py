"""The run's answer judge: built from ``answer.*`` before anything runs, and asked after the generator.

``answer.judge`` (``rule``, the default, or ``llm``), ``answer.judge_model`` and ``answer.judge_prompt`` are checked
by :func:`build_judge` when the command line builds each cell's job, so a bad value is one line before anything runs
(``answer.judge=foo``; ``llm`` in a pipeline without a generator). A pipeline with a generator always has a judge,
a component of the run like a stage (:mod:`ablate.stages.generate.judge`): its params are logged as ``answer.*``, its
fingerprint is ``ablate.fp.answer``, so a sweep ``answer.judge=rule,llm`` varies one factor.

:func:`judge_answers` hands each answer of a question with gold answers to an LLM judge and returns the generator's
output with each repeat's grade and rationale (:class:`~ablate.evaluation.answer_scores.Answered`); scoring reads
them there, and so does every re-score of the run's ``answers.csv``, which never asks the model again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ablate.cache import Cache
from ablate.data.snapshot import Snapshot
from ablate.errors import ConfigError
from ablate.evaluation.answer_scores import Answered
from ablate.runner.session import Session
from ablate.stages.generate.judge import JUDGES, AnswerJudge, JudgeItem, RuleJudge

#: The keys of the ``answer`` block.
KEYS = ("judge", "judge_model", "judge_prompt")
#: The name the judge is logged under (``answer.judge``) and its component (``ablate.fp.answer``).
NAME = "answer"


def _opt(v: Any) -> str | None:
    return None if v in (None, "", "null", "None") else str(v)


def build_judge(
    answer: Mapping[str, Any], generator: Any, prompts_dir: str | Path
) -> RuleJudge | AnswerJudge | None:
    """The judge ``answer`` (the composed ``answer`` block) sets for a pipeline with ``generator`` (``None``: no
    answers, no judge; an LLM judge is refused). ``prompts_dir``: the shipped templates (``conf/prompts``)."""
    unknown = sorted(set(answer) - set(KEYS))
    if unknown:
        raise ConfigError(f"answer.{unknown[0]}", answer[unknown[0]], f"known keys: {', '.join(KEYS)}")
    judge = answer.get("judge", "rule")
    if judge not in JUDGES:
        raise ConfigError("answer.judge", judge, f"valid options: {', '.join(JUDGES)}")
    if judge == "rule":
        return RuleJudge(NAME) if generator is not None else None
    if generator is None:
        raise ConfigError(
            "answer.judge",
            judge,
            "an LLM judge grades a generator's answers and this pipeline has none: add generator=llama_cpp (or "
            "generator=openai), or set answer.judge=rule",
        )
    prompt, model = _opt(answer.get("judge_prompt")), _opt(answer.get("judge_model"))
    if prompt is not None:
        prompt = str(Path(prompt).expanduser())
    own = model is None
    asker = generator if own else _judge_generator(model or "", generator)
    return AnswerJudge(asker, prompt, name=NAME, prompts_dir=prompts_dir, own_model=own)


def _judge_generator(model: str, generator: Any) -> Any:
    """A local llama.cpp generator of ``model`` (``answer.judge_model``: a shipped name or a ``.gguf`` path) for the
    judge, with the run generator's threads; checked now (a missing model is one line naming the setting)."""
    from ablate.stages.generate.gguf import identify_gguf
    from ablate.stages.generate.llama_cpp import LlamaCppGenerator

    identify_gguf(model, "answer.judge_model")
    return LlamaCppGenerator(
        name="answer_judge",
        model=model,
        prompt=generator.prompt_path,  # unused by the judge (it renders its own template); a valid generator's
        n_threads=int(getattr(generator, "n_threads", 0) or 0),
    )


def judge_answers(
    snapshot: Snapshot,
    judge: AnswerJudge,
    answered: Mapping[str, Answered],
    cache: Cache,
    session: Session,
    show_progress: bool = False,
) -> dict[str, Answered]:
    """``answered`` with an LLM judge's grade and rationale for every repeat of each question that has gold answers
    (the others are not judged). The judge asks the generator instance the session prepared: for its own model, the
    one that generated the answers (loaded once)."""
    asker = session.prepared(judge.generator, snapshot, cache, show_progress)
    bound = judge.using(asker)
    keys: list[tuple[str, int]] = []
    items: list[JudgeItem] = []
    for qid, a in answered.items():
        query = snapshot.queries[qid]
        golds = tuple(g for g in query.answers if g.strip())
        if not golds:
            continue
        for i, text in enumerate(a.texts):
            keys.append((qid, i))
            items.append(JudgeItem(query.text, golds, text))
    verdicts = bound.judge(items, cache, show_progress)
    by_q: dict[str, list[Any]] = {}
    for (qid, _), v in zip(keys, verdicts, strict=True):
        by_q.setdefault(qid, []).append(v)
    return {
        qid: replace(
            a,
            grades=tuple(v.grade for v in by_q[qid]),
            rationales=tuple(v.rationale for v in by_q[qid]),
        )
        if qid in by_q
        else a
        for qid, a in answered.items()
    }
