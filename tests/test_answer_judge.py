"""The LLM answer judge (``answer.judge=llm``, :mod:`ablate.stages.generate.judge`): its output parser, its templates
and identity. The runs that use it are in ``tests/test_answer_judge_run.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablate.stages.generate.judge import (
    ANSWER_CHARS,
    FIELDS,
    UNPARSED,
    default_template,
    parse_verdict,
    shown_answer,
)
from ablate.stages.generate.prompt import PromptTemplate

PROMPTS = Path(__file__).resolve().parents[1] / "conf" / "prompts"


@pytest.mark.parametrize(
    ("output", "grade", "rationale"),
    [
        ("Grade: correct\nRationale: It states 38.5 yuan.", "correct", "It states 38.5 yuan."),
        ("Grade: wrong\nRationale: It concludes the other film.", "wrong", "It concludes the other film."),
        ("Grade: partly\nRationale: Only one of two parts.", "partly", "Only one of two parts."),
        ("**Grade:** **Partly correct**\n**Rationale:** misses the unit", "partly", "misses the unit"),
        ("Grade: INCORRECT\nRationale: no.", "wrong", "no."),
        ("The answer is not correct: it names 1942.", "wrong", "it names 1942."),
        ("Partially. It gives the city, not the street.", "partly", "It gives the city, not the street."),
        ("correct", "correct", ""),
        ("Wrong — the reasoning stops before an answer.", "wrong", "the reasoning stops before an answer."),
        ("Grade: 正确\nRationale: 答案是38.5元。", "correct", "答案是38.5元。"),
        ("评分：部分正确\n理由：缺少单位。", "partly", "缺少单位。"),
        ("错误。结论是另一部电影。", "wrong", "结论是另一部电影。"),
        ("不正确", "wrong", ""),
        # the first grade word wins, wherever the rationale goes on
        (
            "Wrong. A correct answer would name Huma Gun Anmogaldi.",
            "wrong",
            "A correct answer would name Huma Gun Anmogaldi.",
        ),
    ],
)
def test_parse_verdict_reads_the_grade_and_the_rationale(output: str, grade: str, rationale: str) -> None:
    assert parse_verdict(output) == (grade, rationale)


@pytest.mark.parametrize(
    "output",
    [
        "",
        "   ",
        "I cannot grade this.",
        "Grade: <correct, partly or wrong>\nRationale: <one short sentence>",  # the template echoed
        "Grade: correct or wrong, hard to say",
        "The correctness is unclear",  # 'correctness' is not the word 'correct'
        "rightly so",
    ],
)
def test_an_output_without_one_grade_is_unparsed_never_correct(output: str) -> None:
    grade, rationale = parse_verdict(output)
    assert grade == UNPARSED
    assert "\n" not in rationale


def test_a_rationale_is_one_line_and_short() -> None:
    grade, rationale = parse_verdict("Grade: wrong\nRationale: " + "very long " * 100 + "\nsecond line")
    assert grade == "wrong" and "\n" not in rationale and len(rationale) <= 300 and rationale.endswith("…")


def test_a_long_answer_is_shown_with_its_conclusion() -> None:
    answer = "step " * 2000 + "Answer: 38.5 yuan"
    shown = shown_answer(answer)
    assert len(shown) < ANSWER_CHARS + 20 and shown.endswith("Answer: 38.5 yuan") and "[...]" in shown
    assert shown_answer("  short  ") == "short"


def test_the_shipped_templates_load_with_their_fields_and_follow_the_language() -> None:
    en, zh = default_template("en", PROMPTS), default_template("zh", PROMPTS)
    assert Path(en).name == "answer_judge.txt" and Path(zh).name == "answer_judge_zh.txt"
    assert default_template("de", PROMPTS) == en
    for path in (en, zh):
        t = PromptTemplate.load(path, "answer.judge_prompt", FIELDS)
        messages = t.render_fields(question="Q?", golds="A | B", answer="Answer: A")
        assert "Q?" in messages[1]["content"] and "A | B" in messages[1]["content"]
        assert "Grade:" in messages[0]["content"]
