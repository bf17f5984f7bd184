"""One ablation run, top to bottom: candidates → fusion → rerank → evaluation. Plain typed arguments only.

``run_variant`` takes a loaded :class:`~ablate.corpus.Snapshot`, a :class:`VariantSpec` (which components, with which
parameters) and evaluation settings, and returns a :class:`RunResult`. Hydra and MLflow never appear here.

Cost model (why sweeps are cheap): each retriever's candidate list for a (snapshot, retriever fingerprint, identity,
query set) is computed once at ``cache_depth`` (at least the largest depth asked for) and stored in the content
cache; smaller windows reuse its prefix. Embeddings and reranker scores are cached by content in their own modules.
So a warm run re-does only fusion and evaluation.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ablate.cache import Cache, key_of, sha256_text
from ablate.data.corpus import Snapshot
from ablate.errors import ConfigError
from ablate.stages.fusion.rrf import rrf
from ablate.data.types import TIE_RULE, Hit, Qrels, Query, Run

RETRIEVERS = ("bm25", "dense", "oracle")
FUSIONS = ("none", "rrf")


@dataclass(frozen=True)
class BM25Spec:
    impl: str = "bm25s"
    k1: float = 0.9
    b: float = 0.4
    method: str = "lucene"
    stopwords: bool = True
    stemmer: str | None = "porter"


@dataclass(frozen=True)
class DenseSpec:
    model: str = "all-MiniLM-L6-v2"
    batch_size: int = 32
    max_seq_length: int = 256
    query_prefix: str = ""
    passage_prefix: str = ""


@dataclass(frozen=True)
class RerankSpec:
    model: str = "cross-encoder/ms-marco-MiniLM-L-6-v2"  # or a local path, or "trained"
    depth: int = 50
    batch_size: int = 32
    max_length: int = 256
    # fine-tuning used when model == "trained"
    train_split: str = "train"
    train_base_model: str = "all-MiniLM-L6-v2"
    train_epochs: int = 1
    train_max_negatives: int = 7
    train_max_length: int = 128
    train_seed: int = 13
    train_min_steps: int = 100  # small train splits are cycled until this many optimizer steps


@dataclass(frozen=True)
class VariantSpec:
    name: str
    retrievers: tuple[str, ...]
    fusion: str = "none"
    rrf_k: float = 60.0
    window: int = 100
    rerank: RerankSpec | None = None
    bm25: BM25Spec = BM25Spec()
    dense: DenseSpec = DenseSpec()
    identity: str | None = None  # a name from the corpus's identities (or None: no permission filtering)
    depth: int = 100  # length of the final ranking (the largest eval K)
    cache_depth: int = 100  # candidate lists are computed at least this deep, so smaller windows reuse them

    def validate(self) -> None:
        if not self.retrievers:
            raise ConfigError("retrieval.retrievers", list(self.retrievers), f"name at least one of {', '.join(RETRIEVERS)}")
        for r in self.retrievers:
            if r not in RETRIEVERS:
                raise ConfigError("retrieval.retrievers", r, f"valid options: {', '.join(RETRIEVERS)}")
        if self.fusion not in FUSIONS:
            raise ConfigError("fusion.method", self.fusion, f"valid options: {', '.join(FUSIONS)}")
        if len(self.retrievers) > 1 and self.fusion == "none":
            raise ConfigError(
                "fusion", "none", f"{len(self.retrievers)} retrievers need fusion=rrf to become one ranking"
            )
        if self.window < 1:
            raise ConfigError("retrieval.window", self.window, "it must be a positive integer")
        if self.rerank is not None and self.rerank.depth < 1:
            raise ConfigError("rerank.depth", self.rerank.depth, "it must be a positive integer")


@dataclass
class RunResult:
    variant: str
    split: str
    run: Run
    evaluation: Any  # ablate.evaluation.EvalResult
    components: dict[str, dict[str, Any]]
    timings: dict[str, float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    permissions: dict[str, Any] = field(default_factory=dict)
    candidates: dict[str, Run] = field(default_factory=dict)
    abstention: Any = None  # ablate.evaluation.AbstentionReport
    threshold_choice: Any = None  # ablate.evaluation.ThresholdChoice when the threshold was tuned on dev
    slices: dict[str, dict[str, float]] = field(default_factory=dict)


# ----------------------------------------------------------------------------------------------------------------
# Component fingerprints (computed without building anything, so cache keys are cheap)


def tokenizer_for(snapshot: Snapshot, spec: BM25Spec):
    from ablate.stages.text.tokenize import Tokenizer

    return Tokenizer(language=snapshot.language, stopwords=spec.stopwords, stemmer=spec.stemmer)


def component_fingerprints(snapshot: Snapshot, spec: VariantSpec, split: str) -> dict[str, dict[str, Any]]:
    from ablate.stages.text.models import resolve_model

    comps: dict[str, dict[str, Any]] = {
        "snapshot": {
            "fingerprint": snapshot.fingerprint,
            "content_fingerprint": snapshot.content_fingerprint,
            "chunker": snapshot.chunker.params(),
            "split": split,
            "qrels": snapshot.split_qrels(split).content_hash(),
        }
    }
    if "bm25" in spec.retrievers:
        comps["bm25"] = {**asdict(spec.bm25), "tokenizer": tokenizer_for(snapshot, spec.bm25).fingerprint()}
    if "dense" in spec.retrievers:
        m = resolve_model(spec.dense.model, kind="encoder", setting="dense.model")
        comps["dense"] = {**asdict(spec.dense), "model_fingerprint": m.fingerprint}
    if "oracle" in spec.retrievers:
        comps["oracle"] = {"min_grade": 1}
    comps["fusion"] = {"method": spec.fusion, **({"k": spec.rrf_k, "window": spec.window} if spec.fusion == "rrf" else {})}
    comps["identity"] = {"name": spec.identity, "groups": identity_groups(snapshot, spec.identity)}
    if spec.rerank is not None:
        comps["reranker"] = {k: v for k, v in asdict(spec.rerank).items() if spec.rerank.model == "trained" or not k.startswith("train_")}
    return comps


def identity_groups(snapshot: Snapshot, identity: str | None) -> list[str] | None:
    if identity is None:
        return None
    ids = snapshot.identities
    if identity not in ids:
        opts = ", ".join(sorted(ids)) if ids else "none (this corpus declares no identities; use null)"
        raise ConfigError("corpus.identity", identity, f"identities of corpus {snapshot.name!r}: {opts}")
    return sorted(str(g) for g in ids[identity])


# ----------------------------------------------------------------------------------------------------------------
# Candidates


def _queries_key(queries: Sequence[Query]) -> str:
    return sha256_text("\n".join(f"{q.qid}\t{q.text}" for q in queries))


def _run_to_json(run: Run) -> dict[str, list[list[Any]]]:
    return {q: [[h.chunk_id, h.score] for h in hits] for q, hits in run.results.items()}


def _run_from_json(name: str, data: dict[str, list[list[Any]]], snapshot: Snapshot) -> Run:
    c2d = snapshot.chunk_to_doc
    ver = {c.chunk_id: c.version for c in snapshot.chunks}
    return Run(name, {q: [Hit(c, c2d[c], float(s), ver[c]) for c, s in hits] for q, hits in data.items()})


class CandidateSource:
    """Builds retrievers on first use and serves candidate lists from the content cache when it can."""

    def __init__(self, snapshot: Snapshot, cache: Cache, qrels: Qrels | None = None, show_progress: bool = False):
        self.snapshot = snapshot
        self.cache = cache
        self.qrels = qrels
        self.show_progress = show_progress
        self._built: dict[str, Any] = {}
        self._memo: dict[str, Run] = {}  # candidate runs already read or computed in this process
        self.timings: dict[str, float] = {}
        self.counters: dict[str, float] = {}

    def _build(self, name: str, spec: VariantSpec):
        key = f"{name}:{key_of(spec.bm25 if name == 'bm25' else spec.dense if name == 'dense' else 'oracle')}"
        if key in self._built:
            return self._built[key]
        t0 = time.perf_counter()
        if name == "bm25":
            from ablate.stages.retrievers.bm25 import BM25Retriever

            r = BM25Retriever(
                self.snapshot.chunks,
                tokenizer=tokenizer_for(self.snapshot, spec.bm25),
                k1=spec.bm25.k1,
                b=spec.bm25.b,
                impl=spec.bm25.impl,
                method=spec.bm25.method,
            )
        elif name == "dense":
            from ablate.stages.retrievers.dense import DenseRetriever

            r = DenseRetriever(
                self.snapshot.chunks,
                model=spec.dense.model,
                cache=self.cache,
                batch_size=spec.dense.batch_size,
                max_seq_length=spec.dense.max_seq_length,
                query_prefix=spec.dense.query_prefix,
                passage_prefix=spec.dense.passage_prefix,
                show_progress=self.show_progress,
            )
            for k in ("passages_encoded", "encode_seconds"):
                if k in r.stats:
                    self.counters[f"dense.{k}"] = self.counters.get(f"dense.{k}", 0.0) + float(r.stats[k])
        else:
            raise ValueError(f"no retriever named {name!r}")
        self.timings[f"build_{name}_seconds"] = self.timings.get(f"build_{name}_seconds", 0.0) + time.perf_counter() - t0
        self._built[key] = r
        return r

    def candidates(
        self,
        name: str,
        spec: VariantSpec,
        comps: dict[str, dict[str, Any]],
        queries: Sequence[Query],
        depth: int,
        qrels: Qrels | None = None,
    ) -> Run:
        groups = comps["identity"]["groups"]
        if name == "oracle":  # the oracle reads the split's labels; nothing to cache
            from ablate.stages.retrievers.oracle import OracleRetriever

            labels = qrels if qrels is not None else self.qrels
            if labels is None:
                raise ConfigError("retrieval.retrievers", "oracle", "the oracle needs the split's qrels")
            return OracleRetriever(self.snapshot.chunks, labels).search(queries, depth, self.snapshot.allowed_mask(groups))
        ckey = key_of("candidates", self.snapshot.fingerprint, comps[name], groups, _queries_key(queries))
        memo = self._memo.get(ckey)
        if memo is not None and memo.meta.get("depth", 0) >= depth:
            self.counters["candidate_cache_hits"] = self.counters.get("candidate_cache_hits", 0) + 1
            return memo.truncated(depth)
        stored = self.cache.load_json("candidates", ckey)
        if stored is not None and stored.get("depth", 0) >= depth:
            self.counters["candidate_cache_hits"] = self.counters.get("candidate_cache_hits", 0) + 1
            run = _run_from_json(name, stored["results"], self.snapshot)
            run.meta["depth"] = stored["depth"]
            self._memo[ckey] = run
            return run.truncated(depth)
        self.counters["candidate_cache_misses"] = self.counters.get("candidate_cache_misses", 0) + 1
        r = self._build(name, spec)
        deep = max(depth, spec.cache_depth)
        t0 = time.perf_counter()
        run = r.search(queries, deep, self.snapshot.allowed_mask(groups))
        self.timings[f"search_{name}_seconds"] = self.timings.get(f"search_{name}_seconds", 0.0) + time.perf_counter() - t0
        if name == "dense":
            for k in ("queries_encoded", "encode_seconds", "passages_encoded"):
                if k in getattr(r, "stats", {}):
                    self.counters[f"dense.{k}"] = float(r.stats[k])
        self.cache.save_json("candidates", ckey, {"depth": deep, "results": _run_to_json(run)})
        run.meta["depth"] = deep
        self._memo[ckey] = run
        return run.truncated(depth)


# ----------------------------------------------------------------------------------------------------------------
# Reranker


def build_reranker(snapshot: Snapshot, spec: RerankSpec, cache: Cache, show_progress: bool = False):
    from ablate.stages.rerank.cross_encoder import CrossEncoderReranker

    model = spec.model
    if model == "trained":
        model = trained_reranker_path(snapshot, spec, cache, show_progress)
    return CrossEncoderReranker(model, cache=cache, batch_size=spec.batch_size, max_length=spec.max_length)


def trained_reranker_path(snapshot: Snapshot, spec: RerankSpec, cache: Cache, show_progress: bool = False) -> str:
    """Fine-tune (or fetch from cache) a cross-encoder on the corpus's train split; hard negatives from BM25."""
    from ablate.stages.rerank.training import pairs_from_snapshot, train_cross_encoder

    pairs = pairs_from_snapshot(
        snapshot, spec.train_split, max_negatives=spec.train_max_negatives, seed=spec.train_seed
    )
    resolved = train_cross_encoder(
        pairs,
        base_model=spec.train_base_model,
        epochs=spec.train_epochs,
        max_length=spec.train_max_length,
        seed=spec.train_seed,
        cache=cache,
        show_progress=show_progress,
        min_steps=spec.train_min_steps,
    )
    return resolved.path


# ----------------------------------------------------------------------------------------------------------------
# The run


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


def run_variant(
    snapshot: Snapshot,
    split: str,
    spec: VariantSpec,
    settings: Any,
    cache: Cache,
    source: CandidateSource | None = None,
    show_progress: bool = False,
    abstain_threshold: float | str | None = None,
    tune_split: str = "dev",
) -> RunResult:
    """Run one variant on one split and evaluate it.

    ``abstain_threshold``: refuse a query when its top score is below this number; ``None`` refuses nothing that
    has a result; ``"dev"`` chooses the threshold on ``tune_split`` with the same variant (balanced accuracy) and
    applies it unchanged here.
    """
    from ablate.evaluation import choose_threshold, evaluate, slice_means, top_scores
    from ablate.evaluation.abstention import abstention

    spec.validate()
    t_start = time.perf_counter()
    qids = snapshot.split_qids(split)
    qrels = snapshot.split_qrels(split)
    queries = [snapshot.queries[q] for q in qids]
    comps = component_fingerprints(snapshot, spec, split)
    groups = comps["identity"]["groups"]
    source = source or CandidateSource(snapshot, cache, qrels=qrels, show_progress=show_progress)

    fused_depth = spec.window if spec.fusion == "rrf" else spec.depth
    cands = {name: source.candidates(name, spec, comps, queries, fused_depth, qrels) for name in spec.retrievers}
    t0 = time.perf_counter()
    if spec.fusion == "rrf":
        depth = max(spec.depth, spec.rerank.depth if spec.rerank is not None else 0)
        run = rrf(list(cands.values()), k=spec.rrf_k, window=spec.window, depth=depth, name="rrf")
    else:
        run = next(iter(cands.values()))
    timings = {"fusion_seconds": time.perf_counter() - t0}

    counters: dict[str, float] = {}
    if spec.rerank is not None:
        t0 = time.perf_counter()
        reranker = build_reranker(snapshot, spec.rerank, cache, show_progress)
        comps["reranker"]["model_fingerprint"] = reranker.fingerprint().get("model_fingerprint", "")
        timings["rerank_setup_seconds"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        run = reranker.rerank(run, {q.qid: q.text for q in queries}, snapshot.chunk_text, spec.rerank.depth)
        timings["rerank_seconds"] = time.perf_counter() - t0
        for k, v in reranker.stats.items():
            counters[f"rerank.{k}"] = float(v)
    run = run.truncated(spec.depth)
    run.name = spec.name
    run.meta.update({"tie_rule": TIE_RULE, "snapshot": snapshot.fingerprint})

    eval_qrels, perm = visible_qrels(snapshot, qrels, groups)
    t0 = time.perf_counter()
    result = evaluate(run, eval_qrels, qids, settings, chunk_to_doc=snapshot.chunk_to_doc)
    timings["eval_seconds"] = time.perf_counter() - t0
    leaks = _permission_leaks(snapshot, run, groups)
    perm["leaks"] = leaks
    choice = None
    threshold: float | None
    if abstain_threshold == "dev":
        if split == tune_split:
            tuned = result
            tuned_run = run
        else:
            dev = run_variant(snapshot, tune_split, spec, settings, cache, source, show_progress, None, tune_split)
            tuned, tuned_run = dev.evaluation, dev.run
        cats = tuned.per_query["category"].to_dict()
        choice = choose_threshold(top_scores(tuned_run, cats), cats)
        threshold = choice.threshold
    elif abstain_threshold is None:
        threshold = None
    else:
        try:
            threshold = float(abstain_threshold)
        except (TypeError, ValueError):
            raise ConfigError("abstain.threshold", abstain_threshold, "give a number, null, or dev") from None
    abst = abstention(result, run, threshold)
    _add_answer_in_context(result, run, snapshot, qids, settings)
    timings.update(source.timings)
    if "dense" in spec.retrievers:  # explicit zeros: a warm run shows that it encoded nothing
        counters.update({"dense.passages_encoded": 0.0, "dense.queries_encoded": 0.0})
    counters.update(source.counters)
    counters.update({f"cache.{k}": float(v) for k, v in (("hits", cache.stats.hits), ("misses", cache.stats.misses))})
    timings["total_seconds"] = time.perf_counter() - t_start
    return RunResult(
        variant=spec.name,
        split=split,
        run=run,
        evaluation=result,
        components=comps,
        timings=timings,
        counters=counters,
        permissions=perm,
        candidates=cands,
        abstention=abst,
        threshold_choice=choice,
        slices=slice_means(result, snapshot.queries),
    )


def _add_answer_in_context(result: Any, run: Run, snapshot: Snapshot, qids: Sequence[str], settings: Any) -> None:
    """Per-query ``answer_in_context@K`` columns and their means over answerable questions with answers."""
    from ablate.evaluation.answers import answer_in_context

    answers = {q: snapshot.queries[q].answers for q in qids if snapshot.queries[q].answers}
    if not answers:
        return
    aic = answer_in_context(run, answers, snapshot.chunk_text, settings.ks, list(answers))
    pq = result.per_query
    for k in settings.ks:
        col = f"answer_in_context@{k}"
        pq[col] = [aic[q][k] if q in aic else float("nan") for q in pq.index]
        scored = pq[(pq["category"] == "answerable") & pq[col].notna()][col]
        if len(scored):
            result.means[col] = float(scored.mean())
    result.accounting["with_answers"] = len(answers)


def _permission_leaks(snapshot: Snapshot, run: Run, groups: list[str] | None) -> int:
    """Results the identity may not see (must be 0: filtering happens inside retrieval)."""
    if groups is None:
        return 0
    mask = snapshot.allowed_mask(groups)
    idx = snapshot.chunk_index
    return sum(1 for hits in run.results.values() for h in hits if not mask[idx[h.chunk_id]])
