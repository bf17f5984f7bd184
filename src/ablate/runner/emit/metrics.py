"""A run's metrics, flat, under library keys: means with bootstrap intervals, query accounting, Wilson intervals of hit
rates, refusals, slices, answers, timings, counters, the funnel, permissions, document-level scores and the labels'
projection; and which of them are undefined (never logged as NaN)."""

from __future__ import annotations

from typing import Any

from ablate import record as R
from ablate.cache import Cache
from ablate.evaluation.abstention import AbstentionReport
from ablate.evaluation.answer_scores import AnswerCosts
from ablate.evaluation.result import EvalResult
from ablate.evaluation.scoring import Scores
from ablate.tables import as_number

#: Cache kind of the per-run bootstrap intervals (keyed by the per-query values, the settings and the stats code).
CI_KIND = "bootstrap-cis"


def headline_cis(
    evaluation: EvalResult, bootstrap: int, seed: int, cache: Cache | None = None
) -> dict[str, tuple[float, float, float]]:
    """95% bootstrap intervals over the answerable queries for every mean metric (shared resamples). With a
    ``cache``, the intervals are kept by content: the same per-query values, resamples and seed give the same
    intervals, so a run whose per-query scores did not change does not resample again."""
    from ablate.evaluation import stats  # scipy: imported when a run is scored

    pq = evaluation.per_query
    rows = pq[pq["category"] == "answerable"] if "category" in pq else pq
    cols = [str(c) for c in pq.columns if "@" in str(c) and not str(c).startswith("unjudged")]
    if rows.empty or bootstrap <= 0:
        return {}

    got = stats.bootstrap_cis_kept(rows, cols, bootstrap, seed, cache, CI_KIND)
    return {c.replace("rr@", "mrr@", 1) if c.startswith("rr@") else c: v for c, v in got.items()}


def costs_of(generator: Any) -> AnswerCosts | None:
    """What the answer metrics need of a generator (None: no generator)."""
    if generator is None:
        return None
    return AnswerCosts(generator.repeats, generator.price_in, generator.price_out)


def score_metrics(
    scores: Scores,
    bootstrap: int = 1000,
    seed: int = 0,
    cache: Cache | None = None,
    costs: AnswerCosts | None = None,
) -> dict[str, float]:
    """Every metric of :func:`ablate.evaluation.scoring.score_run`'s result as the run logs it (library keys): means
    with bootstrap intervals, query accounting, Wilson intervals of hit rates, refusals, slices and, with answers
    (``costs`` given), the answer metrics. The run and every re-score of it flatten their scores here."""
    ev = scores.evaluation
    m: dict[str, float] = {}
    for k, v in ev.means.items():
        f = as_number(v)
        if f is not None:
            m[k] = f
    for k, (_, lo, hi) in headline_cis(ev, bootstrap, seed, cache).items():
        if as_number(lo) is not None:
            m[f"{k}_ci_low"] = float(lo)
            m[f"{k}_ci_high"] = float(hi)
    for k, v in ev.accounting.items():
        f = as_number(v)
        if f is not None and not isinstance(v, bool):
            m[f"queries_{k}"] = f
    m.update(_hit_wilson(ev))
    m.update(_abstention_metrics(scores.abstention))
    for tag, row in scores.slices.items():
        for key in (*R.SLICE_METRICS, *R.ANSWER_SLICE_METRICS):
            f = as_number(row.get(key))
            if f is not None:
                m[R.slice_metric(tag, key)] = f
        m[R.slice_metric(tag, "n")] = float(row.get("n", 0))
    if scores.answers is not None and costs is not None:
        from ablate.evaluation.answer_scores import answer_metrics

        m.update(answer_metrics(scores.answers, costs, bootstrap, seed))
    return m


def _hit_wilson(ev: EvalResult) -> dict[str, float]:
    from ablate.evaluation.stats import wilson_interval  # scipy: imported when a run is scored

    m: dict[str, float] = {}
    pq = ev.per_query
    for k, v in ev.means.items():
        if k.startswith("hit@") and as_number(v) is not None and k in pq:
            col = pq[pq["category"] == "answerable"][k].dropna()
            if len(col):
                _, lo, hi = wilson_interval(int(col.sum()), len(col))
                m[f"{k}{R.WILSON_LOW}"], m[f"{k}{R.WILSON_HIGH}"] = lo, hi
    return m


def _abstention_metrics(ab: AbstentionReport | None) -> dict[str, float]:
    m: dict[str, float] = {}
    if ab is None:
        return m
    thr = as_number(ab.threshold) if ab.threshold is not None else None
    if thr is not None:  # no threshold (null: only empty results are refused) is not a number to log
        m["abstain_threshold"] = thr
    for key in ("correct_refusal_rate", "wrong_answer_count", "false_refusal_rate", "balanced_accuracy"):
        f = as_number(getattr(ab, key))
        if f is not None:
            m[f"abstain_{key}"] = f
    m["abstain_n_no_answer"] = float(ab.n_no_answer)
    return m


def permission_metrics(perm: dict[str, Any]) -> dict[str, float]:
    """What the identity and date rules changed (:meth:`ablate.runner.access.Resolver.labels`) and the leaks."""
    m = {
        "permission_hidden_judgements": float(perm.get("hidden_judgements", 0)),
        "permission_queries_made_unanswerable": float(perm.get("queries_made_unanswerable", 0)),
        "permission_leaks": float(perm.get("leaks", 0)),
    }
    if perm.get("as_of") is not None:  # the date rule (ablate.runner.access): what it changed
        m["versions_queries_dated"] = float(perm.get("queries_dated", 0))
        m["versions_regraded_out_of_force"] = float(perm.get("regraded_out_of_force", 0))
        m["versions_queries_without_evidence_in_force"] = float(
            perm.get("queries_without_evidence_in_force", 0)
        )
    return m


def metrics_for(
    result: Any, bootstrap: int = 1000, seed: int = 0, cache: Cache | None = None
) -> dict[str, float]:
    """Every metric a run logs: :func:`score_metrics` of its scores, plus what only the run itself knows (timings,
    counters of work done, the funnel of the gold evidence over the stages) and the permission counts."""
    scores = Scores(result.evaluation, result.abstention, result.slices, result.answers)
    m = score_metrics(scores, bootstrap, seed, cache, costs_of(result.pipeline.generator))
    for k, v in result.timings.items():
        m[f"time_{k}"] = float(v)
    for k, v in result.counters.items():
        m[k.replace(".", "_")] = float(v)
    m.update(permission_metrics(result.permissions))
    m.update(doc_metrics(result.doc_evaluation))
    m.update(projection_metrics(result.projection_counts))
    for i, (stage, row) in enumerate(result.funnel.items(), 1):  # numbered: MLflow lists them in stage order
        m[R.funnel_metric(i, stage, "recall")] = row["recall"]
        m[R.funnel_metric(i, stage, "depth")] = float(row["depth"])
        m[R.funnel_metric(i, stage, "topkrecall")] = row["topkrecall"]
        m[R.funnel_metric(i, stage, "topk")] = float(row["topk"])
    return m


#: Per-query columns of the document-level scores (:func:`ablate.runner.pipeline.doc_evaluation`) kept and logged.
DOC_METRICS = ("ndcg", "recall", "hit", "rr")


def doc_metrics(ev: EvalResult | None) -> dict[str, float]:
    """The document-level means of a run scored at unit chunk, as ``doc_<metric>@<k>`` (``doc_ndcg_at_10``)."""
    if ev is None:
        return {}
    out = {}
    for k, v in ev.means.items():
        name = k.partition("@")[0]
        f = as_number(v)
        if f is not None and (name in DOC_METRICS or name == "mrr"):
            out[R.DOC_PREFIX + k] = f
    return out


def projection_metrics(counts: Any) -> dict[str, float]:
    """What carrying the labels onto other chunks did (:class:`ablate.data.projection.Counts`), as ``labels_*``."""
    if counts is None:
        return {}
    return {f"{R.PROJECTION_METRIC_PREFIX}{k}": float(v) for k, v in counts.as_dict().items()}


def split_defined(metrics: dict[str, float]) -> tuple[dict[str, float], list[str]]:
    """The finite metrics, and the names of those that could not be computed (NaN or infinite: e.g. a refusal rate
    on a split without no-answer questions). They are counted (``metrics_undefined``) and listed in accounting.json;
    a NaN never reaches MLflow."""
    import math

    undefined = sorted(k for k, v in metrics.items() if not math.isfinite(v))
    defined = {k: v for k, v in metrics.items() if math.isfinite(v)}
    defined["metrics_undefined"] = float(len(undefined))
    return defined, undefined
