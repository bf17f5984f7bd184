"""A local GGUF model through llama-cpp-python (``conf/generator/llama_cpp.yaml``).

``model``: a shipped name (``qwen2.5-coder-1.5b-instruct``, the default; ``smollm2-135m-instruct``) or a ``.gguf``
path, resolved offline (:mod:`ablate.stages.generate.gguf`); its full sha256 is the model's identity. ``n_ctx``: the
context window in tokens; ``n_threads``: CPU threads. Chat completion through the model's own chat template, greedy
by default (``temperature: 0``), with a fixed seed.

Before anything runs, once the corpus is loaded, :func:`check_context_fits` bounds the worst-case prompt (the template
with the ``context_k`` passages of the corpus with the most tokens and the split's question with the most tokens,
counted by the model's own tokenizer and chat template). When that bound plus ``max_tokens`` exceeds ``n_ctx``,
the real prompts are counted after retrieval, before the first generation (:meth:`LlamaCppGenerator.prompt_tokens`,
:mod:`ablate.runner.context_fit`); only a question too long for ``n_ctx`` without any passage is refused up front.

The llama.cpp build is part of the identity too (:func:`llama_build`, logged as ``generator.build``): left to
itself pip compiles llama-cpp-python for the CPU it is installed on (``GGML_NATIVE``; ``make setup`` builds a pinned
tier instead, docs/builds.md), and one version built for AVX2 and for AVX-512 runs different kernels, whose float
rounding can make greedy decoding pick another token. A generation made by another build is therefore never served
from the cache, and two runs that differ only in the build say so.

Before anything runs, the build's instruction sets are checked against the CPU's (:mod:`ablate.stages.generate.cpu`):
a build this CPU cannot run is refused in one line naming the missing instruction sets and ``make setup`` as the fix,
instead of dying mid-run with ``Illegal instruction``. ``make setup`` builds a pinned tier (``tier4``, ``tier3``;
``neon`` on ARM; ``native`` when asked), logged as ``generator.build_tier`` beside the build (docs/builds.md).

Every prompt is evaluated whole (the model's state is reset before each completion). llama-cpp-python would otherwise
keep the tokens the previous prompt shares with this one (the system text) and evaluate only the rest, and where that
split falls changes the float rounding of a quantised model's kernels: an answer would depend on which question was
asked before it (a variant run alone, a sweep in another order, a partly cached sweep), not only on what the cache key
holds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import heapq
import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ablate.cache import Cache
from ablate.errors import AblateError, ConfigError, InputError
from ablate.stages.base import Fingerprint, StageContext, check_int, check_str
from ablate.stages.generate.base import Generation, GeneratorBase, Messages
from ablate.stages.generate.cpu import checked_build
from ablate.stages.generate.gguf import QWEN, ResolvedGGUF, identify_gguf, resolve_gguf
from ablate.stages.generate.prompt import PromptTemplate

#: Bump when how a completion is requested changes (part of the fingerprint and of every generation's cache key).
CODE_VERSION = "ablate-llama-cpp/2"


#: :func:`llama_build` when llama-cpp-python is not installed (the stage then fails when it loads its model).
NOT_INSTALLED = "llama-cpp-python not installed"


@functools.cache
def llama_build() -> str:
    """llama.cpp's ``llama_print_system_info()`` for the llama-cpp-python this process imports: the CPU features its
    kernels were compiled for (``CPU : SSE3 = 1 | ... | AVX2 = 1 | ... | AVX512 = 1 | ...``), read once per process
    without loading a model (llama.cpp's log, which goes to ``sys.stderr``, is silenced while it is read). Part of the
    identity of every stage that runs llama.cpp (module docstring)."""
    try:
        import llama_cpp
    except ImportError:
        return NOT_INSTALLED
    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
        info = llama_cpp.llama_print_system_info()
    return (info.decode("utf-8", errors="replace") if isinstance(info, bytes) else str(info)).strip()


def open_llama(path: str, n_ctx: int, n_threads: int, seed: int, what: str) -> Any:
    """A ``llama_cpp.Llama`` on ``path`` (CPU; ``n_threads`` 0 = all cores), its load chatter silenced; ``what``
    names the setting that needs it in the message when llama-cpp-python is missing."""
    try:
        from llama_cpp import Llama
    except ImportError:
        raise AblateError(
            f"{what} needs llama-cpp-python. Fix: make setup (or pip install "
            "'llama-cpp-python[server]==0.3.36'; it builds from source in a few minutes)"
        ) from None
    threads = n_threads or max(1, os.cpu_count() or 1)
    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
        return Llama(model_path=path, n_ctx=n_ctx, n_threads=threads, seed=seed, verbose=False)


def open_vocab(path: str, what: str) -> Any:
    """A ``llama_cpp.Llama`` holding only the vocabulary and metadata of the GGUF at ``path`` (no weights: fast),
    for counting tokens; a file llama.cpp cannot load is one line naming it."""
    try:
        from llama_cpp import Llama
    except ImportError:
        raise AblateError(
            f"{what} needs llama-cpp-python. Fix: make setup (or pip install "
            "'llama-cpp-python[server]==0.3.36'; it builds from source in a few minutes)"
        ) from None
    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
        try:
            return Llama(model_path=path, vocab_only=True, n_ctx=256, verbose=False)
        except ValueError as e:
            raise InputError(
                f"{path} ({what})",
                f"llama.cpp cannot load it ({e})",
                "give a GGUF of an architecture this llama-cpp-python supports, or upgrade llama-cpp-python",
            ) from None


def prompt_tokens(vocab: Any, messages: Messages) -> int:
    """How many tokens ``messages`` take once the model's chat template renders them (:func:`prompt_token_ids`)."""
    return len(prompt_token_ids(vocab, messages))


def prompt_token_ids(vocab: Any, messages: Messages) -> list[int]:
    """The tokens of ``messages`` once the model's chat template renders them, as ``create_chat_completion`` renders
    and tokenizes them (the GGUF's template through llama-cpp-python's Jinja formatter; its llama-2 fallback for a
    GGUF without one)."""
    result = _formatter(vocab)(messages=messages)
    return list(vocab.tokenize(result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True))


def _formatter(vocab: Any) -> Any:
    """The chat formatter of ``vocab``'s GGUF, built once per vocabulary: compiling its Jinja template costs more
    than rendering and tokenizing a prompt, and the fit of every prompt (:mod:`ablate.runner.context_fit`) asks for
    it once per question."""
    built = getattr(vocab, "_ablate_chat_formatter", None)
    if built is not None:
        return built
    from llama_cpp import llama_chat_format as formats

    template = vocab.metadata.get("tokenizer.chat_template")
    if template:

        def text(token: int) -> str:
            return vocab.detokenize([token], special=True).decode("utf-8", "replace") if token >= 0 else ""

        built = formats.Jinja2ChatFormatter(
            template=template, eos_token=text(vocab.token_eos()), bos_token=text(vocab.token_bos())
        )
    else:
        built = formats.format_llama2
    vocab._ablate_chat_formatter = built
    return built


def longest_prompt(
    vocab: Any, template: PromptTemplate, passages: Sequence[str], questions: Sequence[str], k: int
) -> tuple[Messages, int]:
    """The worst case of a question's prompt: the template with the ``k`` passages of most tokens and the question of
    most tokens, and its size in tokens. Candidates are the longest in UTF-8 bytes (a few more than needed), then
    ranked by their real token counts; so a corpus is never tokenized whole."""

    def most_tokens(texts: Sequence[str], n: int) -> list[str]:
        pool = heapq.nlargest(2 * n + 8, texts, key=lambda t: len(t.encode("utf-8")))
        counted = [(len(vocab.tokenize(t.strip().encode("utf-8"), add_bos=False)), t) for t in pool]
        return [t for _, t in heapq.nlargest(n, counted, key=lambda c: c[0])]

    question = (most_tokens(questions, 1) or [""])[0]
    messages = template.render(question, most_tokens(passages, k))
    return messages, prompt_tokens(vocab, messages)


def check_context_fits(
    gen: LlamaCppGenerator, path: str, passages: Sequence[str], questions: Mapping[str, str]
) -> bool:
    """Whether every prompt of ``questions`` (qid -> text) with ``gen.context_k`` of ``passages`` fits ``gen.n_ctx``
    whatever retrieval ranks: the worst case (:func:`longest_prompt`) plus ``gen.max_tokens`` within ``gen.n_ctx``.
    ``False`` says the real prompts must be counted after retrieval (:mod:`ablate.runner.context_fit`): the worst
    case is a bound, and a few long passages no question retrieves must not stop a run. Refused here, in one line,
    only what every run of these questions meets: a question whose prompt without any passage, plus
    ``gen.max_tokens``, exceeds ``gen.n_ctx``."""
    name = gen.name
    vocab = open_vocab(path, f"{name}.model")
    texts = list(questions.values())
    if longest_prompt(vocab, gen.template, passages, texts, gen.context_k)[1] + gen.max_tokens <= gen.n_ctx:
        return True
    messages, alone = longest_prompt(vocab, gen.template, [], texts, 0)
    if alone + gen.max_tokens <= gen.n_ctx:
        return False
    asked = messages[-1]["content"]
    found = [q for q, t in questions.items() if t.strip() and t.strip() in asked]
    qid = max(found, key=lambda q: len(questions[q]), default="?")  # the question longest_prompt chose
    need = alone + gen.max_tokens
    raise ConfigError(
        f"{name}.n_ctx",
        gen.n_ctx,
        f"question {qid!r} alone (the template, no passage) takes ~{alone:,} tokens, and with {name}.max_tokens="
        f"{gen.max_tokens} needs ~{need:,} (counted with the model's tokenizer). Fix: raise {name}.n_ctx to "
        f"{need:,} or more, lower {name}.max_tokens, or shorten the question",
    )


class LlamaCppGenerator(GeneratorBase):
    """See the module docstring; the parameters of :class:`~ablate.stages.generate.base.GeneratorBase` apply."""

    libraries: ClassVar[tuple[str, ...]] = ("llama-cpp-python",)

    def __init__(
        self,
        name: str = "generator",
        model: str = QWEN,
        n_ctx: int = 4096,
        n_threads: int = 0,
        **common: Any,
    ) -> None:
        super().__init__(name=name, **common)
        self.model = str(check_str(f"{name}.model", model))
        self.n_ctx = check_int(f"{name}.n_ctx", n_ctx, 256, 131072)
        self.n_threads = check_int(f"{name}.n_threads", n_threads, 0, 256)
        self._sha256 = identify_gguf(
            self.model, f"{name}.model"
        )  # fails now, before any work, when it is missing
        # a build this CPU cannot run is refused now, not mid-run with 'Illegal instruction'
        self.build, self.build_tier = checked_build(f"{name} (llama.cpp)", llama_build)
        self._resolved: ResolvedGGUF | None = None
        self._llm: Any = None
        self._vocab: Any = None

    def backend_params(self) -> dict[str, Any]:
        """The settings, and ``build`` (:func:`llama_build`): logged as ``generator.build``, part of the fingerprint
        and so of every generation's cache key."""
        return {"model": self.model, "n_ctx": self.n_ctx, "n_threads": self.n_threads, "build": self.build}

    def params(self) -> dict[str, Any]:
        """The base's, and ``build_tier``: the name of the build (:func:`~ablate.stages.generate.cpu.build_tier`:
        ``tier4``, ``tier3``, ``neon``, ``native`` or ``other``), logged as ``generator.build_tier``. The build string
        is the identity; its name is left out of the fingerprint (:meth:`fingerprint`)."""
        return {**super().params(), "build_tier": self.build_tier}

    def fingerprint(self) -> Fingerprint:
        fp = super().fingerprint()
        params = {k: v for k, v in fp.params.items() if k != "build_tier"}
        return dataclasses.replace(fp, params=params)

    def model_identity(self) -> dict[str, Any]:
        return {"gguf_sha256": self._sha256}

    def prepare(self, context: StageContext) -> None:
        """Resolve (for a shipped Qwen: assemble once into the cache) the GGUF; the model loads on first use."""
        if self._resolved is None:
            self._resolved = resolve_gguf(self.model, context.cache, f"{self.name}.model")

    def check_fits(self, passages: Sequence[str], questions: Mapping[str, str], cache: Cache) -> bool:
        """Whether the worst-case prompt fits ``n_ctx`` (:func:`check_context_fits`)."""
        resolved = self._resolved or resolve_gguf(self.model, cache, f"{self.name}.model")
        return check_context_fits(self, resolved.path, passages, questions)

    def prompt_room(self) -> int:
        """Tokens a prompt may take: the context window less the answer's ``max_tokens``."""
        return self.n_ctx - self.max_tokens

    def prompt_tokens(self, messages: Messages) -> int:
        """Tokens of ``messages`` as this model counts them (:func:`prompt_tokens`); after :meth:`prepare`."""
        if self._vocab is None:
            if self._resolved is None:
                raise RuntimeError(f"stage {self.name}: prepare() before counting tokens")
            self._vocab = open_vocab(self._resolved.path, f"{self.name}.model")
        return prompt_tokens(self._vocab, messages)

    def warm(self) -> None:
        self._load()

    def _load(self) -> Any:
        if self._llm is None:
            if self._resolved is None:
                raise RuntimeError(f"stage {self.name}: prepare() before generating")
            self._llm = open_llama(
                self._resolved.path, self.n_ctx, self.n_threads, self.seed, "generator=llama_cpp"
            )
        return self._llm

    def _complete(self, messages: Messages, seed: int) -> Generation:
        llm = self._load()
        llm.reset()  # evaluate the whole prompt, whatever came before (module docstring)
        out = llm.create_chat_completion(
            messages=messages,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            top_k=1 if self.temperature == 0 else 40,
            seed=seed,
        )
        usage = out.get("usage") or {}
        text = out["choices"][0]["message"].get("content") or ""
        return Generation(
            text, int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)), 0.0
        )
