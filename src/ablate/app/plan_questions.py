"""``python -m ablate.plan [--parent SWEEP_RUN_ID | --runs A_ID,B_ID] --metric ndcg@10 [--delta 0.03] [--power 0.8]
[--alpha 0.05] [--correction holm|bh|none] [--baseline A] [--cluster evidence|group|none] [--json]``: how many
questions a comparison needs.

Reads the runs as ``python -m ablate.report`` does (the children of the sweep, the latest sweep by default; the
baseline as the report chooses it; ``--runs``: the first is the baseline) and prints, per comparison, the minimum
detectable effect at today's n and at 2x/4x/8x, or with ``--delta`` the questions needed to detect it, with a
paired-bootstrap check (:mod:`ablate.study.power_plan`). A sweep's ceiling (the oracle run) is no candidate and is
left out unless ``--with-ceiling``; an MDE beyond a 0-1 metric's range is shown as ``> 1`` with a note. When the
questions cluster (``--cluster``, :mod:`ablate.study.clusters`) the MDE and the questions needed carry the design
effect, shown with its parts (G, m, ICC). Nothing is written to the store.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ablate.app.entry import run_command
from ablate.study.options import CLUSTER_HELP, CLUSTERS, CORRECTIONS, PARENT_HELP
from ablate.tables import format_table

if TYPE_CHECKING:
    from ablate.study.fetch import RunRecord
    from ablate.study.power_plan import PlanRow


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m ablate.plan",
        description="Questions needed to detect an effect, and what today's questions can detect (paired t "
        "approximation over the per-question differences, checked by a paired bootstrap).",
    )
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--parent", help=PARENT_HELP)
    src.add_argument("--runs", help="two or more run ids, comma-separated: the first is the baseline")
    ap.add_argument("--tracking-uri", help="MLflow store (default: $MLFLOW_TRACKING_URI, else ./mlflow.db)")
    ap.add_argument(
        "--metric", default="ndcg@10", help="ndcg@10 or ndcg_at_10, hit@10, ... (default %(default)s)"
    )
    ap.add_argument(
        "--delta", type=float, help="the effect to detect, in the metric's units (omitted: the MDE)"
    )
    ap.add_argument("--power", type=float, default=0.8, help="power to reach (default %(default)s)")
    ap.add_argument("--alpha", type=float, default=0.05, help="level of the family (default %(default)s)")
    ap.add_argument(
        "--correction",
        default="holm",
        help="over the comparisons: " + " | ".join(CORRECTIONS) + " (holm, bh: planned at alpha/m; default "
        "%(default)s)",
    )
    ap.add_argument(
        "--baseline", help="run id, name or variant (default: as the report: A, or the first cell)"
    )
    ap.add_argument(
        "--sims", type=int, default=2000, help="simulated studies of the bootstrap check (default 2000)"
    )
    ap.add_argument("--seed", type=int, default=0, help="seed of the simulation (default 0)")
    ap.add_argument(
        "--with-ceiling",
        action="store_true",
        help="plan the ceiling (the oracle run: the gold evidence retrieved) too; left out by default, it is no "
        "candidate",
    )
    ap.add_argument("--cluster", default="evidence", help=" | ".join(CLUSTERS) + ": " + CLUSTER_HELP)
    ap.add_argument("--json", action="store_true", help="one JSON object per comparison and line")
    return ap


def _f(v: float, digits: int = 3) -> str:
    return "-" if v is None or math.isnan(v) else f"{v:.{digits}f}"


def _n(v: float) -> str:
    return "-" if math.isnan(v) else str(int(v))


def _mde(v: float, cap: float | None) -> str:
    """An MDE, or ``> cap`` beyond the metric's whole range (the row's note says what that means)."""
    return f"> {cap:g}" if cap is not None and v > cap else _f(v)


def table(rows: Sequence[PlanRow], delta: float | None, power: float, cap: float | None = None) -> str:
    """The readable table: one row per comparison; notes (why a number is missing or not to be trusted) below it.
    ``cap``: the metric's range (1 on a 0-1 metric), beyond which an MDE is shown as ``> cap``."""
    out: list[dict[str, str]] = []
    notes: list[str] = []
    clustered = any(r.clustered for r in rows)
    for r in rows:
        row = {"comparison": f"{r.run} vs {r.baseline}", "n": str(r.n)}
        if clustered:  # the design effect and its parts, beside n
            row.update(
                {
                    "G": str(r.clusters),
                    "m": f"{r.cluster_size:.1f}",
                    "ICC": _f(r.icc, 2),
                    "deff": _f(r.deff, 2),
                }
            )
        row |= {
            "sd_diff": _f(r.sd_diff),
            "Δ now": "-" if math.isnan(r.delta_observed) else f"{r.delta_observed:+.3f}",
            "α": f"{r.alpha:.3g}",
        }
        if delta is None:
            row.update({f"MDE n={m}": _mde(v, cap) for m, v in r.mde_at.items()})
            row["sim. power at MDE"] = f"{_f(r.sim_power, 2)} ± {_f(r.sim_se, 2)}"
        else:
            row.update(
                {"MDE at n": _mde(r.mde, cap), "n needed": _n(r.n_needed), "t power": _f(r.t_power, 3)}
            )
            row["sim. power"] = f"{_f(r.sim_power, 2)} ± {_f(r.sim_se, 2)}"
        row.update({f"Wilson width n={m}": _f(w) for m, w in r.wilson_width.items()})
        if r.note:
            notes.append(f"  [{len(notes) + 1}] {r.run} vs {r.baseline}: {r.note}")
        row["note"] = f"[{len(notes)}]" if r.note else "-"
        out.append(row)
    cols = list(dict.fromkeys(k for row in out for k in row))
    return "\n".join([format_table([{c: row.get(c, "") for c in cols} for row in out], cols), *notes])


def run(args: argparse.Namespace) -> int:
    # imported once the arguments are read: the study's modules import MLflow, pandas and scipy
    from ablate.app.recorded_clusters import recompute
    from ablate.study.clusters import check_cluster, clustering, with_clusters
    from ablate.study.fetch import check_store
    from ablate.study.power_plan import check_settings, metric_name, plan_rows
    from ablate.tracking import Tracker, check_uri, resolve_tracking_uri

    check_settings(args.delta, args.power, args.alpha, args.correction)
    check_cluster(args.cluster)
    metric = metric_name(args.metric)
    uri = resolve_tracking_uri(args.tracking_uri)
    check_store(uri)
    check_uri(uri, "--tracking-uri")
    tracker = Tracker(uri)
    runs, swept, title, ceilings = _runs(tracker, args)
    if (
        args.cluster != "none"
    ):  # runs logged before ablate recorded their clusters: given again, if they can be
        runs = with_clusters(runs, recompute(tracker))
    clusters = clustering(runs, args.cluster)
    rows = plan_rows(
        runs,
        metric,
        args.delta,
        args.power,
        args.alpha,
        args.correction,
        args.baseline,
        swept,
        pairs_first=args.runs is not None,
        n_sims=args.sims,
        seed=args.seed,
        clusters=clusters,
    )
    if not rows:
        from ablate.errors import InputError

        raise InputError(
            title,
            f"{len(runs)} run(s), so no comparison to plan",
            "give a sweep of two or more cells (--parent), or two or more runs (--runs BASELINE_ID,OTHER_ID)",
        )
    for w in clusters.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if args.json:
        extra = {
            "correction": args.correction,
            "power": args.power,
            "delta": args.delta,
            "cluster": args.cluster,
        }
        for r in rows:
            print(json.dumps({**r.as_json(), **extra}))
        return 0
    _print(rows, title, metric, args)
    if ceilings:
        print(
            f"left out: {', '.join(ceilings)}: the ceiling (the gold evidence retrieved), not a candidate; "
            "--with-ceiling plans it too"
        )
    return 0


def _runs(tracker: Any, args: argparse.Namespace) -> tuple[list[RunRecord], list[str] | None, str, list[str]]:
    """The runs to plan (``--runs``, or the sweep's without its ceiling unless ``--with-ceiling``), the swept params,
    the title and the ceiling runs left out (not of ``--runs``: those were named)."""
    from ablate.errors import ConfigError
    from ablate.study.fetch import fetch_run_ids, fetch_runs

    if args.runs is None:
        runs, source = fetch_runs(tracker, args.parent)
        kept, ceilings = (runs, []) if args.with_ceiling else _candidates(runs)
        return kept, source.swept, source.title, ceilings
    ids = [x.strip() for x in args.runs.split(",") if x.strip()]
    if len(ids) < 2:
        raise ConfigError("--runs", args.runs, "give two or more run ids, comma-separated: baseline first")
    twice = next((rid for i, rid in enumerate(ids) if rid in ids[:i]), None)
    if twice is not None:
        raise ConfigError(
            "--runs",
            args.runs,
            f"run {twice} is named twice, and a run compared with itself has no difference to plan for; give "
            "two or more different run ids, comma-separated: baseline first",
        )
    return fetch_run_ids(tracker, ids), None, "the runs given", []


def _print(rows: Sequence[PlanRow], title: str, metric: str, args: argparse.Namespace) -> None:
    """The heading, the clusters' line (when the questions cluster), the table and the few-clusters warning."""
    from ablate.study.clusters import few_clusters
    from ablate.study.power_plan import UNIT_RANGE, unit_metric

    print(_heading(title, metric, args, len(rows)))
    clustered = [r for r in rows if r.clustered]
    if clustered:
        print(_clusters_line(clustered[0], args.cluster))
    print(table(rows, args.delta, args.power, UNIT_RANGE if unit_metric(metric) else None))
    few = few_clusters(min(r.clusters for r in clustered)) if clustered else None
    if few:
        print(f"warning: {few}")


def _candidates(runs: list[RunRecord]) -> tuple[list[RunRecord], list[str]]:
    """The sweep's runs without its ceiling, and the ceiling runs' names."""
    from ablate.study.power_plan import without_ceiling

    kept, ceilings = without_ceiling(runs)
    return kept, [r.name for r in ceilings]


def _clusters_line(row: PlanRow, how: str) -> str:
    """What the clusters make of the plan: G clusters of m questions, and what each row's design effect does."""
    return (
        f"clusters (--cluster {how}): {row.n} questions in {row.clusters} clusters of m = {row.cluster_size:.1f} on "
        "average; each comparison's design effect deff = 1 + (m − 1)·ICC (ICC: the within-cluster correlation of "
        "its differences) multiplies its MDE by sqrt(deff) and its questions needed by deff; the simulation draws "
        "whole clusters and tests each study with the cluster-robust t"
    )


def _heading(title: str, metric: str, args: argparse.Namespace, m: int) -> str:
    fam = (
        f"{args.correction} over {m} comparison(s): planned at α/m = {args.alpha:g}/{m} (Bonferroni, the first and "
        f"strictest step of {args.correction}: conservative); the report's MDE column is at α = {args.alpha:g} for "
        "one comparison, so it is smaller for the same pair"
        if args.correction != "none" and m > 1
        else f"{args.correction} over 1 comparison: α = {args.alpha:g}, as the report's MDE column"
        if args.correction != "none"
        else f"no correction: α = {args.alpha:g}"
    )
    goal = (
        f"questions needed to detect Δ = {args.delta:g} with power {args.power:g}"
        if args.delta is not None
        else f"minimum detectable effect (MDE) at power {args.power:g} with today's n and 2x/4x/8x"
    )
    return (
        f"{title}: {metric}, paired t approximation over the per-question differences, checked by a paired "
        f"bootstrap ({args.sims} simulated studies, seed {args.seed}); {fam}\n{goal}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(parser(), run, argv)
