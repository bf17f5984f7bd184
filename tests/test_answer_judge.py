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
        assert "Grade:" in messages[0]["content"] and "Conclusion:" in messages[0]["content"]


# ------------------------------------------------------------------------------------------------ scoring and re-scoring
def _answers_corpus(root: Path) -> Path:
    from conftest import TINY_DOCS, TINY_MANIFEST, TINY_QRELS, TINY_QUERIES, write_corpus

    queries = [dict(q) for q in TINY_QUERIES]
    for q in queries:
        q["answers"] = {"q1": ["1,250 yuan"], "q2": ["supervisor approval"], "q4": ["3"]}.get(q["_id"], [])
    return write_corpus(root, TINY_DOCS, queries, TINY_QRELS, TINY_MANIFEST)


def _scored(snapshot, answered):
    from ablate.evaluation import EvalSettings
    from ablate.evaluation.scoring import score_run
    from ablate.runner.access import Access
    from ablate.runner.scoring import scoring_inputs

    run = _context_run(snapshot)
    inputs = scoring_inputs(snapshot, "dev", Access(identity="employee"), answers=answered)
    return score_run(run, inputs.labels, inputs.qids, EvalSettings(ks=(1, 5)), inputs.context)


def _context_run(snapshot):
    from ablate.data.types import Hit, Run

    ctx = {"q1": ["INV-102#p0"], "q2": ["POL-1#4.2-b"], "q3": ["POL-1#4.2-a"], "q4": ["POL-1#4.2-a"]}
    return Run(
        "x",
        {q: [Hit(c, snapshot.chunk_to_doc[c], 1.0, 1) for c in ids] for q, ids in ctx.items()},
    )


def test_an_llm_judge_decides_correct_the_rule_is_kept_and_answers_csv_scores_again(tmp_path: Path) -> None:
    """With grades (answer.judge=llm) ``correct`` is the judge's (partly and unparsed count 0), ``correct_rule`` the
    rule's, and answers.csv, read back, scores to the same table and metrics: a re-score asks no model."""
    from ablate.data.corpus import load_corpus
    from ablate.evaluation.answer_scores import AnswerCosts, Answered, answer_metrics
    from ablate.runner.rescore import read_answers

    snap = load_corpus(_answers_corpus(tmp_path / "corpus"))
    answered = {
        # the rule finds the gold string; the judge reads the conclusion and says partly
        "q1": Answered(
            ("INV-102#p0",),
            ("Answer: 1,250 yuan, or maybe 1,520 [1]",),
            grades=("partly",),
            rationales=("hedges between two amounts",),
        ),
        # the rule misses a paraphrase; the judge says correct
        "q2": Answered(
            ("POL-1#4.2-b",),
            ("Your supervisor must approve the excess [1]",),
            grades=("correct",),
            rationales=("same meaning",),
        ),
        "q3": Answered(("POL-1#4.2-a",), ("NO_ANSWER",)),  # no gold answer: not judged
        "q4": Answered(("POL-1#4.2-a",), ("NO_ANSWER",)),
    }
    table = _scored(snap, answered).answers
    assert table is not None
    assert table.loc["q1", "correct_rule"] == 1.0 and table.loc["q1", "correct"] == 0.0
    assert table.loc["q2", "correct_rule"] == 0.0 and table.loc["q2", "correct"] == 1.0
    assert table.loc["q1", "judge_grade"] == "partly" and table.loc["q2", "judge_rationale"] == "same meaning"
    assert table.loc["q1", "diagnosis"] != "correct" and table.loc["q2", "diagnosis"] == "correct"
    m = answer_metrics(table, AnswerCosts(), bootstrap=0, seed=0)
    assert (
        m["answer_correct"] == 0.5 and m["answer_correct_rule"] == 0.5
    )  # over q1, q2 (answerable with golds)
    assert m["answer_judged"] == 2 and m["answer_partly"] == 0.5 and m["answer_judge_unparsed"] == 0

    csv = tmp_path / "answers.csv"
    csv.write_text(table.to_csv(index=True, index_label="qid"), encoding="utf-8")
    again = _scored(snap, read_answers(csv)).answers
    assert again is not None
    cols = ["correct", "correct_rule", "judge_grade", "judge_rationale", "diagnosis"]
    assert again[cols].fillna("").equals(table[cols].fillna(""))
    assert answer_metrics(again, AnswerCosts(), bootstrap=0, seed=0) == m


def test_an_unparsed_grade_counts_and_is_never_correct(tmp_path: Path) -> None:
    from ablate.data.corpus import load_corpus
    from ablate.evaluation.answer_scores import AnswerCosts, Answered, answer_metrics

    snap = load_corpus(_answers_corpus(tmp_path / "corpus"))
    answered = {
        "q1": Answered(("INV-102#p0",), ("Answer: 1,250 yuan [1]",), grades=(UNPARSED,), rationales=("?",)),
        "q2": Answered(
            ("POL-1#4.2-b",), ("Answer: supervisor approval [1]",), grades=("correct",), rationales=("",)
        ),
    }
    table = _scored(snap, answered).answers
    m = answer_metrics(table, AnswerCosts(), bootstrap=0, seed=0)
    assert table.loc["q1", "correct"] == 0.0 and table.loc["q1", "correct_rule"] == 1.0
    assert m["answer_judge_unparsed"] == 1 and m["answer_correct"] == 0.5 and m["answer_correct_rule"] == 1.0


def test_the_rule_alone_logs_its_correctness_twice_and_no_judge_columns(tmp_path: Path) -> None:
    from ablate.data.corpus import load_corpus
    from ablate.evaluation.answer_scores import AnswerCosts, Answered, answer_metrics

    snap = load_corpus(_answers_corpus(tmp_path / "corpus"))
    table = _scored(snap, {"q1": Answered(("INV-102#p0",), ("Answer: 1,250 yuan [1]",))}).answers
    m = answer_metrics(table, AnswerCosts(), bootstrap=0, seed=0)
    assert "judge_grade" not in table and m["answer_correct"] == m["answer_correct_rule"]
    assert "answer_judge_unparsed" not in m


# ------------------------------------------------------------------------------------------------ identity
def _job(corpus: Path, *overrides: str):
    from ablate.app.config import job_from_config
    from ablate.testing.contracts import compose_option

    cfg = compose_option(
        "generator/llama_cpp",
        ["corpus=beir", f"corpus.path={corpus}", "corpus.split=dev", "variant=A", *overrides],
    )
    return job_from_config(cfg)


def _key(job, snapshot) -> tuple[str, dict]:
    from ablate.runner.pipeline import planned_components
    from ablate.runner.reuse import cell_key

    comps = planned_components(snapshot, "dev", job.pipeline, job.settings, access=job.corpus.access)
    return cell_key(job, comps), comps


def test_the_judge_is_part_of_the_run_identity(tmp_path: Path) -> None:
    """answer.judge, the judge's template and its model change the run's cell key and its ``answer`` component;
    the same settings give the same key; the generator's prompt leaves the judge's fingerprint (its cache) alone."""
    from ablate.data.corpus import load_corpus
    from ablate.stages.generate.gguf import SMOLLM2

    corpus = _answers_corpus(tmp_path / "corpus")
    snap = load_corpus(corpus)
    other = tmp_path / "judge.txt"
    other.write_text(
        (PROMPTS / "answer_judge.txt")
        .read_text(encoding="utf-8")
        .replace("one short sentence", "a sentence"),
        encoding="utf-8",
    )
    rule, rule_comps = _key(_job(corpus), snap)
    llm_job = _job(corpus, "answer.judge=llm")
    llm, llm_comps = _key(llm_job, snap)
    assert _key(_job(corpus, "answer.judge=llm"), snap)[0] == llm  # same settings, same key
    assert rule != llm and rule_comps["answer"] != llm_comps["answer"]
    assert rule_comps["answer"]["params"] == {"judge": "rule"}
    templated, t_comps = _key(_job(corpus, "answer.judge=llm", f"answer.judge_prompt={other}"), snap)
    assert templated != llm and t_comps["answer"] != llm_comps["answer"]
    smol, s_comps = _key(_job(corpus, "answer.judge=llm", f"answer.judge_model={SMOLLM2}"), snap)
    assert smol != llm and s_comps["answer"]["resources"] != llm_comps["answer"]["resources"]
    assert s_comps["generator"] == llm_comps["generator"]  # the run's generator is the same
    grounded = PROMPTS / "grounded.txt"
    terse = tmp_path / "terse.txt"
    terse.write_text(grounded.read_text(encoding="utf-8").replace("briefly", "tersely"), encoding="utf-8")
    new_prompt, p_comps = _key(_job(corpus, "answer.judge=llm", f"generator.prompt={terse}"), snap)
    assert new_prompt != llm and p_comps["answer"] == llm_comps["answer"]
    params = llm_job.pipeline.judge.params()
    assert params["judge"] == "llm" and params["judge_model"] == "qwen2.5-coder-1.5b-instruct"
    assert (
        params["judge_prompt_sha256"]
        == PromptTemplate.load(str(PROMPTS / "answer_judge.txt"), "x", FIELDS).sha256
    )


def test_a_chinese_corpus_gets_the_chinese_judge_template(tmp_path: Path) -> None:
    from ablate.data.corpus import load_corpus
    from conftest import write_corpus

    docs = [
        {
            "_id": "d1",
            "title": "差旅费管理办法",
            "text": "市内交通费用每次最多报销八十元，超出部分须经主管审批。",
        }
    ]
    queries = [{"_id": "q1", "text": "打车每次最多报销多少？", "answers": ["八十元"], "split": "dev"}]
    corpus = write_corpus(tmp_path / "zh", docs, queries, {"dev": [("q1", "d1", 1)]})
    snap = load_corpus(corpus)
    assert snap.language == "zh"
    job = _job(corpus, "answer.judge=llm")
    bound = job.pipeline.bind(snap, "dev")
    assert Path(bound.judge.template.path).name == "answer_judge_zh.txt"
    assert bound.judge.params()["judge_prompt_source"] == "language:zh"
    assert bound.judge.generator is bound.generator  # the run's own model: no second load
    named = _job(corpus, "answer.judge=llm", f"answer.judge_prompt={PROMPTS / 'answer_judge.txt'}")
    assert Path(named.pipeline.bind(snap, "dev").judge.template.path).name == "answer_judge.txt"
