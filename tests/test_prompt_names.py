"""Answer templates by name: the shipped ones ask for the short answer first in a form the rule finds, a name follows
the corpus language (the Chinese template on a Chinese corpus, declared, set or detected) and says where the choice
came from, a path is used as it is, the fingerprint is the template's content, and a sweep over the prompt is one
factor for the one-factor check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ablate.data.corpus import load_corpus
from ablate.errors import ConfigError
from ablate.evaluation.generation import final_answer
from ablate.record import RecordedRun
from ablate.stages.generate.openai import OpenAIGenerator
from ablate.stages.generate.prompt import PROMPTS_DIR, PromptTemplate, answer_templates, choose_prompt
from ablate.study.compare import check_comparison, describe_change, varying_params
from conftest import write_corpus
from test_compare import params_for
from test_language_defaults import EN_DOCS, EN_QRELS, EN_QUERIES, ZH_DOCS, ZH_QRELS, ZH_QUERIES


def gen(prompt: str = "grounded") -> OpenAIGenerator:
    """A generator that is only built and bound here (nothing is asked of its server)."""
    return OpenAIGenerator(prompt=prompt, max_retries=0)


def test_the_shipped_answer_templates_ask_for_the_short_answer_first_in_a_form_the_rule_finds():
    assert answer_templates() == ["grounded", "grounded_zh", "strict", "strict_zh"]
    for name in answer_templates():
        template = PromptTemplate.load(str(PROMPTS_DIR / f"{name}.txt"))
        text = template.system + "\n" + template.user
        marker = "答案：" if name.endswith("_zh") else "Answer:"
        assert f"{marker}<" in text.replace(" <", "<") and "NO_ANSWER" in text, name
        # what the template shows as the answer line is a final answer the rule reads
        assert final_answer(f"{marker} 38.5 [1]") == "38.5 [1]"


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("prompts")
    return {
        "zh": write_corpus(root / "zh", ZH_DOCS, ZH_QUERIES, ZH_QRELS),  # no corpus.yaml: detected
        "en": write_corpus(root / "en", EN_DOCS, EN_QUERIES, EN_QRELS),
    }


@pytest.mark.parametrize(
    ("manifest", "setting", "want", "source"),
    [
        (None, None, "grounded_zh", "language:zh"),  # detected
        ("language: zh\n", None, "grounded_zh", "language:zh"),  # declared
        ("language: en\n", "zh", "grounded_zh", "language:zh"),  # corpus.language=zh wins over corpus.yaml
        ("language: en\n", None, "grounded", "language:en"),
    ],
)
def test_a_name_follows_the_corpus_language_however_it_was_decided(tmp_path, manifest, setting, want, source):
    snap = load_corpus(
        write_corpus(tmp_path / "c", ZH_DOCS, ZH_QUERIES, ZH_QRELS, manifest), language=setting
    )
    bound = gen().bind(snap, "dev")
    assert (bound.params()["prompt"], bound.params()["prompt_source"]) == (want, source)
    assert bound.template.path == str(PROMPTS_DIR / f"{want}.txt")
    named = gen(want).bind(snap, "dev")
    assert named.params()["prompt_source"] == (
        "setting" if want.endswith("_zh") else source
    )  # a language's own, named
    assert named.fingerprint().key == bound.fingerprint().key  # the same file, however it was chosen


def test_a_path_and_a_named_language_template_run_as_given_on_any_corpus(corpora):
    zh, en = load_corpus(corpora["zh"]), load_corpus(corpora["en"])
    strict = str(PROMPTS_DIR / "strict.txt")
    for snap in (zh, en):
        by_path = gen(strict).bind(snap, "dev")
        assert (by_path.params()["prompt"], by_path.params()["prompt_source"]) == (strict, "setting")
        assert gen("strict_zh").bind(snap, "dev").params()["prompt"] == "strict_zh"
    assert gen("strict").bind(zh, "dev").params()["prompt"] == "strict_zh"
    unbound = gen()
    assert (unbound.params()["prompt"], unbound.params()["prompt_source"]) == ("grounded", "setting")
    assert gen().bind(en, "dev").fingerprint().key == unbound.fingerprint().key
    assert (
        gen().bind(zh, "dev").fingerprint().key != unbound.fingerprint().key
    )  # another template: another answer


def test_the_fingerprint_is_the_templates_content_not_its_name_or_place(tmp_path):
    copy = tmp_path / "mine.txt"
    copy.write_bytes((PROMPTS_DIR / "strict.txt").read_bytes())
    assert (
        gen(str(copy)).fingerprint().key
        == gen("strict").fingerprint().key
        != gen("grounded").fingerprint().key
    )


def test_a_name_no_template_has_is_one_line_listing_the_shipped_ones():
    with pytest.raises(ConfigError) as e:
        gen("grounded_qa")
    assert str(e.value) == (
        "generator.prompt='grounded_qa' is not valid; give a shipped answer template (grounded, grounded_zh, strict, "
        "strict_zh: conf/prompts/<name>.txt) or a template file's path"
    )
    with pytest.raises(ConfigError):
        choose_prompt("rerank_yes_no")  # a relevance template is not an answer template


def _run(prompt: str, sha: str) -> RecordedRun:
    params = {
        **params_for("oracle"),
        "pipeline.generator": "generator",
        "generator.model": "qwen",
        "generator.prompt": prompt,
        "generator.prompt_source": "language:en",
        "generator.prompt_sha256": sha,
    }
    fps = {
        "generator": json.dumps([prompt, sha]),
        "oracle": "o",
        "snapshot": "s",
        "identity": "i",
        "eval": "e",
    }
    tags = {
        "ablate.variant": "oracle",
        "ablate.qrels_hash": "q" * 64,
        "ablate.snapshot": "f" * 64,
        "ablate.split": "dev",
        **{f"ablate.fp.{k}": v for k, v in fps.items()},
    }
    return RecordedRun(run_id=prompt.ljust(32, "0"), name=prompt, params=params, tags=tags)


def test_a_sweep_over_the_prompt_is_one_factor_the_prompt():
    strict, grounded = _run("strict", "a" * 64), _run("grounded", "b" * 64)
    assert varying_params([strict, grounded]) == ["generator.prompt"]
    for factor in ("generator.prompt", None):
        check = check_comparison(strict, grounded, factor)
        assert check.ok and check.factors == ["generator.prompt"], check.reason
    assert describe_change(strict, grounded) == "generator.prompt strict->grounded"
    # the same name with other content (the file was edited): the content is the change, said as such
    edited = _run("strict", "c" * 64)
    assert check_comparison(strict, edited, None).factors == ["generator.prompt_sha256"]
