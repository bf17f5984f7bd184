"""A run's artifact files, ``{name: text}``: its config, ``run.trec``, the per-question table (also logged as a table
MLflow lines up across runs), the corpus manifest, components, accounting, unjudged hits, slices, abstention,
answers, prompt and funnel."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from ablate import record as R
from ablate.data.splitting import question_clusters
from ablate.evaluation.result import EvalResult
from ablate.runner.emit.metrics import DOC_METRICS


def _doc_columns(ev: EvalResult) -> list[str]:
    return [str(c) for c in ev.per_query.columns if str(c).partition("@")[0] in DOC_METRICS]


def per_query_frame(ev: EvalResult, answers: Any, doc_evaluation: EvalResult | None, snapshot: Any) -> Any:
    """The run's ``per_query.csv`` table (index ``qid``): the per-question metrics, the answer scores (with a
    generator), the document-level scores (a chosen chunker), each question's tags, persona and date, and its cluster
    (:data:`ablate.record.PQ_CLUSTER`: questions sharing gold evidence at the run's relevance level, a declared group or
    their text) and declared group (:data:`ablate.record.PQ_GROUP`). A re-score on new labels
    (:mod:`ablate.runner.relabel`) writes the same table, so the clusters follow the new labels."""
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
    qids = [str(q) for q in pq.index]
    cluster, declared = question_clusters(snapshot, qids, ev.settings.relevance_level)
    pq.insert(3, R.PQ_CLUSTER, [cluster[q] for q in qids])
    pq.insert(4, R.PQ_GROUP, [declared[q] for q in qids])
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
