"""Scoring generated answers: normalisation (English and Chinese), numbers with units, full-width digits, citations,
refusals, and the retrieval-vs-generation diagnosis on hand-made cases."""

import pytest

from ablate.evaluation.generation import (
    citations,
    diagnosis,
    is_refusal,
    normalize_answer,
    numbers_match,
    quantities,
    score_answer,
    token_f1,
)


def test_normalisation_english_and_chinese():
    assert normalize_answer("The limit is 80 Yuan [1].") == "limit is 80 yuan"
    assert (
        normalize_answer("  Pudong Swift Travel Services Co., Ltd.  ")
        == "pudong swift travel services co ltd"
    )
    assert (
        normalize_answer("上海市内交通：每次８０元。") == "上海市内交通 每次80元"
    )  # full-width colon, digits, stop
    assert normalize_answer("1,500 yuan") == normalize_answer("1500 yuan")
    assert normalize_answer("v2.1") == "v2.1"  # a dot inside a number stays


@pytest.mark.parametrize(
    "answer, gold, ok",
    [
        ("It is 38.50 yuan over the limit.", "38.5 元", True),
        ("超出 38.5 元", "38.50 yuan", True),
        ("¥38.5", "38.5 元", True),
        ("RMB 38.5", "38.5 yuan", True),
        ("超标 18.5 元", "38.5 元", False),  # the spec's generation failure: 118.5 - 80 is 38.5, not 18.5
        ("It is 38.5 dollars.", "38.5 元", False),  # same number, another unit
        ("１，５００元", "1,500 yuan", True),  # full-width digits and comma
        ("10 percent of them", "10%", True),
        ("Within 30 days", "30 calendar days", True),
    ],
)
def test_numbers_compare_as_numbers_with_their_unit(answer, gold, ok):
    assert numbers_match(answer, gold) is ok


def test_quantities_and_text_without_numbers():
    assert quantities("2 nights at 650 yuan") == [(2.0, "night"), (650.0, "CNY")]
    assert numbers_match("department head", "the department head") is None


def test_citations_are_parsed_in_every_common_form():
    assert citations("Yes [1]. Also [2][4] and [3, 5]; 见［６］ and [7，8].") == [1, 2, 4, 3, 5, 6, 7, 8]
    assert citations("no citation") == [] and citations("[1] [1]") == [1]


def test_refusals_in_english_and_chinese():
    assert is_refusal("NO_ANSWER") and is_refusal("I don't know.") and is_refusal("资料中无法回答这个问题")
    assert is_refusal("") and not is_refusal("It is 80 yuan [1].")


def test_token_f1_counts_han_characters():
    assert token_f1("80元", "80元") == 1.0
    assert token_f1("上海市内交通每次80元", "80元") == pytest.approx(2 * (2 / 10) * 1 / (2 / 10 + 1))
    assert token_f1("Paris is the capital", "paris") == pytest.approx(2 * (1 / 3) / (1 / 3 + 1))


def test_correctness_citation_support_and_diagnosis_on_hand_made_cases():
    gold_ctx, texts = [False, True, False], ["hotel rates", "Shanghai taxi: 80 yuan per trip", "meals"]
    right = score_answer("Answer: The limit is 80 yuan per trip [2].", ["80 yuan"], gold_ctx, texts)
    assert (right.correct, right.cited, right.cited_gold, right.citations_support) == (1.0, 1, 1, 1.0)
    assert diagnosis(right, answerable=True) == "correct"
    # the evidence was there and the generator still got it wrong: a generation failure
    wrong = score_answer("Answer: The limit is 60 yuan [1].", ["80 yuan"], gold_ctx, texts)
    assert wrong.correct == 0.0 and wrong.citations_support == 0.0 and wrong.evidence_in_context
    assert diagnosis(wrong, answerable=True) == "generation_failure"
    # the evidence never reached the generator: a retrieval failure, even when it refuses
    missing = score_answer("NO_ANSWER", ["80 yuan"], [False, False], ["hotel rates", "meals"])
    assert missing.refused and not missing.evidence_in_context
    assert diagnosis(missing, answerable=True) == "retrieval_failure"
    # the answer string in the context counts as evidence even when no passage is labelled
    unlabelled = score_answer("Answer: It is 90 yuan.", ["80 yuan"], [False], ["taxi: 80 yuan per trip"])
    assert unlabelled.answer_in_context and diagnosis(unlabelled, answerable=True) == "generation_failure"
    # a correct refusal and a wrong answer on a question without an answer
    assert diagnosis(score_answer("NO_ANSWER", [], [False], ["x"]), answerable=False) == "correct_refusal"
    assert (
        diagnosis(score_answer("Answer: Yes, 50 yuan.", [], [False], ["x"]), answerable=False)
        == "wrong_answer"
    )
    # a refusal is never correct, even when it quotes the number
    assert score_answer("NO_ANSWER (80 yuan?)", ["80 yuan"], gold_ctx, texts).correct == 0.0
    # citations out of range do not count
    assert score_answer("Answer: 80 yuan [9]", ["80 yuan"], gold_ctx, texts).cited == 0
