"""Each question's prompt within the generator's context window, on the real prompts, after retrieval and before the
first generation.

The check before anything runs (:func:`ablate.runner.answers.check_context`) bounds the worst case: the corpus's
``context_k`` longest passages with the longest question. That bound is a prompt no question may make (a corpus of
short passages with a few very long ones), so when it does not fit nothing is refused: once retrieval has ranked
(which is cheap next to generating), each question's real prompt is counted with the model's tokenizer. A prompt
that fits runs as it is. One that would not keeps its highest-ranked passages that fit and leaves out the rest,
lowest-ranked first; the question is recorded (``answers.csv`` column ``context_dropped``) and named in one line,
with the ``n_ctx`` that would keep every passage. Nothing fails mid-run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Questions the line names before it says "and N more".
SHOWN = 3


@dataclass(frozen=True)
class Trimmed:
    """A question whose prompt was fitted: passages asked (``context_k`` or fewer), kept, and the tokens the prompt
    with all of them takes."""

    qid: str
    asked: int
    kept: int
    tokens: int


def fit_prompts(
    generator: Any,
    qids: Sequence[str],
    questions: Mapping[str, str],
    contexts: Sequence[tuple[str, ...]],
    chunk_text: Mapping[str, str],
) -> tuple[list[tuple[str, ...]], list[Any], list[Trimmed]]:
    """(contexts, chat messages, trimmed questions) for ``qids`` in order, each prompt within the generator's
    ``prompt_room()`` (see the module docstring). The generator is prepared (its model resolved)."""
    room = generator.prompt_room()
    out_contexts: list[tuple[str, ...]] = []
    prompts: list[Any] = []
    trimmed: list[Trimmed] = []
    for qid, ids in zip(qids, contexts, strict=True):
        passages = [chunk_text[c] for c in ids]
        messages = generator.template.render(questions[qid], passages)
        tokens = full = generator.prompt_tokens(messages)
        kept = len(ids)
        while tokens > room and kept > 0:  # the lowest-ranked passage out first
            kept -= 1
            messages = generator.template.render(questions[qid], passages[:kept])
            tokens = generator.prompt_tokens(messages)
        if kept < len(ids):
            trimmed.append(Trimmed(qid, len(ids), kept, full))
        out_contexts.append(tuple(ids[:kept]))
        prompts.append(messages)
    return out_contexts, prompts, trimmed


def trimmed_line(generator: Any, trimmed: Sequence[Trimmed], n_questions: int) -> str:
    """One line naming the questions whose prompts were fitted, by how much, and the setting that keeps them whole."""
    name = getattr(generator, "name", "generator")
    shown = "; ".join(
        f"{t.qid}: {t.tokens:,} tokens with {t.asked} passage(s), read {t.kept}" for t in trimmed[:SHOWN]
    )
    more = f"; and {len(trimmed) - SHOWN} more" if len(trimmed) > SHOWN else ""
    need = max(t.tokens for t in trimmed) + generator.max_tokens
    return (
        f"note: {len(trimmed)} of {n_questions} question(s) would overflow {name}.n_ctx={generator.n_ctx:,} with "
        f"{name}.max_tokens={generator.max_tokens} ({shown}{more}): each keeps the highest-ranked passages that fit "
        f"(answers.csv column context_dropped). Fix, to read them all: {name}.n_ctx={need:,} or more"
    )
