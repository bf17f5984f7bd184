"""Benchmark: answers per second of ablate's llama.cpp generator against a direct llama-cpp-python loop on the same
messages, and what reusing computed prompt state (the KV cache of a shared prefix) would save and change.

    python experiments/bench_generate.py                      # writes experiments/results/bench_generate.{md,json}
    python experiments/bench_generate.py --questions 6 --conditions ablate,raw
    python experiments/bench_generate.py --dump /tmp/messages.json          # only the messages, as JSON
    python experiments/bench_generate.py --engine ablate --messages /tmp/messages.json   # one engine alone
    python experiments/bench_generate.py --engine raw --messages /tmp/messages.json      # (time these two whole
                                                                   # processes against each other, e.g. /usr/bin/time)

**The messages** are the ones the runner builds (``ablate.runner.answers.render_prompts``): the demo's dev questions
(``--questions`` of them, in split order) with the Oracle's gold passages and with C's top ``context_k``, under the
default generator settings (``generator=llama_cpp``: the shipped Qwen, ``n_ctx``, threads, greedy, seed,
``max_tokens``). Retrieval runs through ``run_pipeline`` without the generator (its candidate cache may serve it);
nothing here is logged to MLflow.

**The contenders**, each with its own model instance, step through their prompts side by side: at step ``i`` every
contender answers its ``i``-th prompt, in an order that alternates from step to step, so a drifting load falls on all
of them alike:

* ``ablate``: ``LlamaCppGenerator.generate`` with a disabled cache (``Cache(enabled=False)``: nothing is served,
  every answer is generated; checked), one prompt per call, as the runner's answer stage calls it.
* ``raw``: ``Llama(model_path, n_ctx, n_threads, seed).create_chat_completion(messages, max_tokens, temperature=0,
  top_k=1, seed)`` after ``Llama.reset()``: the same work (every prompt evaluated whole), without ablate.
* ``prefix``: the same loop without ``reset()``: llama-cpp-python keeps the tokens the prompt shares with the
  previous one and evaluates the rest (split order: the Oracle's questions, then C's).
* ``prefix-sorted``: the same, with the prompts sorted by their text, so prompts sharing a prefix follow each other.
* ``aligned-sorted``: sorted, reusing only whole blocks of ``n_batch`` tokens of the shared prefix. llama.cpp
  evaluates a prompt in blocks of ``n_batch`` tokens from position 0; a prompt evaluated whole and one resumed at a
  block boundary run the same blocks, so the answers should not change (``prefix``'s split falls anywhere).
* ``raw-b64``, ``aligned-b64-sorted``: the same with ``n_batch`` 64 instead of llama-cpp-python's 512 (what ablate
  runs): smaller blocks let more of a shared prefix be reused, but evaluating in other blocks may itself change an
  answer, so these are compared with ``raw-b64`` too.

Reported: seconds and answers per second of each contender, the ratio to ``raw`` (total, and the median of the
per-step ratios), prompt tokens evaluated and reused, and how many answers are byte-identical to ``raw``'s and to
those of the raw loop with the same ``n_batch``. Figures are wall seconds of generation only (models are loaded
before the clock starts).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from _common import REPO, RESULTS, Report, machine_facts, say

Messages = list[dict[str, str]]
#: contenders: ``ablate``, or a raw loop ``raw`` / ``prefix`` / ``aligned``, with ``-b<N>`` (``n_batch`` N instead of
#: llama-cpp-python's 512, the default ablate runs) and ``-sorted`` (prompts sorted by text) as suffixes
CONDITION = re.compile(r"^(ablate|(raw|prefix|aligned)(-b(\d+))?(-sorted)?)$")
DEFAULT = "ablate,raw,prefix-sorted,aligned-sorted,raw-b64,aligned-b64-sorted"


# --------------------------------------------------------------------------------------------------------------------
# The messages the runner builds


def build_messages(variants: list[str], questions: int, extra: list[str]) -> dict[str, Any]:
    """The demo's dev messages for each variant (the runner's own rendering) and the generator's settings."""
    from ablate.app.precheck import check_command_line
    from ablate.cache import Cache
    from ablate.runner.answers import render_prompts
    from ablate.runner.pipeline import run_pipeline
    from ablate.runner.session import shared_session
    from ablate.stages.generate.gguf import resolve_gguf

    store = tempfile.mkdtemp(prefix="bench-generate-")
    argv = [
        "-m",
        f"variant={','.join(variants)}",
        "generator=llama_cpp",
        f"tracking.uri=sqlite:///{store}/mlflow.db",
        "progress=false",
        *extra,
    ]
    plan = check_command_line(argv, str(REPO))
    prompts: list[dict[str, Any]] = []
    settings: dict[str, Any] = {}
    for cell in plan.cells:
        job = cell.job
        gen = job.pipeline.generator
        assert gen is not None
        session = shared_session()
        snapshot = session.snapshot(job.corpus)
        cache = Cache(job.output.cache_dir, enabled=job.output.cache_enabled)
        result = run_pipeline(
            snapshot,
            job.corpus.split,
            replace(job.pipeline, generator=None),
            job.settings,
            cache,
            variant=job.variant,
            access=job.corpus.access,
            session=session,
        )
        qids, contexts, rendered = render_prompts(snapshot, job.corpus.split, gen, result.run)
        for qid, ctx, messages in list(zip(qids, contexts, rendered, strict=True))[:questions]:
            prompts.append({"variant": job.variant, "qid": qid, "context": list(ctx), "messages": messages})
        settings = {
            "model": gen.model,  # type: ignore[attr-defined]
            "path": resolve_gguf(gen.model, cache).path,  # type: ignore[attr-defined]
            "prompt": gen.prompt_path,  # type: ignore[attr-defined]
            "n_ctx": gen.n_ctx,  # type: ignore[attr-defined]
            "n_threads": gen.n_threads,  # type: ignore[attr-defined]
            "max_tokens": gen.max_tokens,  # type: ignore[attr-defined]
            "temperature": gen.temperature,  # type: ignore[attr-defined]
            "seed": gen.seed,  # type: ignore[attr-defined]
            "corpus": job.corpus.name,
            "split": job.corpus.split,
        }
    return {"settings": settings, "prompts": prompts}


# --------------------------------------------------------------------------------------------------------------------
# The contenders


class Ablate:
    """ablate's generator, its cache disabled."""

    def __init__(self, s: dict[str, Any]) -> None:
        from ablate.cache import Cache
        from ablate.stages.base import StageContext
        from ablate.stages.generate.llama_cpp import LlamaCppGenerator

        self.gen = LlamaCppGenerator(
            model=s["model"],
            prompt=s["prompt"],
            n_ctx=s["n_ctx"],
            n_threads=s["n_threads"],
            max_tokens=s["max_tokens"],
            temperature=s["temperature"],
            seed=s["seed"],
        )
        self.gen.prepare(StageContext(None, Cache()))  # type: ignore[arg-type]  # the model file, from the cache
        self.gen.warm()
        self.cache = Cache(enabled=False)
        self.prompt_tokens = 0

    def answer(self, messages: Messages) -> str:
        (g,) = self.gen.generate([messages], self.cache)[0]
        assert not g.cached, "the timed runs must generate every answer"
        self.prompt_tokens += g.tokens_in
        return g.text


class Raw:
    """A direct llama-cpp-python loop; ``mode``: ``whole`` (reset before each prompt), ``prefix`` (llama-cpp-python's
    own reuse of the prefix shared with the previous prompt) or ``aligned`` (only whole ``n_batch`` blocks of it)."""

    def __init__(self, s: dict[str, Any], mode: str = "whole", n_batch: int | None = None) -> None:
        import contextlib

        from llama_cpp import Llama

        # ablate is imported only for "aligned" (its rendering and tokenizing of the chat template)
        self.s, self.mode = s, mode
        threads = s["n_threads"] or max(1, os.cpu_count() or 1)
        with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
            self.llm = Llama(
                model_path=s["path"],
                n_ctx=s["n_ctx"],
                n_threads=threads,
                seed=s["seed"],
                verbose=False,
                **({"n_batch": n_batch} if n_batch else {}),
            )
        self.vocab = None
        if mode == "aligned":
            from ablate.stages.generate.llama_cpp import open_vocab

            self.vocab = open_vocab(s["path"], "bench")
        self.prev: list[int] = []  # the previous prompt's tokens
        self.prompt_tokens = 0  # evaluated (not reused)
        self.reused_tokens = 0

    def _keep(self, tokens: list[int]) -> int:
        """How many leading tokens of the previous prompt's state this prompt reuses."""
        shared = 0
        for a, b in zip(self.prev, tokens, strict=False):
            if a != b:
                break
            shared += 1
        shared = min(shared, len(tokens) - 1)  # the last token is always evaluated (it gives the logits)
        if self.mode == "aligned":
            block = self.llm.n_batch
            return shared // block * block
        return shared

    def answer(self, messages: Messages) -> str:
        llm = self.llm
        if self.mode == "whole":
            llm.reset()
        elif self.mode == "aligned":
            from ablate.stages.generate.llama_cpp import prompt_token_ids

            assert self.vocab is not None
            tokens = prompt_token_ids(self.vocab, messages)
            keep = self._keep(tokens)
            if keep == 0:
                llm.reset()
            else:
                llm.n_tokens = keep  # llama-cpp-python then reuses these `keep` tokens and evaluates the rest
        out = llm.create_chat_completion(
            messages=messages,
            max_tokens=self.s["max_tokens"],
            temperature=self.s["temperature"],
            top_k=1 if self.s["temperature"] == 0 else 40,
            seed=self.s["seed"],
        )
        n_prompt = int(out["usage"]["prompt_tokens"])
        if self.mode != "whole":
            tokens = list(llm.input_ids[:n_prompt])
            reused = self._keep(tokens) if self.mode == "aligned" else self._shared(tokens)
            self.reused_tokens += reused
            self.prompt_tokens += n_prompt - reused
            self.prev = tokens
        else:
            self.prompt_tokens += n_prompt
        return out["choices"][0]["message"].get("content") or ""

    def _shared(self, tokens: list[int]) -> int:
        shared = 0
        for a, b in zip(self.prev, tokens, strict=False):
            if a != b:
                break
            shared += 1
        return min(shared, len(tokens) - 1)


def contender(name: str, s: dict[str, Any]) -> Any:
    m = CONDITION.match(name)
    assert m is not None, name
    if name == "ablate":
        return Ablate(s)
    return Raw(s, "whole" if m[2] == "raw" else m[2], int(m[4]) if m[4] else None)


def order(name: str, prompts: list[dict[str, Any]]) -> list[int]:
    """The order a contender asks the prompts in: split order, or sorted by the rendered text."""
    idx = list(range(len(prompts)))
    if name.endswith("-sorted"):
        idx.sort(key=lambda i: json.dumps(prompts[i]["messages"], ensure_ascii=False))
    return idx


def run_side_by_side(
    names: list[str], data: dict[str, Any], log: Callable[[str], None]
) -> dict[str, dict[str, Any]]:
    """Every contender through every prompt, step by step (see the module docstring)."""
    prompts, s = data["prompts"], data["settings"]
    engines = {}
    for n in names:
        t0 = time.perf_counter()
        engines[n] = contender(n, s)
        log(f"  loaded {n} in {time.perf_counter() - t0:.1f}s")
    orders = {n: order(n, prompts) for n in names}
    res: dict[str, dict[str, Any]] = {
        n: {"seconds": [0.0] * len(prompts), "texts": [""] * len(prompts)} for n in names
    }
    for step in range(len(prompts)):
        turn = names if step % 2 == 0 else names[::-1]
        for n in turn:
            i = orders[n][step]
            t0 = time.perf_counter()
            text = engines[n].answer(prompts[i]["messages"])
            res[n]["seconds"][i] = time.perf_counter() - t0
            res[n]["texts"][i] = text
        log(
            f"  step {step + 1}/{len(prompts)}: "
            + ", ".join(f"{n} {res[n]['seconds'][orders[n][step]]:.1f}s" for n in names)
        )
    for n in names:
        res[n]["prompt_tokens"] = engines[n].prompt_tokens
        res[n]["reused_tokens"] = getattr(engines[n], "reused_tokens", 0)
    return res


# --------------------------------------------------------------------------------------------------------------------
# One engine alone (for whole-process timing)


def run_one(engine: str, data: dict[str, Any]) -> None:
    prompts = data["prompts"]
    e = contender(engine, data["settings"])
    t0 = time.perf_counter()
    texts = [e.answer(prompts[i]["messages"]) for i in order(engine, prompts)]
    wall = time.perf_counter() - t0
    print(
        json.dumps(
            {
                "engine": engine,
                "answers": len(texts),
                "seconds": round(wall, 3),
                "answers_per_s": len(texts) / wall,
            }
        )
    )


# --------------------------------------------------------------------------------------------------------------------


def prefix_stats(data: dict[str, Any]) -> list[list[Any]]:
    """What reuse could save, counted with the model's tokenizer (no model run): per order (split, sorted by text),
    the prompt tokens, those shared with the previous prompt, and those in whole blocks of 512 and 64 tokens."""
    from ablate.stages.generate.llama_cpp import open_vocab, prompt_token_ids

    vocab = open_vocab(data["settings"]["path"], "bench")
    tokens = [prompt_token_ids(vocab, p["messages"]) for p in data["prompts"]]
    rows = []
    for name in ("split order", "sorted by text"):
        idx = order("x-sorted" if name.startswith("sorted") else "x", data["prompts"])
        total = shared = b512 = b64 = 0
        prev: list[int] = []
        for i in idx:
            t = tokens[i]
            k = 0
            for a, b in zip(prev, t, strict=False):
                if a != b:
                    break
                k += 1
            k = min(k, len(t) - 1)
            total, shared = total + len(t), shared + k
            b512, b64 = b512 + k // 512 * 512, b64 + k // 64 * 64
            prev = t
        rows.append([name, len(idx), total, max(len(t) for t in tokens), shared, b512, b64])
    return rows


def _same(r: dict[str, Any], other: dict[str, Any] | None) -> int:
    """How many answers of ``r`` are byte-identical to ``other``'s for the same prompt."""
    return sum(1 for a, b in zip(r["texts"], other["texts"], strict=True) if a == b) if other else 0


def report(
    data: dict[str, Any], res: dict[str, dict[str, Any]], names: list[str], facts: dict[str, str]
) -> None:
    prompts, s = data["prompts"], data["settings"]
    n = len(prompts)
    rep = Report(
        "generate",
        "Answers per second: ablate's generator against a direct llama-cpp-python loop",
        intro=(
            f"{n} prompts: the {s['corpus']} {s['split']} questions ({', '.join(dict.fromkeys(p['variant'] for p in prompts))}) "
            f"as the runner renders them; model {s['model']}, n_ctx {s['n_ctx']}, n_threads {s['n_threads']} "
            f"(0 = all cores), max_tokens {s['max_tokens']}, temperature {s['temperature']}, seed {s['seed']}. "
            "Wall seconds of generation only; contenders side by side, prompt by prompt (see the script's docstring)."
        ),
    )
    base = res["raw"] if "raw" in res else None
    rows = []
    for name in names:
        r = res[name]
        total = sum(r["seconds"])
        m = CONDITION.match(name)
        peer_name = f"raw-b{m[4]}" if m and m[4] else "raw"
        peer = res.get(peer_name)
        rows.append(
            [
                name,
                total,
                n / total,
                (sum(base["seconds"]) / total) if base else float("nan"),
                statistics.median(b / a for a, b in zip(r["seconds"], base["seconds"], strict=True) if a > 0)
                if base
                else float("nan"),
                r["prompt_tokens"],
                r["reused_tokens"],
                f"{_same(r, base)}/{n}" if base else "n/a",
                f"{_same(r, peer)}/{n} ({peer_name})" if peer else "n/a",
            ]
        )
    rep.heading("Side by side")
    rep.table(
        [
            "contender",
            "seconds",
            "answers/s",
            "answers/s vs raw",
            "median per-prompt ratio",
            "prompt tokens evaluated",
            "reused",
            "byte-identical to raw",
            "to raw at its n_batch",
        ],
        rows,
    )
    if base:
        for name in names:
            diff = [
                i for i, (a, b) in enumerate(zip(res[name]["texts"], base["texts"], strict=True)) if a != b
            ]
            if diff:
                rep.para(
                    f"{name}: answers differing from raw's: "
                    + ", ".join(f"{prompts[i]['variant']}/{prompts[i]['qid']}" for i in diff)
                )
    rep.heading("What prefix reuse could save (counted, not timed)")
    rep.table(
        [
            "order",
            "prompts",
            "prompt tokens",
            "longest prompt",
            "shared with the previous prompt",
            "in whole blocks of 512",
            "in whole blocks of 64",
        ],
        prefix_stats(data),
    )
    rep.heading("Machine")
    rep.facts(facts)
    rep.emit()
    out = RESULTS / "bench_generate.json"
    out.write_text(
        json.dumps(
            {
                "command": rep.command,
                "settings": {k: v for k, v in s.items() if k != "path"},
                "facts": facts,
                "prompts": [{k: p[k] for k in ("variant", "qid", "context")} for p in prompts],
                "contenders": {
                    name: {
                        "seconds_total": sum(res[name]["seconds"]),
                        "answers_per_s": n / sum(res[name]["seconds"]),
                        "prompt_tokens_evaluated": res[name]["prompt_tokens"],
                        "prompt_tokens_reused": res[name]["reused_tokens"],
                        "seconds": res[name]["seconds"],
                        "texts": res[name]["texts"],
                    }
                    for name in names
                },
            },
            indent=1,
            ensure_ascii=False,
        )
        + "\n",
        encoding="utf-8",
    )
    print(f"wrote {out}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--variants", default="oracle,C", help="demo variants whose contexts are asked (default oracle,C)"
    )
    ap.add_argument(
        "--questions", type=int, default=20, help="dev questions per variant, in split order (20: all)"
    )
    ap.add_argument("--conditions", default=DEFAULT, help=f"contenders (default {DEFAULT}; see CONDITION)")
    ap.add_argument("--start", type=int, default=0, help="skip this many dev questions per variant first")
    ap.add_argument(
        "--stats", action="store_true", help="print the prefix statistics (no model run) and stop"
    )
    ap.add_argument("--dump", default="", help="write the messages and settings as JSON and stop")
    ap.add_argument("--messages", default="", help="read the messages from this JSON (written by --dump)")
    ap.add_argument(
        "--engine", default="", help="run this one contender over the messages and print its figures"
    )
    ap.add_argument(
        "overrides", nargs="*", help="extra overrides for python -m ablate (e.g. generator.n_threads=2)"
    )
    a = ap.parse_args(argv)
    if a.messages:
        data = json.loads(Path(a.messages).read_text(encoding="utf-8"))
    else:
        say("building the messages (retrieval through ablate's pipeline; its caches may serve it)")
        data = build_messages(a.variants.split(","), a.start + a.questions, a.overrides)
    if a.start:  # the questions from --start on, per variant
        seen: dict[str, int] = {}
        kept = []
        for p in data["prompts"]:
            seen[p["variant"]] = seen.get(p["variant"], 0) + 1
            if a.start < seen[p["variant"]] <= a.start + a.questions:
                kept.append(p)
        data["prompts"] = kept
    if a.dump:
        Path(a.dump).write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
        say(f"wrote {len(data['prompts'])} prompts to {a.dump}")
        return 0
    if a.stats:
        for row in prefix_stats(data):
            print(row)
        return 0
    if a.engine:
        run_one(a.engine, data)
        return 0
    names = [c for c in a.conditions.split(",") if c]
    unknown = [n for n in names if not CONDITION.match(n)]
    if unknown:
        print(
            f"error: --conditions {unknown[0]}: ablate, or raw|prefix|aligned[-b<N>][-sorted]. Fix: e.g. "
            f"--conditions {DEFAULT}",
            file=sys.stderr,
        )
        return 2
    facts = machine_facts(["llama-cpp-python"])
    say(f"{len(data['prompts'])} prompts x {len(names)} contenders")
    res = run_side_by_side(names, data, say)
    facts["load average (1/5/15 min, at end)"] = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    report(data, res, names, facts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
