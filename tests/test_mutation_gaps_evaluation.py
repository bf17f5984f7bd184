"""Gaps found by mutation testing of ``ablate.evaluation`` (``units.py`` and the scoring core in ``core.py``).

Every expected value is hand-computed from the declared rules (``ablate.evaluation.core.RULES``) or taken from an
independent evaluator (pytrec_eval for linear-gain nDCG and recall).
"""

from __future__ import annotations

import math

import pytest
import pytrec_eval

from ablate.data.types import Hit, Qrels, Run
from ablate.evaluation import EvalSettings, evaluate

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
