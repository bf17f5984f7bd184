"""One ablation cell, top to bottom: candidates -> fusion -> rerank -> evaluation. Plain typed arguments only.

:func:`run_pipeline` takes a loaded :class:`~ablate.data.corpus.Snapshot`, a :class:`Pipeline` of stage objects (built
from config by :mod:`ablate.app.config`, or by hand) and :class:`~ablate.runner.settings.RunSettings`, and returns a
:class:`RunResult`. Hydra and MLflow never appear here.

Order of work: every stage is bound to the snapshot and split first (cheap; resolves corpus-dependent parameters and
fixes its fingerprint); retrievers are prepared only when their candidates are not cached
(:mod:`ablate.runner.candidates`); the reranker is prepared (trained, loaded) before reranking. Permission filtering
happens inside every retriever for the job's identity; labels the identity may not see are dropped before scoring.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ablate.cache import Cache, key_of
from ablate.data.corpus import Snapshot
from ablate.data.types import TIE_RULE, Qrels, Run
from ablate.errors import ConfigError
from ablate.evaluation import EvalResult
from ablate.evaluation.abstention import AbstentionReport, ThresholdChoice
from ablate.evaluation.slices import slice_means, slice_members
from ablate.runner.answers import answer_questions, answer_slices
from ablate.runner.candidates import CandidateSource
from ablate.runner.funnel import funnel
from ablate.runner.session import Session
from ablate.runner.settings import RunSettings
from ablate.stages.base import Fuser, Generator, Reranker, Retriever, delta


@dataclass(frozen=True)
class Pipeline:
    """The stages of one cell: one or more retrievers, a fuser when there is more than one, an optional reranker,
    an optional generator (the answer stage)."""

    retrievers: tuple[Retriever, ...]
    fuser: Fuser | None = None
    reranker: Reranker | None = None
    generator: Generator | None = None

    def __post_init__(self) -> None:
        if not self.retrievers:
            raise ConfigError("retrievers", [], "select at least one retriever, e.g. retrievers=[bm25]")
        if len(self.retrievers) > 1 and self.fuser is None:
            listed = ", ".join(r.name for r in self.retrievers)
            raise ConfigError(
                "fusion",
                "none",
                f"{len(self.retrievers)} retrievers ({listed}) need a fuser: set fusion=rrf",
            )
        names = [s.name for s in self.stages]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ConfigError("stages", dup[0], "every stage needs its own name")

    @property
    def stages(self) -> list[Any]:
        out: list[Any] = list(self.retrievers)
        if self.fuser is not None:
            out.append(self.fuser)
        if self.reranker is not None:
            out.append(self.reranker)
        if self.generator is not None:
            out.append(self.generator)
        return out

    def bind(self, snapshot: Snapshot, split: str) -> Pipeline:
        """The pipeline with every stage bound to ``snapshot`` and ``split``."""
        return Pipeline(
            tuple(r.bind(snapshot, split) for r in self.retrievers),
            self.fuser,
            self.reranker.bind(snapshot, split) if self.reranker is not None else None,
            self.generator.bind(snapshot, split) if self.generator is not None else None,
        )


@dataclass
class RunResult:
    variant: str
    split: str
    run: Run
    evaluation: EvalResult
    pipeline: Pipeline  # bound to the snapshot and split: its fingerprints are what ran
    components: dict[
        str, dict[str, Any]
    ]  # component -> fingerprint (stages) or description (snapshot, identity, eval)
    fingerprints: dict[str, str]  # component -> fingerprint key (the ablate.fp.<component> tags)
    timings: dict[str, float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    permissions: dict[str, Any] = field(default_factory=dict)
    candidates: dict[str, Run] = field(default_factory=dict)
    abstention: AbstentionReport | None = None
    threshold_choice: ThresholdChoice | None = None
    slices: dict[str, dict[str, float]] = field(default_factory=dict)
    answers: pd.DataFrame | None = None  # one row per question when the pipeline has a generator
    funnel: dict[str, dict[str, float]] = field(default_factory=dict)  # stage -> recall of the gold evidence


# ----------------------------------------------------------------------------------------------------------------
# identities and components


def identity_groups(snapshot: Snapshot, identity: str | None) -> list[str] | None:
    if identity is None:
        return None
    ids = snapshot.identities
    if identity not in ids:
        opts = ", ".join(sorted(ids)) if ids else "none (this corpus declares no identities; use null)"
        raise ConfigError(
            "corpus.identity",
            identity,
            f"identities of corpus {snapshot.name!r}: {opts}; choose one (null: no filter)",
        )
    return sorted(str(g) for g in ids[identity])


def components_of(
    snapshot: Snapshot, split: str, pipeline: Pipeline, identity: str | None, settings: RunSettings
) -> dict[str, dict[str, Any]]:
    """What a run's one-factor check compares: every stage's fingerprint, the snapshot, the identity, the rules."""
    comps: dict[str, dict[str, Any]] = {
        "snapshot": {
            "fingerprint": snapshot.fingerprint,
            "content_fingerprint": snapshot.content_fingerprint,
            "chunker": snapshot.chunker.params(),
            "language": snapshot.language,
            "split": split,
            "qrels": snapshot.split_qrels(split).content_hash(),
        },
        "identity": {"name": identity, "groups": identity_groups(snapshot, identity)},
        "eval": settings.eval.as_dict(),
        "abstain": {"threshold": settings.abstain_threshold},
    }
    for stage in pipeline.stages:
        comps[stage.name] = stage.fingerprint().as_dict()
    return comps


def fingerprint_keys(pipeline: Pipeline, components: dict[str, dict[str, Any]]) -> dict[str, str]:
    stage_keys = {s.name: s.fingerprint().key for s in pipeline.stages}
    return {name: stage_keys.get(name) or key_of(value) for name, value in components.items()}


# ----------------------------------------------------------------------------------------------------------------
# the run


def visible_qrels(snapshot: Snapshot, qrels: Qrels, groups: list[str] | None) -> tuple[Qrels, dict[str, Any]]:
    """Drop judgements of units the identity may not see: for this identity they cannot be retrieved (seed 000:
    evaluate what the fixed identity is allowed to get). Queries left without a positive become no-answer for it."""
    if groups is None:
        return qrels, {"identity_groups": None, "hidden_judgements": 0, "queries_made_unanswerable": 0}
    if qrels.unit == "doc":
        visible = {d for d, doc in snapshot.documents.items() if doc.visible_to(groups)}
    else:
        visible = {c.chunk_id for c in snapshot.chunks if c.visible_to(groups)}
    out: dict[str, dict[str, int]] = {}
    hidden = 0
    made_unanswerable: list[str] = []
    for qid, judged in qrels.judgements.items():
        keep = {u: g for u, g in judged.items() if u in visible}
        hidden += len(judged) - len(keep)
        if any(g >= 1 for g in judged.values()) and not any(g >= 1 for g in keep.values()):
            made_unanswerable.append(qid)
        out[qid] = keep
    info = {
        "identity_groups": groups,
        "hidden_judgements": hidden,
        "queries_made_unanswerable": len(made_unanswerable),
        "unanswerable_qids": made_unanswerable,
    }
    return Qrels(out, unit=qrels.unit, name=qrels.name, source_sha256=qrels.source_sha256), info


def _rank(
    snapshot: Snapshot,
    split: str,
    pipeline: Pipeline,
    settings: RunSettings,
    source: CandidateSource,
    groups: list[str] | None,
) -> tuple[Run, dict[str, Run], dict[str, float]]:
    """Candidates -> fusion -> rerank -> the final ranking (cut at ``settings.depth``), for one bound pipeline.
    Returns the final run, every stage's list in order (the funnel reads them) and timings."""
    queries = [snapshot.queries[q] for q in snapshot.split_qids(split)]
    timings: dict[str, float] = {}
    fuser, reranker = pipeline.fuser, pipeline.reranker
    first_depth = fuser.window if fuser is not None else settings.depth
    cands = {
        r.name: source.candidates(r, queries, first_depth, groups, settings.cache_depth)
        for r in pipeline.retrievers
    }
    t0 = time.perf_counter()
    if fuser is not None:
        depth = max(settings.depth, reranker.depth if reranker is not None else 0)
        run = fuser.fuse(list(cands.values()), depth)
    else:
        run = next(iter(cands.values()))
    timings["fusion_seconds"] = time.perf_counter() - t0
    lists = dict(cands)
    if fuser is not None:
        lists[fuser.name] = run
    if reranker is not None:
        t0 = time.perf_counter()
        reranker = source.session.prepared(reranker, snapshot, source.cache, source.show_progress)
        timings["rerank_setup_seconds"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        run = reranker.rerank(run, {q.qid: q.text for q in queries}, snapshot.chunk_text)
        timings["rerank_seconds"] = time.perf_counter() - t0
        lists[reranker.name] = run
    run = run.truncated(settings.depth)
    lists["final"] = run
    return run, lists, timings


def run_pipeline(
    snapshot: Snapshot,
    split: str,
    pipeline: Pipeline,
    settings: RunSettings,
    cache: Cache,
    *,
    variant: str = "",
    identity: str | None = None,
    session: Session | None = None,
    show_progress: bool = False,
) -> RunResult:
    """Run ``pipeline`` on ``split`` as ``identity`` and score it by ``settings``.

    The abstention threshold ``"dev"`` is chosen on ``settings.tune_split`` with the same pipeline (balanced
    accuracy) and applied unchanged here.
    """
    from ablate.evaluation import evaluate

    t_start = time.perf_counter()
    session = session or Session()
    source = CandidateSource(snapshot, cache, session, show_progress)
    groups = identity_groups(snapshot, identity)
    bound = pipeline.bind(snapshot, split)
    before = session.stage_stats(bound.stages)
    cache_before = (cache.stats.hits, cache.stats.misses)
    run, lists, timings = _rank(snapshot, split, bound, settings, source, groups)
    cands = {r.name: lists[r.name] for r in bound.retrievers}
    run.name = variant or run.name
    run.meta.update({"tie_rule": TIE_RULE, "snapshot": snapshot.fingerprint})

    qids = snapshot.split_qids(split)
    eval_qrels, perm = visible_qrels(snapshot, snapshot.split_qrels(split), groups)
    t0 = time.perf_counter()
    result = evaluate(run, eval_qrels, qids, settings.eval, chunk_to_doc=snapshot.chunk_to_doc)
    timings["eval_seconds"] = time.perf_counter() - t0
    perm["leaks"] = permission_leaks(snapshot, run, groups)

    abst, choice = _abstention(snapshot, split, pipeline, settings, source, groups, result, run)
    add_answer_in_context(result, run, snapshot, qids, settings.eval.ks)
    answers, stage_funnel = _answers_and_funnel(
        snapshot,
        split,
        bound,
        run,
        lists,
        result,
        eval_qrels,
        settings,
        cache,
        session,
        show_progress,
        timings,
    )

    counters = _counters(source, bound, before, cache, cache_before)
    timings.update(source.timings)
    timings["total_seconds"] = time.perf_counter() - t_start
    comps = components_of(snapshot, split, bound, identity, settings)
    return RunResult(
        variant=variant,
        split=split,
        run=run,
        evaluation=result,
        pipeline=bound,
        components=comps,
        fingerprints=fingerprint_keys(bound, comps),
        timings=timings,
        counters=counters,
        permissions=perm,
        candidates=cands,
        abstention=abst,
        threshold_choice=choice,
        slices=_slices(result, snapshot, answers),
        answers=answers,
        funnel=stage_funnel,
    )


def _counters(
    source: CandidateSource,
    bound: Pipeline,
    before: dict[int, tuple[str, dict[str, float]]],
    cache: Cache,
    cache_before: tuple[int, int],
) -> dict[str, float]:
    """What this job's stages did: the increase of every counter of the instances that did the work (this job's own,
    or the prepared instance an earlier job of the sweep left in the session), summed per stage name."""
    counters: dict[str, float] = dict(source.counters)
    names = {s.name for s in bound.stages}
    for sid, (name, stats) in source.session.stage_stats(bound.stages).items():
        if name not in names:
            continue
        for k, v in delta(stats, before.get(sid, (name, {}))[1]).items():
            if not k.endswith("_seconds"):
                key = f"{name}.{k}"
                counters[key] = counters.get(key, 0.0) + v
    counters["cache.hits"] = float(cache.stats.hits - cache_before[0])
    counters["cache.misses"] = float(cache.stats.misses - cache_before[1])
    return counters


def _slices(
    result: EvalResult, snapshot: Snapshot, answers: pd.DataFrame | None
) -> dict[str, dict[str, float]]:
    """Retrieval means per question tag, with the answer metrics beside them when the run generated answers."""
    slices = slice_means(result, snapshot.queries)
    if answers is not None:
        members = slice_members(result.per_query.index, snapshot.queries)
        for tag, row in answer_slices(answers, members).items():
            slices.setdefault(tag, {}).update(row)
    return slices


def _answers_and_funnel(
    snapshot: Snapshot,
    split: str,
    bound: Pipeline,
    run: Run,
    lists: dict[str, Run],
    result: EvalResult,
    eval_qrels: Qrels,
    settings: RunSettings,
    cache: Cache,
    session: Session,
    show_progress: bool,
    timings: dict[str, float],
) -> tuple[pd.DataFrame | None, dict[str, dict[str, float]]]:
    """The answer stage (when the pipeline has a generator) and the funnel of the gold evidence over every stage."""
    answers = None
    level = settings.eval.relevance_level
    if bound.generator is not None:
        t0 = time.perf_counter()
        answers = answer_questions(
            snapshot, split, bound.generator, run, result, eval_qrels, level, cache, session, show_progress
        )
        timings["generate_seconds"] = time.perf_counter() - t0
        lists["context"] = run.truncated(bound.generator.context_k)
    top_k = bound.generator.context_k if bound.generator is not None else 10
    return answers, funnel(lists, result, eval_qrels, snapshot.chunk_to_doc, level, top_k)


def _abstention(
    snapshot: Snapshot,
    split: str,
    pipeline: Pipeline,
    settings: RunSettings,
    source: CandidateSource,
    groups: list[str] | None,
    result: EvalResult,
    run: Run,
) -> tuple[AbstentionReport, ThresholdChoice | None]:
    """Refusals on ``run``: by the fixed threshold, or by the one chosen on ``settings.tune_split`` with the same
    pipeline (balanced accuracy), applied unchanged here."""
    from ablate.evaluation import choose_threshold, evaluate, top_scores
    from ablate.evaluation.abstention import abstention_report

    if settings.abstain_threshold != "dev":
        return abstention_report(result, run, settings.abstain_threshold), None  # type: ignore[arg-type]
    if split == settings.tune_split:
        tuned, tuned_run = result, run
    else:
        tune = settings.tune_split
        tuned_run, _, _ = _rank(snapshot, tune, pipeline.bind(snapshot, tune), settings, source, groups)
        tq, _ = visible_qrels(snapshot, snapshot.split_qrels(tune), groups)
        tuned = evaluate(
            tuned_run, tq, snapshot.split_qids(tune), settings.eval, chunk_to_doc=snapshot.chunk_to_doc
        )
    cats = tuned.per_query["category"].to_dict()
    choice = choose_threshold(top_scores(tuned_run, cats), cats)
    return abstention_report(result, run, choice.threshold), choice


def add_answer_in_context(
    result: EvalResult, run: Run, snapshot: Snapshot, qids: Sequence[str], ks: Sequence[int]
) -> None:
    """Per-query ``answer_in_context@K`` columns and their means over answerable questions with answers."""
    from ablate.evaluation.answers import answer_in_context

    answers = {q: snapshot.queries[q].answers for q in qids if snapshot.queries[q].answers}
    if not answers:
        return
    aic = answer_in_context(run, answers, snapshot.chunk_text, tuple(ks), list(answers))
    pq = result.per_query
    for k in ks:
        col = f"answer_in_context@{k}"
        pq[col] = [aic[q][k] if q in aic else float("nan") for q in pq.index]
        scored = pq[(pq["category"] == "answerable") & pq[col].notna()][col]
        if len(scored):
            result.means[col] = float(scored.mean())
    result.accounting["with_answers"] = len(answers)


def permission_leaks(snapshot: Snapshot, run: Run, groups: list[str] | None) -> int:
    """Results the identity may not see (must be 0: filtering happens inside retrieval)."""
    mask = snapshot.allowed_mask(groups)
    if mask is None:
        return 0
    idx = snapshot.chunk_index
    return sum(1 for hits in run.results.values() for h in hits if not mask[idx[h.chunk_id]])
