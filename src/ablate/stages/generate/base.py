"""What every generator shares: its decoding parameters, its prompt template, and the content cache of generations.

A generator turns (question, context passages) into an answer. Subclasses say how one chat completion is made
(:meth:`GeneratorBase._complete`) and what identifies their model (:meth:`GeneratorBase.model_identity`); this base
does the rest:

* **Parameters** (checked at construction): ``prompt`` (a shipped template's name or a template file,
  :mod:`ablate.stages.generate.prompt`; a name follows the corpus language once the stage is bound),
  ``context_k`` (how many of the final ranking's passages go in), ``max_tokens``, ``temperature`` (0 = greedy),
  ``seed``, ``repeats`` (``> 1`` measures consistency; intervals still resample questions), and optional prices per
  1,000 input / output tokens for the cost figure.
* **Cache**: every generation is stored by ``key_of("generation/v1", fingerprint key, sha256 of the rendered chat
  messages, repeat)``: the fingerprint holds the model's identity (a GGUF's full sha256), the decoding parameters,
  the template's sha256, library and code versions. Re-running a variant, or a sweep that reorders retrieval without
  changing a question's context, generates nothing; a changed template regenerates everything. A cached answer keeps
  the latency and token counts it was generated with (its latency is that measurement, never the lookup's time; an
  entry without one has an unknown, NaN, latency).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from ablate.cache import Cache, key_of
from ablate.progress import AnswerSink, Progress
from ablate.stages.base import Fingerprint, StageContext, check_float, check_int, check_str, fingerprint_of
from ablate.stages.generate.prompt import SETTING, PromptChoice, PromptTemplate, choose_prompt

Messages = list[dict[str, str]]
KIND = "generations"


@dataclass(frozen=True)
class Generation:
    text: str
    tokens_in: int
    tokens_out: int
    latency_s: float
    cached: bool = False


def _stored_latency(stored: dict[str, Any]) -> float:
    """The latency an answer was generated with, as its cache entry keeps it; NaN (unknown) for an entry without a
    usable one, never the time the lookup took."""
    value = stored.get("latency_s")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return math.nan


class GeneratorBase:
    """See the module docstring. Subclasses implement :meth:`_complete` and :meth:`model_identity`."""

    kind: ClassVar[str] = "generator"
    libraries: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        name: str = "generator",
        prompt: str = "",
        context_k: int = 5,
        max_tokens: int = 128,
        temperature: float = 0.0,
        seed: int = 0,
        repeats: int = 1,
        price_in_per_1k: float | None = None,
        price_out_per_1k: float | None = None,
    ) -> None:
        self.name = name
        self.prompt = str(check_str(f"{name}.prompt", prompt))
        self._use_prompt(choose_prompt(self.prompt, None, f"{name}.prompt"))
        self.context_k = check_int(f"{name}.context_k", context_k, 1, 100)
        self.max_tokens = check_int(f"{name}.max_tokens", max_tokens, 1, 8192)
        self.temperature = check_float(f"{name}.temperature", temperature, 0.0, 2.0)
        self.seed = check_int(f"{name}.seed", seed, 0)
        self.repeats = check_int(f"{name}.repeats", repeats, 1, 20)
        self.price_in = (
            None if price_in_per_1k is None else check_float(f"{name}.price_in_per_1k", price_in_per_1k, 0.0)
        )
        self.price_out = (
            None
            if price_out_per_1k is None
            else check_float(f"{name}.price_out_per_1k", price_out_per_1k, 0.0)
        )
        self.stats: dict[str, float] = {"generated": 0.0, "cached": 0.0}

    def _use_prompt(self, choice: PromptChoice) -> None:
        self.prompt_path = choice.path
        self.prompt_name = choice.name
        self.prompt_source = choice.source
        self.template = PromptTemplate.load(choice.path, f"{self.name}.prompt")

    def use_template(self, template: PromptTemplate) -> None:
        """Ask ``template`` (loaded by the caller, e.g. a judgement template) instead of the configured prompt; the
        params, the fingerprint and the cache key follow it."""
        self.template = template
        self.prompt_path, self.prompt_name, self.prompt_source = template.path, None, SETTING

    # -- identity ---------------------------------------------------------------------------------------------------
    def model_identity(self) -> dict[str, Any]:  # pragma: no cover - subclasses
        raise NotImplementedError

    def backend_params(self) -> dict[str, Any]:
        return {}

    def params(self) -> dict[str, Any]:
        return {
            **self.backend_params(),
            "prompt": self.prompt_name or self.prompt_path,  # the shipped template's name, else the file
            "prompt_source": self.prompt_source,
            "prompt_sha256": self.template.sha256,
            "context_k": self.context_k,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
            "repeats": self.repeats,
            "price_in_per_1k": self.price_in,
            "price_out_per_1k": self.price_out,
        }

    def fingerprint(self) -> Fingerprint:
        params = {
            k: v for k, v in self.params().items() if k not in ("prompt", "prompt_source")
        }  # the name or path is where, the sha256 is what
        return fingerprint_of(
            self,
            params,
            libraries=self.libraries,
            resources={"model": self.model_identity(), "prompt_sha256": self.template.sha256},
        )

    def generation_identity(self) -> dict[str, Any]:
        """What determines one generation: the model, the decoding parameters, the template, libraries and code.
        Prices and ``repeats`` are left out (they do not change an answer; a repeat has its own index in the key)."""
        fp = self.fingerprint().as_dict()
        fp.pop("stage")
        fp["params"] = {k: v for k, v in fp["params"].items() if not k.startswith(("price_", "repeats"))}
        return fp

    def bind(self, snapshot: Any, split: str) -> GeneratorBase:
        """This stage when its prompt runs as named; else a copy with the template of the corpus language
        (:func:`~ablate.stages.generate.prompt.choose_prompt`: ``grounded`` is ``grounded_zh`` on a Chinese corpus)."""
        choice = choose_prompt(self.prompt, getattr(snapshot, "language", None), f"{self.name}.prompt")
        if (choice.path, choice.source) == (self.prompt_path, self.prompt_source):
            return self
        bound = copy.copy(self)
        bound.stats = dict.fromkeys(self.stats, 0.0)
        bound._use_prompt(choice)
        return bound

    def prepare(self, context: StageContext) -> None:
        """Load the model (subclasses); the base has nothing to prepare."""

    def check_fits(self, passages: Sequence[str], questions: Mapping[str, str], cache: Cache) -> bool:
        """Before anything runs: ``True`` when every prompt made of ``context_k`` of ``passages`` and one of
        ``questions`` (qid -> text) fits, ``False`` when the real prompts must be counted after retrieval
        (:meth:`prompt_room`, :meth:`prompt_tokens`); refuses (an :class:`~ablate.errors.AblateError` naming the
        setting and the fix) only what every run meets. The base knows no limit: a served model's context window is
        the server's business."""
        return True

    def prompt_room(self) -> int | None:
        """Tokens a prompt may take (``None``: no limit known here)."""
        return None

    def prompt_tokens(
        self, messages: Messages
    ) -> int:  # pragma: no cover - only asked when prompt_room is set
        """Tokens of ``messages`` as the model counts them."""
        raise NotImplementedError

    # -- generating -------------------------------------------------------------------------------------------------
    def _complete(self, messages: Messages, seed: int) -> Generation:  # pragma: no cover - subclasses
        raise NotImplementedError

    def warm(self) -> None:
        """Load what the first generation needs (a model), so its latency measures answering, not loading."""

    def cost(self, tokens_in: int, tokens_out: int) -> float | None:
        if self.price_in is None and self.price_out is None:
            return None
        return tokens_in / 1000 * (self.price_in or 0.0) + tokens_out / 1000 * (self.price_out or 0.0)

    def generate(
        self,
        prompts: Sequence[Messages],
        cache: Cache,
        show_progress: bool = False,
        answers: AnswerSink | None = None,
    ) -> list[list[Generation]]:
        """``repeats`` generations per prompt, from the cache when it has them. ``answers`` (a sweep's console) is
        told of each one, and then this run's own progress line is left out: the sweep's line counts them."""
        fp = key_of(self.generation_identity())
        out: list[list[Generation]] = []
        with Progress(
            f"generate ({self.name})",
            len(prompts) * self.repeats,
            unit="answers",
            enabled=show_progress and answers is None,
        ) as progress:
            for messages in prompts:
                msg_sha = hashlib.sha256(json.dumps(messages, ensure_ascii=False).encode("utf-8")).hexdigest()
                row = []
                for r in range(self.repeats):
                    key = key_of("generation/v1", fp, msg_sha, r)
                    stored = cache.load_json(KIND, key)
                    if isinstance(stored, dict) and isinstance(stored.get("text"), str):
                        gen = Generation(
                            stored["text"],
                            int(stored["tokens_in"]),
                            int(stored["tokens_out"]),
                            _stored_latency(stored),
                            cached=True,
                        )
                        self.stats["cached"] += 1
                    else:
                        self.warm()
                        t0 = time.perf_counter()
                        gen = self._complete(messages, self.seed + r)
                        gen = Generation(gen.text, gen.tokens_in, gen.tokens_out, time.perf_counter() - t0)
                        cache.save_json(KIND, key, {k: v for k, v in asdict(gen).items() if k != "cached"})
                        self.stats["generated"] += 1
                    row.append(gen)
                    progress.update(1)
                    if answers is not None:
                        answers.answered(None if gen.cached else gen.latency_s)
                out.append(row)
        return out
