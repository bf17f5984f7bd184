"""The declared rules of retrieval evaluation: one text per choice, filled in with the settings in force.

Every choice the two seed articles ask to be fixed in advance (unit, dedup, budget, unjudged results, queries without
answers, empty or short rankings, queries missing from the run) is a named rule below.
:func:`~ablate.evaluation.retrieval.evaluate` follows them and returns them, filled in by :func:`applied_rules`, in
``EvalResult.accounting["rules"]``, so a tracked run says how it was scored.

References: Järvelin & Kekäläinen (2002), *Cumulated gain-based evaluation of IR techniques*, TOIS 20(4) (nDCG);
Burges et al. (2005), *Learning to rank using gradient descent*, ICML (the 2^rel - 1 gain); Sakai (2007), *Alternatives
to bpref*, SIGIR (condensed lists); Buckley & Voorhees (2004), *Retrieval evaluation with incomplete information*,
SIGIR (unjudged results). trec_eval (``ndcg_cut``, ``recall``, ``recip_rank``) is the reference for linear gains.

Rules
-----
"""

from __future__ import annotations

from ablate.evaluation.settings import EvalSettings

#: Rule texts. ``{…}`` fields are filled from the settings by :func:`applied_rules`.
RULES: dict[str, str] = {
    "ranking": "the run's list order is the ranking (rank = position + 1); evaluate never re-sorts. Ties were broken "
    "by the producer's declared rule: {tie_rule}",
    "unit": "results are scored as '{unit}' units (requested '{requested}', qrels unit '{qrels_unit}'); a hit's doc "
    "unit is its explicit Hit.doc_id, its chunk unit is Hit.chunk_id",
    "lift": "{lift}",
    "dedup": "a unit counts once, at its first appearance; RR and nDCG positions are positions in the "
    "deduplicated unit list",
    "budget": "{budget}",
    "unjudged": "{unjudged}",
    "relevance_level": "a unit is relevant when its grade >= {level} (hit, recall, RR, complete, answerable); grades "
    "below {level} (0 and negative grades included) give no nDCG gain, so 'relevant' means one thing for every "
    "metric (trec_eval's ndcg ignores -l and gains every positive grade; at level 1 the two agree)",
    "hit": "hit@K = 1 if any relevant unit is in the top K, else 0",
    "recall": "recall@K = |relevant ∩ top K| / |relevant|",
    "rr": "rr@K = 1 / rank of the first relevant unit in the top K, else 0; its mean is reported as mrr@K",
    "ndcg": "ndcg@K = DCG@K / IDCG@K with gain {gain_formula} and discount 1/log2(rank + 1); IDCG@K from this "
    "query's judged grades sorted descending, cut at K positions (K positions under either budget)",
    "judged": "judged@K = 1 - unjudged@K / |window|, the share of the units in the top-K window with a judgement "
    "(any grade, 0 included) for THIS query; 1.0 for an empty window (nothing unknown). It divides by the window, "
    "not by K, so a short list or the chunks budget (K chunks may be fewer than K documents) is not read as missing "
    "labels; the count unjudged@K and n_units are reported beside it",
    "complete": "complete@K = 1 if every relevant unit is in the top K, else 0",
    "unjudged_count": "unjudged@K = number of units in the top-K window with no judgement for this query (labels "
    "given for other queries do not count); every such result within max K is listed in EvalResult.unjudged "
    "(rank = position in the deduplicated list)",
    "answerable": "at least one judgement with grade >= {level}: scored and averaged",
    "no_answer": "no judgements at all: hit/recall/rr/ndcg/complete are undefined (NaN) and never enter the means; "
    "scored apart (ablate.evaluation.abstention); judged/unjudged are still reported",
    "idcg_zero": "judgements exist but none has grade >= {level}, so IDCG = 0 and recall's denominator is 0: "
    "handled like no_answer",
    "empty_result": "in the run with zero results: scored as an empty list (quality metrics 0), counted",
    "fewer_than_k": "fewer results than max K = {max_k} in the budget's unit ({budget_unit}): the empty positions "
    "count as non-relevant, counted",
    "missing_from_run": "{missing}",
    "not_in_query_set": "queries in the run that are not in the declared query set are ignored and counted",
    "qrels_not_in_query_set": "judged queries outside the declared query set are ignored and counted",
    "means": "arithmetic mean over the scored answerable queries, every query weighing the same; no rounding "
    "anywhere in evaluation",
}

_BUDGET_TEXT = {
    "chunks": "budget=chunks: K counts ranked results (chunks): take the first K results, then dedup to units; a "
    "unit is in the top K when its first result is among the first K (the window can hold fewer than K units)",
    "docs": "budget=docs: K counts units: dedup the whole ranking, then take the first K units (this may read "
    "deeper than K results)",
}
_UNJUDGED_TEXT = {
    "nonrelevant": "unjudged=nonrelevant: a result with no judgement for this query scores as grade 0 (as trec_eval)",
    "condensed": "unjudged=condensed: results with no judgement for this query are removed before the budget and the "
    "positions are counted (condensed list, Sakai 2007); judged@K and unjudged@K are measured on the full ranking",
}
_MISSING_TEXT = {
    "zero": "missing=zero: a declared query absent from the run is scored as an empty result (quality metrics 0) "
    "and counted",
    "exclude": "missing=exclude: a declared query absent from the run gets NaN metrics, stays out of the means, and "
    "is counted",
}


def _rules_doc() -> str:
    generic = {
        "tie_rule": "run.meta['tie_rule'] (default types.TIE_RULE)",
        "unit": "<unit>",
        "requested": "<eval.unit>",
        "qrels_unit": "<qrels.unit>",
        "level": "relevance_level",
        "gain_formula": "2^grade - 1 (exponential) or grade (linear, trec_eval)",
        "max_k": "max(ks)",
        "budget_unit": "results for budget=chunks, deduplicated units for budget=docs",
    }
    skip = ("lift", "budget", "unjudged", "missing_from_run")
    lines = [f"* ``{k}``: {v.format(**generic)}" for k, v in RULES.items() if k not in skip]
    lines += [f"* ``budget``: {t}" for t in _BUDGET_TEXT.values()]
    lines += [f"* ``unjudged``: {t}" for t in _UNJUDGED_TEXT.values()]
    lines += [f"* ``missing_from_run``: {t}" for t in _MISSING_TEXT.values()]
    lines.append(
        "* ``lift``: chunk qrels evaluated at unit doc: a document's grade is the max grade of its judged "
        "chunks; a document is judged when any of its chunks is (needs chunk_to_doc)"
    )
    return "\n".join(lines) + "\n"


__doc__ = (__doc__ or "") + _rules_doc()


def applied_rules(settings: EvalSettings, unit: str, qrels_unit: str, tie_rule: str) -> dict[str, str]:
    """The rule texts with this evaluation's settings filled in (goes into ``accounting["rules"]``)."""
    lifted = qrels_unit == "chunk" and unit == "doc"
    fields = {
        "tie_rule": tie_rule,
        "unit": unit,
        "requested": settings.unit,
        "qrels_unit": qrels_unit,
        "lift": (
            "chunk qrels lifted to documents: a document's grade is the max grade of its judged chunks; a document "
            "is judged when any of its chunks is (mapping: chunk_to_doc)"
            if lifted
            else "none: qrels are already at the evaluation unit"
        ),
        "budget": _BUDGET_TEXT[settings.budget],
        "unjudged": _UNJUDGED_TEXT[settings.unjudged],
        "missing": _MISSING_TEXT[settings.missing],
        "level": settings.relevance_level,
        "gain_formula": "2^grade - 1 (exponential)"
        if settings.gain == "exponential"
        else "grade (linear, trec_eval)",
        "max_k": settings.max_k,
        "budget_unit": "results" if settings.budget == "chunks" else "deduplicated units",
    }
    return {k: v.format(**fields) for k, v in RULES.items()}
