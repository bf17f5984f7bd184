"""Evaluation semantics: the seed articles' worked examples, edge cases, accounting and settings.

Seeds: /work/shared/seeds/000_213f499ee80fcb1c.txt (Recall vs Hit, MRR, nDCG worked examples) and
003_cb31c840ac03efcc.txt (chunks mapped to source documents, budgets, shrinking labels, unjudged E).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from ablate.data.types import Hit, Qrels, Run
from ablate.errors import ConfigError, InputError
from ablate.evaluation import EvalSettings, evaluate


def docs(*ids: str, start: float = 100.0) -> list[Hit]:
    """Whole-document hits (chunker none: chunk id == doc id), scores strictly decreasing."""
    return [Hit(d, d, start - i) for i, d in enumerate(ids)]


def chunks(*ids: str) -> list[Hit]:
    """Chunk hits ``DOC#n``; the document is the explicit doc_id, never parsed from the id by evaluation."""
    return [Hit(c, c.split("#")[0], 100.0 - i) for i, c in enumerate(ids)]


def ev(results, judgements, qids=None, unit="doc", chunk_to_doc=None, **settings):
    run = Run("test", results)
    qrels = Qrels(judgements, unit=unit)
    return evaluate(
        run,
        qrels,
        list(qids if qids is not None else results),
        EvalSettings(**settings),
        chunk_to_doc=chunk_to_doc,
    )


# ----------------------------------------------------------------------------------------------------------------
# Seed 000: q1-q3 (Recall@3 vs Hit@3, MRR@3) and q1's nDCG@3


SEED000_RUN = {"q1": docs("A", "X", "B"), "q2": docs("Y", "Z", "D"), "q3": docs("U", "V", "W")}
SEED000_QRELS = {"q1": {"A": 2, "B": 1, "C": 2, "X": 0}, "q2": {"D": 1}, "q3": {"E": 1, "F": 1}}


def test_seed000_recall_hit_mrr_at_3():
    r = ev(SEED000_RUN, SEED000_QRELS, ks=(3,))
    pq = r.per_query
    assert pq.loc["q1", "recall@3"] == pytest.approx(2 / 3)
    assert pq.loc["q2", "recall@3"] == 1.0
    assert pq.loc["q3", "recall@3"] == 0.0
    assert list(pq["hit@3"]) == [1.0, 1.0, 0.0]
    assert list(pq["rr@3"]) == pytest.approx([1.0, 1 / 3, 0.0])
    assert r.means["recall@3"] == pytest.approx(0.5556, abs=1e-4)
    assert r.means["hit@3"] == pytest.approx(0.6667, abs=1e-4)
    assert r.means["mrr@3"] == pytest.approx(0.4444, abs=1e-4)
    # exact values, unrounded
    assert r.means["recall@3"] == pytest.approx((2 / 3 + 1 + 0) / 3, abs=1e-15)


def test_seed000_ndcg_q1():
    r = ev(SEED000_RUN, SEED000_QRELS, ks=(3,))
    dcg = 3 / 1 + 0 + 1 / 2  # A=2, X=0, B=1
    idcg = 3 / 1 + 3 / math.log2(3) + 1 / 2  # A, C, B
    assert r.per_query.loc["q1", "ndcg@3"] == pytest.approx(dcg / idcg, abs=1e-12)
    assert r.per_query.loc["q1", "ndcg@3"] == pytest.approx(0.65, abs=0.005)
    # linear gain (trec_eval): A=2, B=1 -> DCG = 2 + 1/2; IDCG = 2 + 2/log2(3) + 1/2
    lin = ev(SEED000_RUN, SEED000_QRELS, ks=(3,), gain="linear")
    assert lin.per_query.loc["q1", "ndcg@3"] == pytest.approx(2.5 / (2 + 2 / math.log2(3) + 0.5), abs=1e-12)


def test_hit_equals_recall_with_one_relevant():
    r = ev(SEED000_RUN, SEED000_QRELS, ks=(1, 3))
    assert r.per_query.loc["q2", "hit@3"] == r.per_query.loc["q2", "recall@3"] == 1.0
    assert r.per_query.loc["q2", "hit@1"] == r.per_query.loc["q2", "recall@1"] == 0.0


# ----------------------------------------------------------------------------------------------------------------
# Seed 003: chunks mapped to source documents, budgets, shrinking labels, unjudged E

ABC = {"q": {"A": 1, "B": 1, "C": 1}}


@pytest.mark.parametrize(
    ("ranking", "recall"),
    [(("A#1", "A#2", "A#3"), 1 / 3), (("A#1", "B#1", "E#1"), 2 / 3), (("A#1", "B#1", "C#1"), 1.0)],
)
def test_seed003_three_runs_mapped_to_documents(ranking, recall):
    r = ev({"q": chunks(*ranking)}, ABC, ks=(3,))
    pq = r.per_query.loc["q"]
    assert r.unit == "doc"
    assert pq["hit@3"] == 1.0
    assert pq["rr@3"] == 1.0
    assert pq["recall@3"] == pytest.approx(recall)


def test_seed003_chunk_budget_vs_dedup_then_three_documents():
    run = {"q": chunks("A#1", "A#2", "A#3", "B#1", "C#1")}
    by_chunks = ev(run, ABC, ks=(3,), budget="chunks").per_query.loc["q"]
    by_docs = ev(run, ABC, ks=(3,), budget="docs").per_query.loc["q"]
    assert by_chunks["recall@3"] == pytest.approx(1 / 3)  # first 3 chunks cover only A
    assert by_chunks["complete@3"] == 0.0
    assert by_docs["recall@3"] == 1.0  # dedup the ranking, then 3 documents: A, B, C
    assert by_docs["complete@3"] == 1.0
    assert by_chunks["n_results"] == 5 and by_chunks["n_units"] == 3


def test_seed003_shrunk_labels_make_aaa_complete():
    run = {"q": chunks("A#1", "A#2", "A#3")}
    full = ev(run, ABC, ks=(3,)).per_query.loc["q"]
    shrunk = ev(run, {"q": {"A": 1}}, ks=(3,)).per_query.loc["q"]
    assert full["complete@3"] == 0.0 and full["recall@3"] == pytest.approx(1 / 3)
    assert shrunk["complete@3"] == 1.0 and shrunk["recall@3"] == 1.0


def test_seed003_unjudged_e_is_reported_as_unknown():
    r = ev({"q": chunks("A#1", "B#1", "E#1")}, ABC, ks=(3,))
    pq = r.per_query.loc["q"]
    assert pq["unjudged@3"] == 1
    assert pq["judged@3"] == pytest.approx(2 / 3)
    assert pq["recall@3"] == pytest.approx(
        2 / 3
    )  # E scored as non-relevant (nonrelevant rule), still unknown
    u = r.unjudged
    assert list(u.columns) == ["qid", "unit_id", "rank", "chunk_id", "doc_id"]
    assert u.to_dict("records") == [{"qid": "q", "unit_id": "E", "rank": 3, "chunk_id": "E#1", "doc_id": "E"}]


def test_judged_for_another_query_is_still_unjudged():
    r = ev({"q": docs("A", "E")}, {"q": {"A": 1}, "other": {"E": 0}}, qids=["q"], ks=(2,))
    assert r.per_query.loc["q", "unjudged@2"] == 1
    assert r.unjudged["unit_id"].tolist() == ["E"]
    assert r.accounting["qrels_not_in_query_set"] == 1


# ----------------------------------------------------------------------------------------------------------------
# Edge cases


def test_first_result_irrelevant():
    r = ev({"q": docs("X", "A")}, {"q": {"A": 1, "X": 0}}, ks=(1, 2), gain="linear")
    pq = r.per_query.loc["q"]
    assert pq["hit@1"] == 0 and pq["rr@1"] == 0 and pq["ndcg@1"] == 0
    assert pq["hit@2"] == 1 and pq["rr@2"] == 0.5
    assert pq["ndcg@2"] == pytest.approx((1 / math.log2(3)) / 1.0)


def test_empty_result_is_scored_zero_and_counted():
    r = ev({"q": [], "p": docs("A")}, {"q": {"A": 1}, "p": {"A": 1}}, ks=(1, 3))
    pq = r.per_query.loc["q"]
    assert pq["status"] == "empty_result" and pq["category"] == "answerable"
    for m in ("hit", "recall", "rr", "ndcg", "complete"):
        assert pq[f"{m}@3"] == 0.0
    assert pq["judged@3"] == 1.0 and pq["unjudged@3"] == 0  # nothing unknown
    assert r.accounting["empty_result"] == 1
    assert r.accounting["scored"] == 2
    assert r.means["hit@1"] == 0.5


def test_fewer_than_k_padded_as_nonrelevant():
    r = ev({"q": docs("A", "X")}, {"q": {"A": 2, "B": 1, "X": 0}}, ks=(2, 5))
    pq = r.per_query.loc["q"]
    assert pq["status"] == "fewer_than_k"
    assert r.accounting["fewer_than_k"] == 1
    idcg5 = 3 + 1 / math.log2(3)
    assert pq["ndcg@5"] == pytest.approx(3 / idcg5)
    assert pq["recall@5"] == 0.5
    assert pq["judged@5"] == 1.0  # the window holds 2 results, both judged


def test_k_larger_than_ranking_equals_full_list():
    r = ev({"q": docs("X", "A", "B")}, {"q": {"A": 1, "B": 2, "C": 1, "D": 1}}, ks=(3, 100), gain="linear")
    pq = r.per_query.loc["q"]
    for m in ("hit", "recall", "rr", "complete", "judged", "unjudged"):
        assert pq[f"{m}@3"] == pq[f"{m}@100"]
    dcg = 1 / math.log2(3) + 2 / 2
    assert pq["ndcg@3"] == pytest.approx(dcg / (2 + 1 / math.log2(3) + 1 / 2))
    # IDCG@100 uses every relevant unit (D too), so nDCG@100 < nDCG@3 although nothing new was retrieved
    assert pq["ndcg@100"] == pytest.approx(dcg / (2 + 1 / math.log2(3) + 1 / 2 + 1 / math.log2(5)))
    assert pq["status"] == "fewer_than_k"


def test_all_results_unjudged():
    r = ev({"q": docs("U", "V", "W")}, {"q": {"A": 1}}, ks=(3,))
    pq = r.per_query.loc["q"]
    assert pq["unjudged@3"] == 3 and pq["judged@3"] == 0.0
    assert pq["hit@3"] == 0 and pq["ndcg@3"] == 0
    assert len(r.unjudged) == 3 and r.unjudged["rank"].tolist() == [1, 2, 3]


def test_only_grade_zero_labels_is_idcg_zero_not_averaged():
    r = ev({"q": docs("A"), "p": docs("B")}, {"q": {"A": 0, "C": 0}, "p": {"B": 1}}, ks=(1,))
    pq = r.per_query
    assert pq.loc["q", "category"] == "idcg_zero"
    assert all(np.isnan(pq.loc["q", f"{m}@1"]) for m in ("hit", "recall", "rr", "ndcg", "complete"))
    assert pq.loc["q", "judged@1"] == 1.0  # judged statistics still reported
    assert r.accounting["idcg_zero"] == 1 and r.accounting["answerable"] == 1
    assert r.means["ndcg@1"] == 1.0  # only p


def test_no_labels_at_all_is_no_answer():
    r = ev({"q": docs("A"), "p": docs("B")}, {"p": {"B": 1}}, qids=["q", "p"], ks=(1,))
    assert r.per_query.loc["q", "category"] == "no_answer"
    assert np.isnan(r.per_query.loc["q", "recall@1"])
    assert r.per_query.loc["q", "unjudged@1"] == 1
    assert r.accounting["no_answer"] == 1
    assert r.means["recall@1"] == 1.0
    assert "q" in set(r.unjudged["qid"])  # its results can be labelled too


def test_relevance_level_below_threshold_is_idcg_zero():
    r = ev({"q": docs("A")}, {"q": {"A": 1}}, ks=(1,), relevance_level=2)
    assert r.per_query.loc["q", "category"] == "idcg_zero"
    r2 = ev({"q": docs("B", "A")}, {"q": {"A": 2, "B": 1}}, ks=(1, 2), relevance_level=2)
    pq = r2.per_query.loc["q"]
    assert pq["hit@1"] == 0 and pq["rr@2"] == 0.5 and pq["ndcg@1"] == 0  # grade 1 gives no gain at level 2


def test_duplicate_results_of_one_document_count_once():
    run = {"q": chunks("A#1", "A#2", "B#1", "C#1")}
    r = ev(run, {"q": {"A": 1, "B": 1}}, ks=(2, 3), gain="linear", budget="chunks")
    pq = r.per_query.loc["q"]
    assert pq["recall@2"] == 0.5  # A only: its second chunk does not count again
    assert pq["recall@3"] == 1.0  # B's first chunk is the 3rd result
    # B is the 2nd deduplicated unit: DCG@3 = 1 + 1/log2(3) = IDCG
    assert pq["ndcg@3"] == pytest.approx(1.0)
    docs_budget = ev(run, {"q": {"A": 1, "B": 1}}, ks=(2,), budget="docs").per_query.loc["q"]
    assert docs_budget["recall@2"] == 1.0
    # duplicate chunk ids at unit chunk dedup too
    same = ev(
        {"q": [Hit("A#1", "A", 2.0), Hit("A#1", "A", 1.0), Hit("B#1", "B", 0.5)]},
        {"q": {"A#1": 1, "B#1": 1}},
        unit="chunk",
        ks=(2,),
    )
    assert same.per_query.loc["q", "recall@2"] == 0.5
    assert same.per_query.loc["q", "n_units"] == 2


def test_missing_from_run_zero_vs_exclude():
    judgements = {"q": {"A": 1}, "p": {"A": 1}, "n": {}}
    zero = ev({"q": docs("A")}, judgements, qids=["q", "p", "n"], ks=(1,))
    assert zero.per_query.loc["p", "status"] == "missing_from_run"
    assert zero.per_query.loc["p", "hit@1"] == 0.0
    assert zero.means["hit@1"] == 0.5
    assert zero.accounting["missing_from_run"] == 2  # p and n, whatever their category
    assert zero.accounting["by_category"]["answerable"]["missing_from_run"] == 1
    excl = ev({"q": docs("A")}, judgements, qids=["q", "p", "n"], ks=(1,), missing="exclude")
    assert np.isnan(excl.per_query.loc["p", "hit@1"])
    assert excl.means["hit@1"] == 1.0
    assert excl.accounting["missing_from_run"] == 2 and excl.accounting["scored"] == 1
    assert excl.accounting["excluded_missing"] == 1


def test_not_in_query_set_ignored_and_counted():
    r = ev({"q": docs("A"), "extra": docs("A")}, {"q": {"A": 1}, "extra": {"A": 1}}, qids=["q"], ks=(1,))
    assert list(r.per_query.index) == ["q"]
    assert r.accounting["not_in_query_set"] == 1


def test_condensed_vs_nonrelevant():
    # U and V are unjudged; condensed removes them, so B moves from rank 4 to rank 2.
    run = {"q": docs("A", "U", "V", "B", "X")}
    j = {"q": {"A": 1, "B": 1, "X": 0}}
    nonrel = ev(run, j, ks=(2, 5), gain="linear").per_query.loc["q"]
    cond = ev(run, j, ks=(2, 5), gain="linear", unjudged="condensed").per_query.loc["q"]
    idcg = 1 + 1 / math.log2(3)
    assert nonrel["recall@2"] == 0.5 and cond["recall@2"] == 1.0
    assert nonrel["ndcg@5"] == pytest.approx((1 + 1 / math.log2(5)) / idcg)
    assert cond["ndcg@5"] == pytest.approx(1.0)
    # unjudged statistics are measured on the full ranking either way
    assert nonrel["unjudged@5"] == cond["unjudged@5"] == 2
    assert nonrel["judged@2"] == cond["judged@2"] == 0.5
    rx = ev({"q": docs("U", "X", "A")}, {"q": {"A": 1, "X": 0}}, ks=(1,), unjudged="condensed").per_query.loc[
        "q"
    ]
    assert rx["rr@1"] == 0.0  # condensed list is X, A: the judged non-relevant X stays


def test_condensed_with_chunks_budget_counts_condensed_chunks():
    run = {"q": chunks("U#1", "A#1", "A#2", "B#1")}
    r = ev(run, {"q": {"A": 1, "B": 1}}, ks=(2,), unjudged="condensed", budget="chunks").per_query.loc["q"]
    assert r["recall@2"] == 0.5  # condensed chunks A#1, A#2, B#1: the first two are A only
    r2 = ev(run, {"q": {"A": 1, "B": 1}}, ks=(2,), unjudged="condensed", budget="docs").per_query.loc["q"]
    assert r2["recall@2"] == 1.0


# ----------------------------------------------------------------------------------------------------------------
# Units: chunk qrels lifted to documents, doc qrels refused at chunk unit


def test_chunk_qrels_lifted_to_documents_with_mapping():
    qrels = {"q": {"P#a": 1, "P#b": 2, "Q#a": 0}}
    c2d = {"P#a": "P", "P#b": "P", "Q#a": "Q", "R#a": "R"}
    run = {"q": [Hit("Q#a", "Q", 3.0), Hit("P#a", "P", 2.0), Hit("R#a", "R", 1.0)]}
    r = ev(run, qrels, unit="chunk", chunk_to_doc=c2d, ks=(2, 3))
    assert r.unit == "chunk"
    lifted = evaluate(
        Run("t", run),
        Qrels(qrels, unit="chunk"),
        ["q"],
        EvalSettings(ks=(2, 3), unit="doc"),
        chunk_to_doc=c2d,
    )
    pq = lifted.per_query.loc["q"]
    assert lifted.unit == "doc"
    assert pq["n_relevant"] == 1  # P (max of its chunks = 2); Q judged 0
    assert pq["rr@2"] == 0.5
    assert pq["ndcg@2"] == pytest.approx((3 / math.log2(3)) / 3)  # P's lifted grade 2
    assert pq["unjudged@3"] == 1  # R
    assert "lifted" in lifted.accounting["rules"]["lift"]


def test_chunk_qrels_at_doc_unit_without_mapping_is_a_config_error():
    with pytest.raises(ConfigError, match="chunk_to_doc"):
        evaluate(
            Run("t", {"q": chunks("P#a")}),
            Qrels({"q": {"P#a": 1}}, unit="chunk"),
            ["q"],
            EvalSettings(unit="doc"),
        )


def test_judged_chunk_unknown_to_mapping_is_an_input_error():
    with pytest.raises(InputError, match="P#zz"):
        evaluate(
            Run("t", {"q": chunks("P#a")}),
            Qrels({"q": {"P#zz": 1}}, unit="chunk"),
            ["q"],
            EvalSettings(unit="doc"),
            chunk_to_doc={"P#a": "P"},
        )


def test_doc_qrels_at_chunk_unit_is_refused_naming_both_units():
    with pytest.raises(ConfigError) as e:
        evaluate(
            Run("t", {"q": chunks("P#a")}),
            Qrels({"q": {"P": 1}}, unit="doc"),
            ["q"],
            EvalSettings(unit="chunk"),
        )
    msg = str(e.value)
    assert "'doc'" in msg and "chunk" in msg and "Fix" in msg


def test_unit_auto_follows_qrels():
    run = {"q": chunks("P#a", "P#b")}
    r = ev(run, {"q": {"P#b": 1}}, unit="chunk", ks=(1, 2))
    assert r.unit == "chunk"
    assert r.per_query.loc["q", "rr@2"] == 0.5  # chunk unit: P#a and P#b are different units


# ----------------------------------------------------------------------------------------------------------------
# Result object, accounting, settings


def test_result_columns_means_keys_and_json():
    r = ev(SEED000_RUN, SEED000_QRELS, ks=(1, 3))
    cols = set(r.per_query.columns)
    assert {"category", "status", "n_relevant", "n_results", "n_units"} <= cols
    for m in ("hit", "recall", "rr", "ndcg", "judged", "complete", "unjudged"):
        assert {f"{m}@1", f"{m}@3"} <= cols
    assert set(r.means) == {
        f"{m}@{k}" for m in ("hit", "recall", "mrr", "ndcg", "judged", "complete", "unjudged") for k in (1, 3)
    }
    d = json.loads(r.to_json(per_query=True))
    assert d["ndcg@3"] == r.means["ndcg@3"]
    assert d["accounting"]["total"] == 3 and d["tie_rule"] == r.tie_rule and d["unit"] == "doc"
    assert len(d["per_query"]) == 3
    assert set(r.accounting["rules"]) >= {
        "budget",
        "unjudged",
        "no_answer",
        "idcg_zero",
        "missing_from_run",
        "fewer_than_k",
        "empty_result",
        "judged",
        "ranking",
    }


def test_json_has_no_nan():
    r = ev({"q": docs("A")}, {}, qids=["q"], ks=(1,))
    assert math.isnan(r.means["ndcg@1"])  # no answerable query: undefined, not 0
    d = json.loads(r.to_json(per_query=True))
    assert d["ndcg@1"] is None


def test_tie_rule_comes_from_the_run():
    r = evaluate(Run("t", {"q": docs("A")}, {"tie_rule": "custom rule"}), Qrels({"q": {"A": 1}}), ["q"])
    assert r.tie_rule == "custom rule"
    assert "custom rule" in r.accounting["rules"]["ranking"]
    r2 = evaluate(Run("t", {"q": docs("A")}), Qrels({"q": {"A": 1}}), ["q"])
    assert r2.tie_rule == "score desc, then id asc"


def test_evaluate_does_not_resort_or_mutate():
    hits = [Hit("B", "B", 1.0), Hit("A", "A", 2.0)]  # list order is the ranking, scores ignored
    run = Run("t", {"q": hits})
    qrels = Qrels({"q": {"A": 1}})
    before = (list(hits), {q: dict(j) for q, j in qrels.judgements.items()})
    r = evaluate(run, qrels, ["q"], EvalSettings(ks=(1, 2)))
    assert r.per_query.loc["q", "rr@2"] == 0.5
    assert (run.results["q"], qrels.judgements) == before


def test_per_query_rows_follow_declared_order():
    r = ev({"b": docs("A"), "a": docs("A")}, {"a": {"A": 1}, "b": {"A": 1}}, qids=["b", "a", "c"], ks=(1,))
    assert list(r.per_query.index) == ["b", "a", "c"]
    assert r.accounting["total"] == 3


def test_duplicate_qids_rejected():
    with pytest.raises(InputError, match="more than once"):
        ev({"q": docs("A")}, {"q": {"A": 1}}, qids=["q", "q"])


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"ks": ()}, "eval.ks"),
        ({"ks": (0, 3)}, "eval.ks"),
        ({"ks": (1.5,)}, "eval.ks"),
        ({"unit": "page"}, "eval.unit"),
        ({"budget": "tokens"}, "eval.budget"),
        ({"gain": "log"}, "eval.gain"),
        ({"unjudged": "skip"}, "eval.unjudged"),
        ({"missing": "drop"}, "eval.missing"),
        ({"relevance_level": 0}, "eval.relevance_level"),
    ],
)
def test_invalid_settings_raise_config_error(kwargs, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        EvalSettings(**kwargs)


def test_ks_are_sorted_and_deduplicated():
    assert EvalSettings(ks=[10, 1, 10, 3]).ks == (1, 3, 10)
    assert EvalSettings(ks=5).ks == (5,)


def test_unjudged_export_under_docs_budget_reads_deeper():
    run = {"q": chunks("A#1", "A#2", "A#3", "E#1", "F#1")}
    r = ev(run, {"q": {"A": 1}}, ks=(2,), budget="docs")
    assert r.unjudged[["unit_id", "rank", "chunk_id"]].to_dict("records") == [
        {"unit_id": "E", "rank": 2, "chunk_id": "E#1"}
    ]
    rc = ev(run, {"q": {"A": 1}}, ks=(2,), budget="chunks")
    assert rc.unjudged.empty
    assert isinstance(rc.unjudged, pd.DataFrame)


def test_budgets_coincide_at_chunk_unit_without_duplicate_ids():
    import random

    rng = random.Random(3)
    run, judgements = {}, {}
    for i in range(50):
        ids = rng.sample([f"D{d}#{c}" for d in range(10) for c in range(3)], rng.randint(0, 25))
        run[f"q{i}"] = [Hit(c, c.split("#")[0], 100.0 - j) for j, c in enumerate(ids)]
        judgements[f"q{i}"] = {
            f"D{rng.randint(0, 9)}#{rng.randint(0, 2)}": rng.randint(0, 3) for _ in range(6)
        }
    a = ev(run, judgements, unit="chunk", ks=(1, 5, 10), budget="chunks").per_query
    b = ev(run, judgements, unit="chunk", ks=(1, 5, 10), budget="docs").per_query
    pd.testing.assert_frame_equal(a, b)
