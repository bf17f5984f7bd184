"""Reproduce the ablation table of one dataset and write its page, experiments/<name>.md.

    python experiments/dataset_page.py scifact --tune-split train -- rerank.model=trained rerank.depth=20
    python experiments/dataset_page.py nq_utd
    python experiments/dataset_page.py rgb_zh --variants A,B,C,oracle --encoders multilingual-e5-small,all-MiniLM-L6-v2

1. With ``--tune-split``, RRF's k and the retrieval window are chosen on that split (never on the held-out split):
   a C sweep over rrf.k x retrieval.window, best nDCG@10 wins (ties: the smaller k, then the smaller window).
2. The held-out split is run once: ``python -m ablate -m corpus=<name> variant=... --confirm-test`` with the chosen k
   and window (``--confirm-test``: a sweep on a held-out split is refused without it).
3. The page lists the exact commands, wall times, every variant with 95% CIs, and the published figures beside ours.
4. With ``--encoders``, the same sweep runs every dense variant with each encoder (``dense.model=...``): the main
   table shows the first, and a side-by-side table gives each encoder's B and C with a paired randomization test on
   per-query nDCG@10 (the queries, never anything else, are resampled).

Everything goes through the real entry point and MLflow store (``--tracking-uri``, default ./mlflow.db).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from ablate.record import CI_HIGH, CI_LOW, ROLE_SWEEP_PARENT, T_ROLE, RecordedRun, metric_key
from ablate.tracking import Tracker

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

PUBLISHED = {
    "scifact": [
        ("A", "ndcg@10", 0.665, "BM25, BEIR paper (Thakur et al., 2021, Table 2; Elasticsearch multi-field)"),
        ("A", "ndcg@10", 0.679, "BM25 flat, Pyserini/Anserini BEIR regressions (Porter stemming, one field)"),
        ("B", "ndcg@10", 0.645, "all-MiniLM-L6-v2, MTEB leaderboard (SciFact)"),
    ],
}
COLUMNS = ["ndcg@10", "recall@100", "mrr@10", "hit@10"]
SWEEP_K = "1,10,30,60,100"
SWEEP_WINDOW = "20,50,100"


def ablate(args: list[str], uri: str) -> float:
    cmd = [sys.executable, "-m", "ablate", *args, f"tracking.uri={uri}", "progress=false"]
    print("+", " ".join(cmd[1:]), flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=REPO, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
    return time.perf_counter() - t0


def latest_children(uri: str, experiment: str) -> tuple[RecordedRun, list[RecordedRun]]:
    """The newest sweep parent run of ``experiment`` and its child runs."""
    t = Tracker(uri)
    exp = t.experiment_id(experiment, create=False)
    parents = (
        []
        if exp is None
        else t.find_runs([exp], f"tags.`{T_ROLE}` = '{ROLE_SWEEP_PARENT}'", max_results=1, newest_first=True)
    )
    if not parents:
        raise SystemExit(f"error: no sweep parent run in experiment {experiment!r} of {uri}")
    parent = parents[0]
    return parent, t.children(parent.run_id)


def cell(m: Mapping[str, float], key: str) -> str:
    k = metric_key(key)
    if k not in m:
        return "–"
    lo, hi = m.get(metric_key(f"{key}{CI_LOW}")), m.get(metric_key(f"{key}{CI_HIGH}"))
    return f"{m[k]:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else "")


def per_query_ndcg(uri: str, run: RecordedRun) -> dict[str, float]:
    import tempfile

    import pandas as pd

    path = Tracker(uri).download_artifact(run.run_id, "per_query.csv", tempfile.mkdtemp(prefix="page-"))
    pq = pd.read_csv(path, index_col=0)
    pq = pq[pq["category"] == "answerable"]
    return {str(q): float(v) for q, v in pq["ndcg@10"].items()}


def encoder_section(kids: list[RecordedRun], encoders: list[str], uri: str) -> list[str]:
    """Each dense variant with each encoder, and a paired randomization test of every encoder against the first."""
    from ablate.evaluation.stats import paired_randomization_test

    lines = [
        "## Encoders side by side",
        "",
        "Same sweep, same queries; Δ and p: paired randomization test on per-query nDCG@10 against "
        f"`{encoders[0]}` (10,000 sign flips, seed 0).",
        "",
        "| variant | encoder | ndcg@10 | recall@100 | Δ nDCG@10 | p |",
        "|---|---|---|---|---|---|",
    ]
    by = {
        (r.params.get("variant"), r.params.get("dense.model")): r for r in kids if "dense.model" in r.params
    }
    for v in dict.fromkeys(r.params.get("variant") for r in kids if "dense.model" in r.params):
        base = by.get((v, encoders[0]))
        base_q = per_query_ndcg(uri, base) if base is not None else {}
        for e in encoders:
            r = by.get((v, e))
            if r is None:
                continue
            delta = p = "–"
            if e != encoders[0] and base_q:
                q = per_query_ndcg(uri, r)
                common = sorted(set(q) & set(base_q))
                res = paired_randomization_test([q[x] for x in common], [base_q[x] for x in common])
                delta, p = f"{res.delta:+.3f}", f"{res.p_value:.4f}"
            lines.append(
                f"| {v} | `{e}` | {cell(r.metrics, 'ndcg@10')} | {cell(r.metrics, 'recall@100')} | {delta} | {p} |"
            )
    return [*lines, ""]


def paired_section(kids: list[RecordedRun], uri: str, pairs: list[tuple[str, str]]) -> list[str]:
    """``variant vs baseline`` for each pair present: Δ nDCG@10 and a paired randomization test on per-query nDCG@10
    (10,000 sign flips, seed 0), over the queries both runs scored."""
    from ablate.evaluation.stats import paired_randomization_test

    by = {r.params.get("variant"): r for r in kids}
    present = [(v, b) for v, b in pairs if v in by and b in by]
    if not present:
        return []
    lines = [
        "## Paired tests",
        "",
        "Δ and p: paired randomization test on per-query nDCG@10 (10,000 sign flips, seed 0), same queries.",
        "",
        "| comparison | nDCG@10 | baseline nDCG@10 | Δ nDCG@10 | p | queries |",
        "|---|---|---|---|---|---|",
    ]
    for v, b in present:
        q, base_q = per_query_ndcg(uri, by[v]), per_query_ndcg(uri, by[b])
        common = sorted(set(q) & set(base_q))
        res = paired_randomization_test([q[x] for x in common], [base_q[x] for x in common])
        lines.append(
            f"| {v} vs {b} | {cell(by[v].metrics, 'ndcg@10')} | {cell(by[b].metrics, 'ndcg@10')} | "
            f"{res.delta:+.3f} | {res.p_value:.4f} | {len(common)} |"
        )
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus")
    ap.add_argument("--variants", default="A,B,C,D,oracle")
    ap.add_argument(
        "--tune-split", default=None, help="split to choose rrf.k and retrieval.window on (e.g. train)"
    )
    ap.add_argument("--tracking-uri", default=f"sqlite:///{REPO / 'mlflow.db'}")
    ap.add_argument("--out", default=None)
    ap.add_argument("--note", default="", help="a paragraph for the page (e.g. why D is absent)")
    ap.add_argument("--encoders", default="", help="dense models side by side, the first is the main table's")
    a, rest = ap.parse_known_args(argv)
    a.overrides = [x for x in rest if x != "--"]  # extra ablate overrides, e.g. -- rerank.model=trained
    name, uri = a.corpus, a.tracking_uri
    commands: list[tuple[str, float]] = []
    k, window = 60, 100
    tuning_rows = []
    if a.tune_split:
        args = [
            "-m",
            f"corpus={name}",
            f"corpus.split={a.tune_split}",
            "variant=C",
            f"rrf.k={SWEEP_K}",
            f"retrieval.window={SWEEP_WINDOW}",
            "stats.bootstrap=200",
        ]
        commands.append(("python -m ablate " + " ".join(args), ablate(args, uri)))
        _, kids = latest_children(uri, name)
        scored = []
        for r in kids:
            if r.status != "FINISHED":
                continue
            # the window is set as retrieval.window and logged as the rrf stage's param rrf.window
            kk, ww = float(r.params["rrf.k"]), int(r.params["rrf.window"])
            v = r.metrics[metric_key("ndcg@10")]
            scored.append((-v, kk, ww))
            tuning_rows.append((kk, ww, v))
        _, k, window = min(scored)
        k = int(k) if float(k).is_integer() else k
    args = [
        "-m",
        f"corpus={name}",
        f"variant={a.variants}",
        f"rrf.k={k}",
        f"retrieval.window={window}",
        *a.overrides,
        *([f"dense.model={a.encoders}"] if a.encoders else []),
        "--confirm-test",  # the one final run on the held-out split, of settings chosen on --tune-split
    ]
    commands.append(("python -m ablate " + " ".join(args), ablate(args, uri)))
    parent, kids = latest_children(uri, name)
    order = {v: i for i, v in enumerate(a.variants.split(","))}
    kids = sorted(kids, key=lambda r: order.get(r.params.get("variant"), 99))
    encoders = [e for e in a.encoders.split(",") if e]
    all_kids = kids
    if encoders:  # the main table: the first encoder's runs, and each variant without dense once
        seen: set[str] = set()
        main_rows = []
        for r in kids:
            v = r.params.get("variant", "?")
            if v in seen or r.params.get("dense.model", encoders[0]) != encoders[0]:
                continue
            seen.add(v)
            main_rows.append(r)
        kids = main_rows

    split = kids[0].params.get("corpus.split", "?") if kids else "?"
    lines = [f"# {name}: the ablation table", ""]
    lines += [
        f"Split `{split}`{' (held out, run once)' if split == 'test' else ''}, "
        f"{int(kids[0].metrics.get('queries_total', 0)) if kids else 0} "
        f"queries; nDCG@10 uses 2^rel−1 gains; 95% bootstrap CIs over queries (1000 resamples, seed 0).",
        "",
    ]
    if a.note:
        lines += [a.note, ""]
    extra_cols = ["judged@10"]
    has_aic = any(metric_key("answer_in_context@10") in r.metrics for r in kids)
    if has_aic:
        extra_cols.append("answer_in_context@10")
    header = ["variant", *COLUMNS, *extra_cols, "run seconds", "status"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in kids:
        m = r.metrics
        row = [r.params.get("variant", "?"), *(cell(m, c) for c in COLUMNS)]
        row += [f"{m[metric_key(c)]:.3f}" if metric_key(c) in m else "–" for c in extra_cols]
        row += [f"{m.get('time_total_seconds', float('nan')):.1f}", r.status]
        lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        f"C and D use rrf.k={k}, retrieval.window={window}"
        + (
            f" (chosen on `{a.tune_split}`; see below)."
            if a.tune_split
            else " (defaults; this set has no dev split to tune on)."
        ),
        "",
    ]
    lines += paired_section(kids, uri, [("D", "C")])
    if encoders:
        lines += encoder_section(all_kids, encoders, uri)
    pub = PUBLISHED.get(name, [])
    if pub:
        lines += [
            "## Published figures beside ours",
            "",
            "| variant | metric | published | ours | Δ | source |",
            "|---|---|---|---|---|---|",
        ]
        by_v = {r.params.get("variant"): r.metrics for r in kids}
        for v, metric, value, src in pub:
            ours = by_v.get(v, {}).get(metric_key(metric))
            lines.append(
                f"| {v} | {metric} | {value:.3f} | {'–' if ours is None else f'{ours:.4f}'} | "
                f"{'–' if ours is None else f'{ours - value:+.4f}'} | {src} |"
            )
        lines.append("")
    if tuning_rows:
        lines += [
            f"## Tuning on `{a.tune_split}` (C, nDCG@10)",
            "",
            "| rrf.k | window | nDCG@10 |",
            "|---|---|---|",
        ]
        lines += [f"| {kk:g} | {ww} | {v:.4f} |" for kk, ww, v in sorted(tuning_rows)]
        lines.append("")
    lines += ["## Reproduce", "", "```bash"] + [c for c, _ in commands] + ["```", ""]
    lines += ["| command | wall seconds |", "|---|---|"] + [
        f"| `{c[:90]}{'…' if len(c) > 90 else ''}` | {t:.0f} |" for c, t in commands
    ]
    lines += [
        "",
        f"MLflow: parent run `{parent.run_id}` (experiment `{name}`). Machine: {os.cpu_count()} cores, "
        f"Python {platform.python_version()}; measured {time.strftime('%Y-%m-%d')}; wall times include model loading "
        "and were taken on a machine shared with other jobs.",
        "",
    ]
    out = Path(a.out) if a.out else HERE / f"{name}.md"
    out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
