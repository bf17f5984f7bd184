"""Calibration of the regression gate (ablate.study.gate.decide) on simulated clustered questions.

    python experiments/gate_calibration.py [--reps 4000] [--clusters 10] [--size 5] [--icc 0.3] [--seed 0]

Each replicate draws per-question differences d = u_cluster + e_question (u ~ N(0, icc·s²), e ~ N(0, (1-icc)·s²),
s = 0.1 on a 0-1 metric) around a true difference delta, G clusters of m questions, and asks:

* the clustered gate (``decide`` with the clusters): exit 1 (regression) and a "better" claim (low > 0);
* the naive paired t (``decide`` without groups: every question alone) and a naive paired bootstrap over questions
  (percentile interval at 1 - 2·alpha), with the same rules.

Under delta = 0 (nothing changed) a regression alarm and a "better" claim are each false alarms; their rates should
stay near alpha for an honest gate. At delta = -2·margin the regression rate is the gate's power. Writes
experiments/results/gate_calibration.md.
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np

from ablate.study.gate import REGRESSION, decide

HERE = Path(__file__).resolve().parent
SD = 0.1  # the spread of one question's difference on a 0-1 metric
BOOT = 1000  # resamples of the naive bootstrap


def _naive_bootstrap(d: np.ndarray, alpha: float, rng: np.random.Generator) -> tuple[float, float]:
    idx = rng.integers(0, len(d), (BOOT, len(d)))
    means = d[idx].mean(axis=1)
    return float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


def _rates(args: argparse.Namespace, delta: float) -> dict[str, tuple[float, float]]:
    rng = np.random.default_rng(args.seed)
    g = np.repeat(np.arange(args.clusters), args.size)
    qids = [f"q{i}" for i in range(len(g))]
    groups = {q: f"c{c}" for q, c in zip(qids, g, strict=True)}
    zero = dict.fromkeys(qids, 0.0)
    counts = {k: [0, 0] for k in ("clustered gate", "naive paired t", "naive bootstrap")}
    for _ in range(args.reps):
        u = rng.normal(0, SD * np.sqrt(args.icc), args.clusters)[g]
        d = delta + u + rng.normal(0, SD * np.sqrt(1 - args.icc), len(g))
        cand = dict(zip(qids, d.tolist(), strict=True))
        for name, grouping in (("clustered gate", groups), ("naive paired t", None)):
            r = decide(zero, cand, margin=args.margin, alpha=args.alpha, groups=grouping)
            counts[name][0] += r.outcome == REGRESSION
            counts[name][1] += r.better
        low, high = _naive_bootstrap(d, args.alpha, rng)
        counts["naive bootstrap"][0] += low <= -args.margin and high < 0
        counts["naive bootstrap"][1] += low > 0
    return {k: (v[0] / args.reps, v[1] / args.reps) for k, v in counts.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=4000)
    ap.add_argument("--clusters", type=int, default=10)
    ap.add_argument("--size", type=int, default=5)
    ap.add_argument("--icc", type=float, default=0.3)
    ap.add_argument("--margin", type=float, default=0.02)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(HERE / "results" / "gate_calibration.md"))
    args = ap.parse_args()
    t0 = time.perf_counter()
    null = _rates(args, 0.0)
    drop = _rates(args, -2 * args.margin)
    seconds = time.perf_counter() - t0
    se = np.sqrt(args.alpha * (1 - args.alpha) / args.reps)
    lines = [
        "# The regression gate on clustered questions: false alarms and power",
        "",
        f"{args.clusters} clusters of {args.size} questions, within-cluster correlation {args.icc}, per-question "
        f"spread {SD} on a 0-1 metric, margin {args.margin}, alpha {args.alpha} (one-sided, each side), "
        f"{args.reps} replicates per row, seed {args.seed}; {seconds:.0f} s on {platform.machine()}, Python "
        f"{platform.python_version()}. Monte Carlo standard error of a rate near alpha: {se:.4f}.",
        "",
        '| method | regression alarm, nothing changed | "better" claim, nothing changed | power: regression '
        f"found at a true drop of {2 * args.margin:g} |",
        "|---|---:|---:|---:|",
    ]
    for name in null:
        lines.append(f"| {name} | {null[name][0]:.3f} | {null[name][1]:.3f} | {drop[name][0]:.3f} |")
    lines += [
        "",
        "An honest gate keeps each false-alarm column near alpha (within alpha + 0.02). Questions that share evidence "
        "move together: treating them as independent (the naive rows) narrows the interval, so nothing-changed pairs "
        "raise alarms far more often than alpha. The clustered gate's power is what G clusters can give; more "
        "distinct evidence raises it more than more questions from the same.",
        "",
        f"Reproduce: `python experiments/gate_calibration.py --reps {args.reps} --clusters {args.clusters} --size "
        f"{args.size} --icc {args.icc} --seed {args.seed}`",
        "",
    ]
    Path(args.out).write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
