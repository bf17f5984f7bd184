"""One ablation cell, top to bottom: candidates -> fusion -> rerank -> evaluation. Plain typed arguments only.

:func:`run_pipeline` takes a loaded :class:`~ablate.data.snapshot.Snapshot`, a :class:`Pipeline` of stage objects (built
from config by :mod:`ablate.app.config`, or by hand) and :class:`~ablate.runner.settings.RunSettings`, and returns a
:class:`RunResult`. Hydra and MLflow never appear here.

Order of work: every stage is bound to the snapshot and split first (cheap; resolves corpus-dependent parameters and
fixes its fingerprint); retrievers are prepared only when their candidates are not cached
(:mod:`ablate.runner.candidates`); the reranker is prepared (trained, loaded) before reranking. Permission filtering
happens inside every retriever for each question's identity (and, under ``versions.policy=in_force``, its date); labels
are restricted per question before scoring (:mod:`ablate.runner.access`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from ablate import record as R
from ablate.cache import Cache, key_of
from ablate.data.snapshot import Snapshot
from ablate.data.types import TIE_RULE, Run
from ablate.errors import ConfigError
from ablate.evaluation import EvalResult
from ablate.evaluation.abstention import AbstentionReport, ThresholdChoice
from ablate.evaluation.scoring import score_run
from ablate.progress import AnswerSink
from ablate.runner.access import Access, Resolver
from ablate.runner.answers import answer_questions
from ablate.runner.candidates import CandidateSource
from ablate.runner.funnel import funnel_per_query, summarise
from ablate.runner.judge import judge_answers
from ablate.runner.scoring import ScoringInputs, scoring_inputs
from ablate.runner.session import Session
from ablate.runner.settings import RunSettings
from ablate.stages.base import Fuser, Generator, Reranker, Retriever, delta
from ablate.stages.generate.judge import AnswerJudge


@dataclass(frozen=True)
class Pipeline:
    """The stages of one cell: one or more retrievers, a fuser when there is more than one, an optional reranker,
    an optional generator (the answer stage) and, with a generator, the answer judge (``answer.judge``:
    :mod:`ablate.runner.judge`; a component like a stage, named ``answer``)."""

    retrievers: tuple[Retriever, ...]
    fuser: Fuser | None = None
    reranker: Reranker | None = None
    generator: Generator | None = None
    judge: Any = None

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
        if self.judge is not None:
            out.append(self.judge)
        return out

    def bind(self, snapshot: Snapshot, split: str) -> Pipeline:
        """The pipeline with every stage bound to ``snapshot`` and ``split`` (the judge to the bound generator)."""
        generator = self.generator.bind(snapshot, split) if self.generator is not None else None
        return Pipeline(
            tuple(r.bind(snapshot, split) for r in self.retrievers),
            self.fuser,
            self.reranker.bind(snapshot, split) if self.reranker is not None else None,
            generator,
            self.judge.bind(snapshot, split, generator) if self.judge is not None else None,
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
    #: the funnel per answerable question and stage (:func:`ablate.runner.funnel.funnel_per_query`); ``funnel`` is
    #: its mean
    funnel_per_query: pd.DataFrame | None = None
    #: the same ranking scored at the document level against the ORIGINAL labels (a run over a chosen chunker whose
    #: unit is chunk): what runs over different chunkers are compared by
    doc_evaluation: EvalResult | None = None
    #: labels carried onto other chunks (:class:`ablate.data.projection.Counts` of the split, the projection's
    #: record and the chunks' name): None when the labels are the corpus's own
    projection_counts: Any = None
    projection: dict[str, Any] | None = None
    projected_onto: str = ""


# ----------------------------------------------------------------------------------------------------------------
# identities and components


def components_of(
    snapshot: Snapshot,
    split: str,
    pipeline: Pipeline,
    identity: str | None,
    settings: RunSettings,
    access: Access | None = None,
) -> dict[str, dict[str, Any]]:
    """What a run's one-factor check compares: every stage's fingerprint, the snapshot, the identity, the dates and
    version policy (when dates are used), the rules."""
    comps: dict[str, dict[str, Any]] = {
        "snapshot": {
            "fingerprint": snapshot.fingerprint,
            "content_fingerprint": snapshot.content_fingerprint,
            "chunker": snapshot.chunker.params(),
            "language": snapshot.language,
            "split": split,
            "qrels": snapshot.split_qrels(split).content_hash(),
            # labels carried onto other chunks: from which chunking, by which rule and share, which label version
            **({"label_projection": snapshot.projection.record()} if snapshot.projection is not None else {}),
        },
        "identity": {
            "name": identity,
            "groups": Resolver(snapshot, Access(identity=identity)).groups_record(),
        },
        "eval": settings.eval.as_dict(),
        "abstain": {"threshold": settings.abstain_threshold},
    }
    if access is not None and access.as_of is not None:
        comps[R.PARAM_COMPONENTS[R.P_AS_OF]] = {"as_of": access.as_of, "versions_policy": access.policy}
    for stage in pipeline.stages:
        comps[stage.name] = stage.fingerprint().as_dict()
    return comps


def planned_components(
    snapshot: Snapshot,
    split: str,
    pipeline: Pipeline,
    settings: RunSettings,
    *,
    identity: str | None = None,
    access: Access | None = None,
) -> dict[str, dict[str, Any]]:
    """The components :func:`run_pipeline` would record for these arguments (``RunResult.components``), known before
    anything runs: the stages bound to the same (relabelled) snapshot and split, nothing retrieved or scored."""
    access = access if access is not None else Access(identity=identity)
    resolver = Resolver(snapshot, access)
    bound = pipeline.bind(relabelled(snapshot, resolver), split)
    return components_of(snapshot, split, bound, access.identity, settings, access)


def fingerprint_keys(pipeline: Pipeline, components: dict[str, dict[str, Any]]) -> dict[str, str]:
    stage_keys = {s.name: s.fingerprint().key for s in pipeline.stages}
    return {name: stage_keys.get(name) or key_of(value) for name, value in components.items()}


# ----------------------------------------------------------------------------------------------------------------
# the run


_CACHED = (
    "fingerprint",
    "content_fingerprint",
    "chunk_to_doc",
    "chunk_version",
    "chunk_text",
    "chunk_index",
    "id_table",
)


def relabelled(snapshot: Snapshot, resolver: Resolver) -> Snapshot:
    """``snapshot`` with every split's labels re-graded by the date rule (what stages that read labels use: the
    oracle, a reranker trained on the train split). Only the date changes what a label means; permissions change
    what an asker can retrieve, which the retrievers' masks enforce, so training labels do not depend on who asks.
    Files, fingerprints and chunks are the same objects. Without dates: ``snapshot`` itself."""
    access = resolver.access
    if access.as_of is None:
        return snapshot
    dated = Resolver(snapshot, Access(None, access.as_of, access.policy))
    qrels = {
        s: dated.labels(q, snapshot.splits.get(s, list(q.judgements)))[0] for s, q in snapshot.qrels.items()
    }
    new = replace(snapshot, qrels=qrels)
    new.__dict__.update({k: v for k, v in snapshot.__dict__.items() if k in _CACHED})
    return new


def _rank(
    snapshot: Snapshot,
    split: str,
    pipeline: Pipeline,
    settings: RunSettings,
    source: CandidateSource,
    resolver: Resolver,
) -> tuple[Run, dict[str, Run], dict[str, float]]:
    """Candidates -> fusion -> rerank -> the final ranking (cut at ``settings.depth``), for one bound pipeline.
    Returns the final run, every stage's list in order (the funnel reads them) and timings. Each cohort of questions
    (same visibility) is searched inside its own visibility; their lists are merged in question order."""
    queries = [snapshot.queries[q] for q in snapshot.split_qids(split)]
    timings: dict[str, float] = {}
    fuser, reranker = pipeline.fuser, pipeline.reranker
    first_depth = fuser.window if fuser is not None else settings.depth
    cohorts = resolver.cohorts(queries)
    cands: dict[str, Run] = {}
    for r in pipeline.retrievers:
        parts = [
            source.candidates(
                r,
                [snapshot.queries[q] for q in c.qids],
                first_depth,
                c.key,
                settings.cache_depth,
                resolver.mask(c),
            )
            for c in cohorts
        ]
        cands[r.name] = _merged(parts, [q.qid for q in queries])
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


def _merged(parts: list[Run], order: list[str]) -> Run:
    """One run from the cohorts' runs, questions in split order."""
    if len(parts) == 1:
        return parts[0]
    results = {}
    for p in parts:
        results.update(p.results)
    return Run(parts[0].name, {q: results[q] for q in order if q in results}, dict(parts[0].meta))


def run_pipeline(
    snapshot: Snapshot,
    split: str,
    pipeline: Pipeline,
    settings: RunSettings,
    cache: Cache,
    *,
    variant: str = "",
    identity: str | None = None,
    access: Access | None = None,
    session: Session | None = None,
    show_progress: bool = False,
    doc_scores: bool = False,
    answers: AnswerSink | None = None,
) -> RunResult:
    """Run ``pipeline`` on ``split`` as ``identity`` (or as ``access`` says: per-question identities, dates and the
    version policy) and score it by ``settings`` with :func:`ablate.evaluation.scoring.score_run`, the one scoring
    function (``python -m ablate.evaluate --from-run`` re-scores the run with it). ``doc_scores``: a run scored at
    unit chunk is also scored at the document level against the original labels (:func:`doc_evaluation`).

    The abstention threshold ``"dev"`` is chosen on ``settings.tune_split`` with the same pipeline (balanced
    accuracy) and applied unchanged here.
    """
    t_start = time.perf_counter()
    session = session or Session()
    source = CandidateSource(snapshot, cache, session, show_progress)
    access = access if access is not None else Access(identity=identity)
    resolver = Resolver(snapshot, access)
    # the labels as asked: before any work
    inputs = scoring_inputs(snapshot, split, access, resolver=resolver)
    work = relabelled(snapshot, resolver)
    bound = pipeline.bind(work, split)
    before = session.stage_stats(bound.stages)
    cache_before = (cache.stats.hits, cache.stats.misses)
    run, lists, timings = _rank(work, split, bound, settings, source, resolver)
    run.name = variant or run.name
    run.meta.update({"tie_rule": TIE_RULE, "snapshot": snapshot.fingerprint})

    answered = None
    if bound.generator is not None:
        answered = _answered(snapshot, split, bound, run, cache, session, show_progress, timings, answers)
        lists["context"] = run.truncated(bound.generator.context_k)
    threshold, choice = _threshold(work, split, pipeline, settings, source, resolver, inputs, run)
    t0 = time.perf_counter()
    context = replace(inputs.context, abstain_threshold=threshold, answers=answered)
    scores = score_run(run, inputs.labels, inputs.qids, settings.eval, context)
    timings["eval_seconds"] = time.perf_counter() - t0
    top_k = bound.generator.context_k if bound.generator is not None else 10
    per_question_funnel = funnel_per_query(
        lists, scores.evaluation, inputs.labels, snapshot.chunk_to_doc, settings.eval.relevance_level, top_k
    )
    counters = _counters(source, bound, before, cache, cache_before)
    timings.update(source.timings)
    timings["total_seconds"] = time.perf_counter() - t_start
    comps = components_of(snapshot, split, bound, access.identity, settings, access)
    return RunResult(
        variant=variant,
        split=split,
        run=run,
        evaluation=scores.evaluation,
        pipeline=bound,
        components=comps,
        fingerprints=fingerprint_keys(bound, comps),
        timings=timings,
        counters=counters,
        permissions={**inputs.permissions, "leaks": resolver.leaks(run)},
        candidates={r.name: lists[r.name] for r in bound.retrievers},
        abstention=scores.abstention,
        threshold_choice=choice,
        slices=scores.slices,
        answers=scores.answers,
        funnel=summarise(per_question_funnel, list(lists), top_k),
        funnel_per_query=per_question_funnel,
        doc_evaluation=doc_evaluation(snapshot, split, access, settings, run) if doc_scores else None,
        **_projection_fields(snapshot, split),
    )


def _answered(
    snapshot: Snapshot,
    split: str,
    bound: Pipeline,
    run: Run,
    cache: Cache,
    session: Session,
    show_progress: bool,
    timings: dict[str, float],
    answers: AnswerSink | None = None,
) -> dict[str, Any]:
    """The generator's answers to ``run``'s contexts and, with an LLM judge (``answer.judge=llm``), its grades beside
    them; the time each took goes into ``timings``."""
    assert bound.generator is not None
    t0 = time.perf_counter()
    answered = answer_questions(snapshot, split, bound.generator, run, cache, session, show_progress, answers)
    timings["generate_seconds"] = time.perf_counter() - t0
    if isinstance(bound.judge, AnswerJudge):
        t0 = time.perf_counter()
        answered = judge_answers(snapshot, bound.judge, answered, cache, session, show_progress)
        timings["judge_seconds"] = time.perf_counter() - t0
    return answered


def _projection_fields(snapshot: Snapshot, split: str) -> dict[str, Any]:
    p = snapshot.projection
    if p is None:
        return {}
    params = snapshot.chunker.params()
    return {
        "projection_counts": p.split_counts(split, snapshot.split_qids(split)),
        "projection": p.record(),
        "projected_onto": "-".join(str(params[k]) for k in ("kind", "size") if k in params),
    }


def doc_evaluation(
    snapshot: Snapshot, split: str, access: Access, settings: RunSettings, run: Run
) -> EvalResult | None:
    """``run`` scored at the document level against the document labels the ORIGINAL labels give
    (:meth:`~ablate.data.snapshot.Snapshot.doc_view`), as asked (identities, dates): the same labels whatever the
    chunker, so runs over different chunkers compare here. None when the run is already scored at ``doc``."""
    from ablate.evaluation import evaluate, resolve_unit

    if resolve_unit(settings.eval.unit, snapshot.qrels_unit) == "doc":
        return None
    view = snapshot.doc_view()
    inputs = scoring_inputs(view, split, access)
    at_doc = replace(settings.eval, unit="doc")
    return evaluate(run, inputs.labels, inputs.qids, at_doc, chunk_to_doc=view.chunk_to_doc)


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


def _threshold(
    snapshot: Snapshot,
    split: str,
    pipeline: Pipeline,
    settings: RunSettings,
    source: CandidateSource,
    resolver: Resolver,
    inputs: ScoringInputs,
    run: Run,
) -> tuple[float | None, ThresholdChoice | None]:
    """The abstention threshold the run applies: the fixed one, or the one chosen on ``settings.tune_split`` with
    the same pipeline (balanced accuracy), applied unchanged here."""
    from ablate.evaluation import choose_threshold, evaluate, top_scores

    if settings.abstain_threshold != "dev":
        return settings.abstain_threshold, None  # type: ignore[return-value]
    c2d = snapshot.chunk_to_doc
    if split == settings.tune_split:
        tuned_run = run
        tuned = evaluate(run, inputs.labels, inputs.qids, settings.eval, chunk_to_doc=c2d)
    else:
        tune = settings.tune_split
        tq, _ = resolver.labels(
            snapshot.split_qrels(tune), snapshot.split_qids(tune)
        )  # dated already: as asked
        tuned_run, _, _ = _rank(snapshot, tune, pipeline.bind(snapshot, tune), settings, source, resolver)
        tuned = evaluate(tuned_run, tq, snapshot.split_qids(tune), settings.eval, chunk_to_doc=c2d)
    cats = tuned.per_query["category"].to_dict()
    choice = choose_threshold(top_scores(tuned_run, cats), cats)
    return choice.threshold, choice
