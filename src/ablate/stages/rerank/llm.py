"""An LLM reranker from the generator's backend (``conf/reranker/llm.yaml``): pointwise relevance judgements.

For each (question, passage) pair a local GGUF model (llama-cpp-python, resolved offline like the generator's:
:mod:`ablate.stages.generate.gguf`) reads a judgement prompt (a versioned template file with ``{question}`` and
``{passage}``, rendered with the model's own chat template) and the score is the log-probability that its first answer
token is "yes": ``log sum_{t in yes tokens} softmax(logits)_t`` over the first tokens of ``yes``/``Yes``/`` yes``/
`` Yes`` (Nogueira et al. 2020, "Document Ranking with a Pretrained Sequence-to-Sequence Model", use the same
true/false token probability). One forward pass per pair, no sampling: the score is deterministic for a model, a
prompt and a library version.

Pairs of one question share the prompt's head (system text and question come first), and llama.cpp's KV cache keeps
that head between pairs, so only the passage and the closing question are evaluated for each. The head is always
evaluated as a batch of its own and each pair's rest from where it ends (:meth:`LlmJudgeScorer._score_one`): where an
evaluation is split changes the rounding of a quantised model's kernels, so reusing whatever the previous pair happened
to share would make a score depend on which pair was scored before it (an interrupted or extended query, another
order), not only on what its cache key holds. Passages are cut to ``max_passage_tokens`` tokens.

The scores are cached like the cross-encoder's (:mod:`ablate.stages.rerank.pair_scores`): keyed by this scorer's
fingerprint (the GGUF's full sha256, the template's sha256, ``max_passage_tokens``, ``n_ctx``, the yes words, llama-cpp-python's
version, the llama.cpp build's system info (:func:`~ablate.stages.generate.llama_cpp.llama_build`: kernels compiled for
another CPU round differently; logged as ``rerank.build``, its tier's name as ``rerank.build_tier``; a build
this CPU cannot run is refused before anything runs: :mod:`ablate.stages.generate.cpu`) and ``CODE_VERSION``) and the texts' hashes. ``stats`` add ``tokens_in`` (prompt tokens evaluated), so a
run's cost per pair is ``time_rerank_seconds / rerank_pairs_scored`` and ``rerank_tokens_in / rerank_pairs_scored``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from ablate.cache import Cache
from ablate.data.types import Run
from ablate.progress import Progress
from ablate.stages.base import (
    Fingerprint,
    StageContext,
    check_int,
    check_str,
    fingerprint_of,
    library_versions,
)
from ablate.stages.generate.cpu import build_tier, checked_build, identity, installed_wheel_folder
from ablate.stages.generate.gguf import QWEN, identify_gguf, resolve_gguf
from ablate.stages.generate.llama_cpp import llama_build, open_llama
from ablate.stages.generate.prompt import PromptTemplate
from ablate.stages.rerank.pair_scores import STAT_KEYS, CachedPairScorer

#: Bump when the judgement or the score form changes: part of the fingerprint and of every score cache key.
CODE_VERSION = "ablate-llm-rerank/2"
LIBRARIES = ("llama-cpp-python",)
YES_WORDS = ("yes", "Yes", " yes", " Yes")
FIELDS = ("{passage}", "{question}")
#: Two one-word passages whose prompts share exactly the head a question's pairs share (:meth:`LlmJudgeScorer._head`).
HEAD_PROBES = ("alpha", "omega")
#: Tokens of the context kept for the prompt's own words around the passage and question (the shipped prompts need
#: fewer): ``n_ctx`` must hold ``max_passage_tokens`` plus these.
PROMPT_MARGIN_TOKENS = 64
#: Bounds of ``max_passage_tokens``: a passage cut below 16 tokens says too little to judge; 8192 is past any passage
#: a chunker makes.
PASSAGE_TOKENS_RANGE = (16, 8192)
#: Bounds of ``n_ctx``: below 256 tokens a prompt with a passage does not fit; 131072 (128k) is the longest context
#: GGUF models ship with.
N_CTX_RANGE = (256, 131072)
#: Most ``n_threads`` accepted: more than any machine runs llama.cpp on, so a typo (2000) is refused.
MAX_THREADS = 256


class LlmJudgeScorer(CachedPairScorer):
    """log P("yes") of a GGUF model for each (question, passage) pair; see the module docstring."""

    flush_pairs = 1  # seconds per pair: write every finished query to the cache at once

    def __init__(
        self,
        path: str,
        sha256: str,
        template: PromptTemplate,
        cache: Cache | None = None,
        n_ctx: int = 1024,
        n_threads: int = 0,
        max_passage_tokens: int = 384,
        label: str = "",
        show_progress: bool = False,
    ) -> None:
        self.path, self.sha256, self.template = path, sha256, template
        self.n_ctx, self.n_threads, self.max_passage_tokens = n_ctx, n_threads, max_passage_tokens
        self.model_label = label or path
        self.show_progress = show_progress
        self._llm: Any = None
        self._format: Any = None
        self._yes: list[int] = []
        self._progress: Any = None
        self._heads: dict[
            str, list[int]
        ] = {}  # question -> its pairs' head tokens (the current question only)
        self._evaluated_head = -1  # length of the head the model's state starts with (-1: none)
        super().__init__(cache)
        self.stats["tokens_in"] = 0

    def fingerprint(self) -> dict[str, object]:
        build = llama_build()
        return {
            "code_version": CODE_VERSION,
            "gguf_sha256": self.sha256,
            "prompt_sha256": self.template.sha256,
            "max_passage_tokens": self.max_passage_tokens,
            "n_ctx": self.n_ctx,
            "yes_words": list(YES_WORDS),
            "score": "log_p_yes",
            "libraries": library_versions(*LIBRARIES),
            "llama_cpp_build": identity(build, build_tier(build, installed_wheel_folder())),
        }

    def _load(self) -> Any:
        if self._llm is None:
            self._llm = open_llama(self.path, self.n_ctx, self.n_threads, 0, "reranker=llm")
            self._format = _chat_formatter(self._llm)
            first = {self._llm.tokenize(w.encode(), add_bos=False, special=False)[0] for w in YES_WORDS}
            self._yes = sorted(first)
            self.stats["model_loads"] += 1
        return self._llm

    def _tokens(self, question: str, passage: str) -> list[int]:
        llm = self._load()
        ptoks = llm.tokenize(passage.encode("utf-8"), add_bos=False, special=False)
        if len(ptoks) > self.max_passage_tokens:
            passage = llm.detokenize(ptoks[: self.max_passage_tokens]).decode("utf-8", errors="ignore")
        messages = self.template.render_fields(question=question, passage=passage)
        prompt = self._format(messages)
        toks: list[int] = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        if len(toks) >= self.n_ctx:  # keep the end (the question to answer), never overflow the context
            toks = toks[-(self.n_ctx - 1) :]
        return toks

    def _head(self, question: str) -> list[int]:
        """The tokens every pair of ``question`` starts with: the common prefix of its prompts with two different
        one-word passages (the prompt up to its passage)."""
        if question not in self._heads:
            a, b = (self._tokens(question, probe) for probe in HEAD_PROBES)
            self._heads = {question: a[: _common_prefix(a, b)]}
        return self._heads[question]

    def _score_one(self, toks: list[int], head: list[int]) -> float:
        """log P("yes") after ``toks``, evaluated as ``head`` (its part of the pair's tokens) in a batch of its own,
        kept from the previous pair when that one had the same head, then the rest: the same splits whatever came
        before (module docstring)."""
        import llama_cpp

        llm = self._llm
        h = min(
            _common_prefix(toks, head), len(toks) - 1
        )  # at least the last token is evaluated: its logits judge
        if h == self._evaluated_head and llm.n_tokens >= h and llm.input_ids[:h].tolist() == toks[:h]:
            llm.n_tokens = h
        else:
            llm.reset()
            llm.eval(toks[:h])
            self._evaluated_head = h
            self.stats["tokens_in"] += h
        llm.eval(toks[h:])
        self.stats["tokens_in"] += len(toks) - h
        ptr = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
        logits = np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),)).astype(np.float64)
        top = float(logits.max())
        log_z = top + float(np.log(np.exp(logits - top).sum()))
        yes = logits[self._yes]
        return float(yes.max() + np.log(np.exp(yes - yes.max()).sum()) - log_z)

    def _score_missing(self, todo: dict[str, dict[str, tuple[str, str]]]) -> None:
        # One progress line over every missing pair; the base class writes each query's scores as it finishes.
        total = sum(len(d) for d in todo.values())
        with Progress(
            "rerank (llm)", total, unit="pairs", enabled=self.show_progress and total > 0
        ) as progress:
            self._progress = progress
            try:
                super()._score_missing(todo)
            finally:
                self._progress = None

    def _predict(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        out = []
        for question, passage in pairs:
            out.append(self._score_one(self._tokens(question, passage), self._head(question)))
            if self._progress is not None:
                self._progress.update(1)
        return out


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _chat_formatter(llm: Any) -> Any:
    """``messages -> prompt text`` with the model's own chat template (a plain fallback when the GGUF has none)."""
    template = (llm.metadata or {}).get("tokenizer.chat_template")
    if not template:
        return lambda messages: (
            "".join(f"{m['role'].capitalize()}: {m['content']}\n\n" for m in messages) + "Assistant:"
        )
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    def token_text(tid: int) -> str:
        return llm.detokenize([tid], special=True).decode("utf-8", errors="ignore") if tid >= 0 else ""

    fmt = Jinja2ChatFormatter(
        template=template, eos_token=token_text(llm.token_eos()), bos_token=token_text(llm.token_bos())
    )
    return lambda messages: fmt(messages=messages).prompt


class LLMReranker:
    """The LLM reranker stage: rescore the first ``depth`` fused candidates by log P("yes") of a local GGUF model.

    ``model``: a shipped name (``qwen2.5-coder-1.5b-instruct``, the generator's default; ``smollm2-135m-instruct``) or
    a ``.gguf`` path; ``prompt``: the judgement template (``{question}``, ``{passage}``); ``depth``;
    ``max_passage_tokens``; ``n_ctx``; ``n_threads`` (0 = all cores). ``params()`` also holds ``build`` (the llama.cpp
    build's system info), so it is logged and part of the fingerprint.
    """

    kind: ClassVar[str] = "reranker"

    def __init__(
        self,
        name: str = "rerank",
        model: str = QWEN,
        prompt: str = "",
        depth: int = 20,
        max_passage_tokens: int = 384,
        n_ctx: int = 1024,
        n_threads: int = 0,
    ) -> None:
        self.name = name
        self.model = str(check_str(f"{name}.model", model))
        self.prompt_path = str(check_str(f"{name}.prompt", prompt))
        self.template = PromptTemplate.load(self.prompt_path, f"{name}.prompt", FIELDS)
        self.depth = check_int(f"{name}.depth", depth, 1)
        self.max_passage_tokens = check_int(
            f"{name}.max_passage_tokens", max_passage_tokens, *PASSAGE_TOKENS_RANGE
        )
        self.n_ctx = check_int(f"{name}.n_ctx", n_ctx, *N_CTX_RANGE)
        self.n_threads = check_int(f"{name}.n_threads", n_threads, 0, MAX_THREADS)
        if self.max_passage_tokens + PROMPT_MARGIN_TOKENS > self.n_ctx:
            from ablate.errors import ConfigError

            raise ConfigError(
                f"{name}.n_ctx",
                self.n_ctx,
                f"must hold the passage ({self.max_passage_tokens} tokens) plus the prompt: raise it or lower "
                f"{name}.max_passage_tokens",
            )
        self._sha256 = identify_gguf(self.model, f"{name}.model")  # a missing model fails before any work
        # a build this CPU cannot run is refused now, not mid-run with 'Illegal instruction'
        self.build, self.build_tier = checked_build(f"{name} (llama.cpp)", llama_build)
        self.stats: dict[str, float] = dict.fromkeys((*STAT_KEYS, "tokens_in"), 0.0)
        self._scorer: LlmJudgeScorer | None = None

    def params(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "prompt": self.prompt_path,
            "prompt_sha256": self.template.sha256,
            "depth": self.depth,
            "max_passage_tokens": self.max_passage_tokens,
            "n_ctx": self.n_ctx,
            "n_threads": self.n_threads,
            "build": self.build,  # the llama.cpp build: logged as rerank.build, part of the fingerprint
            "build_tier": self.build_tier,  # its name (tier4, tier3, neon, native, other): not in the fingerprint
        }

    def fingerprint(self) -> Fingerprint:
        params = {
            k: v for k, v in self.params().items() if k not in ("prompt", "build_tier")
        }  # the path is where, the sha is what; the build's name is its string's
        return fingerprint_of(
            self,
            params,
            libraries=LIBRARIES,
            resources={"model": {"gguf_sha256": self._sha256}, "prompt_sha256": self.template.sha256},
        )

    def bind(self, snapshot: Any, split: str) -> LLMReranker:
        return self

    def prepare(self, context: StageContext) -> None:
        if self._scorer is not None:
            return
        resolved = resolve_gguf(self.model, context.cache, f"{self.name}.model")
        self._scorer = LlmJudgeScorer(
            resolved.path,
            resolved.sha256,
            self.template,
            cache=context.cache,
            n_ctx=self.n_ctx,
            n_threads=self.n_threads,
            max_passage_tokens=self.max_passage_tokens,
            label=self.model,
            show_progress=context.show_progress,
        )

    def rerank(self, run: Run, query_text: Mapping[str, str], chunk_text: Mapping[str, str]) -> Run:
        if self._scorer is None:
            raise RuntimeError(f"stage {self.name}: prepare() before rerank()")
        out = self._scorer.rerank(run, query_text, chunk_text, self.depth)
        self.stats.update(self._scorer.stats)
        return out
