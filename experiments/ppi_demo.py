"""Prediction-powered figures on the demo with the shipped generator as the relevance assessor: PPI beside the
human-label truth, the naive figure on the assessor's labels and the human-only figure from the checked questions.

    python experiments/ppi_demo.py [--variants A,B,C] [--holes 1.0] [--questions 8] [--seed 0] [--redraws 1000]
        [--prompt TEMPLATE] [--work DIR] [--out experiments/results/ppi_demo.md]

Everything runs through the product's own commands, in ``--work`` (a fresh temporary folder by default: its own
MLflow sqlite store and ``labels/``), with the generations cached by content in ``$ABLATE_CACHE_DIR`` (a second run
generates nothing and reports the times the judgements took when they were made):

1. ``python -m ablate -m variant=A,B,C``: the sweep, scored on the demo's own labels (the dev split);
2. ``python -m ablate.label validate generator=llama_cpp --holes H --seed 0``: the shipped generator (the default
   assessor) re-judges a grade-stratified share H of the split's human-labelled pairs blind (H = 1: every one); its
   kappa against the demo's grades, and the report ``commit`` requires before an LLM's judgements enter a version;
3. ``python -m ablate.label pool --parent SWEEP`` for the pool's description, then a pool of exactly the pairs
   validate judged (``ablate.labels.poolfile.write``), and ``python -m ablate.label judge`` on it: the assessor's
   grades as ``llm:`` journal lines (from the cache: validate asked the same prompts);
4. ``python -m ablate.label sample --questions N --seed S``: the random human sample; the demo's own labels stand in
   for the person who checks it (hole punching): every pooled pair of a sampled question gets its demo grade as a
   ``human:demo-labels`` journal line (``ablate.labels.journal.append``);
5. ``python -m ablate.label commit --version ppi-demo``: the headline qrels (the human grade where a pair has one,
   else the assessor's), the ``assessor/`` view and the draw in ``version.json``;
6. ``python -m ablate.report --json``: on the sweep itself (the truth: the demo's labels), ``--labels ppi-demo``
   (the headline figure, and PPI when the report prints it) and ``--labels <version>/assessor`` (the naive figure:
   the report's own interval on the assessor's labels as if they were true).

Why the pool is the labelled pairs and not the sweep's unjudged top 10: only a pair with a human grade has a truth
to compare the assessor with. On unjudged pairs the demo's labels could only say "unjudged", so the "person" would
have to grade them 0 by assumption and the truth would be that assumption.

The figures, for nDCG@10 and recall@10 of each run and each paired difference (run - baseline), over the questions
the version scores (a question with no relevant unit under a set of grades scores 0): the truth (every question
under the demo's labels), the naive figure, the human-only figure (the checked questions under the demo's labels:
1000-resample percentile bootstrap), and PPI: ``ablate.evaluation.stats.ppi_mean(Y, Ŷ, Ŷu)`` (ppi_py, PPI++) on the
re-scored runs' own per-question values, Y the checked questions under the headline, Ŷ the same under the assessor
view, Ŷu the unchecked ones under the assessor view; where the report prints PPI its figures are checked against
these to 1e-6. ``--redraws`` draws the checked questions anew that many times over the same per-question values (the
assessor's grades are fixed, only the sample moves) for how often each interval covers the truth.

Writes ``--out`` (the page), and beside it ``ppi_demo.csv`` (every question's value per run, metric and view) and
``ppi_demo.json`` (the figures, the report rows, the assessor and the commands), from which
``tests/test_ppi_demo.py`` recomputes the page's figures with ppi_py.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
METRICS = ("ndcg@10", "recall@10")
VERSION = "ppi-demo"
POOL = "labelled"
PERSON = "human:demo-labels"
BOOT = 1000  # resamples of the human-only bootstrap (the report's own number)
CSV_COLUMNS = ("run", "metric", "qid", "category", "checked", "scored", "truth", "headline", "assessor")
#: The question sets the figures are over: ``headline``, those the version's headline scores (the report's rule);
#: ``fixed``, every question of the split with an answer (not a no-answer question), fixed before any grade.
POPULATIONS = ("headline", "fixed")


class Steps:
    """Progress on stderr: the step, the time so far, and an ETA from the seconds each step is expected to take."""

    def __init__(self, expected: dict[str, float]) -> None:
        self.expected = expected
        self.t0 = time.perf_counter()
        self.done: list[str] = []

    def start(self, name: str, what: str) -> None:
        left = sum(s for k, s in self.expected.items() if k not in self.done)
        i = len(self.done) + 1
        print(
            f"[ppi-demo] {i}/{len(self.expected)} {what} ({time.perf_counter() - self.t0:.0f} s so far, "
            f"eta ~{left:.0f} s)",
            file=sys.stderr,
            flush=True,
        )

    def finish(self, name: str) -> None:
        self.done.append(name)


def _env(work: Path) -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{work / 'mlflow.db'}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "src"), env.get("PYTHONPATH", "")) if p)
    return env


def _run(args: list[str], work: Path, live: bool = False) -> str:
    """``python -m ARGS`` in ``work``; its stdout (stderr shown as it comes when ``live``: the LLM's progress and
    ETA; else kept in ``work/logs``)."""
    log = work / "logs" / (re.sub(r"[^\w.-]+", "_", " ".join(args[:2]))[:60] + ".log")
    log.parent.mkdir(exist_ok=True)
    with log.open("a", encoding="utf-8") as err:
        err.write(f"$ python -m {shlex.join(args)}\n")
        err.flush()
        p = subprocess.run(
            [sys.executable, "-m", *args],
            cwd=work,
            env=_env(work),
            stdout=subprocess.PIPE,
            stderr=None if live else err,
            text=True,
        )
    if p.returncode != 0:
        tail = "" if live else log.read_text(encoding="utf-8")[-2000:]
        raise SystemExit(f"python -m {shlex.join(args)} failed (exit {p.returncode}):\n{tail}")
    return p.stdout


# -- the product pipeline ------------------------------------------------------------------------------------------
def sweep(work: Path, variants: str) -> str:
    out = _run(["ablate", "-m", f"variant={variants}", "progress=false"], work)
    return re.search(r"logged to MLflow run ([0-9a-f]{32})", out).group(1)  # type: ignore[union-attr]


def _prompt(prompt: str | None) -> list[str]:
    """``--prompt`` for validate and judge when one is given (else the product's default template)."""
    return [] if prompt is None else ["--prompt", prompt]


def validate(work: Path, holes: float, prompt: str | None = None) -> dict[str, Any]:
    out = _run(
        [
            "ablate.label",
            "validate",
            "generator=llama_cpp",
            "--holes",
            f"{holes:g}",
            "--seed",
            "0",
            *_prompt(prompt),
        ],
        work,
        True,
    )
    path = Path(re.search(r"report: (.+validation\.md)", out).group(1))  # type: ignore[union-attr]
    return json.loads((path.parent / "validation.json").read_text(encoding="utf-8")) | {
        "folder": str(path.parent)
    }


def labelled_pool(work: Path, parent: str, report: dict[str, Any]) -> Path:
    """A pool of the pairs validate judged, described as ``label pool`` describes the sweep's own pool."""
    from ablate.labels import poolfile

    _run(["ablate.label", "pool", "--parent", parent, "--depth", "10", "--name", "top10"], work)
    meta = poolfile.read(work / "labels" / "demo" / "pools" / "top10.tsv").meta
    pairs = sorted({(r["qid"], r["unit"]) for r in _csv_rows(Path(report["folder"]) / "pairs.csv")})
    pairs += sorted({(u["qid"], u["unit"]) for u in report.get("unparseable_pairs", [])} - set(pairs))
    path = work / "labels" / "demo" / "pools" / f"{POOL}.tsv"
    entries = [poolfile.PoolEntry(q, u, (), 1) for q, u in pairs]
    poolfile.write(path, poolfile.Pool(meta, entries))
    return path


def judge(work: Path, pool: Path, prompt: str | None = None) -> str:
    args = ["ablate.label", "judge", "--pool", str(pool), "generator=llama_cpp", *_prompt(prompt)]
    return _run(args, work, True).strip()


def sample_and_check(work: Path, pool: Path, questions: int, seed: int) -> list[str]:
    """``label sample``, then the demo's grade of every pooled pair of a sampled question as a person's line."""
    from ablate.data.qrels import read_qrels
    from ablate.labels import journal, poolfile

    _run(
        ["ablate.label", "sample", "--pool", str(pool), "--questions", str(questions), "--seed", str(seed)],
        work,
    )
    drawn = json.loads((work / "labels" / "demo" / "human_sample.json").read_text(encoding="utf-8"))[
        "questions"
    ]
    demo = read_qrels(REPO / "corpora" / "demo" / "qrels" / "dev.tsv", "chunk", name="dev").judgements
    lines = [
        journal.judgement(e.qid, e.unit, int(demo[e.qid][e.unit]), PERSON, pool.stem)
        for e in poolfile.read(pool).entries
        if e.qid in drawn
    ]
    journal.append(work / "labels" / "demo" / "journal.jsonl", lines)
    return list(drawn)


def report(work: Path, parent: str, labels: str | None = None, cluster: str = "none") -> list[dict[str, Any]]:
    """``report --json`` rows; ``--cluster none`` unless ``cluster`` says: every interval of the page then treats
    the questions alike (as ppi_py does), where the report's default resamples clusters of questions."""
    extra = [] if labels is None else ["--labels", labels]
    args = [
        "ablate.report",
        "--parent",
        parent,
        "--json",
        "--metrics",
        ",".join(METRICS),
        "--cluster",
        cluster,
    ]
    return json.loads(_run([*args, *extra], work))


def per_question(work: Path, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The per_query table of each run a report's rows name, by the report's name of the run."""
    from ablate.study.fetch import fetch_run_ids
    from ablate.tracking import Tracker

    names = {r["run_id"]: r["run"] for r in rows if r["kind"] == "run"}
    tracker = Tracker(f"sqlite:///{work / 'mlflow.db'}")
    tables = fetch_run_ids(tracker, list(names))
    return {
        names[rec.run_id]: rec.per_query.set_index("qid") if "qid" in rec.per_query.columns else rec.per_query
        for rec in tables
    }


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def _cell_value(table: dict[str, Any], run: str, qid: str, metric: str) -> str:
    """A question's value in a run's per_query table, as text; empty when the view does not score it."""
    pq = table[run]
    x = float(pq.loc[qid, metric]) if qid in pq.index else float("nan")
    return "" if x != x else repr(x)


def values_table(
    truth: dict[str, Any], headline: dict[str, Any], assessor: dict[str, Any], checked: set[str]
) -> list[dict[str, Any]]:
    """One row per run, metric and question: the value under the demo's labels, the headline and the assessor view
    (empty: not scored under that view), whether it is checked and whether the headline scores it."""
    out = []
    for run, pq in headline.items():
        for m in METRICS:
            for qid in pq.index:
                scored = str(pq.loc[qid, "category"]) == "answerable" and pq.loc[qid, m] == pq.loc[qid, m]
                out.append(
                    {
                        "run": run,
                        "metric": m,
                        "qid": qid,
                        "category": str(truth[run].loc[qid, "category"]),
                        "checked": int(qid in checked),
                        "scored": int(bool(scored)),
                        "truth": _cell_value(truth, run, qid, m),
                        "headline": _cell_value(headline, run, qid, m),
                        "assessor": _cell_value(assessor, run, qid, m),
                    }
                )
    return out


# -- the figures -----------------------------------------------------------------------------------------------------
def _values(rows: list[dict[str, str]], run: str, metric: str) -> dict[str, dict[str, Any]]:
    """qid -> its row of ``run`` and ``metric``."""
    return {r["qid"]: r for r in rows if r["run"] == run and r["metric"] == metric}


def _num(x: str) -> float:
    """A view's value; a question that view does not score (no relevant unit) scores 0."""
    return float(x) if x != "" else 0.0


def estimand_values(
    rows: list[dict[str, str]],
    metric: str,
    run: str,
    baseline: str | None = None,
    population: str = "headline",
) -> dict[str, Any]:
    """Over the questions of ``population`` (:data:`POPULATIONS`; for a difference: those of both runs), each
    question's truth, headline and assessor value (run - baseline for a difference) and whether it is checked."""
    mine = _values(rows, run, metric)
    base = _values(rows, baseline, metric) if baseline else None

    def member(r: dict[str, str]) -> bool:
        return r["scored"] == "1" if population == "headline" else r["category"] != "no_answer"

    qids = [q for q, r in mine.items() if member(r) and (base is None or member(base[q]))]

    def col(name: str) -> np.ndarray:
        v = np.array([_num(mine[q][name]) for q in qids])
        return v - np.array([_num(base[q][name]) for q in qids]) if base is not None else v

    return {
        "qids": qids,
        "truth": col("truth"),
        "headline": col("headline"),
        "assessor": col("assessor"),
        "checked": np.array([mine[q]["checked"] == "1" for q in qids], dtype=bool),
    }


def _estimands(rows: list[dict[str, str]], baseline: str) -> list[tuple[str, str, str | None]]:
    """(metric, run, baseline or None): every run, then every difference from the baseline, per metric."""
    runs = list(dict.fromkeys(r["run"] for r in rows))
    both = [(r, None) for r in runs] + [(r, baseline) for r in runs if r != baseline]
    return [(m, r, b) for m in METRICS for r, b in both]


def fixed_population(rows: list[dict[str, str]], baseline: str) -> list[dict[str, Any]]:
    """PPI over the questions fixed before any grade (``population="fixed"``), with its truth there."""
    from ablate.evaluation.stats import ppi_mean

    out = []
    for m, run, base in _estimands(rows, baseline):
        v = estimand_values(rows, m, run, base, "fixed")
        c = v["checked"]
        y, yhat, yhat_u = v["headline"][c], v["assessor"][c], v["assessor"][~c]
        r = ppi_mean(y, yhat, yhat_u)
        truth = float(v["truth"].mean())
        out.append(
            {
                "metric": m,
                "estimand": f"{run} - {base}" if base else run,
                "questions": len(v["qids"]),
                "n_checked": int(c.sum()),
                "n_unchecked": int((~c).sum()),
                "truth": truth,
                "ppi": _interval(r.estimate, r.low, r.high, truth),
                "lambda": _lam(r.estimate, y, yhat, yhat_u),
            }
        )
    return out


def _interval(est: float, lo: float, hi: float, truth: float) -> dict[str, Any]:
    return {"estimate": est, "low": lo, "high": hi, "width": hi - lo, "covers": bool(lo <= truth <= hi)}


def _lam(estimate: float, y: np.ndarray, yhat: np.ndarray, yhat_u: np.ndarray) -> float | None:
    """The weight PPI++ gave the assessor, read back from its estimate ``mean(y) + lam·(mean(yhat_u) - mean(yhat))``
    (0: the human-only mean, 1: plain PPI); ``None`` where the two assessor means are equal and it is not
    determined."""
    gap = float(yhat_u.mean() - yhat.mean())
    return None if abs(gap) < 1e-12 else round((estimate - float(y.mean())) / gap, 9) + 0.0


def _report_row(
    rows: list[dict[str, Any]], metric: str, run: str, baseline: str | None
) -> dict[str, Any] | None:
    kind = "comparison" if baseline else "run"
    return next((r for r in rows if r["kind"] == kind and r["metric"] == metric and r["run"] == run), None)


def figures(
    rows: list[dict[str, str]], reports: dict[str, list[dict[str, Any]]], baseline: str
) -> list[dict[str, Any]]:
    """Per metric, per run and per difference from ``baseline``: the truth, the headline, the naive, the human-only
    and the PPI figure (module docstring), each interval with its width and whether it covers the truth."""
    from ablate.evaluation.stats import bootstrap_ci, ppi_mean

    out = []
    for m, run, base in _estimands(rows, baseline):
        v = estimand_values(rows, m, run, base)
        truth = float(v["truth"].mean())
        y, yhat, yhat_u = (
            v["headline"][v["checked"]],
            v["assessor"][v["checked"]],
            v["assessor"][~v["checked"]],
        )
        ppi = ppi_mean(y, yhat, yhat_u)
        _, lo, hi = bootstrap_ci(y, BOOT, seed=0)
        key = "delta" if base else "value"
        naive = _report_row(reports["assessor"], m, run, base)
        clustered = _report_row(reports["assessor_clustered"], m, run, base)
        head = _report_row(reports["headline"], m, run, base)
        demo = _report_row(reports["truth"], m, run, base)
        assert naive is not None and head is not None and demo is not None and clustered is not None
        fig = {
            "metric": m,
            "estimand": f"{run} - {base}" if base else run,
            "questions": len(v["qids"]),
            "n_checked": int(v["checked"].sum()),
            "n_unchecked": int((~v["checked"]).sum()),
            "truth": truth,
            "truth_report": demo[key],
            "headline": head[key],
            "naive": _interval(naive[key], naive["low"], naive["high"], truth),
            "naive_clustered": _interval(clustered[key], clustered["low"], clustered["high"], truth),
            "human_only": _interval(float(y.mean()), lo, hi, truth),
            "ppi": _interval(ppi.estimate, ppi.low, ppi.high, truth),
            "lambda": _lam(ppi.estimate, y, yhat, yhat_u),
            "corr": float(np.corrcoef(v["truth"], v["assessor"])[0, 1]),
            "report_ppi": head.get("ppi"),
        }
        if fig["report_ppi"] is not None:  # the report's own PPI must be the same numbers
            for k in ("estimate", "low", "high"):
                assert abs(fig["report_ppi"][k] - fig["ppi"][k]) <= 1e-6, (fig["estimand"], m, k)
        out.append(fig)
    return out


def redraws(rows: list[dict[str, str]], baseline: str, draws: int, seed: int) -> list[dict[str, Any]]:
    """How often each interval covers the truth when the same number of checked questions is drawn anew ``draws``
    times from the same questions (the assessor's grades and the truth fixed: only the random sample moves)."""
    from ablate.evaluation.stats import bootstrap_ci, ppi_mean

    rng = np.random.default_rng(seed)
    out = []
    for m, run, base in _estimands(rows, baseline):
        v = estimand_values(rows, m, run, base)
        truth, n, size = float(v["truth"].mean()), int(v["checked"].sum()), len(v["qids"])
        got: dict[str, list[tuple[bool, float]]] = {"ppi": [], "human_only": []}
        for d in range(draws):
            mask = np.zeros(size, dtype=bool)
            mask[rng.choice(size, n, replace=False)] = True
            r = ppi_mean(v["truth"][mask], v["assessor"][mask], v["assessor"][~mask])
            _, lo, hi = bootstrap_ci(v["truth"][mask], BOOT, seed=d)
            got["ppi"].append((r.low <= truth <= r.high, r.high - r.low))
            got["human_only"].append((lo <= truth <= hi, hi - lo))
        out.append(
            {
                "metric": m,
                "estimand": f"{run} - {base}" if base else run,
                **{
                    f"{k}_{s}": float(np.mean([x[i] for x in vals]))
                    for k, vals in got.items()
                    for i, s in ((0, "coverage"), (1, "width"))
                },
            }
        )
    return out


# -- the page ------------------------------------------------------------------------------------------------------
def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _cell(iv: dict[str, Any]) -> str:
    covers = "yes" if iv["covers"] else "**no**"
    return f"{_f(iv['estimate'])} [{_f(iv['low'])}, {_f(iv['high'])}] | {_f(iv['width'])} | {covers}"


def table(figs: list[dict[str, Any]], metric: str) -> list[str]:
    head = "| estimand | n checked / unchecked | truth | demo's report | headline (report) | "
    head += " | ".join(
        f"{m} [95%] | width | covers" for m in ("naive (assessor labels)", "human-only (checked)", "PPI")
    )
    lines = [head + " | PPI++ lambda |", "|---|---:|---:|---:|---:|" + "---:|---:|:---:|" * 3 + "---:|"]
    for f in (x for x in figs if x["metric"] == metric):
        lines.append(
            f"| {f['estimand']} | {f['n_checked']} / {f['n_unchecked']} | {_f(f['truth'])} | "
            f"{_f(f['truth_report'])} | {_f(f['headline'])} | "
            + " | ".join(_cell(f[k]) for k in ("naive", "human_only", "ppi"))
            + f" | {_f(f['lambda'])} |"
        )
    return lines


def fixed_table(fixed: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| estimand | metric | n checked / unchecked | truth | PPI [95%] | width | covers | PPI++ lambda |",
        "|---|---|---:|---:|---:|---:|:---:|---:|",
    ]
    for f in fixed:
        lines.append(
            f"| {f['estimand']} | {f['metric']} | {f['n_checked']} / {f['n_unchecked']} | {_f(f['truth'])} | "
            f"{_cell(f['ppi'])} | {_f(f['lambda'])} |"
        )
    return lines


def _missed(figs: list[dict[str, Any]], key: str) -> str:
    miss = [f"{f['estimand']} {f['metric']}" for f in figs if not f[key]["covers"]]
    return f"{len(figs) - len(miss)} of {len(figs)}" + (f" (misses: {', '.join(miss)})" if miss else "")


def moved(rows: list[dict[str, str]]) -> tuple[list[str], list[str]]:
    """The questions the version's headline scores that the demo's labels do not, and the other way round."""
    first = rows[0]["run"], rows[0]["metric"]
    mine = [r for r in rows if (r["run"], r["metric"]) == first]
    human = {r["qid"] for r in mine if r["category"] == "answerable" and r["truth"] != ""}
    head = {r["qid"] for r in mine if r["scored"] == "1"}
    return sorted(head - human), sorted(human - head)


def reading(
    figs: list[dict[str, Any]],
    kappa: dict[str, Any],
    again: list[dict[str, Any]],
    fixed: list[dict[str, Any]],
    shift: tuple[list[str], list[str]],
) -> list[str]:
    """What the tables say, from their numbers."""
    ratio = float(
        np.median([f["ppi"]["width"] / f["human_only"]["width"] for f in figs if f["human_only"]["width"]])
    )
    naive_ratio = float(
        np.median([f["naive"]["width"] / f["human_only"]["width"] for f in figs if f["human_only"]["width"]])
    )
    lams = [f["lambda"] for f in figs if f["lambda"] is not None]
    corr = [f["corr"] for f in figs if f["corr"] == f["corr"]]
    off = {k: float(np.median([abs(f[k]["estimate"] - f["truth"]) for f in figs])) for k in ("naive", "ppi")}
    head_off = float(np.median([abs(f["headline"] - f["truth"]) for f in figs]))
    chance = kappa["binary_low"] <= 0 <= kappa["binary_high"]
    lines = [
        f"- **The assessor.** Binary kappa {_f(kappa['binary'])} [{_f(kappa['binary_low'])}, "
        f"{_f(kappa['binary_high'])}] over {kappa['n']} pairs (graded {_f(kappa['graded'])}): "
        + (
            "its interval holds 0, so on the demo it agrees with the demo's grades no better than chance."
            if chance
            else "above chance, far below a second person's agreement."
        ),
        f"- **Naive.** The interval on the assessor's labels covers the truth for {_missed(figs, 'naive')}; its "
        f"estimate is {off['naive']:.3f} from the truth (median over the figures), and nothing in it says so: it "
        f"is {naive_ratio:.2f} times as wide as the human-only one (median), because it counts every question "
        "as if a person had judged it. With the report's default intervals (`--cluster evidence`: the questions "
        f"resampled in clusters that share evidence) it covers {_missed(figs, 'naive_clustered')}.",
        f"- **PPI.** Its interval covers the truth for {_missed(figs, 'ppi')}; its estimate is {off['ppi']:.3f} "
        f"from the truth (median). The headline the report prints beside it (people's grades on the checked "
        f"questions, the assessor's elsewhere) is {head_off:.3f} from the truth (median).",
        f"- **Width.** PPI's interval is {ratio:.2f} times the human-only one's (median over the figures). PPI++ "
        f"gave the assessor a weight lambda of {min(lams):.2f} to {max(lams):.2f} (median {np.median(lams):.2f}; "
        "0 ignores it, 1 is plain PPI): the weight follows how closely the assessor's per-question values move "
        "with the checked questions' true ones, not its kappa on pairs. Here the assessor's per-question values "
        f"correlate {min(corr):.2f} to {max(corr):.2f} with the truth (median {np.median(corr):.2f}, over every "
        "question, which only this demo can see)."
        + f" The human-only interval covers {_missed(figs, 'human_only')}.",
    ]
    if again:
        lo, hi = min(a["ppi_coverage"] for a in again), max(a["ppi_coverage"] for a in again)
        h_lo, h_hi = (
            min(a["human_only_coverage"] for a in again),
            max(a["human_only_coverage"] for a in again),
        )
        worse = [a for a in again if a["ppi_coverage"] < a["human_only_coverage"] - 0.03]
        short = [a for a in again if min(a["ppi_coverage"], a["human_only_coverage"]) < 0.93]
        text = (
            f"- **The sample drawn anew.** PPI covers the truth in {lo:.3f} to {hi:.3f} of the draws, the "
            f"human-only interval in {h_lo:.3f} to {h_hi:.3f}."
        )
        if short:
            text += (
                f" Both fall below 0.93 for {len(short)} of {len(again)} figures: a few checked questions of a "
                "skewed metric (many questions score 1, or differ by 0) give normal and bootstrap intervals that "
                "are too narrow too often (experiments/results/ppi_coverage.md measures coverage at larger n)."
            )
        if worse:
            text += (
                " PPI falls further short than the human-only interval for "
                + ", ".join(
                    f"{a['estimand']} {a['metric']} ({a['ppi_coverage']:.3f} vs {a['human_only_coverage']:.3f})"
                    for a in worse
                )
                + ": PPI's estimate lets the unchecked questions' assessor values stand for every question's, "
                "and a handful of them that are mostly equal (a difference that is 0 for most questions) often "
                "show too little spread, so its interval is too narrow around a value off the truth."
            )
        lines.append(text)
    added, dropped = shift
    if added or dropped:
        lines.append(
            "- **Which questions count.** The report's PPI is over the questions the version's headline scores, "
            "and on the unchecked questions the headline holds the assessor's grades, so the assessor decides them: "
            + "; ".join(
                x
                for x in (
                    f"it brought in {', '.join(added)} (it graded non-relevant pairs there relevant; the demo's "
                    "labels hold no relevant unit there: truth 0)"
                    if added
                    else "",
                    f"it took out {', '.join(dropped)} (it graded every relevant pair there not relevant)"
                    if dropped
                    else "",
                )
                if x
            )
            + ". So the estimand is not the demo's own report over its questions (the truth and the demo's report "
            "columns differ), and PPI's guarantee, which is for a set of questions fixed before any grade, does "
            f"not cover the choice. Over the split's questions with an answer, fixed before grading, PPI covers "
            f"the truth for {_missed(fixed, 'ppi')} (last table)."
        )
    return lines


def page(
    ctx: dict[str, Any],
    figs: list[dict[str, Any]],
    again: list[dict[str, Any]],
    fixed: list[dict[str, Any]],
    shift: tuple[list[str], list[str]],
) -> str:
    v = ctx["validation"]
    ag = v["agreement"]
    kappa = {
        "graded": ag["graded"]["kappa"],
        "binary": ag["binary"]["kappa"],
        "binary_low": ag["binary"]["low"],
        "binary_high": ag["binary"]["high"],
        "n": v["n"],
    }
    via = (
        "the report's own PPI figures (`--json`), equal to ppi_mean on the re-scored runs' per-question values to "
        "1e-6"
        if all(f["report_ppi"] for f in figs)
        else "ppi_mean on the re-scored runs' per-question values (the report printed no PPI figure)"
    )
    first = figs[0]
    lines = [
        "# Prediction-powered figures on the demo: the shipped Qwen as assessor, the demo's labels as the person",
        "",
        f"Reproduce: `{ctx['command']}` ({ctx['seconds']:.0f} s this time, validate's judgements "
        f"{v['seconds']:.0f} s of it; a first run, with nothing cached, generates {v['n_holes']} judgements at "
        f"about {v['time_per_judgement_s']:.0f} s each; {ctx['date']}, load average at start "
        f"{ctx['load']}, git {ctx['git']}). Every step is a product command in a fresh work folder (its own MLflow "
        "store and labels); the generations are cached by content in `$ABLATE_CACHE_DIR`, so a second run judges "
        "nothing. Per-question values: [ppi_demo.csv](ppi_demo.csv); every figure and report row: "
        "[ppi_demo.json](ppi_demo.json).",
        "",
        f"- **Runs**: `python -m ablate -m variant={ctx['variants']}` on the demo's dev split; baseline "
        f"{ctx['baseline']}.",
        f"- **Assessor**: `{v['assessor']}`: the shipped generator (`generator=llama_cpp`: "
        f"{v['details'].get('model', '?')}, a Q4 GGUF through llama.cpp) with "
        + ("the default relevance template " if ctx["prompt"] is None else "the relevance template ")
        + f"(`{Path(str(v['details'].get('template', '?'))).name}`), greedy; mapping {v['mapping']}. "
        f"{v['time_per_judgement_s']:.1f} s per judgement when it was made (2 cores shared with other jobs).",
        f"- **Pool**: the {v['n_holes']} human-labelled pairs of the dev split, re-judged blind by `validate "
        f"--holes {v['holes']:g}` ({v['unparseable']} unparseable) and judged again by `label judge` into the "
        "journal (from the cache). The labelled pairs and not the sweep's unjudged top 10: only a pair with a human "
        "grade has a truth to hold the assessor's grade against.",
        f"- **Agreement** on those pairs: kappa graded {_f(ag['graded']['kappa'])} [{_f(ag['graded']['low'])}, "
        f"{_f(ag['graded']['high'])}], binary {_f(ag['binary']['kappa'])} [{_f(ag['binary']['low'])}, "
        f"{_f(ag['binary']['high'])}] (95% bootstrap over questions); {ag['graded']['agree']:.1%} graded alike.",
        f"- **Human sample**: `label sample --questions {ctx['questions']} --seed {ctx['seed']}` drew "
        f"{', '.join(ctx['drawn'])} of the split's {ctx['population']} questions; every pooled pair of them got "
        f"the demo's grade as a `{PERSON}` journal line (the demo's labels stand in for the person). Of the "
        f"{first['questions']} questions the version scores, {first['n_checked']} are checked and "
        f"{first['n_unchecked']} unchecked.",
        f"- **PPI**: {via}. Y: the checked questions under the headline (there, the demo's labels); Ŷ: the same "
        "under the assessor view; Ŷu: the unchecked ones under the assessor view; a question with no relevant unit "
        "under a view scores 0.",
        "- **Columns**: *truth*, the same questions under the demo's labels (what PPI estimates); *demo's report*, "
        "the report of the sweep itself (the questions the demo's labels score); *headline*, the report on the "
        "version (people's grades on the checked questions, the assessor's elsewhere); *naive*, the report's "
        f"interval on `--labels {VERSION}/assessor` (the assessor's labels taken as true); every report with "
        "`--cluster none`, so that all intervals here treat the questions alike, as ppi_py does; *human-only*, the "
        f"checked questions alone (95% percentile bootstrap, {BOOT} resamples); *PPI++ lambda*, the weight PPI++ "
        "gave the assessor (0: ignored, 1: plain PPI).",
        "",
    ]
    for m in METRICS:
        lines += [f"## {m}", "", *table(figs, m), ""]
    if again:
        lines += [
            f"## The sample drawn anew ({ctx['redraws']} draws, seed {ctx['seed']})",
            "",
            "The same per-question values, the same number of checked questions drawn anew from the version's "
            "questions each time (only the random sample moves): how often each 95% interval covers the truth, and "
            "its mean width.",
            "",
            "| estimand | metric | PPI coverage | PPI width | human-only coverage | human-only width |",
            "|---|---|---:|---:|---:|---:|",
            *(
                f"| {a['estimand']} | {a['metric']} | {a['ppi_coverage']:.3f} | {a['ppi_width']:.3f} | "
                f"{a['human_only_coverage']:.3f} | {a['human_only_width']:.3f} |"
                for a in again
            ),
            "",
        ]
    lines += [
        "## The questions fixed before grading",
        "",
        "PPI over the split's questions with an answer (every question but the no-answer ones), a set no grade "
        "decides, with the truth over the same questions (0 where the demo's labels hold no relevant unit).",
        "",
        *fixed_table(fixed),
        "",
        "## Reading",
        "",
        *reading(figs, kappa, again, fixed, shift),
        "",
        "## Commands",
        "",
        "In the work folder, in this order; between `pool` and `judge` the script writes `labels/demo/pools/"
        f"{POOL}.tsv` (the pairs validate judged, with the sweep pool's description), and between `sample` and "
        f"`commit` appends the `{PERSON}` lines:",
        "",
        *(f"- `{c}`" for c in ctx["commands"]),
    ]
    return "\n".join(lines) + "\n"


# -- main ----------------------------------------------------------------------------------------------------------
def _holes_count(holes: float) -> int:
    from ablate.data.qrels import read_qrels
    from ablate.labels.validation import holes as punch

    demo = read_qrels(REPO / "corpora" / "demo" / "qrels" / "dev.tsv", "chunk", name="dev").judgements
    return len(punch(demo, holes, 0))


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--variants", default="A,B,C", help="the sweep's variants; the first is the baseline")
    ap.add_argument(
        "--prompt",
        default=None,
        help="the assessor's relevance template for validate and judge (default: the product's default)",
    )
    ap.add_argument(
        "--holes", type=float, default=1.0, help="share of the dev split's labelled pairs to judge"
    )
    ap.add_argument("--questions", type=int, default=8, help="questions in the random human sample")
    ap.add_argument("--seed", type=int, default=0, help="seed of the human sample (and of the redraws)")
    ap.add_argument("--redraws", type=int, default=1000, help="draws of the sample anew (0: none)")
    ap.add_argument("--work", default=None, help="work folder (default: a new temporary one)")
    ap.add_argument("--out", default=str(HERE / "results" / "ppi_demo.md"))
    args = ap.parse_args()
    t0 = time.perf_counter()
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    work = Path(args.work or tempfile.mkdtemp(prefix="ppi-demo-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    if (work / "mlflow.db").exists() or (work / "labels").exists():
        raise SystemExit(
            f"error: --work {work} is not empty (a store or labels are there); give a new folder"
        )
    n_holes = _holes_count(args.holes)
    steps = Steps(
        {"sweep": 40, "validate": 30.0 * n_holes, "judge": 20, "sample": 15, "commit": 10, "report": 90}
    )
    variants = args.variants
    baseline = variants.split(",")[0]
    steps.start("sweep", f"sweep variant={variants}")
    parent = sweep(work, variants)
    steps.finish("sweep")
    steps.start(
        "validate", f"validate: the assessor judges {n_holes} labelled pairs blind (eta assumes none cached)"
    )
    # a template file named relative to here, for commands that run in the work folder (a shipped name as it is)
    prompt = str(Path(args.prompt).resolve()) if args.prompt and Path(args.prompt).is_file() else args.prompt
    val = validate(work, args.holes, prompt)
    steps.finish("validate")
    steps.start("judge", "label pool, then label judge on the labelled pairs (from the cache)")
    pool = labelled_pool(work, parent, val)
    judged = judge(work, pool, prompt)
    steps.finish("judge")
    steps.start(
        "sample",
        f"label sample --questions {args.questions} --seed {args.seed}; the demo's grades as the person's",
    )
    drawn = sample_and_check(work, pool, args.questions, args.seed)
    steps.finish("sample")
    steps.start("commit", f"label commit --version {VERSION}")
    _run(["ablate.label", "commit", "--version", VERSION], work)
    steps.finish("commit")
    steps.start("report", "report --json: the sweep, the version, the assessor view")
    folder = work / "labels" / "demo" / "versions" / VERSION
    reports = {
        "truth": report(work, parent),
        "headline": report(work, parent, VERSION),
        "assessor": report(work, parent, str(folder / "assessor")),
        # the same with the report's default intervals, over clusters of questions
        "assessor_clustered": report(work, parent, str(folder / "assessor"), "evidence"),
    }
    from ablate.labels.views import read_views

    views = read_views(folder)
    assert views.sample is not None and views.sample.random, "the version records no random sample"
    tables = {k: per_question(work, rows) for k, rows in reports.items()}
    rows = values_table(tables["truth"], tables["headline"], tables["assessor"], set(views.checked))
    steps.finish("report")
    text_rows = [{k: str(v) for k, v in r.items()} for r in rows]  # as the CSV holds them
    figs = figures(text_rows, reports, baseline)
    fixed = fixed_population(text_rows, baseline)
    again = redraws(text_rows, baseline, args.redraws, args.seed) if args.redraws else []
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.with_suffix(".csv").open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, CSV_COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    flags = [a for a in sys.argv[1:]]
    ctx = {
        "command": "python experiments/ppi_demo.py" + ("" if not flags else " " + shlex.join(flags)),
        "seconds": time.perf_counter() - t0,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load": load,
        "git": subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "variants": variants,
        "baseline": baseline,
        "validation": val,
        "questions": args.questions,
        "prompt": args.prompt,
        "seed": args.seed,
        "drawn": drawn,
        "population": json.loads(
            (work / "labels" / "demo" / "human_sample.json").read_text(encoding="utf-8")
        )["population"],
        "redraws": args.redraws,
        "judge": judged,
        "commands": [
            f"python -m ablate -m variant={variants} progress=false",
            f"python -m ablate.label validate generator=llama_cpp --holes {args.holes:g} --seed 0"
            + "".join(f" {a}" for a in _prompt(args.prompt)),
            f"python -m ablate.label pool --parent {parent} --depth 10 --name top10",
            f"python -m ablate.label judge --pool labels/demo/pools/{POOL}.tsv generator=llama_cpp"
            + "".join(f" {a}" for a in _prompt(args.prompt)),
            f"python -m ablate.label sample --pool labels/demo/pools/{POOL}.tsv --questions {args.questions} "
            f"--seed {args.seed}",
            f"python -m ablate.label commit --version {VERSION}",
            f"python -m ablate.report --parent {parent} --json --metrics {','.join(METRICS)} --cluster none",
            f"python -m ablate.report --parent {parent} --json --metrics {','.join(METRICS)} --cluster none "
            f"--labels {VERSION}",
            f"python -m ablate.report --parent {parent} --json --metrics {','.join(METRICS)} --cluster none "
            f"--labels labels/demo/versions/{VERSION}/assessor",
            f"python -m ablate.report --parent {parent} --json --metrics {','.join(METRICS)} --cluster evidence "
            f"--labels labels/demo/versions/{VERSION}/assessor",
        ],
    }
    data = {
        **ctx,
        "validation": {k: val[k] for k in val if k not in ("folder",)},
        "figures": figs,
        "fixed_population": fixed,
        "moved": dict(zip(("added", "dropped"), moved(text_rows), strict=True)),
        "redraws_table": again,
        "reports": reports,
    }
    text = json.dumps(data, indent=2, allow_nan=False) + "\n"
    # no machine's paths in a page kept in the repository: the repo's own relative, the work folder by name
    text = text.replace(str(REPO) + "/", "").replace(str(work), "<work>")
    out.with_suffix(".json").write_text(text, encoding="utf-8")
    text = page(ctx, figs, again, fixed, moved(text_rows))
    out.write_text(text, encoding="utf-8")
    print(text)
    print(
        f"wrote {out} (and {out.with_suffix('.csv').name}, {out.with_suffix('.json').name}); work folder {work}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
