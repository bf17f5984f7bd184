"""Does the llama.cpp build change the demo's answers? Three tools for ``experiments/results/llama_build.md``.

    python experiments/llama_build.py info
        the llama-cpp-python this process imports (put another build first on PYTHONPATH to inspect it): its path,
        version and ``llama_print_system_info()`` (the CPU features its kernels were compiled for)
    python experiments/llama_build.py compare avx2=sqlite:///a/mlflow.db native=sqlite:///b/mlflow.db
        two stores that each ran the demo sweep (``python -m ablate -m variant=A,B,C,D,oracle generator=llama_cpp``),
        answer by answer: per variant the answer metrics of each side (as the demo's table shows them) and how many
        answers differ, then every differing answer
    python experiments/llama_build.py regen sqlite:///a/mlflow.db --variant C --questions 6 --threads 1,2
        regenerates the first questions of one recorded run with each thread count (a new model per count, no
        generation cache, every prompt evaluated whole) and says, per question, whether the text equals the recorded
        answer and whether the thread counts agree
    python experiments/llama_build.py split sqlite:///a/mlflow.db --variant C --questions 6
        for consecutive questions of a run: the logits after a prompt evaluated whole vs evaluated after the previous
        prompt, keeping the tokens the two share (what llama-cpp-python does between completions unless reset)

Runs are read through :mod:`ablate.tracking`; the prompts of ``regen`` are rebuilt from the run's ``answers.csv``
(its context chunk ids), the corpus it names and the prompt template, exactly as :mod:`ablate.runner.answers` renders
them (a regenerated answer equal to the recorded one at the run's own thread count checks that).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pandas as pd  # noqa: E402

from ablate.record import ROLE_SWEEP_PARENT, T_ROLE, RecordedRun  # noqa: E402
from ablate.tracking import Tracker  # noqa: E402

ANSWERS = "answers.csv"


def info() -> None:
    import llama_cpp

    from ablate.stages.generate.llama_cpp import llama_build

    print(f"llama-cpp-python {llama_cpp.__version__} from {Path(llama_cpp.__file__).parent}")
    print(f"llama_print_system_info(): {llama_build()}")


def _answer_runs(uri: str, experiment: str) -> dict[str, RecordedRun]:
    """The newest finished run with answers per variant."""
    t = Tracker(uri)
    eid = t.experiment_id(experiment, create=False)
    if eid is None:
        sys.exit(f"error: no experiment {experiment!r} in {uri}")
    out: dict[str, RecordedRun] = {}
    for run in t.find_runs([eid], newest_first=True):
        if run.status != "FINISHED" or run.tags.get(T_ROLE) == ROLE_SWEEP_PARENT:
            continue
        if run.params.get("pipeline.generator", "none") == "none":
            continue
        out.setdefault(run.variant, run)
    return dict(sorted(out.items(), key=lambda kv: kv[1].variant_order))


def _answers(uri: str, run: RecordedRun, tmp: Path) -> pd.DataFrame:
    path = Tracker(uri).download_artifact(run.run_id, ANSWERS, tmp / run.run_id)
    if path is None:
        sys.exit(f"error: run {run.run_id} in {uri} has no {ANSWERS}")
    df = pd.read_csv(path, dtype={"qid": str}, keep_default_na=False).set_index("qid")
    return df


def _truthy(col: pd.Series) -> pd.Series:
    return col.astype(str).str.lower().isin(("true", "1", "1.0"))


def figures(df: pd.DataFrame) -> dict[str, str]:
    """The demo table's answer columns from one run's answers.csv."""
    answerable = df[_truthy(df["answerable"])]
    no_answer = df[_truthy(df["no_answer"])]
    diag = answerable["diagnosis"].astype(str)
    support = pd.to_numeric(answerable["citations_support"], errors="coerce")
    return {
        "correct": f"{pd.to_numeric(answerable['correct']).mean():.3f}",
        "citations support": f"{support.mean():.2f}",
        "refused no-answer": f"{int(_truthy(no_answer['refused']).sum())}/{len(no_answer)}",
        "wrong: generation / retrieval": (
            f"{int((diag == 'generation_failure').sum())} / {int((diag == 'retrieval_failure').sum())}"
        ),
    }


def compare(sides: list[tuple[str, str]], experiment: str, width: int) -> None:
    (la, ua), (lb, ub) = sides
    runs_a, runs_b = _answer_runs(ua, experiment), _answer_runs(ub, experiment)
    variants = [v for v in runs_a if v in runs_b]
    rows, diffs = [], []
    with tempfile.TemporaryDirectory(prefix="ablate-llama-build-") as tmp_s:
        tmp = Path(tmp_s)
        for v in variants:
            a, b = _answers(ua, runs_a[v], tmp / "a"), _answers(ub, runs_b[v], tmp / "b")
            if list(a.index) != list(b.index):
                sys.exit(f"error: variant {v}: the two runs answered different questions")
            if list(a["context"]) != list(b["context"]):
                print(f"note: variant {v}: contexts differ between the runs (retrieval is not the same)")
            fa, fb = figures(a), figures(b)
            changed = [q for q in a.index if a.at[q, "answer"] != b.at[q, "answer"]]
            flips = [q for q in changed if a.at[q, "correct"] != b.at[q, "correct"]]
            rows.append(
                {
                    "variant": v,
                    **{f"{k} ({la})": x for k, x in fa.items()},
                    **{f"{k} ({lb})": x for k, x in fb.items()},
                    "answers that differ": f"{len(changed)}/{len(a)}",
                    "of which scored differently": str(len(flips)),
                }
            )
            for q in changed:
                diffs.append(
                    {
                        "variant": v,
                        "qid": q,
                        f"correct {la}/{lb}": f"{a.at[q, 'correct']}/{b.at[q, 'correct']}",
                        f"answer ({la})": _short(a.at[q, "answer"], width),
                        f"answer ({lb})": _short(b.at[q, "answer"], width),
                    }
                )
    for side, runs in ((la, runs_a), (lb, runs_b)):
        builds = {r.params.get("generator.build", "(not logged)") for r in runs.values()}
        print(f"{side}: {len(runs)} runs, generator.build = {' / '.join(sorted(builds))}")
    print()
    print(_markdown(rows))
    print()
    print(_markdown(diffs) if diffs else "(no answer differs)")


def _recorded(
    uri: str, experiment: str, variant: str, questions: int
) -> tuple[RecordedRun, Any, pd.DataFrame]:
    """A run with answers, its corpus snapshot and the first ``questions`` rows of its answers.csv."""
    from ablate.data.corpus import load_corpus

    runs = _answer_runs(uri, experiment)
    if variant not in runs:
        sys.exit(f"error: no run of variant {variant!r} with answers in {uri} (have: {', '.join(runs)})")
    run = runs[variant]
    with tempfile.TemporaryDirectory(prefix="ablate-llama-build-") as tmp:
        df = _answers(uri, run, Path(tmp))
    return run, load_corpus(run.params["corpus.path"]), df.iloc[:questions]


def _generator(run: RecordedRun, snap: Any, n_threads: int, max_tokens: int | None = None) -> Any:
    """The run's generator (its model, template and decoding) at ``n_threads``, prepared."""
    from ablate.cache import Cache, default_cache_dir
    from ablate.stages.base import StageContext
    from ablate.stages.generate.llama_cpp import LlamaCppGenerator

    p = run.params
    gen = LlamaCppGenerator(
        model=p["generator.model"],
        prompt=p["generator.prompt"],
        context_k=int(p["generator.context_k"]),
        max_tokens=max_tokens or int(p["generator.max_tokens"]),
        temperature=float(p["generator.temperature"]),
        seed=int(p["generator.seed"]),
        n_ctx=int(p["generator.n_ctx"]),
        n_threads=n_threads,
    )
    if gen.template.sha256 != p["generator.prompt_sha256"]:
        sys.exit(f"error: {p['generator.prompt']} is not the template the run used (sha256 differs)")
    gen.prepare(StageContext(snap, Cache(default_cache_dir())))
    return gen


def _prompts(gen: Any, snap: Any, df: pd.DataFrame) -> list[Any]:
    """Each question's chat messages as the run rendered them (its context chunk ids, in order)."""
    return [
        gen.template.render(
            snap.queries[q].text, [snap.chunk_text[c] for c in str(df.at[q, "context"]).split()]
        )
        for q in df.index
    ]


def regen(uri: str, experiment: str, variant: str, questions: int, counts: list[int], width: int) -> None:
    """Regenerate the first ``questions`` answers of a recorded run at each thread count (a new model per count,
    no generation cache) and compare them with the recorded ones. The generator evaluates every prompt whole; a run
    recorded by ``ablate-llama-cpp/1`` (which let llama-cpp-python keep what a prompt shared with the one before it)
    shows here which of its answers depended on that."""
    from ablate.cache import Cache

    run, snap, df = _recorded(uri, experiment, variant, questions)
    qids = list(df.index)
    recorded = {q: str(df.at[q, "answer"]) for q in qids}
    table: dict[str, dict[str, str]] = {q: {"qid": q, "recorded": _short(recorded[q], width)} for q in qids}
    texts: dict[int, list[str]] = {}
    for n in counts:
        gen = _generator(run, snap, n)
        texts[n] = [gen.generate([m], Cache(enabled=False))[0][0].text for m in _prompts(gen, snap, df)]
        for q, text in zip(qids, texts[n], strict=True):
            table[q][f"n_threads={n}"] = "same" if text == recorded[q] else f"DIFFERS: {_short(text, width)}"
        same = sum(t == recorded[q] for q, t in zip(qids, texts[n], strict=True))
        print(f"n_threads={n}: {same}/{len(qids)} as recorded")
    agree = sum(len({texts[n][i] for n in counts}) == 1 for i in range(len(qids)))
    print(f"thread counts {', '.join(map(str, counts))} give the same text for {agree}/{len(qids)} questions")
    print(
        f"run {run.run_id} (variant {variant}, n_threads {run.params.get('generator.n_threads')}), build: {_build()}"
    )
    print(_markdown(list(table.values())))


def split(uri: str, experiment: str, variant: str, questions: int, n_threads: int) -> None:
    """For consecutive questions of a run (previous, this): the logits after this question's prompt evaluated whole,
    and evaluated after the previous prompt keeping the tokens the two share (what llama-cpp-python does between
    completions unless the model is reset): the largest difference and whether the top token is the same."""
    import llama_cpp
    import numpy as np

    from ablate.stages.rerank.llm import _chat_formatter

    run, snap, df = _recorded(uri, experiment, variant, questions)
    gen = _generator(run, snap, n_threads, max_tokens=1)
    llm = gen._load()
    fmt = _chat_formatter(llm)
    toks = [
        llm.tokenize(fmt(m).encode("utf-8"), add_bos=False, special=True) for m in _prompts(gen, snap, df)
    ]

    def logits(tokens: list[int], keep: int) -> Any:
        llm.n_tokens = keep
        llm.eval(tokens[keep:])
        return np.ctypeslib.as_array(
            llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),)
        ).copy()

    rows = []
    pairs = list(zip(df.index, toks, strict=True))
    for (prev_q, prev), (q, this) in zip(pairs, pairs[1:], strict=False):
        llm.reset()
        whole = logits(this, 0)
        llm.reset()
        logits(prev, 0)
        keep = 0
        while keep < min(len(prev), len(this)) - 1 and prev[keep] == this[keep]:
            keep += 1
        after = logits(this, keep)
        rows.append(
            {
                "after": prev_q,
                "question": q,
                "tokens kept / prompt": f"{keep}/{len(this)}",
                "max abs logit difference": f"{float(np.abs(whole - after).max()):.3g}",
                "same top token": str(bool(whole.argmax() == after.argmax())),
            }
        )
    print(f"run {run.run_id} (variant {variant}), n_threads {n_threads}, build: {_build()}")
    print(_markdown(rows))


def _build() -> str:
    from ablate.stages.generate.llama_cpp import llama_build

    return llama_build()


def _short(text: object, width: int) -> str:
    s = " ".join(str(text).split()).replace("|", "\\|")
    return s if len(s) <= width else s[: width - 1] + "…"


def _markdown(rows: list[dict[str, str]]) -> str:
    if not rows:
        return ""
    cols = list(rows[0])
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("info", help="the imported llama-cpp-python and its build")
    c = sub.add_parser("compare", help="two stores' demo answers, answer by answer")
    c.add_argument("sides", nargs=2, metavar="LABEL=URI")
    c.add_argument("--experiment", default="demo")
    c.add_argument("--width", type=int, default=70, help="characters of each answer shown")
    t = sub.add_parser("regen", help="regenerate a run's first questions at each thread count")
    t.add_argument("uri")
    t.add_argument("--experiment", default="demo")
    t.add_argument("--variant", default="oracle")
    t.add_argument("--questions", type=int, default=6)
    t.add_argument("--threads", default="1,2")
    t.add_argument("--width", type=int, default=60, help="characters of each answer shown")
    sp = sub.add_parser("split", help="logits of a prompt evaluated whole vs after the previous prompt")
    sp.add_argument("uri")
    sp.add_argument("--experiment", default="demo")
    sp.add_argument("--variant", default="C")
    sp.add_argument("--questions", type=int, default=6)
    sp.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    if args.cmd == "info":
        info()
    elif args.cmd == "compare":
        sides = [tuple(s.split("=", 1)) for s in args.sides]
        if any(len(s) != 2 for s in sides):
            ap.error("each side is LABEL=URI")
        compare(sides, args.experiment, args.width)  # type: ignore[arg-type]
    elif args.cmd == "regen":
        counts = [int(x) for x in args.threads.split(",")]
        regen(args.uri, args.experiment, args.variant, args.questions, counts, args.width)
    else:
        split(args.uri, args.experiment, args.variant, args.questions, args.threads)


if __name__ == "__main__":
    main()
