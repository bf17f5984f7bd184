"""A job's inputs, checked before it starts: the tracking store, the cache folder, the corpus, its split and labels.

Everything here runs before any MLflow run or experiment exists (:mod:`ablate.app.precheck` calls it once per
distinct corpus and store of a sweep), so a wrong path or an unusable label file leaves nothing behind.
"""

from __future__ import annotations

import sys

from ablate.cache import Cache
from ablate.data.no_answer import no_answer_line
from ablate.data.snapshot import Snapshot
from ablate.errors import InputError
from ablate.runner.access import Resolver, check_answerable
from ablate.runner.answers import check_context
from ablate.runner.pipeline import Pipeline
from ablate.runner.session import Session, shared_session
from ablate.runner.settings import CorpusSpec, OutputSpec
from ablate.tracking import check_uri

#: (snapshot fingerprint, split, relevance level) whose no-answer questions this process has named already
_SAID: set[tuple[str, str, int]] = set()


def check_labels(snapshot: Snapshot, split: str, relevance_level: int = 1) -> None:
    """A split must hold at least one question with a usable label (a grade >= ``relevance_level``); otherwise every
    question would be scored apart as no-answer and every retrieval metric would be blank."""
    qids = snapshot.split_qids(split)
    qrels = snapshot.split_qrels(split)
    path = snapshot.root / "qrels" / f"{split}.tsv"
    where = str(path) if path.exists() else f"{path} (missing)"
    positives = sum(1 for q in qids if qrels.positives(q, relevance_level))
    if positives:
        return
    judged = sum(len(j) for j in qrels.judgements.values())
    if not path.exists():
        problem = f"does not exist, so the {len(qids)} questions of split {split!r} have no labels"
    elif judged == 0:
        problem = "holds no judgement (empty, or a header only)"
    else:
        problem = (
            f"holds {judged} judgements but none with a grade >= {relevance_level} (eval.relevance_level)"
        )
    raise InputError(
        where,
        problem,
        "give the split graded labels (query-id<TAB>corpus-id<TAB>score), or run a split that has them",
    )


def check_inputs(
    corpus: CorpusSpec,
    output: OutputSpec,
    pipeline: Pipeline,
    relevance_level: int = 1,
    session: Session | None = None,
    sweep_orphans: bool = True,
) -> Snapshot:
    """Check everything a job reads and writes; returns the loaded snapshot (kept in the session for the job).
    ``sweep_orphans``: also delete temp files a killed process left in the cache (once per command, not per job)."""
    check_uri(output.tracking_uri)
    cache = Cache(output.cache_dir, enabled=output.cache_enabled)
    cache.check()
    if sweep_orphans:
        cache.sweep_orphans()
    snapshot = (session or shared_session()).snapshot(corpus)
    check_labels(snapshot, corpus.split, relevance_level)
    said = (snapshot.fingerprint, corpus.split, relevance_level)
    note = no_answer_line(snapshot, corpus.split, relevance_level) if said not in _SAID else None
    if note:  # once per corpus and split in a process: the command's check, not each cell of its sweep
        print(note, file=sys.stderr)
    _SAID.add(said)
    Resolver(snapshot, corpus.access).check(snapshot.split_qids(corpus.split))
    check_answerable(snapshot, corpus.access, corpus.split, relevance_level)
    pipeline.bind(snapshot, corpus.split)  # stages check what they need from the corpus (e.g. a train split)
    if pipeline.generator is not None:
        check_context(snapshot, corpus.split, pipeline.generator, cache)
    return snapshot


def check_generator(
    corpus: CorpusSpec, output: OutputSpec, pipeline: Pipeline, session: Session | None = None
) -> None:
    """The generator's check against the corpus (:func:`~ablate.runner.answers.check_context`) for a job whose
    corpus :func:`check_inputs` already loaded: each cell of a sweep has its own generator settings."""
    if pipeline.generator is not None:
        snapshot = (session or shared_session()).snapshot(corpus)
        cache = Cache(output.cache_dir, enabled=output.cache_enabled)
        check_context(snapshot, corpus.split, pipeline.generator, cache)
