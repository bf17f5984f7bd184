"""What a run prints: its headline table, the query accounting (a warning when queries were not scored as declared),
the labels' projection, the answers' line and where the run is recorded."""

from __future__ import annotations

import sys
from typing import IO, Any

from ablate import record as R
from ablate.tables import fmt, format_table


def projection_line(counts: Any, record: dict[str, Any], onto: str) -> str:
    """The console's one line about a projection."""
    c = counts
    return (
        f"labels projected onto {onto} chunks (from {record['from']['kind']}, min_overlap {record['min_overlap']:g}: "
        f"a chunk takes the best grade of each label it shares that share of, of the label or of the chunk): "
        f"{c.projected} of {c.labels} labels projected, {c.split} split, {c.lost} lost, {c.merged} merged; "
        f"sub-question evidence {c.evidence - c.evidence_lost} of {c.evidence} kept. The unit changed: compare "
        f"runs over chunkers at the document level (doc_ndcg@10)"
    )


def latency_note(answers: Any) -> str:
    """``latency p50 0.41s``, saying where the figure comes from when some answers came from the cache (their latency
    is the one measured when they were generated, not this run's lookup) or have no latency kept."""
    lat = answers["latency_s"].astype(float)
    known, cached = lat.dropna(), int(answers["cached"].astype(bool).sum())
    text = f"latency p50 {known.median():.2f}s" if len(known) else "latency unknown"
    notes = []
    if cached:
        notes.append(f"as generated: {cached} of {len(answers)} answers from the cache")
    if len(known) < len(lat):
        notes.append(f"{len(lat) - len(known)} cached without a latency, left out")
    return text + (f" ({'; '.join(notes)})" if notes else "")


#: Accounting counters that say queries were not scored as declared: any of them above zero gets one warning line,
#: with or without ``-v`` (no query is dropped silently). Every counter is in ``accounting.json`` and the run's
#: ``queries_*`` metrics; ``-v`` prints them all. An empty result is a problem only for an answerable question (it
#: scores 0 there); for a no-answer question it is the refusal wanted.
PROBLEM_COUNTERS: tuple[str, ...] = (
    "missing_from_run",
    "excluded_missing",
    "not_in_query_set",
    "qrels_not_in_query_set",
)


def accounting_lines(
    accounting: dict[str, Any], split: str | None, label: str, verbose: bool
) -> tuple[list[str], list[str]]:
    """(lines for stdout, warnings for stderr) of a run's query accounting: the counter line only when ``verbose``;
    one warning when a :data:`PROBLEM_COUNTERS` counter is above zero or an answerable question got an empty
    result."""
    counts = {k: v for k, v in accounting.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    out = [f"queries ({split}): " + ", ".join(f"{k}={v:g}" for k, v in counts.items())] if verbose else []
    problems = [f"{k}={counts[k]:g}" for k in PROBLEM_COUNTERS if counts.get(k)]
    by_category = accounting.get("by_category")
    empty = by_category.get("answerable", {}).get("empty_result", 0) if isinstance(by_category, dict) else 0
    if empty:
        problems.append(f"empty_result={empty} (answerable, scored 0)")
    warn = (
        [
            f"warning: {label} ({split}): {', '.join(problems)}: queries not scored as declared (every counter: "
            "accounting.json and the queries_* metrics of the run; -v prints them)"
        ]
        if problems
        else []
    )
    return out, warn


def print_accounting(
    accounting: dict[str, Any], split: str | None, label: str, verbose: bool, stream: IO[str] | None = None
) -> None:
    """:func:`accounting_lines`, printed: the counters on ``stream`` (stdout), the warning on stderr."""
    out, warn = accounting_lines(accounting, split, label, verbose)
    for line in out:
        print(line, file=stream or sys.stdout)
    for line in warn:
        print(line, file=sys.stderr)


def print_run_summary(
    result: Any,
    run_id: str,
    uri: str,
    experiment: str,
    stream: IO[str] | None = None,
    artifacts: str = "",
    brief: bool = False,
    verbose: bool = False,
    label: str = "",
) -> None:
    """What a run prints: its headline table, the answers' line and where the run is; only the accounting (the
    counters with ``verbose``, a warning when queries were not scored) when ``brief`` (a sweep's cell, whose one
    line the command prints)."""
    stream = stream or sys.stdout
    ev = result.evaluation
    if not brief:
        cols = [k for k in R.HEADLINE if k in ev.means]
        row = {"variant": result.variant, **{k: fmt(ev.means[k]) for k in cols}}
        print(format_table([row], ["variant", *cols]), file=stream)
    print_accounting(ev.accounting, result.split, label or result.variant, verbose, stream)
    if (
        result.projection_counts is not None and result.projection is not None
    ):  # the unit changed: said even for a sweep's cell
        print(
            projection_line(result.projection_counts, result.projection, result.projected_onto), file=stream
        )
    if brief:
        return
    if result.answers is not None:
        a = result.answers
        scored = a[a["answerable"]]
        diag = scored["diagnosis"].value_counts()
        na = a[a["no_answer"]]
        judge = getattr(result.pipeline.judge, "label", "rule")
        beside = ""
        if (
            "judge_grade" in a
        ):  # an LLM judge: the rule's figure beside it, and what it graded partly or unparsed
            grades = scored["judge_grade"].fillna("").astype(str)
            beside = (
                f" (rule: {scored['correct_rule'].mean():.3f}; partly {int((grades == 'partly').sum())}, "
                f"unparsed {int((grades == 'unparsed').sum())})"
            )
        print(
            f"answers: correct ({judge}) {scored['correct'].mean():.3f} of {len(scored)} answerable{beside}; "
            f"citations support "
            f"{scored['citations_support'].mean():.3f}; no-answer questions refused {int(na['refused'].sum())}/{len(na)}"
            f"; wrong: {int(diag.get('generation_failure', 0))} with the evidence in the context (generation), "
            f"{int(diag.get('retrieval_failure', 0))} without it (retrieval); {latency_note(a)}",
            file=stream,
        )
    print(f"mlflow run {run_id} in experiment {experiment!r} at {uri}", file=stream)
    if artifacts:
        print(f"artifacts (run.trec, per_query.csv, ...): {artifacts}", file=stream)
    if uri.startswith("sqlite:///"):
        print(
            f"compare runs: mlflow ui --backend-store-uri {uri}  (then open http://127.0.0.1:5000)",
            file=stream,
        )
