"""The rule that judges an answer by its short final answer, on hand-written answers: both candidates named, the wrong
one concluded, reasoning cut off before any answer, the gold only inside a quoted passage, correct short answers in
English and Chinese, refusals; the candidates a question offers; and the table and metrics that count answers without
a final answer apart."""

from __future__ import annotations

import math

import pytest

from ablate.data.corpus import load_corpus
from ablate.data.types import Query
from ablate.evaluation.answer_scores import AnswerCosts, Answered, answer_metrics, score_answers
from ablate.evaluation.generation import score_answer, score_parts
from conftest import TINY_DOCS, TINY_MANIFEST, TINY_QRELS, TINY_QUERIES, write_corpus

FILMS = "Which film came out earlier, This Night Is Still Ours or Huma Gun Anmogaldi?"
GOLD = "Huma Gun Anmogaldi"
BOTH = "This Night Is Still Ours came out earlier, in 2008, compared to Huma Gun Anmogaldi, which was released in 1942"
PASSAGES = ["Huma Gun Anmogaldi is a 1942 film.", "This Night Is Still Ours is a 2008 film."]


def score(answer: str, gold: str, question: str = "", **kw: object):
    """One answer against one gold answer, both passages gold evidence in the context."""
    extra = {"question": question, **kw} if question or kw else {}
    return score_answer(answer, [gold], [True, True], PASSAGES, **extra)


# -- comparison questions: the short answer must choose --------------------------------------------------------------


def test_an_answer_that_names_both_candidates_is_not_correct_with_or_without_an_answer_line():
    without = score(BOTH, GOLD, FILMS)
    assert without.correct == 0.0 and without.no_final and not without.refused
    with_line = score(f"Answer: {BOTH} [1][2]", GOLD, FILMS)
    assert with_line.correct == 0.0 and not with_line.no_final
    assert with_line.citations_support == 1.0  # what it cites is judged apart from what it concludes


def test_the_chosen_candidate_alone_is_correct_even_when_the_support_names_the_other():
    right = score(
        f"Answer: {GOLD} [1]\nIt was released in 1942, This Night Is Still Ours in 2008 [2].", GOLD, FILMS
    )
    assert (right.correct, right.em, right.no_final, right.final) == (1.0, 1.0, False, f"{GOLD} [1]")


def test_the_wrong_candidate_concluded_is_not_correct():
    wrong = score(
        "Huma Gun Anmogaldi was released in 1942 and This Night Is Still Ours in 2008.\n"
        "Answer: This Night Is Still Ours [2]",
        GOLD,
        FILMS,
    )
    assert wrong.correct == 0.0 and wrong.f1 == 0.0 and not wrong.no_final


def test_reasoning_cut_off_before_any_answer_has_no_final_answer():
    cut = score("To determine which film was released more recently, we need to compare", GOLD, FILMS)
    assert (cut.correct, cut.em, cut.f1, cut.no_final, cut.refused, cut.final) == (
        0.0,
        0.0,
        0.0,
        True,
        False,
        "",
    )


def test_the_gold_only_inside_a_quoted_passage_is_not_correct():
    quoted = score(
        'Passage [1] says: "Huma Gun Anmogaldi is a 1942 film."\nAnswer: This Night Is Still Ours', GOLD
    )
    assert quoted.correct == 0.0
    unanswered = score('Passage [1] says: "Huma Gun Anmogaldi is a 1942 film."', GOLD)
    assert unanswered.correct == 0.0 and unanswered.no_final


def test_chinese_candidates_follow_the_same_rule():
    question = "《我们的夜晚》和《胡马》哪部电影先上映？"
    assert score("答案：《胡马》先于《我们的夜晚》上映 [1]", "胡马", question).correct == 0.0
    assert score("答案：胡马 [1]", "胡马", question).correct == 1.0
    assert score("张三先出生。\n答案：李四", "张三", "张三还是李四先出生？").correct == 0.0
    assert score("答案：张三 [1]", "张三", "张三还是李四先出生？").correct == 1.0


def test_declared_candidates_count_and_an_extraction_that_misses_the_gold_changes_nothing():
    # no choice in the wording: the queries.jsonl list declares it
    plain = "Which of the two films came out first?"
    declared = ("This Night Is Still Ours", GOLD)
    assert score(f"Answer: {BOTH}", GOLD, plain).correct == 1.0  # nothing to choose from: containment
    assert score(f"Answer: {BOTH}", GOLD, plain, candidates=declared).correct == 0.0
    # " or " that offers no choice of answers: no candidate matches the gold, so the rule stays out of it
    odd = "Can I take a taxi or a train to the airport, and what is the cap?"
    assert score("Answer: 200 yuan, by taxi or by train [1]", "200 yuan", odd).correct == 1.0
    # a candidate that matches the gold by containment ("finance" in "Finance Director")
    who = "Who approves the excess, the department head or finance?"
    assert score("Answer: the Finance Director [1]", "Finance Director", who).correct == 1.0
    assert (
        score("Answer: the department head and the Finance Director", "Finance Director", who).correct == 0.0
    )


# -- short answers that are right ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer, gold",
    [
        (
            "Answer: 38.5 yuan [1]\nThe fare of 118.50 yuan is 38.50 yuan above the 80 yuan limit [1].",
            "38.50 yuan",
        ),
        ("**Answer:** 38.5 yuan [1]", "38.5 元"),
        ("Final answer: RMB 38.5", "38.5 yuan"),
        ("答案：38.5元", "38.5 元"),
        ("答案: 38.50 元", "38.5 yuan"),
        ("超出部分按规定计算。\n最终答案：38.5元 [1]", "38.5元"),
    ],
)
def test_a_correct_short_answer_in_english_and_chinese(answer, gold):
    s = score(answer, gold)
    assert (s.correct, s.no_final, s.refused) == (1.0, False, False)


def test_only_the_short_answer_is_scored_not_the_sentence_after_it():
    # the right number only in the support sentence: the short answer is wrong
    s = score("Answer: 18.5 yuan [1]\nThe fare is 38.5 yuan above the limit.", "38.5 yuan")
    assert s.correct == 0.0 and not s.no_final
    # the last marker wins: a draft answer corrected on a later line
    assert score("Answer: 18.5 yuan\nWait, 118.5 - 80 = 38.5.\nAnswer: 38.5 yuan", "38.5 yuan").correct == 1.0


# -- refusals stay refusals ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        "Answer: NO_ANSWER",
        "NO_ANSWER",
        "答案：NO_ANSWER",
        "答案：无法回答",
        "The passages do not say. NO_ANSWER",
    ],
)
def test_a_refusal_is_a_refusal_not_an_answer_without_a_final_line(answer):
    s = score(answer, "38.5 yuan")
    assert (s.refused, s.no_final, s.correct) == (True, False, 0.0)


def test_answer_parts_are_read_from_the_short_answer():
    parts = ["550 yuan", "120 yuan"]
    assert score_parts("Answer: 550 yuan and 120 yuan [1][2]", parts) == (1.0, 1.0)
    assert score_parts("The cap is 550 yuan and the allowance 120 yuan.", parts) == (
        0.0,
        0.0,
    )  # no final line
    assert score_parts("Answer: 550 yuan [1]\nThe allowance is 120 yuan [2].", parts) == (0.5, 0.0)


# -- the table and the run's metrics ---------------------------------------------------------------------------------


def test_answers_without_a_final_line_are_counted_apart_in_the_table_and_the_metrics():
    queries = {
        "q1": Query("q1", FILMS, answers=(GOLD,)),
        "q2": Query("q2", FILMS, answers=(GOLD,)),
        "q3": Query("q3", "What is the fare above the limit?", answers=("38.5 yuan",)),
        "q4": Query("q4", "What is the fare above the limit?", answers=("38.5 yuan",)),
        "q5": Query(
            "q5",
            "Which of the two came first?",
            answers=(GOLD,),
            candidates=("This Night Is Still Ours", GOLD),
        ),
    }
    texts = {
        "q1": f"Answer: {GOLD} [1]",
        "q2": "To determine which film was released more recently, we need to compare",
        "q3": "Answer: NO_ANSWER",
        "q4": "The fare is 118.5 yuan, so it is 38.5 yuan above",
        "q5": f"Answer: {BOTH}",
    }
    answered = {q: Answered(context=("c1",), texts=(t,)) for q, t in texts.items()}
    table = score_answers(
        answered,
        list(texts),
        queries,
        {q: {"c1": 1} for q in texts},
        None,
        {"c1": PASSAGES[0]},
        1,
        dict.fromkeys(texts, "answerable"),
    )
    assert table["no_final"].tolist() == [False, True, False, True, False]
    assert table["correct"].tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert table["refused"].tolist() == [False, False, True, False, False]
    assert table.loc["q1", "final_answer"] == f"{GOLD} [1]" and table.loc["q2", "final_answer"] == ""
    m = answer_metrics(table, AnswerCosts(), bootstrap=0, seed=0)
    assert (m["answer_no_final"], m["answer_no_final_rate"], m["answer_correct"]) == (2.0, 0.4, 0.2)
    assert m["answer_false_refusal_rate"] == 0.2
    assert all(math.isfinite(v) for k, v in m.items() if k.startswith("answer_no_final"))


def test_a_questions_candidates_are_read_from_queries_jsonl(tmp_path):
    queries = [{**TINY_QUERIES[0], "candidates": ["INV-102", "INV-103"]}, *TINY_QUERIES[1:]]
    snap = load_corpus(write_corpus(tmp_path / "c", TINY_DOCS, queries, TINY_QRELS, TINY_MANIFEST))
    assert snap.queries["q1"].candidates == ("INV-102", "INV-103") and snap.queries["q2"].candidates == ()


def test_one_part_of_a_multi_part_question_is_not_correct():
    """The demo's q061 asks for the hotel cap AND the meal allowance: its gold answers are the two parts, and an
    answer that gives only one of them answers half of it (a person grades it 'partly', not 'correct')."""
    parts = (("550 yuan",), ("120 yuan",))
    half = score_answer("Answer: 550 yuan [1]", ["550 yuan", "120 yuan"], [True], PASSAGES[:1], parts=parts)
    whole = score_answer(
        "Answer: 550 yuan per night, 120 yuan a day [1]",
        ["550 yuan", "120 yuan"],
        [True],
        PASSAGES[:1],
        parts=parts,
    )
    assert half.correct == 0.0 and whole.correct == 1.0
    alone = score_answer("Answer: 550 yuan [1]", ["550 yuan", "120 yuan"], [True], PASSAGES[:1])
    assert alone.correct == 1.0  # without parts, gold answers are alternatives


@pytest.mark.parametrize(
    ("answer", "gold"),
    [
        ("Answer: 80 [USD] [2][3]", "USD 80"),
        ("Answer: 3 [days] [n] [1]", "3 days"),
        ("Answer: Deputy [n]", "deputy"),
    ],
)
def test_a_word_in_brackets_is_a_word_and_the_placeholder_is_dropped(answer, gold):
    s = score(answer, gold)
    assert s.correct == 1.0 and s.f1 == 1.0  # "80 USD", "3 days", "deputy": the short answer is the gold


@pytest.mark.parametrize(
    ("answer", "gold", "ok"),
    [
        ("答案：600 [1]", "600 元", True),  # the unit is the question's, not contradicted
        ("Answer: 600 dollars [1]", "600 yuan", False),  # another unit
        ("Answer: 5 days [3]", "3 days", False),  # a citation is not a number of the answer
        ("Answer: 5 [3]", "3", False),
    ],
)
def test_a_bare_number_matches_and_a_citation_is_not_a_number(answer, gold, ok):
    assert score(answer, gold).correct == float(ok)
