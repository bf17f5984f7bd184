"""The LLM reranker with a real model (SmolLM2-135M through llama-cpp-python): the reranker contract, log P("yes")
scores checked against a fresh full evaluation, the prefix reuse, the score cache and its identity."""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest

from ablate.app.paths import CONF_DIR
from ablate.cache import Cache
from ablate.data.types import Hit, Run
from ablate.errors import ConfigError
from ablate.stages.generate.gguf import SMOLLM2, resolve_gguf
from ablate.stages.generate.prompt import PromptTemplate
from ablate.stages.rerank.llm import FIELDS, LlmJudgeScorer, LLMReranker
from ablate.stages.rerank.pair_scores import SCORE_KIND
from ablate.testing.contracts import RerankerContract

llama_cpp = pytest.importorskip("llama_cpp")
PROMPT = str(CONF_DIR / "prompts" / "rerank_yes_no.txt")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

QUERY = {"q": "What is the per-trip limit for city transport in Shanghai?"}
CHUNKS = {
    "a": "Travel policy 2026, clause 4.2-a: city transport in Shanghai is reimbursed up to 80 yuan per trip.",
    "b": "Hotel rates: Beijing 600 yuan per night.",
    "c": "IT policy: laptops are replaced every three years.",
}


def stage(**params):
    return LLMReranker(**{"model": SMOLLM2, "prompt": PROMPT, "depth": 3, "n_threads": 1, **params})


def _other_prompt() -> str:
    """The shipped judgement template with one word changed (a new identity)."""
    p = Path(tempfile.mkdtemp(prefix="ablate-judge-")) / "judge.txt"
    p.write_text(Path(PROMPT).read_text(encoding="utf-8").replace("one word", "a single word"), "utf-8")
    return str(p)


class TestSmolLM2JudgeContract(RerankerContract):
    option = "reranker/llm"
    variations = {"depth": 2, "max_passage_tokens": 64, "n_ctx": 2048, "prompt": _other_prompt()}
    invalid = {"depth": 0, "max_passage_tokens": 8, "n_ctx": 100, "n_threads": -1}
    derived = frozenset(
        {"prompt_sha256", "build", "build_tier"}
    )  # the template's content, the llama.cpp build

    def yaml_overrides(self):
        return [f"rerank.model={SMOLLM2}"]

    def make(self, **params):
        return stage(**params)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return resolve_gguf(SMOLLM2, Cache(tmp_path_factory.mktemp("gguf")), "rerank.model")


def _run() -> Run:
    return Run("fused", {"q": [Hit("c", "C", 3.0), Hit("b", "B", 2.0), Hit("a", "A", 1.0)]})


def _reference_log_p_yes(path: str, question: str, passage: str) -> float:
    """log P(first answer token in the yes set), from a fresh model that evaluates the whole prompt at once."""
    from ablate.stages.rerank.llm import YES_WORDS, _chat_formatter

    llm = llama_cpp.Llama(model_path=path, n_ctx=1024, n_threads=1, verbose=False)
    template = PromptTemplate.load(PROMPT, "rerank.prompt", FIELDS)
    prompt = _chat_formatter(llm)(template.render_fields(question=question, passage=passage))
    toks = llm.tokenize(prompt.encode(), add_bos=False, special=True)
    llm.eval(toks)
    logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
    logits = logits.astype(np.float64)
    p = np.exp(logits - logits.max())
    p /= p.sum()
    yes = {llm.tokenize(w.encode(), add_bos=False, special=False)[0] for w in YES_WORDS}
    return math.log(sum(p[t] for t in yes))


def test_scores_are_log_p_yes_with_prefix_reuse_and_cached(tmp_path, model_path):
    template = PromptTemplate.load(PROMPT, "rerank.prompt", FIELDS)
    scorer = LlmJudgeScorer(model_path.path, model_path.sha256, template, cache=Cache(tmp_path), n_threads=1)
    out = scorer.rerank(_run(), QUERY, CHUNKS, depth=3)
    scores = {h.chunk_id: h.score for h in out.get("q")}
    for cid, text in CHUNKS.items():  # the KV-cache prefix reuse changes nothing
        assert scores[cid] == pytest.approx(_reference_log_p_yes(model_path.path, QUERY["q"], text), abs=1e-3)
        assert scores[cid] < 0
    assert scorer.stats["pairs_scored"] == 3 and scorer.stats["model_loads"] == 1
    full = sum(len(scorer._tokens(QUERY["q"], t)) for t in CHUNKS.values())
    assert scorer.stats["tokens_in"] < full  # the shared prefix was evaluated once
    assert out.meta["rerank"]["model"] == model_path.path and out.meta["rerank"]["depth"] == 3

    warm = LlmJudgeScorer(model_path.path, model_path.sha256, template, cache=Cache(tmp_path), n_threads=1)
    again = warm.rerank(_run(), QUERY, CHUNKS, depth=3)
    assert again.get("q") == out.get("q")
    assert (
        warm.stats["pairs_scored"] == 0 and warm.stats["pairs_cached"] == 3 and warm.stats["model_loads"] == 0
    )
    assert len(list((tmp_path / SCORE_KIND).rglob("*.json"))) == 1

    shorter = LlmJudgeScorer(
        model_path.path, model_path.sha256, template, cache=Cache(tmp_path), n_threads=1, max_passage_tokens=8
    )
    assert shorter.fingerprint() != warm.fingerprint()
    shorter.rerank(_run(), QUERY, CHUNKS, depth=3)
    assert shorter.stats["pairs_scored"] == 3  # another identity: nothing served from the first entries


def test_another_llama_cpp_build_is_another_identity_and_another_score_cache_entry(monkeypatch, model_path):
    """Kernels compiled for another CPU round differently: the build is logged (``rerank.build``), part of the
    stage's fingerprint and of the score cache's key."""
    from ablate.stages.rerank import llm

    template = PromptTemplate.load(PROMPT, "rerank.prompt", FIELDS)
    here, scorer = stage(), LlmJudgeScorer(model_path.path, model_path.sha256, template)
    assert here.params()["build"] == llama_cpp.llama_print_system_info().decode("utf-8").strip()
    assert scorer.fingerprint()["llama_cpp_build"] == here.params()["build"]
    monkeypatch.setattr(llm, "llama_build", lambda: "CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | FMA = 1 |")
    other, other_scorer = stage(), LlmJudgeScorer(model_path.path, model_path.sha256, template)
    assert other.params()["build"] != here.params()["build"]
    assert other.fingerprint().key != here.fingerprint().key
    assert other_scorer._entry_key("q") != scorer._entry_key("q")


@pytest.mark.slow  # the shipped Qwen (its 1 GB GGUF joined into the test's cache): SmolLM2's Q4_1 kernels show no effect
def test_a_score_does_not_depend_on_the_pair_scored_before_it(tmp_path):
    """Where an evaluation is split changes the rounding of Qwen's Q4_K kernels (experiments/results/llama_build.md);
    the head is always its own batch, so the same pairs scored in another order get the same scores."""
    from ablate.stages.generate.gguf import QWEN

    qwen = resolve_gguf(QWEN, Cache(tmp_path / "gguf"), "rerank.model")
    template = PromptTemplate.load(PROMPT, "rerank.prompt", FIELDS)
    forward, backward = _run(), Run("fused", {"q": list(reversed(_run().get("q")))})
    scores = []
    for run in (forward, backward):
        scorer = LlmJudgeScorer(qwen.path, qwen.sha256, template, cache=None, n_threads=1)
        scores.append({h.chunk_id: h.score for h in scorer.rerank(run, QUERY, CHUNKS, depth=3).get("q")})
    assert scores[0] == scores[1]


def test_a_passage_longer_than_the_limit_is_cut(tmp_path, model_path):
    template = PromptTemplate.load(PROMPT, "rerank.prompt", FIELDS)
    scorer = LlmJudgeScorer(
        model_path.path, model_path.sha256, template, cache=None, n_threads=1, max_passage_tokens=16
    )
    long = " ".join(["reimbursement"] * 400)
    assert len(scorer._tokens("q?", long)) < len(scorer._tokens("q?", "x")) + 20


def test_bad_settings_are_refused_before_any_work(tmp_path):
    with pytest.raises(ConfigError, match=r"rerank\.n_ctx"):
        stage(n_ctx=256, max_passage_tokens=384)
    bad = tmp_path / "judge.txt"
    bad.write_text("### system\nx\n### user\n{question} only\n", "utf-8")
    from ablate.errors import InputError

    with pytest.raises(InputError, match=r"\{passage\}"):
        stage(prompt=str(bad))
