"""What the answer commands share (``serve --answers``, ``validate-answers``): an answers pool loaded with its
corpus (the corpus the pool's ``.json`` names, as its runs loaded it; a ``corpus=...`` that is not the pool's is
refused), the check that every pooled and graded answer is to one of that corpus's questions, and the grading page.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ablate.app import label_common
from ablate.app.label_common import pool_corpus
from ablate.data.snapshot import Snapshot
from ablate.errors import InputError
from ablate.labels import answerjournal, answerpool
from ablate.labels.workspace import Workspace


@dataclass
class Loaded:
    path: Path
    pool: answerpool.AnswerPool
    cfg: Any
    snapshot: Snapshot
    workspace: Workspace


def question_check(snapshot: Snapshot) -> answerjournal.QuestionCheck:
    queries = set(snapshot.queries)

    def check(qid: str) -> str | None:
        return None if qid in queries else f"question {qid!r} is not in {snapshot.name}'s queries.jsonl"

    return check


def load_pool(args: argparse.Namespace, path_text: str) -> Loaded:
    """The answers pool at ``path_text``, its corpus loaded, every entry checked against it, and the labels folder."""
    path = Path(path_text).expanduser().resolve()
    pool = answerpool.read(path)
    cfg = pool_corpus(path, pool.meta, list(args.overrides))
    snapshot = label_common.load(label_common.corpus_from_mapping(pool.meta.corpus_config, cfg))
    if pool.meta.corpus != snapshot.name:
        raise InputError(
            str(path),
            f"answers pool {path.name} was made on corpus {pool.meta.corpus}, but its settings load {snapshot.name}",
            "make the pool again with python -m ablate.label pool-answers",
        )
    check = question_check(snapshot)
    for line, e in enumerate(pool.entries, 1):
        if problem := check(e.qid):
            raise InputError(
                f"{path}:{line}", problem, "make the pool again with python -m ablate.label pool-answers"
            )
    return Loaded(path, pool, cfg, snapshot, label_common.workspace(args, snapshot))


def answer_app(args: argparse.Namespace, assessor: str) -> tuple[Any, str]:
    """``serve --answers FILE``: the pool and every line of the answer journal checked, the page's app and the line
    that says what it serves."""
    from ablate.labels.answer_page import AnswerPageData, Asked, Passage, Progress, create_app

    loaded = load_pool(args, args.answers)
    snapshot, ws = loaded.snapshot, loaded.workspace
    # every line of the journal, before anything is served: a bad line is one error, not a page that fails later
    answerjournal.read(ws.answer_journal, question_check(snapshot))
    wanted = {c for e in loaded.pool.entries for c in e.context}
    passages = {}
    for c in wanted:
        text = snapshot.chunk_text.get(c)
        if text is not None:
            doc = snapshot.documents.get(snapshot.chunk_to_doc.get(c, ""))
            passages[c] = Passage(c, doc.title if doc is not None else "", text)
    data = AnswerPageData(
        pool=loaded.path.stem,
        entries=loaded.pool.entries,
        asked={
            q: Asked(snapshot.queries[q].persona, snapshot.queries[q].as_of)
            for q in {e.qid for e in loaded.pool.entries}
        },
        passages=passages,
        journal=ws.answer_journal,
        assessor=assessor,
        language=snapshot.language,
    )
    progress = Progress(data)
    left = sum(not progress.done(e) for e in data.entries)
    said = (
        f"answers pool {data.pool} of {snapshot.name}: {len(data.entries)} answers, {left} left for {assessor}; "
        f"grades go to {ws.answer_journal}"
    )
    return create_app(data), said
