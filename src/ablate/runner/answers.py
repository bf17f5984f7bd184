"""The answer stage of a run: each question's context goes to the generator; what it wrote is kept for scoring.

The context of a question is the first ``context_k`` passages of the final ranking (for the Oracle: the gold
evidence, ranked by grade). Every question of the split is asked, no-answer questions included (the generator
should refuse them). :func:`answer_questions` returns, per question, an
:class:`~ablate.evaluation.answer_scores.Answered` (the passages it read, every repeat's text, latency and tokens);
scoring it is :func:`ablate.evaluation.scoring.score_run`'s, like every other score of the run. A prompt that would
overflow the model's context window keeps its highest-ranked passages that fit (:mod:`ablate.runner.context_fit`).
"""

from __future__ import annotations

import sys

from ablate.cache import Cache
from ablate.data.snapshot import Snapshot
from ablate.data.types import Run
from ablate.evaluation.answer_scores import Answered
from ablate.progress import AnswerSink
from ablate.runner.context_fit import fit_prompts, trimmed_line
from ablate.runner.session import Session
from ablate.stages.base import Generator

#: (generator fingerprint, snapshot fingerprint, split) already checked in this process (a sweep checks each once)
#: -> whether the worst case fits
_FITS: dict[tuple[str, str, str], bool] = {}


def check_context(snapshot: Snapshot, split: str, generator: Generator, cache: Cache) -> bool:
    """Before anything runs: whether every prompt the generator may see fits it whatever retrieval ranks
    (``check_fits``: for a llama.cpp model, the worst case of ``context_k`` passages of this corpus and a question of
    ``split`` within ``n_ctx``); ``False``: the real prompts are counted after retrieval
    (:mod:`ablate.runner.context_fit`). Checked once per process for each generator, corpus and split."""
    check = getattr(generator, "check_fits", None)
    if check is None:
        return True
    key = (generator.fingerprint().key, snapshot.fingerprint, split)
    if key not in _FITS:
        questions = {q: snapshot.queries[q].text for q in snapshot.split_qids(split)}
        fits = check(list(snapshot.chunk_text.values()), questions, cache)
        _FITS[key] = fits is not False  # None: a check of one's own that returns nothing refuses or passes
    return _FITS[key]


def render_prompts(
    snapshot: Snapshot, split: str, generator: Generator, run: Run
) -> tuple[list[str], list[tuple[str, ...]], list[list[dict[str, str]]]]:
    """(qids, context chunk ids, chat messages) of every question of ``split``, in split order: what the generator
    reads (``experiments/bench_generate.py`` times the generator on exactly these)."""
    qids = snapshot.split_qids(split)
    contexts, prompts = [], []
    for qid in qids:
        ids = tuple(h.chunk_id for h in run.get(qid)[: generator.context_k])
        contexts.append(ids)
        prompts.append(
            generator.template.render(  # type: ignore[attr-defined]
                snapshot.queries[qid].text, [snapshot.chunk_text[c] for c in ids]
            )
        )
    return qids, contexts, prompts


def answer_questions(
    snapshot: Snapshot,
    split: str,
    generator: Generator,
    run: Run,
    cache: Cache,
    session: Session,
    show_progress: bool = False,
    answers: AnswerSink | None = None,
) -> dict[str, Answered]:
    """``qid -> what the generator wrote`` for every question of ``split``, in split order. ``answers`` (a sweep's
    console) is told of each answer."""
    generator = session.prepared(generator, snapshot, cache, show_progress)
    qids, contexts, prompts = render_prompts(snapshot, split, generator, run)
    dropped: dict[str, int] = {}
    room = getattr(generator, "prompt_room", None)  # None: a generator of one's own that knows no window
    if room is not None and room() is not None and not check_context(snapshot, split, generator, cache):
        # the worst case overflows: count the real prompts
        questions = {q: snapshot.queries[q].text for q in qids}
        contexts, prompts, trimmed = fit_prompts(generator, qids, questions, contexts, snapshot.chunk_text)
        dropped = {t.qid: t.asked - t.kept for t in trimmed}
        if trimmed:
            print(trimmed_line(generator, trimmed, len(qids)), file=sys.stderr)
    told = {"answers": answers} if answers is not None else {}  # a generator of one's own may not take it
    generations = generator.generate(prompts, cache, show_progress, **told)
    out: dict[str, Answered] = {}
    for qid, ids, gens in zip(qids, contexts, generations, strict=True):
        first = gens[0]
        out[qid] = Answered(
            context=ids,
            texts=tuple(g.text for g in gens),
            latency_s=first.latency_s,
            tokens_in=first.tokens_in,
            tokens_out=first.tokens_out,
            cached=first.cached,
            dropped=dropped.get(qid, 0),
        )
    return out
