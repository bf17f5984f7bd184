"""Answer in context: normalised substring matching over the first K retrieved chunks."""

from ablate.data.types import Hit, Run
from ablate.evaluation.answers import answer_in_context, normalize


def test_normalize_and_match():
    assert normalize("  ８０ Yuan\n per  trip ") == "80 yuan per trip"
    run = Run("r", {"q1": [Hit("a", "A", 3.0), Hit("b", "B", 2.0)], "q2": [Hit("c", "C", 1.0)], "q3": []})
    text = {"a": "Nothing here.", "b": "Shanghai: 80 YUAN per trip", "c": "上海市内交通每次80元"}
    answers = {"q1": ["80 yuan"], "q2": ["80元", "八十元"], "q3": ["x"], "q4": []}
    out = answer_in_context(run, answers, text, ks=[1, 2])
    assert out == {"q1": {1: 0.0, 2: 1.0}, "q2": {1: 1.0, 2: 1.0}, "q3": {1: 0.0, 2: 0.0}}
