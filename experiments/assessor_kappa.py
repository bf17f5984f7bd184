"""The shipped assessor before and after its relevance prompt stated the grading policy: Cohen's kappa against human
labels held back as holes (``python -m ablate.label validate``), on the demo and on one shared dataset.

    python experiments/assessor_kappa.py [--only CORPUS] [--out experiments/results/assessor_kappa.md] [--work DIR]

Runs, through the real entry point, in ``--work`` (a temporary folder by default), for each corpus the same seeded,
grade-stratified holes judged twice by the shipped generator (``generator=llama_cpp``: Qwen2.5-Coder-1.5B-Instruct,
Q4_K_M, greedy):

* **before**: ``--prompt conf/prompts/relevance_umbrela.txt`` (the UMBRELA template, the default on every corpus
  until this change);
* **after**: the default template, ``relevance_policy`` (``relevance_policy_zh`` on a Chinese corpus: the stated policy
  and criteria, the question's reference answer where the corpus has one);
* **after, repeats**: the default template asked 3 times per pair with sampling, the majority voting, when
  ``validate --repeats`` exists in this checkout (it is skipped otherwise, and the page says so).

Corpora: the demo's dev split with holes 0.7 (43 of its 62 labelled pairs: the earlier page's 0.2 gave 13), and
NQ-UTD's test split (``corpus=nq_utd``, graded 0/1/2 with judged non-relevant documents and a reference answer for
every question) with holes 0.05 (40 of 800 pairs); and demo_zh's dev split with holes 0.7 (43 pairs), for the Chinese
template, where the English policy template (``--prompt conf/prompts/relevance_policy.txt``, the Chinese passages and
reference answers as they are) is measured beside it. Each validate writes ``validation.json``; the page is made from
those. Generations are cached by content (``$ABLATE_CACHE_DIR``): a second run judges nothing and reports the times
the judgements took when they were made.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "experiments" / "results" / "assessor_kappa.md"
SEED = "0"
#: corpus -> (its settings, the share of holes): enough pairs for kappa, few enough for a 2-core machine.
CORPORA: dict[str, tuple[list[str], str]] = {
    "demo": ([], "0.7"),
    "nq_utd": (["corpus=nq_utd"], "0.05"),
    "demo_zh": (["corpus=demo_zh"], "0.7"),
}
#: template label -> the validate options that choose it: before, the file that was the default on every corpus
#: (the English UMBRELA instruction, also with a Chinese passage); after, the default (the corpus language's own).
TEMPLATES: dict[str, list[str]] = {
    "before: relevance_umbrela": ["--prompt", str(REPO / "conf" / "prompts" / "relevance_umbrela.txt")],
    "after: relevance_policy": [],
}
#: On a Chinese corpus also the English policy template with the Chinese passages (which language to instruct in).
CHINESE = {"demo_zh"}
ENGLISH_POLICY = (
    "after, English relevance_policy",
    ["--prompt", str(REPO / "conf" / "prompts" / "relevance_policy.txt")],
)
REPEATS = ["--repeats", "3"]


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[str, float]:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{p.stderr[-2000:]}")
    seconds = time.perf_counter() - t0
    print(f"{seconds:7.1f} s  python -m {' '.join(args)}", file=sys.stderr)
    return p.stdout, seconds


def _report(stdout: str) -> dict[str, Any]:
    path = re.search(r"report: (.+validation\.md)", stdout).group(1)  # type: ignore[union-attr]
    data: dict[str, Any] = json.loads((Path(path).parent / "validation.json").read_text(encoding="utf-8"))
    return data


def _has_repeats(env: dict[str, str]) -> bool:
    p = subprocess.run(
        [sys.executable, "-m", "ablate.label", "validate", "--help"], env=env, capture_output=True, text=True
    )
    return "--repeats" in p.stdout


def _k(data: dict[str, Any], which: str) -> str:
    k = data["agreement"][which]
    if k is None or k["kappa"] is None:
        return "undefined"
    return f"{k['kappa']:.3f} [{k['low']:.3f}, {k['high']:.3f}]"


def _row(corpus: str, label: str, data: dict[str, Any]) -> str:
    per = data["time_per_judgement_s"]
    return (
        f"| {corpus} | {label} | {data['n']} ({data['unparseable']}) | {_k(data, 'graded')} | {_k(data, 'binary')} "
        f"| {data['agreement']['graded']['agree']:.1%} | {'-' if per is None else f'{per:.1f}'} |"
    )


def _matrix(data: dict[str, Any]) -> str:
    ag = data["agreement"]
    labels = ag["labels"]
    lines = ["| human \\ assessor | " + " | ".join(map(str, labels)) + " |", "|---" * (len(labels) + 1) + "|"]
    lines += [
        f"| {g} | " + " | ".join(map(str, row)) + " |" for g, row in zip(labels, ag["confusion"], strict=True)
    ]
    return "\n".join(lines)


def _command(data: dict[str, Any]) -> str:
    return str(data["command"]).replace(str(REPO) + "/", "")


def page(reports: dict[tuple[str, str], dict[str, Any]], repeats: bool, load: tuple[float, float]) -> str:
    first = next(iter(reports.values()))
    lines = [
        "# The shipped assessor before and after a stated grading policy",
        "",
        "Reproduce: `python experiments/assessor_kappa.py` (one command for the whole page; `--only demo` for one",
        "corpus's rows). Each row is one `python -m ablate.label validate generator=llama_cpp ...`",
        "(commands below): the corpus's labelled pairs held back as seeded holes stratified by grade (seed 0), re-judged",
        "blind by the shipped generator, Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF through llama.cpp; `generator=",
        "llama_cpp`'s default, and the only shipped model that writes a score: SmolLM2-135M, the other one, rarely",
        "does), greedy, 48 tokens at most, default mapping 3:2,2:1,1:0,0:0. Kappa: Cohen's, graded (three grades) and",
        "binary (relevant from grade 1, the labels the metrics use), with 95% bootstrap intervals over questions",
        f"(1,000 resamples). Assessor details: `{first['details']['model']}`, model sha256",
        f"`{str(first['details']['model_identity'].get('gguf_sha256', ''))[:12]}`.",
        "",
        "| corpus | template | pairs (unparseable) | kappa graded | kappa binary | agree | s / judgement |",
        "|---|---|---|---|---|---|---|",
        *[_row(corpus, label, data) for (corpus, label), data in reports.items()],
        "",
        "Time per judgement: seconds per generation when it was made, on this project's 2-core machine shared with",
        f"other jobs (load average {load[0]:.1f} when this run started, {load[1]:.1f} when it ended); read it as an upper",
        "bound and compare the templates' times with each other, not with another machine.",
        "",
    ]
    if not repeats:
        lines += [
            "Repeats voting: not measured; `validate --repeats` did not exist in this checkout when the page was made.",
            "",
        ]
    lines += ["Commands:", ""]
    lines += [f"- {corpus}, {label}: `{_command(data)}`" for (corpus, label), data in reports.items()]
    lines += [""]
    for (corpus, label), data in reports.items():
        lines += [f"Confusion, {corpus}, {label} (rows human, columns assessor):", "", _matrix(data), ""]
    lines += READING
    return "\n".join(lines)


READING: list[str] = [
    "## Reading",
    "",
    "(written after the measurement)",
    "",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--only", choices=sorted(CORPORA), default=None, help="one corpus (default: all)")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--work", default=None, help="folder the commands run in (default: a temporary one)")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="assessor-kappa-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    repeats = _has_repeats(env)
    templates = dict(TEMPLATES)
    if repeats:
        templates["after, 3 repeats voting"] = REPEATS
    start = os.getloadavg()[0]
    reports: dict[tuple[str, str], dict[str, Any]] = {}
    for corpus, (settings, holes) in CORPORA.items():
        if args.only and corpus != args.only:
            continue
        rows = dict(templates)
        if corpus in CHINESE:
            rows[ENGLISH_POLICY[0]] = ENGLISH_POLICY[1]
        for label, options in rows.items():
            cmd = [
                "ablate.label",
                "validate",
                "generator=llama_cpp",
                *settings,
                "--holes",
                holes,
                "--seed",
                SEED,
                *options,
            ]
            reports[(corpus, label)] = _report(_run(cmd, work, env)[0])
    Path(args.out).write_text(page(reports, repeats, (start, os.getloadavg()[0])), encoding="utf-8")
    print(args.out)


if __name__ == "__main__":
    main()
