"""``python -m ablate.gate``: fail a build when a candidate run is worse than its baseline by more than a margin,
honestly about what n clustered questions can tell (the decision: :mod:`ablate.study.gate`).

    python -m ablate.gate --baseline RUN --candidate RUN --metric ndcg@10 --margin 0.02 [--alpha 0.05]
        [--cluster evidence|group|none] [--json] [--summary FILE] [--tracking-uri URI]

``RUN`` is an MLflow run id or a run's name. Per-question values are read from each run's ``per_query.csv`` (checked
against the run's sealed record): the questions the run scored as answerable with the metric defined, as every
table's mean. Both runs must stand on one corpus snapshot and one label version, and score the same questions.
Exit codes: 0 pass, 1 regression, 3 inconclusive, 2 bad input.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ablate.app.entry import run_command
from ablate.app.parser import add_choice, command_parser
from ablate.errors import AblateError

CLUSTERS = ("evidence", "group", "none")
#: the most broken and fixed questions the console names under the verdict
SHOWN_QUESTIONS = 5


def parser() -> Any:
    p = command_parser(
        "gate", "Gate a candidate run against a baseline run: exit 0 pass, 1 regression, 3 inconclusive."
    )
    p.add_argument("--baseline", required=True, help="the baseline run: an MLflow run id or run name")
    p.add_argument("--candidate", required=True, help="the candidate run: an MLflow run id or run name")
    p.add_argument(
        "--metric",
        action="append",
        required=True,
        help="a per-question metric (ndcg@10); may repeat: each is then gated at alpha / the number of metrics",
    )
    p.add_argument("--margin", type=float, required=True, help="the largest drop you accept (e.g. 0.02)")
    p.add_argument("--alpha", type=float, default=0.05, help="each side's one-sided level (default 0.05)")
    add_choice(
        p,
        "--cluster",
        CLUSTERS,
        "evidence (default): questions that share gold evidence, a declared group or their text move together; "
        "group: the queries' declared group only; none: every question alone",
    )
    p.add_argument("--json", action="store_true", help="print the decision as JSON")
    p.add_argument("--summary", type=Path, help="also write the decision as Markdown (a CI job summary)")
    p.add_argument("--tracking-uri", help="the MLflow store (default: ./mlflow.db, or MLFLOW_TRACKING_URI)")
    return p


def _resolve(tracker: Any, given: str, option: str) -> Any:
    run = tracker.get_run(given)
    if run is not None:
        return run
    quoted = given.replace("'", "\\'")
    found = tracker.find_runs(filter_string=f"attributes.run_name = '{quoted}'")
    if len(found) == 1:
        return found[0]
    if not found:
        raise AblateError(
            f"{option} {given!r}: no run with this id or name in {tracker.uri}. Fix: pass a run id"
        )
    ids = ", ".join(r.run_id for r in found[:5])
    raise AblateError(f"{option} {given!r}: {len(found)} runs have this name ({ids}). Fix: pass a run id")


def _values(per_query: Any, metric: str, run: Any) -> dict[str, float]:
    if metric not in per_query.columns:
        known = ", ".join(c for c in per_query.columns if "@" in str(c) or str(c).startswith("answer_"))
        raise AblateError(
            f"--metric {metric!r}: run {run.name} has no such per-question value; it has {known}"
        )
    rows = per_query[per_query["category"] == "answerable"] if "category" in per_query.columns else per_query
    return {str(q): float(v) for q, v in rows[metric].items() if not math.isnan(float(v))}


def _same_ground(base: Any, cand: Any) -> None:
    from ablate import record as R

    for tag, what in ((R.T_SNAPSHOT, "corpus snapshot"), (R.T_LABEL_VERSION, "label version")):
        b, c = base.tags.get(tag), cand.tags.get(tag)
        if b != c:
            raise AblateError(
                f"the runs stand on different {what}s ({b} in {base.name}, {c} in {cand.name}). Fix: re-score both "
                "on one: python -m ablate.report --runs BASELINE,CANDIDATE --labels VERSION"
            )


def _groups(tracker: Any, run: Any, qids: list[str], how: str, tmp: str) -> dict[str, str] | None:
    if how == "none":
        return None
    from ablate.app.label_common import load
    from ablate.data.splitting import evidence_groups
    from ablate.runner.rescore import _config, recorded_settings

    corpus, settings = recorded_settings(_config(tracker, run.run_id, tmp))
    snapshot = load(corpus)
    if how == "group":
        return {q: g for q in qids if (g := snapshot.queries[q].group)}
    return evidence_groups(snapshot, qids, settings.eval.relevance_level)


def _console(decision: Any, metric: str, base: dict[str, float], cand: dict[str, float]) -> str:
    verdict = {"pass": "PASS", "regression": "REGRESSION", "inconclusive": "INCONCLUSIVE"}[decision.outcome]
    lines = [
        f"{verdict}{' (better)' if decision.better else ''} {metric} Δ {decision.delta:+.3f} "
        f"[{decision.low:+.3f}, {decision.high:+.3f}] margin {decision.margin:g}, {decision.n_questions} questions in "
        f"{decision.n_clusters} clusters"
    ]
    if decision.outcome == "inconclusive":
        need = decision.questions_needed
        lines.append(
            f"  this n rules out drops larger than {decision.mde:.3f} (80% power, alpha {decision.alpha:g}); "
            + (f"about {need} questions would decide it at this margin" if need else "no spread to plan from")
            + f" (within-cluster correlation {decision.icc:.2f})"
        )
    diffs = sorted(((cand[q] - base[q], q) for q in base), key=lambda x: x[0])
    broke = [f"{q} {d:+.3f}" for d, q in diffs[:SHOWN_QUESTIONS] if d < 0]
    fixed = [f"{q} {d:+.3f}" for d, q in reversed(diffs[-SHOWN_QUESTIONS:]) if d > 0]
    if broke:
        lines.append("  broke most: " + ", ".join(broke))
    if fixed:
        lines.append("  fixed most: " + ", ".join(fixed))
    lines += [f"  warning: {w}" for w in decision.warnings]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(parser(), _run, argv)


def _run(args: Any) -> int:
    # imported once the arguments are read: MLflow, pandas and scipy
    from ablate import record as R
    from ablate.study.fetch import check_store, read_per_query
    from ablate.study.gate import decide
    from ablate.tracking import Tracker, resolve_tracking_uri

    uri = resolve_tracking_uri(args.tracking_uri)
    check_store(uri)
    tracker = Tracker(uri)
    base, cand = (
        _resolve(tracker, args.baseline, "--baseline"),
        _resolve(tracker, args.candidate, "--candidate"),
    )
    _same_ground(base, cand)
    out: list[dict[str, Any]] = []
    text: list[str] = []
    alpha = args.alpha / len(args.metric)  # Bonferroni over the metrics: the gates hold at alpha jointly
    with tempfile.TemporaryDirectory(prefix="ablate-gate-") as tmp:
        tables = [read_per_query(tracker, r, tmp) for r in (base, cand)]
        groups = None
        for metric in args.metric:
            b, c = (_values(t, metric, r) for t, r in zip(tables, (base, cand), strict=True))
            if groups is None and args.cluster != "none":
                groups = _groups(tracker, base, sorted(b), args.cluster, tmp)
            d = decide(b, c, margin=args.margin, alpha=alpha, groups=groups)
            row = {"metric": metric, **d.as_dict(), "baseline": base.run_id, "candidate": cand.run_id}
            row["label_version"] = base.tags.get(R.T_LABEL_VERSION)
            out.append(row)
            text.append(_console(d, metric, b, c))
    print(json.dumps(out[0] if len(out) == 1 else out, indent=2) if args.json else "\n".join(text))
    if args.summary is not None:
        args.summary.write_text("```\n" + "\n".join(text) + "\n```\n", encoding="utf-8")
    codes = {r["exit_code"] for r in out}
    return 1 if 1 in codes else (3 if 3 in codes else 0)  # a regression on any metric fails the build
