"""Units and the edges of scoring (``ablate.evaluation.units`` and the scoring core): chunk labels lifted to
documents, the ideal list cut at K, empty and unanswerable question sets, the unit rule and its messages.

Every expected value is hand-computed from the declared rules (``ablate.evaluation.rules.RULES``) or taken from an
independent evaluator (pytrec_eval for linear-gain nDCG and recall).
"""

from __future__ import annotations

import math
import warnings

import pytest
import pytrec_eval

from ablate.data.types import Hit, Qrels, Run
from ablate.errors import ConfigError, InputError
from ablate.evaluation import EvalSettings, evaluate
from ablate.evaluation.metrics import METRICS
from ablate.evaluation.units import judgements_at, resolve_unit

L3 = math.log2(3)


def _hits(*pairs: tuple[str, str]) -> list[Hit]:
    """Hits ``(chunk_id, doc_id)`` with strictly decreasing scores."""
    return [Hit(c, d, 100.0 - i) for i, (c, d) in enumerate(pairs)]


# ----------------------------------------------------------------------------------------------------------------
# Chunk qrels lifted to documents: a document's grade is the MAX grade of its judged chunks


LIFT_QRELS = {
    # q_low_first: the lower grade comes first in the chunk order; q_high_first: the higher grade comes first
    "q_low_first": {"D#1": 1, "D#2": 2, "F#1": 1},
    "q_high_first": {"D#2": 2, "D#1": 1, "F#1": 1},
}
LIFT_C2D = {"D#1": "D", "D#2": "D", "F#1": "F", "G#1": "G"}
# Both queries retrieve F then D (document unit): D is at rank 2 with a lifted grade 2, F at rank 1 with grade 1.
LIFT_RUN = {q: _hits(("F#1", "F"), ("D#1", "D"), ("G#1", "G")) for q in LIFT_QRELS}


def _lifted(**settings) -> object:
    return evaluate(
        Run("lift", LIFT_RUN),
        Qrels(LIFT_QRELS, unit="chunk"),
        list(LIFT_QRELS),
        EvalSettings(unit="doc", **settings),
        chunk_to_doc=LIFT_C2D,
    )


def test_lifting_takes_the_highest_chunk_grade_exponential_ndcg():
    r = _lifted(ks=(2, 3), gain="exponential")
    # lifted grades D=2, F=1. DCG@2 = (2^1-1)/log2(2) + (2^2-1)/log2(3); IDCG@2 = 3/1 + 1/log2(3)
    expected = (1 + 3 / L3) / (3 + 1 / L3)
    for q in LIFT_QRELS:
        row = r.per_query.loc[q]
        assert row["ndcg@2"] == pytest.approx(expected, abs=1e-12)
        assert row["n_relevant"] == 2
        assert row["unjudged@3"] == 1  # G has no judged chunk
    assert r.means["ndcg@2"] == pytest.approx(expected, abs=1e-12)  # ~0.7967, not 1.0 (what D=1 would give)


def test_lifting_takes_the_highest_chunk_grade_at_relevance_level_2():
    r = _lifted(ks=(1, 2), relevance_level=2, gain="exponential")
    for q in LIFT_QRELS:
        row = r.per_query.loc[q]
        assert (
            row["category"] == "answerable"
        )  # D's lifted grade 2 reaches level 2 (grade 1 would make idcg_zero)
        assert row["n_relevant"] == 1
        assert row["recall@1"] == 0.0 and row["recall@2"] == 1.0
        assert row["hit@2"] == 1.0 and row["rr@2"] == 0.5
        # only D gains at level 2: DCG@2 = 3/log2(3), IDCG@2 = 3
        assert row["ndcg@2"] == pytest.approx(1 / L3, abs=1e-12)
    assert r.accounting["answerable"] == 2 and r.accounting["idcg_zero"] == 0
    assert r.means["recall@2"] == 1.0


def test_lifting_matches_pytrec_eval_on_the_max_lifted_document_qrels():
    r = _lifted(ks=(2, 3), gain="linear")
    doc_qrels = {q: {"D": 2, "F": 1} for q in LIFT_QRELS}  # max of the chunks, by hand
    doc_run = {q: {"F": 3.0, "D": 2.0, "G": 1.0} for q in LIFT_QRELS}
    ref = pytrec_eval.RelevanceEvaluator(doc_qrels, {"ndcg_cut_2", "ndcg_cut_3", "recall_2"}).evaluate(
        doc_run
    )
    for q in LIFT_QRELS:
        assert r.per_query.loc[q, "ndcg@2"] == pytest.approx(ref[q]["ndcg_cut_2"], abs=1e-12)
        assert r.per_query.loc[q, "ndcg@3"] == pytest.approx(ref[q]["ndcg_cut_3"], abs=1e-12)
        assert r.per_query.loc[q, "recall@2"] == pytest.approx(ref[q]["recall_2"], abs=1e-12)
    assert r.per_query.loc["q_low_first", "ndcg@2"] == pytest.approx((1 + 2 / L3) / (2 + 1 / L3), abs=1e-12)


# ----------------------------------------------------------------------------------------------------------------
# IDCG: the ideal list is this query's judged grades sorted descending, cut at K positions


def test_more_relevant_units_than_max_k_cuts_the_ideal_list_at_k():
    judgements = {"q": {"d1": 1, "d2": 1, "d3": 3, "d4": 2, "d5": 1, "d6": 0}}
    run = {"q": [Hit("d4", "d4", 3.0), Hit("x", "x", 2.0), Hit("d3", "d3", 1.0)]}
    r = evaluate(Run("t", run), Qrels(judgements), ["q"], EvalSettings(ks=(1, 2), gain="exponential"))
    row = r.per_query.loc["q"]
    assert row["n_relevant"] == 5
    # ideal top 2 = grades 3, 2 -> IDCG@1 = 7, IDCG@2 = 7 + 3/log2(3); d4 (grade 2, gain 3) at rank 1, x unjudged
    assert row["ndcg@1"] == pytest.approx(3 / 7, abs=1e-12)
    assert row["ndcg@2"] == pytest.approx(3 / (7 + 3 / L3), abs=1e-12)
    assert row["recall@2"] == pytest.approx(1 / 5, abs=1e-12)
    assert row["complete@2"] == 0.0 and row["hit@1"] == 1.0 and row["rr@2"] == 1.0
    linear = evaluate(Run("t", run), Qrels(judgements), ["q"], EvalSettings(ks=(1, 2), gain="linear"))
    doc_run = {"q": {h.chunk_id: h.score for h in run["q"]}}
    ref = pytrec_eval.RelevanceEvaluator(judgements, {"ndcg_cut_1", "ndcg_cut_2", "recall_2"}).evaluate(
        doc_run
    )
    assert linear.per_query.loc["q", "ndcg@1"] == pytest.approx(ref["q"]["ndcg_cut_1"], abs=1e-12)
    assert linear.per_query.loc["q", "ndcg@2"] == pytest.approx(ref["q"]["ndcg_cut_2"], abs=1e-12)
    assert linear.per_query.loc["q", "recall@2"] == pytest.approx(ref["q"]["recall_2"], abs=1e-12)


# ----------------------------------------------------------------------------------------------------------------
# Degenerate query sets


def test_empty_query_set_scores_nothing_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = evaluate(
            Run("t", {"q": [Hit("a", "a", 1.0)]}), Qrels({"q": {"a": 1}}), [], EvalSettings(ks=(1, 3))
        )
    assert r.per_query.empty and list(r.per_query.index) == []
    assert set(r.means) == {f"{'mrr' if m == 'rr' else m}@{k}" for m in METRICS for k in (1, 3)}
    assert all(math.isnan(v) for v in r.means.values())
    acc = r.accounting
    assert (acc["total"], acc["answerable"], acc["scored"]) == (0, 0, 0)
    assert (acc["not_in_query_set"], acc["qrels_not_in_query_set"]) == (1, 1)


def test_no_answerable_query_gives_nan_means_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = evaluate(
            Run("t", {"q": [Hit("a", "a", 1.0)]}), Qrels({"q": {"a": 0}}), ["q"], EvalSettings(ks=(1,))
        )
    assert r.per_query.loc["q", "category"] == "idcg_zero"
    assert math.isnan(r.means["ndcg@1"]) and math.isnan(r.means["judged@1"])
    assert r.per_query.loc["q", "judged@1"] == 1.0


# ----------------------------------------------------------------------------------------------------------------
# units.py: the unit rule and the lifting errors (direct callers included)


def test_resolve_unit_rule_and_its_messages():
    assert [
        resolve_unit(r, q)
        for r, q in [("auto", "doc"), ("auto", "chunk"), ("doc", "chunk"), ("chunk", "chunk")]
    ] == [
        "doc",
        "chunk",
        "doc",
        "chunk",
    ]
    with pytest.raises(ConfigError) as e:
        resolve_unit("auto", "passage")
    assert (e.value.key, e.value.value, str(e.value)) == (
        "qrels.unit",
        "passage",
        "qrels.unit='passage' is not valid; valid options: doc, chunk",
    )
    with pytest.raises(ConfigError) as e:
        resolve_unit("page", "doc")
    assert (e.value.key, e.value.value, str(e.value)) == (
        "eval.unit",
        "page",
        "eval.unit='page' is not valid; valid options: auto, doc, chunk",
    )
    with pytest.raises(ConfigError) as e:
        resolve_unit("chunk", "doc")
    assert (e.value.key, e.value.value) == ("eval.unit", "chunk")
    assert str(e.value) == (
        "eval.unit='chunk' is not valid; the qrels are labelled at unit 'doc' and document labels cannot be mapped "
        "down to chunks (which chunk holds the answer is what a document label does not say). Fix: evaluate with "
        "eval.unit=doc (or auto), or label chunks (qrels_unit: chunk)"
    )


def test_judgements_at_same_unit_is_the_qrels_own_mapping():
    qrels = Qrels({"q": {"D": 1}}, unit="doc")
    assert judgements_at(qrels, "doc") is qrels.judgements
    chunk_qrels = Qrels({"q": {"D#1": 1}}, unit="chunk")
    assert judgements_at(chunk_qrels, "chunk", {"D#1": "D"}) is chunk_qrels.judgements


def test_judgements_at_refuses_doc_qrels_at_chunk_unit_even_with_a_mapping():
    # direct callers get the same refusal as evaluate: document labels are never pushed down (or "lifted") to chunks
    with pytest.raises(ConfigError) as e:
        judgements_at(Qrels({"q": {"D": 1}}, unit="doc"), "chunk", {"D#1": "D", "D": "D"})
    assert (e.value.key, e.value.value) == ("eval.unit", "chunk")
    assert "cannot be mapped down to chunks" in str(e.value)


def test_lifting_without_a_mapping_names_the_missing_argument_and_the_fix():
    with pytest.raises(ConfigError) as e:
        judgements_at(Qrels({"q": {"X#1": 1}}, unit="chunk"), "doc")
    assert (e.value.key, e.value.value) == ("chunk_to_doc", None)
    assert str(e.value) == (
        "chunk_to_doc=None is not valid; qrels are labelled at unit 'chunk' and evaluation is at unit 'doc', so "
        "chunk labels must be lifted to their documents. Fix: pass chunk_to_doc (the snapshot's chunk->doc "
        "mapping), or evaluate with eval.unit=chunk (or auto)"
    )


def test_unknown_judged_chunks_are_listed_five_at_most():
    fix = (
        "label the chunks the current chunker produces (or re-chunk with the chunker the labels were made for), so "
        "every judged chunk maps to its document"
    )
    seven = Qrels({"q": {f"X#{i}": 1 for i in range(7)} | {"D#1": 2}}, unit="chunk", name="dev")
    with pytest.raises(InputError) as e:
        judgements_at(seven, "doc", {"D#1": "D"})
    assert (e.value.where, e.value.fix) == ("qrels dev", fix)
    assert e.value.problem == (
        "7 judged chunk id(s) are not chunks of this snapshot: q:X#0, q:X#1, q:X#2, q:X#3, q:X#4 (and 2 more)"
    )
    six = Qrels({"q": {f"X#{i}": 1 for i in range(6)}}, unit="chunk")
    with pytest.raises(InputError) as e:
        judgements_at(six, "doc", {})
    assert e.value.problem.endswith("q:X#4 (and 1 more)")
    five = Qrels({"q": {f"X#{i}": 1 for i in range(5)}}, unit="chunk")
    with pytest.raises(InputError) as e:
        judgements_at(five, "doc", {})
    assert e.value.where == "qrels (unnamed)"
    assert e.value.problem == (
        "5 judged chunk id(s) are not chunks of this snapshot: q:X#0, q:X#1, q:X#2, q:X#3, q:X#4"
    )


def test_lifting_keeps_every_query_and_judged_non_relevant_documents():
    qrels = Qrels({"q1": {"D#1": 0, "D#2": 0, "E#1": 3}, "q2": {"E#1": 0}, "q3": {}}, unit="chunk")
    lifted = judgements_at(qrels, "doc", {"D#1": "D", "D#2": "D", "E#1": "E"})
    assert lifted == {"q1": {"D": 0, "E": 3}, "q2": {"E": 0}, "q3": {}}
    neg = Qrels({"q": {"D#1": -1, "D#2": -2}}, unit="chunk")
    assert judgements_at(neg, "doc", {"D#1": "D", "D#2": "D"}) == {"q": {"D": -1}}


def test_judgements_at_refuses_an_unknown_qrels_unit_instead_of_lifting_it():
    # only chunk qrels are lifted; qrels declared at any other unit are refused by the unit rule
    with pytest.raises(ConfigError) as e:
        judgements_at(Qrels({"q": {"D#1": 1}}, unit="passage"), "doc", {"D#1": "D"})
    assert (e.value.key, e.value.value) == ("qrels.unit", "passage")
