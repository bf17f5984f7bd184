"""A local GGUF model through llama-cpp-python (``conf/generator/llama_cpp.yaml``).

``model``: a shipped name (``qwen2.5-coder-1.5b-instruct``, the default; ``smollm2-135m-instruct``) or a ``.gguf``
path, resolved offline (:mod:`ablate.stages.generate.gguf`); its full sha256 is the model's identity. ``n_ctx``: the
context window in tokens; ``n_threads``: CPU threads. Chat completion through the model's own chat template, greedy
by default (``temperature: 0``), with a fixed seed.

The llama.cpp build is part of the identity too (:func:`llama_build`, logged as ``generator.build``): pip compiles
llama-cpp-python for the CPU it is installed on (``GGML_NATIVE``), so one version built on an AVX2 machine and on an
AVX-512 machine runs different kernels, whose float rounding can make greedy decoding pick another token. A
generation made by another build is therefore never served from the cache, and two runs that differ only in the build
say so.

Every prompt is evaluated whole (the model's state is reset before each completion). llama-cpp-python would otherwise
keep the tokens the previous prompt shares with this one (the system text) and evaluate only the rest, and where that
split falls changes the float rounding of a quantised model's kernels: an answer would depend on which question was
asked before it (a variant run alone, a sweep in another order, a partly cached sweep), not only on what the cache key
holds.
"""

from __future__ import annotations

import contextlib
import functools
import os
from typing import Any, ClassVar

from ablate.errors import AblateError
from ablate.stages.base import StageContext, check_int, check_str
from ablate.stages.generate.base import Generation, GeneratorBase, Messages
from ablate.stages.generate.gguf import QWEN, ResolvedGGUF, identify_gguf, resolve_gguf

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
        self.build = llama_build()
        self._resolved: ResolvedGGUF | None = None
        self._llm: Any = None

    def backend_params(self) -> dict[str, Any]:
        """The settings, and ``build`` (:func:`llama_build`): logged as ``generator.build``, part of the fingerprint
        and so of every generation's cache key."""
        return {"model": self.model, "n_ctx": self.n_ctx, "n_threads": self.n_threads, "build": self.build}

    def model_identity(self) -> dict[str, Any]:
        return {"gguf_sha256": self._sha256}

    def prepare(self, context: StageContext) -> None:
        """Resolve (for a shipped Qwen: assemble once into the cache) the GGUF; the model loads on first use."""
        if self._resolved is None:
            self._resolved = resolve_gguf(self.model, context.cache, f"{self.name}.model")

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
