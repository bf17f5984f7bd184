"""Benchmark: prefill and decode speed of llama.cpp builds (the pinned tiers of ``make setup``, or a native build)
side by side on the same demo prompts, and whether their greedy answers agree.

    python experiments/bench_generate.py --variants oracle,C --questions 3 --dump /tmp/messages.json
    python experiments/bench_tiers.py --messages /tmp/messages.json \\
        --builds tier4=/path/to/tier4-site,tier3=/path/to/tier3-site --rounds 3
        # writes experiments/results/bench_tiers.md

A build is a folder holding an installed ``llama_cpp`` package (``pip install --no-deps --target DIR WHEEL``, e.g.
the wheels ``make setup`` keeps in ``.wheels/``); each contender runs in its own process with that folder first on
``PYTHONPATH``, so one machine measures every build. Each round runs every build once over the same prompts, in an
order that alternates from round to round (tier4 tier3, tier3 tier4, ...), so a drifting load falls on all alike.
Within a process the model is loaded before the clock starts; every prompt is evaluated whole (``reset()`` first,
as ablate's generator does), greedy, with the generator's settings of the messages file. Prefill and decode speeds
are llama.cpp's own counters (``llama_perf_context``: prompt tokens over prompt-eval time, generated tokens over
eval time), per prompt; the report gives each build's median and range over all prompts and rounds, the ratio of
the medians to the first build's, and how many answers are byte-identical to the first build's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from _common import RESULTS, Report, machine_facts, say

HERE = Path(__file__).resolve().parent


def worker(messages_file: str, limit: int) -> None:
    """One build's process: every prompt once, one JSON line each (speeds, answer, build string)."""
    import llama_cpp
    from llama_cpp import Llama

    data = json.loads(Path(messages_file).read_text(encoding="utf-8"))
    s, prompts = data["settings"], data["prompts"][: limit or None]
    info = llama_cpp.llama_print_system_info()
    build = (info.decode() if isinstance(info, bytes) else str(info)).strip()
    threads = s["n_threads"] or max(1, os.cpu_count() or 1)
    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
        llm = Llama(model_path=s["path"], n_ctx=s["n_ctx"], n_threads=threads, seed=s["seed"], verbose=False)
    ctx = llm._ctx.ctx
    for p in prompts:
        llm.reset()
        llama_cpp.llama_perf_context_reset(ctx)
        out = llm.create_chat_completion(
            messages=p["messages"],
            max_tokens=s["max_tokens"],
            temperature=s["temperature"],
            top_k=1 if s["temperature"] == 0 else 40,
            seed=s["seed"],
        )
        perf = llama_cpp.llama_perf_context(ctx)
        row = {
            "qid": f"{p['variant']}/{p['qid']}",
            "build": build,
            "prompt_tokens": int(perf.n_p_eval),
            "prefill_tok_s": perf.n_p_eval / (perf.t_p_eval_ms / 1000) if perf.t_p_eval_ms else 0.0,
            "decode_tokens": int(perf.n_eval),
            "decode_tok_s": perf.n_eval / (perf.t_eval_ms / 1000) if perf.t_eval_ms else 0.0,
            "answer": out["choices"][0]["message"].get("content") or "",
        }
        print(json.dumps(row, ensure_ascii=False), flush=True)


def run_build(site: str, messages: str, limit: int) -> list[dict[str, Any]]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([site, str(HERE), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--messages", messages]
    cmd += ["--prompts", str(limit)]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", required=True, help="prompts and settings (bench_generate.py --dump)")
    ap.add_argument("--builds", default="", help="NAME=SITE_DIR,... (the first is the reference)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=0, help="only the first N prompts (0: all)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=str(RESULTS / "bench_tiers.md"))
    a = ap.parse_args(argv)
    if a.worker:
        worker(a.messages, a.prompts)
        return 0
    builds = [tuple(b.split("=", 1)) for b in a.builds.split(",") if b]
    if len(builds) < 2 or any(len(b) != 2 or not Path(b[1]).is_dir() for b in builds):
        print(
            "error: --builds needs NAME=DIR,NAME=DIR with existing folders. Fix: e.g. "
            "--builds tier4=/tmp/t4site,tier3=/tmp/t3site",
            file=sys.stderr,
        )
        return 2
    facts = machine_facts(["llama-cpp-python"])
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in builds}
    for r in range(a.rounds):
        order = builds if r % 2 == 0 else list(reversed(builds))
        for name, site in order:
            say(f"round {r + 1}/{a.rounds}: {name}")
            rows[name] += [dict(x, round=r) for x in run_build(site, a.messages, a.prompts)]
    facts["load average (1/5/15 min, at end)"] = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    ref = builds[0][0]
    med = {
        n: {k: statistics.median(x[k] for x in rows[n]) for k in ("prefill_tok_s", "decode_tok_s")}
        for n in rows
    }
    table = []
    ref_answers = {(x["round"], x["qid"]): x["answer"] for x in rows[ref]}
    for name, _ in builds:
        xs = rows[name]
        same = sum(ref_answers.get((x["round"], x["qid"])) == x["answer"] for x in xs)
        pre = [x["prefill_tok_s"] for x in xs]
        dec = [x["decode_tok_s"] for x in xs]
        table.append(
            [
                name,
                f"{med[name]['prefill_tok_s']:.1f} ({min(pre):.1f}–{max(pre):.1f})",
                f"{med[name]['prefill_tok_s'] / med[ref]['prefill_tok_s']:.2f}x",
                f"{med[name]['decode_tok_s']:.1f} ({min(dec):.1f}–{max(dec):.1f})",
                f"{med[name]['decode_tok_s'] / med[ref]['decode_tok_s']:.2f}x",
                f"{same}/{len(xs)}",
                (xs[0]["build"] if xs else "").replace("|", "\\|"),  # a Markdown table cell
            ]
        )
    n_prompts = len(rows[ref]) // max(1, a.rounds)
    tokens = statistics.median(x["prompt_tokens"] for x in rows[ref])
    rep = Report("tiers", "llama.cpp build tiers: prefill and decode speed side by side", __doc__ or "")
    rep.heading("Results")
    rep.para(
        f"{n_prompts} prompts (median {tokens:.0f} prompt tokens) x {a.rounds} rounds per build; "
        "speeds in tokens per second, median (min–max) over every prompt of every round."
    )
    rep.table(
        [
            "build",
            "prefill tok/s",
            "vs " + ref,
            "decode tok/s",
            "vs " + ref,
            "answers = " + ref,
            "llama_print_system_info()",
        ],
        table,
    )
    rep.heading("Machine")
    rep.facts(facts)
    rep.emit(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
