"""What one run emits: its params (what ran), its metrics (flat, library keys), its artifact files and its console
summary. Pure functions of a :class:`~ablate.runner.pipeline.RunResult`; :mod:`ablate.runner.job` logs them.
Every name comes from :mod:`ablate.record`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import IO, Any

from ablate import record as R
from ablate.cache import Cache
from ablate.data.snapshot import Snapshot
from ablate.evaluation.abstention import AbstentionReport
from ablate.evaluation.answer_scores import AnswerCosts
from ablate.evaluation.result import EvalResult
from ablate.evaluation.scoring import Scores
from ablate.runner.settings import CorpusSpec, RunSettings
from ablate.tables import as_number, fmt, format_table


def params_for(
    variant: str, result: Any, snapshot: Snapshot, corpus: CorpusSpec, settings: RunSettings
) -> dict[str, Any]:
    """The run's params: what ran, typed. Stages that did not run log nothing."""
    pipe = result.pipeline
    params: dict[str, Any] = {
        R.P_VARIANT: variant,
        R.P_RETRIEVERS: [r.name for r in pipe.retrievers],
        R.P_FUSER: pipe.fuser.name if pipe.fuser is not None else R.NONE,
        R.P_RERANKER: pipe.reranker.name if pipe.reranker is not None else R.NONE,
        R.P_GENERATOR: pipe.generator.name if pipe.generator is not None else R.NONE,
    }
    for stage in pipe.stages:
        params.update(R.flatten(stage.params(), stage.name))
    params.update(
        {
            R.P_CORPUS_NAME: snapshot.name,
            "corpus.path": str(snapshot.root),
            R.P_SPLIT: result.split,
            R.P_IDENTITY: corpus.identity,
            R.P_AS_OF: corpus.as_of,
            R.P_VERSIONS_POLICY: corpus.version_policy,
            "corpus.split_file": corpus.split_file,
            "corpus.language": snapshot.language,
            R.P_LANGUAGE_SOURCE: snapshot.language_source,
            "corpus.chunker": snapshot.chunker.params(),
        }
    )
    if snapshot.projection is not None:  # labels carried onto other chunks: how (the counts are metrics)
        params.update(R.flatten(snapshot.projection.record(), R.P_PROJECTION))
    params.update(label_params(snapshot))
    params.update(R.flatten(settings.eval.as_dict(), "eval"))
    params["abstain.threshold"] = settings.abstain_threshold
    params["stats.bootstrap"] = settings.bootstrap
    params["stats.seed"] = settings.seed
    return params


def label_params(snapshot: Snapshot) -> dict[str, Any]:
    """Labels from a committed label version (its name is the tag ``ablate.label_version``): the version it was made
    from and how many of its labels an LLM made; nothing for a corpus's own ``qrels/``."""
    prov = snapshot.label_provenance
    if not prov:
        return {}
    return {R.P_LABELS_PARENT: prov["label_version_parent"], R.P_LABELS_LLM_MADE: prov["labels_llm_made"]}


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


def _doc_columns(ev: EvalResult) -> list[str]:
    return [str(c) for c in ev.per_query.columns if str(c).partition("@")[0] in DOC_METRICS]


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


def projection_line(counts: Any, record: dict[str, Any], onto: str) -> str:
    """The console's one line about a projection."""
    c = counts
    return (
        f"labels projected onto {onto} chunks (from {record['from']['kind']}, min_overlap {record['min_overlap']:g}: "
        f"a chunk takes the best grade of each label it shares that share of, of the label or of the chunk): "
        f"{c.projected} of {c.labels} labels projected, {c.split} split, {c.lost} lost, {c.merged} merged; "
        f"sub-question evidence {c.evidence - c.evidence_lost} of {c.evidence} kept. The unit changed: compare "
        f"runs over chunkers at the document level (doc_ndcg@10)"
    )


def split_defined(metrics: dict[str, float]) -> tuple[dict[str, float], list[str]]:
    """The finite metrics, and the names of those that could not be computed (NaN or infinite: e.g. a refusal rate
    on a split without no-answer questions). They are counted (``metrics_undefined``) and listed in accounting.json;
    a NaN never reaches MLflow."""
    import math

    undefined = sorted(k for k, v in metrics.items() if not math.isfinite(v))
    defined = {k: v for k, v in metrics.items() if math.isfinite(v)}
    defined["metrics_undefined"] = float(len(undefined))
    return defined, undefined


def per_query_frame(ev: EvalResult, answers: Any, doc_evaluation: EvalResult | None, snapshot: Any) -> Any:
    """The run's ``per_query.csv`` table (index ``qid``): the per-question metrics, the answer scores (with a
    generator), the document-level scores (a chosen chunker) and each question's tags, persona and date. A re-score on
    new labels (:mod:`ablate.runner.relabel`) writes the same table."""
    pq = ev.per_query.copy()
    if answers is not None:  # the answer scores join the per-question table (the report reads them there)
        a = answers
        for col in ("correct", "em", "f1", "refused", "no_final", "citations_support", "diagnosis"):
            pq[f"answer_{col}"] = a[col].reindex(pq.index)
        for col in ("parts_covered", "parts_all"):  # questions with answer_parts only (NaN elsewhere)
            if col in a:
                pq[f"answer_{col}"] = a[col].reindex(pq.index)
        for col in ("correct_rule", "judge_grade"):  # the rule's verdict beside an LLM judge's grade
            if col in a:
                pq[f"answer_{col}"] = a[col].reindex(pq.index)
        unscored = ~a["answerable"].reindex(pq.index, fill_value=False).astype(
            bool
        )  # no-answer, or no gold answer
        scores = [c for c in ("answer_correct", "answer_em", "answer_f1", "answer_correct_rule") if c in pq]
        pq.loc[unscored.to_numpy(), scores] = float("nan")
    if doc_evaluation is not None:  # document-level scores beside the chunk-level ones
        dq = doc_evaluation.per_query
        for col in _doc_columns(doc_evaluation):
            pq[R.DOC_PREFIX + col] = dq[col].reindex(pq.index)
    pq.insert(
        0, "tags", [";".join(snapshot.queries[q].tags) if q in snapshot.queries else "" for q in pq.index]
    )
    pq.insert(
        1, "persona", [snapshot.queries[q].persona or "" if q in snapshot.queries else "" for q in pq.index]
    )
    pq.insert(
        2, "as_of", [snapshot.queries[q].as_of or "" if q in snapshot.queries else "" for q in pq.index]
    )
    return pq


def per_query_table(pq: Any) -> Any:
    """What the run logs with MLflow's ``log_table`` as ``per_query_table.json`` (:data:`ablate.record.A_PER_QUERY_TABLE`):
    the columns of :func:`per_query_frame`'s table worth comparing question by question across runs, ``qid`` first
    (:data:`ablate.record.PER_QUERY_TABLE_KEYS`, ``..._METRICS``, ``..._ANSWERS``; those the run has)."""
    cols = [
        c
        for c in (*R.PER_QUERY_TABLE_KEYS, *R.PER_QUERY_TABLE_METRICS, *R.PER_QUERY_TABLE_ANSWERS)
        if c in pq.columns
    ]
    table = pq[cols].copy()
    table.insert(0, "qid", [str(q) for q in pq.index])
    return table.reset_index(drop=True)


def question_table(result: Any, snapshot: Any) -> Any:
    """:func:`per_query_table` of a pipeline result (what :mod:`ablate.runner.job` logs with ``log_table``)."""
    return per_query_table(
        per_query_frame(result.evaluation, result.answers, result.doc_evaluation, snapshot)
    )


def artifacts_for(
    result: Any, snapshot: Any, config_yaml: str, undefined: list[str] | None = None
) -> dict[str, str]:
    """Every file the run logs as an artifact, ``{name: text}`` (names from :mod:`ablate.record`)."""
    ev = result.evaluation
    pq = per_query_frame(ev, result.answers, result.doc_evaluation, snapshot)
    files = {
        R.A_CONFIG: config_yaml,
        R.A_RUN: result.run.to_trec(tag=result.variant),
        R.A_PER_QUERY: pq.to_csv(index=True, index_label="qid"),
        R.A_MANIFEST: json.dumps(snapshot.manifest_record(), indent=2, ensure_ascii=False),
        R.A_COMPONENTS: json.dumps(result.components, indent=2, ensure_ascii=False, default=str),
        R.A_ACCOUNTING: json.dumps(
            {
                "accounting": ev.accounting,
                "permissions": result.permissions,
                "metrics_undefined": list(undefined or []),  # not logged: no finite value (e.g. no citations)
            },
            indent=2,
            ensure_ascii=False,
            default=str,
        ),
        R.A_UNJUDGED: ev.unjudged_csv(),
        R.A_SLICES: slices_csv(result.slices),
    }
    if result.abstention is not None:
        abst = {"applied": asdict(result.abstention)}
        if result.threshold_choice is not None:
            abst["chosen_on_dev"] = asdict(result.threshold_choice)
        files[R.A_ABSTENTION] = json.dumps(abst, indent=2, default=str)
    if result.answers is not None and result.pipeline.generator is not None:
        files[R.A_ANSWERS] = result.answers.to_csv(index=True, index_label="qid")
        files[R.A_PROMPT] = result.pipeline.generator.template.text
    if result.funnel:
        rows = [
            "stage,depth,recall,topk,topk_recall",
            *(
                f"{k},{v['depth']},{v['recall']!r},{v['topk']},{v['topkrecall']!r}"
                for k, v in result.funnel.items()
            ),
        ]
        files[R.A_FUNNEL] = "\n".join(rows) + "\n"
    if result.funnel_per_query is not None:
        files[R.A_FUNNEL_PER_QUERY] = result.funnel_per_query.to_csv(index=False)
    return files


def slices_csv(slices: dict[str, dict[str, float]]) -> str:
    import pandas as pd

    if not slices:
        return ""
    return pd.DataFrame.from_dict(slices, orient="index").rename_axis("tag").to_csv()


def latency_note(answers: Any) -> str:
    """``latency p50 0.41s``, saying where the figure comes from when some answers came from the cache (their latency
    is the one measured when they were generated, not this run's lookup) or have no latency kept."""
    lat = answers["latency_s"].astype(float)
    known, cached = lat.dropna(), int(answers["cached"].astype(bool).sum())
    text = f"latency p50 {known.median():.2f}s" if len(known) else "latency unknown"
    notes = []
    if cached:
        notes.append(f"as generated: {cached} of {len(answers)} answers from the cache")
    if len(known) < len(lat):
        notes.append(f"{len(lat) - len(known)} cached without a latency, left out")
    return text + (f" ({'; '.join(notes)})" if notes else "")


#: Accounting counters that say queries were not scored as declared: any of them above zero gets one warning line,
#: with or without ``-v`` (no query is dropped silently). Every counter is in ``accounting.json`` and the run's
#: ``queries_*`` metrics; ``-v`` prints them all. An empty result is a problem only for an answerable question (it
#: scores 0 there); for a no-answer question it is the refusal wanted.
PROBLEM_COUNTERS: tuple[str, ...] = (
    "missing_from_run",
    "excluded_missing",
    "not_in_query_set",
    "qrels_not_in_query_set",
)


def accounting_lines(
    accounting: dict[str, Any], split: str | None, label: str, verbose: bool
) -> tuple[list[str], list[str]]:
    """(lines for stdout, warnings for stderr) of a run's query accounting: the counter line only when ``verbose``;
    one warning when a :data:`PROBLEM_COUNTERS` counter is above zero or an answerable question got an empty
    result."""
    counts = {k: v for k, v in accounting.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    out = [f"queries ({split}): " + ", ".join(f"{k}={v:g}" for k, v in counts.items())] if verbose else []
    problems = [f"{k}={counts[k]:g}" for k in PROBLEM_COUNTERS if counts.get(k)]
    by_category = accounting.get("by_category")
    empty = by_category.get("answerable", {}).get("empty_result", 0) if isinstance(by_category, dict) else 0
    if empty:
        problems.append(f"empty_result={empty} (answerable, scored 0)")
    warn = (
        [
            f"warning: {label} ({split}): {', '.join(problems)}: queries not scored as declared (every counter: "
            "accounting.json and the queries_* metrics of the run; -v prints them)"
        ]
        if problems
        else []
    )
    return out, warn


def print_accounting(
    accounting: dict[str, Any], split: str | None, label: str, verbose: bool, stream: IO[str] | None = None
) -> None:
    """:func:`accounting_lines`, printed: the counters on ``stream`` (stdout), the warning on stderr."""
    out, warn = accounting_lines(accounting, split, label, verbose)
    for line in out:
        print(line, file=stream or sys.stdout)
    for line in warn:
        print(line, file=sys.stderr)


def print_run_summary(
    result: Any,
    run_id: str,
    uri: str,
    experiment: str,
    stream: IO[str] | None = None,
    artifacts: str = "",
    brief: bool = False,
    verbose: bool = False,
    label: str = "",
) -> None:
    """What a run prints: its headline table, the answers' line and where the run is; only the accounting (the
    counters with ``verbose``, a warning when queries were not scored) when ``brief`` (a sweep's cell, whose one
    line the command prints)."""
    stream = stream or sys.stdout
    ev = result.evaluation
    if not brief:
        cols = [k for k in R.HEADLINE if k in ev.means]
        row = {"variant": result.variant, **{k: fmt(ev.means[k]) for k in cols}}
        print(format_table([row], ["variant", *cols]), file=stream)
    print_accounting(ev.accounting, result.split, label or result.variant, verbose, stream)
    if (
        result.projection_counts is not None and result.projection is not None
    ):  # the unit changed: said even for a sweep's cell
        print(
            projection_line(result.projection_counts, result.projection, result.projected_onto), file=stream
        )
    if brief:
        return
    if result.answers is not None:
        a = result.answers
        scored = a[a["answerable"]]
        diag = scored["diagnosis"].value_counts()
        na = a[a["no_answer"]]
        judge = getattr(result.pipeline.judge, "label", "rule")
        beside = ""
        if (
            "judge_grade" in a
        ):  # an LLM judge: the rule's figure beside it, and what it graded partly or unparsed
            grades = scored["judge_grade"].fillna("").astype(str)
            beside = (
                f" (rule: {scored['correct_rule'].mean():.3f}; partly {int((grades == 'partly').sum())}, "
                f"unparsed {int((grades == 'unparsed').sum())})"
            )
        print(
            f"answers: correct ({judge}) {scored['correct'].mean():.3f} of {len(scored)} answerable{beside}; "
            f"citations support "
            f"{scored['citations_support'].mean():.3f}; no-answer questions refused {int(na['refused'].sum())}/{len(na)}"
            f"; wrong: {int(diag.get('generation_failure', 0))} with the evidence in the context (generation), "
            f"{int(diag.get('retrieval_failure', 0))} without it (retrieval); {latency_note(a)}",
            file=stream,
        )
    print(f"mlflow run {run_id} in experiment {experiment!r} at {uri}", file=stream)
    if artifacts:
        print(f"artifacts (run.trec, per_query.csv, ...): {artifacts}", file=stream)
    if uri.startswith("sqlite:///"):
        print(
            f"compare runs: mlflow ui --backend-store-uri {uri}  (then open http://127.0.0.1:5000)",
            file=stream,
        )
