"""The relevance prompt of the LLM assessor (``ablate.labels.relevance_prompt``): the default template states the
grading policy, its criteria and each score's meaning, gives the question's reference answer when the corpus has one
and drops that line when it has none, follows the corpus language, and the UMBRELA template is still asked exactly as
before. A pair judged through the real OpenAI-compatible generator (against a Flask server on 127.0.0.1) carries the
reference answer from ``queries.jsonl``; a ``--prompt`` that names no template is one line, exit 2 (the catalogue's ``judge-prompt-unknown``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ablate.app.label_common import compose, corpus_spec, load
from ablate.cache import Cache
from ablate.data.types import Query
from ablate.errors import ConfigError
from ablate.labels.assessor import default_mapping, judge_pairs, make_assessor, passage_of
from ablate.labels.relevance_prompt import (
    DEFAULT,
    FIELDS,
    OPTIONAL,
    choose_template,
    reference_of,
    relevance_templates,
    render,
)
from ablate.stages.generate.prompt import PROMPTS_DIR, PromptTemplate
from conftest import serving

flask = pytest.importorskip("flask")
REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "corpora" / "demo"


def _template(name: str) -> PromptTemplate:
    return PromptTemplate.load(str(PROMPTS_DIR / f"{name}.txt"), "--prompt", FIELDS, OPTIONAL)


# ------------------------------------------------------------------------------------------------- the template text
def test_the_default_template_states_the_policy_its_criteria_and_each_score():
    system = _template("relevance_policy").system
    for criterion in ("Topicality", "Fit", "Exactness", "Coverage"):
        assert f"- {criterion}:" in system
    for score, meaning in (
        (3, "states the answer"),
        (2, "needed to reach it"),
        (1, "on the question's topic but about another thing"),
        (0, "nothing to do with the question"),
    ):
        line = next(x for x in system.splitlines() if x.startswith(f"{score} = "))
        assert meaning in line
    assert '"States the answer: " and yes or no' in system and '"##final score: " and the score' in system
    zh = _template("relevance_policy_zh").system
    for criterion in ("主题", "对应", "准确", "完整"):
        assert f"- {criterion}：" in zh
    assert [x[:4] for x in zh.splitlines() if x[:1].isdigit()] == ["3 = ", "2 = ", "1 = ", "0 = "]
    assert '"写出答案："' in zh and '"##final score: "' in zh


def test_the_reference_answer_is_given_when_the_question_has_one_and_its_line_dropped_when_not():
    t = _template("relevance_policy")
    q = Query("q", "Who is the vendor on invoice INV-120?", answers=("Pudong Swift Travel", " 80  yuan "))
    assert reference_of(q) == "Pudong Swift Travel; 80 yuan"
    with_ref = render(t, q.text, "Vendor: Pudong Swift Travel.", reference_of(q))
    assert with_ref[0]["content"] == t.system
    assert with_ref[1]["content"].splitlines()[:3] == [
        "Question: Who is the vendor on invoice INV-120?",
        "Reference answer: Pudong Swift Travel; 80 yuan",
        "Passage: Vendor: Pudong Swift Travel.",
    ]
    without = render(t, q.text, "Vendor: Pudong Swift Travel.", reference_of(Query("q", q.text)))
    assert without[1]["content"].splitlines()[:2] == [
        "Question: Who is the vendor on invoice INV-120?",
        "Passage: Vendor: Pudong Swift Travel.",
    ]
    assert "Reference" not in without[1]["content"] and "{" not in without[1]["content"]
    zh = render(_template("relevance_policy_zh"), "发票 INV-120 的供应商是谁？", "供应商：浦东", "浦东")
    assert "参考答案：浦东" in zh[1]["content"]
    assert "参考答案" not in render(_template("relevance_policy_zh"), "问？", "段落", "")[1]["content"]
    long = reference_of(Query("q", "?", answers=("x" * 400,)))
    assert len(long) == 304 and long.endswith(" ...")


def test_a_text_holding_a_placeholder_is_never_filled_twice():
    t = _template("relevance_policy")
    user = render(t, "What does {passage} mean?", "It says {reference}.", "{question}")[1]["content"]
    assert "Question: What does {passage} mean?" in user
    assert "Reference answer: {question}" in user and "Passage: It says {reference}." in user


def test_the_umbrela_template_is_asked_exactly_as_before():
    """The old default renders as ``render_fields`` did: its cached generations and its assessor's name still hold."""
    t = _template("relevance_umbrela")
    assert render(t, "q?", "p.", "a reference") == t.render_fields(question="q?", passage="p.")


# ------------------------------------------------------------------------------------------------- the choice
@pytest.mark.parametrize(
    ("value", "language", "name", "source"),
    [
        (None, "en", "relevance_policy", "language:en"),
        (None, "zh", "relevance_policy_zh", "language:zh"),
        (None, None, "relevance_policy", "setting"),
        ("relevance_umbrela", "en", "relevance_umbrela", "language:en"),
        ("relevance_umbrela", "zh", "relevance_umbrela_zh", "language:zh"),
        (
            "relevance_policy_zh",
            "en",
            "relevance_policy_zh",
            "language:en",
        ),  # a language's own, named: as named
    ],
)
def test_the_corpus_language_picks_the_template(value, language, name, source):
    choice = choose_template(value, language)
    assert (choice.name, choice.path, choice.source) == (name, str(PROMPTS_DIR / f"{name}.txt"), source)


def test_a_path_is_used_as_it_is_and_an_unknown_name_is_refused(tmp_path):
    path = str(PROMPTS_DIR / "relevance_umbrela.txt")
    assert (
        choose_template(path, "zh").path == path
    )  # the English instruction on a Chinese corpus: a path says so
    assert DEFAULT in relevance_templates() and "rerank_yes_no" not in relevance_templates()
    with pytest.raises(ConfigError) as e:
        choose_template("relevance_umbrella", "en")
    assert str(e.value) == (
        "--prompt='relevance_umbrella' is not valid; give a shipped relevance template (relevance_policy, "
        "relevance_policy_zh, relevance_umbrela, relevance_umbrela_zh: conf/prompts/<name>.txt) or a template "
        "file's path"
    )


# ------------------------------------------------------------------------------------------------- a judgement
@pytest.fixture(scope="module")
def recording_llm() -> Iterator[tuple[str, list[str]]]:
    """An OpenAI-compatible server that records each user message and answers a score line."""
    seen: list[str] = []
    app = flask.Flask("recording-assessor")

    @app.post("/v1/chat/completions")
    def chat() -> dict:
        seen.append(flask.request.get_json()["messages"][-1]["content"])
        return {
            "choices": [{"message": {"role": "assistant", "content": "Same thing: yes\n##final score: 3"}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 8},
        }

    with serving(app) as url:
        yield url, seen


def test_a_judgement_reads_the_reference_answer_of_queries_jsonl(tmp_path, recording_llm):
    from ablate.app.config import build_stage

    url, seen = recording_llm
    cfg = compose(["generator=openai", f"generator.base_url={url}/v1", "generator.model=rec"])
    snapshot = load(corpus_spec(cfg))
    assert snapshot.language == "en" and snapshot.queries["q025"].answers
    generator = build_stage("generator", cfg.generator)
    assessor = make_assessor(
        generator, choose_template(None, snapshot.language).path, default_mapping([2, 1, 0])
    )
    assert assessor.details["template"] == str(PROMPTS_DIR / "relevance_policy.txt")
    pairs = [("q025", "INV-120#header"), ("q040", "POL-TRAVEL-2026#3.3")]  # q040 has no answer in the corpus
    del seen[:]
    verdicts = judge_pairs(assessor, snapshot, pairs, Cache(tmp_path / "cache"), show_progress=False)
    assert [(v.score, v.grade) for v in verdicts] == [(3, 2), (3, 2)]
    assert f"Reference answer: {snapshot.queries['q025'].answers[0]}\n" in seen[0]
    assert f"Passage: {passage_of(snapshot, 'INV-120#header')}" in seen[0]
    assert "Reference answer" not in seen[1] and snapshot.queries["q040"].answers == ()
