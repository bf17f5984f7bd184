"""Slices (means per question-type tag) and no-answer questions scored apart (refusals, threshold choice)."""

from __future__ import annotations

import math

import pytest

from ablate.data.types import Hit, Qrels, Query, Run
from ablate.errors import ConfigError, InputError
from ablate.evaluation import (
    EvalSettings,
    choose_threshold,
    evaluate,
    score_abstention,
    slice_means,
    top_scores,
)
from ablate.evaluation.abstention import abstention_report


def hits(*pairs):
    return [Hit(d, d, s) for d, s in pairs]


RUN = Run(
    "r",
    {
        "a1": hits(("A", 0.9), ("X", 0.5)),  # answerable, hit at 1
        "a2": hits(("X", 0.4), ("B", 0.3)),  # answerable, hit at 2
        "a3": [],  # answerable, empty result
        "n1": hits(("X", 0.8)),  # no labels at all
        "n2": hits(("Y", 0.2)),  # no labels at all
        "z1": hits(("C", 0.6)),  # labels, all grade 0
    },
)
QRELS = Qrels({"a1": {"A": 1}, "a2": {"B": 1}, "a3": {"C": 1}, "z1": {"C": 0}})
QIDS = ["a1", "a2", "a3", "n1", "n2", "z1", "m1"]  # m1: no labels and missing from the run
QUERIES = {
    "a1": Query("a1", "t", tags=("exact-id",)),
    "a2": Query("a2", "t", tags=("paraphrase", "multi-hop")),
    "a3": Query("a3", "t", tags=("paraphrase",)),
    "n1": Query("n1", "t", tags=("no-answer",)),
    "n2": Query("n2", "t", tags=("no-answer",)),
    "z1": Query("z1", "t"),
    "m1": Query("m1", "t", tags=("no-answer",)),
}


@pytest.fixture(scope="module")
def result():
    return evaluate(RUN, QRELS, QIDS, EvalSettings(ks=(1, 2)))


def test_slices_by_tag_with_overlap_and_counts(result):
    s = slice_means(result, QUERIES)
    assert list(s) == ["exact-id", "multi-hop", "no-answer", "paraphrase", "(untagged)"]
    assert s["exact-id"]["hit@1"] == 1.0 and s["exact-id"]["n"] == 1
    assert s["multi-hop"]["mrr@2"] == 0.5  # a2 is in multi-hop and paraphrase
    assert s["paraphrase"]["n"] == 2 and s["paraphrase"]["n_scored"] == 2
    assert s["paraphrase"]["mrr@2"] == pytest.approx((0.5 + 0.0) / 2)  # a3 (empty result) is scored 0
    assert s["no-answer"]["n"] == 3 and s["no-answer"]["n_answerable"] == 0
    assert s["no-answer"]["n_no_answer"] == 3 and s["no-answer"]["n_missing_from_run"] == 1
    assert math.isnan(s["no-answer"]["ndcg@2"])  # not averaged: scored apart
    assert s["(untagged)"]["n_idcg_zero"] == 1
    # slice means follow the same rule as result.means
    overall = [q for q in QIDS if result.per_query.loc[q, "category"] == "answerable"]
    assert len(overall) == 3 and result.means["hit@2"] == pytest.approx(2 / 3)


def test_abstention_without_threshold_refuses_only_empty(result):
    cats = result.per_query["category"].to_dict()
    rep = score_abstention(top_scores(RUN, QIDS), cats, threshold=None)
    # no-answer group: n1, n2, z1 (idcg_zero), m1 (missing -> no result -> refused)
    assert rep.n_no_answer == 4 and rep.correct_refusals == 1 and rep.wrong_answer_count == 3
    assert rep.correct_refusal_rate == 0.25
    # answerable: a3 returned nothing -> a (false) refusal
    assert rep.n_answerable == 3 and rep.false_refusals == 1
    assert rep.false_refusal_rate == pytest.approx(1 / 3)
    assert rep.threshold is None and "threshold None" in rep.rule


def test_abstention_with_threshold(result):
    rep = abstention_report(result, RUN, threshold=0.5)
    # refused: n2 (0.2), m1 (missing), a2 (0.4), a3 (empty); answered: a1 0.9, n1 0.8, z1 0.6
    assert rep.correct_refusals == 2 and rep.wrong_answer_count == 2
    assert rep.false_refusals == 2 and rep.false_refusal_rate == pytest.approx(2 / 3)
    assert rep.balanced_accuracy == pytest.approx((0.5 + 1 / 3) / 2)
    assert rep.as_dict()["threshold"] == 0.5


def test_choose_threshold_maximises_balanced_accuracy():
    top = {"a1": 0.9, "a2": 0.7, "a3": 0.35, "n1": 0.3, "n2": 0.5, "n3": None}
    cats = {
        "a1": "answerable",
        "a2": "answerable",
        "a3": "answerable",
        "n1": "no_answer",
        "n2": "no_answer",
        "n3": "idcg_zero",
    }
    choice = choose_threshold(top, cats)
    # t = 0.7 refuses n1, n2, n3 and a3: (3/3 + 2/3) / 2 = 0.833; t = 0.35 refuses n1, n3 only: (2/3 + 1) / 2 = 0.833;
    # the tie goes to the smaller threshold
    assert choice.threshold == 0.35
    assert choice.value == pytest.approx(5 / 6)
    assert choice.report.correct_refusals == 2 and choice.report.false_refusals == 0
    # applying the chosen threshold reproduces the objective
    assert score_abstention(top, cats, choice.threshold).balanced_accuracy == pytest.approx(choice.value)
    # brute force over every candidate agrees
    best = max(
        score_abstention(top, cats, t).balanced_accuracy for t in [None, 0.3, 0.35, 0.5, 0.7, 0.9, 0.91]
    )
    assert choice.value == pytest.approx(best)


def test_choose_threshold_none_when_refusing_nothing_is_best():
    top = {"a": 0.1, "n": 0.9}
    cats = {"a": "answerable", "n": "no_answer"}
    choice = choose_threshold(top, cats)
    # refusing n needs t > 0.9, which also refuses a: BA 0.5 either way -> smallest = refuse nothing
    assert choice.threshold is None and choice.value == 0.5


def test_choose_threshold_needs_both_kinds():
    with pytest.raises(InputError, match="both"):
        choose_threshold({"a": 1.0}, {"a": "answerable"})
    with pytest.raises(ConfigError, match="objective"):
        choose_threshold({"a": 1.0, "n": 0.0}, {"a": "answerable", "n": "no_answer"}, objective="f1")


def test_abstention_rates_over_zero_queries_are_nan():
    rep = score_abstention({"a": 1.0}, {"a": "answerable"}, None)
    assert math.isnan(rep.correct_refusal_rate) and rep.as_dict()["correct_refusal_rate"] is None
    with pytest.raises(InputError):
        score_abstention({}, {"a": "answerable"}, None)
