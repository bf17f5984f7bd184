"""The table printed at the end of a ``-m`` sweep: one row per child run, headline metrics with 95% CIs, status."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import IO, Any

from ablate import record as R
from ablate.record import RecordedRun
from ablate.study.compare import varying_params
from ablate.study.report import heldout_marking, run_labels
from ablate.study.report.rows import one_sweep_declared
from ablate.tables import fmt, format_table
from ablate.tracking import Tracker


def ordered_children(tracker: Tracker, parent_run_id: str) -> list[RecordedRun]:
    """The sweep's child runs as the sweep was declared (their cells' places, ``ablate.sweep_index``), else (runs
    without it) in ablation order (``variant.order``), then by name."""
    return declared_order(tracker.children(parent_run_id))


def declared_order(runs: list[RecordedRun]) -> list[RecordedRun]:
    """``runs`` by their places in the sweep as declared when they are one sweep's and every one has its place,
    else by ``variant.order`` and name (runs of older sweeps, or of several)."""
    if one_sweep_declared(runs):
        return sorted(runs, key=lambda r: (r.sweep_index or 0, r.start_time, r.run_id))
    return sorted(runs, key=lambda r: (r.variant_order, r.variant, r.name, r.run_id))


COMPACT: tuple[str, ...] = ("ndcg@10", "recall@10", "mrr@10", "hit@10")


ANSWER_COLS: tuple[str, ...] = ("correct", "citations support", "wrong: gen/retr", "refused n/a")

# Shown when some run logged them (a corpus with dated version conflicts, with multi-condition questions): the share
# of conflicting questions that rank a superseded version first, and of multi-condition questions with every part
# in the top 10 — what nDCG and recall over pooled labels do not show.
ENTERPRISE: dict[str, str] = {"superseded first@10": "superseded_first@10", "all parts@10": "subq_all@10"}


def _answer_cells(m: Mapping[str, float]) -> dict[str, str]:
    """Answer correctness with its interval, the diagnosis split of wrong answers (generation / retrieval failures)
    and the refusals of no-answer questions, from a run's logged answer metrics."""
    lo, hi = m.get("answer_correct_ci_low"), m.get("answer_correct_ci_high")
    ci = f" [{fmt(lo, 2)}, {fmt(hi, 2)}]" if lo is not None and hi is not None else ""
    n_na = m.get("answer_no_answer_questions")
    refused = m.get("answer_correct_refusal_rate")
    return {
        "correct": fmt(m.get("answer_correct")) + ci if "answer_correct" in m else "-",
        "citations support": fmt(m.get("answer_citations_support")),
        "wrong: gen/retr": (
            f"{int(m['diagnosis_generation_failure_count'])}/{int(m['diagnosis_retrieval_failure_count'])}"
            if "diagnosis_generation_failure_count" in m and "diagnosis_retrieval_failure_count" in m
            else "-"
        ),
        "refused n/a": f"{round(refused * n_na)}/{int(n_na)}" if n_na and refused is not None else "-",
    }


def summary_table(runs: list[RecordedRun]) -> str:
    """One compact row per run: its label (the name, plus the swept values that tell runs apart, and its held-out
    mark: ``†`` test-tuned), the headline metrics (nDCG@10 with its 95% interval), the :data:`ENTERPRISE` columns
    some run logged, the answer columns when a run has answers, and its status; the held-out line
    (:func:`ablate.study.report.heldout_marking`) above the table when it has one."""
    plain = run_labels(runs, varying_params(runs))
    heldout = heldout_marking(runs, plain)
    labels = heldout.labels(plain)
    answers = any("answer_correct" in r.metrics for r in runs)
    enterprise = [
        c for c, k in ENTERPRISE.items() if any(fmt(r.metrics.get(R.metric_key(k))) != "-" for r in runs)
    ]
    answer_cols = list(ANSWER_COLS) if answers else []
    judges = {R.judge_label(r.params) for r in runs if "answer_correct" in r.metrics}
    if len(judges) > 1:  # every correctness figure names its judge: one column when the runs' judges differ
        answer_cols.insert(1, "judge")
    cols = ["run", *COMPACT, *enterprise, *answer_cols, "status"]
    rows: list[dict[str, Any]] = []
    for r in runs:
        status = f"{r.status} (reused)" if R.T_REUSED_FROM in r.tags else r.status  # ablate.runner.reuse
        row: dict[str, Any] = {"run": labels[r.run_id], "status": status}
        for h in COMPACT:
            key = R.metric_key(h)
            lo, hi = r.metrics.get(f"{key}{R.CI_LOW}"), r.metrics.get(f"{key}{R.CI_HIGH}")
            ci = (
                f" [{fmt(lo, 2)}, {fmt(hi, 2)}]"
                if lo is not None and hi is not None and h == "ndcg@10"
                else ""
            )
            row[h] = fmt(r.metrics.get(key)) + ci
        row.update({c: fmt(r.metrics.get(R.metric_key(ENTERPRISE[c]))) for c in enterprise})
        if answers:
            row.update(_answer_cells(r.metrics))
            row["judge"] = R.judge_label(r.params) or "-"
        rows.append(row)
    kind = "note" if heldout.exploratory_only else "warning"
    above = f"{kind}: {heldout.warning}\n" if heldout.warning else ""
    if len(judges) == 1 and None not in judges:  # the one judge in the header
        named = f"correct ({next(iter(judges))})"
        cols = [named if c == "correct" else c for c in cols]
        rows = [{(named if k == "correct" else k): v for k, v in row.items()} for row in rows]
    return above + format_table(rows, cols)


def summarize_sweep(
    tracker: Tracker, parent_run_id: str, stream: IO[str] | None = None, quiet: bool = False
) -> str:
    """Attach ``summary.md`` (one row per child, with status) to the parent; print failures (and the table unless
    ``quiet``: the full report prints its own)."""
    stream = stream or sys.stdout
    runs = ordered_children(tracker, parent_run_id)
    table = summary_table(runs)
    split = runs[0].split if runs else "?"
    header = f"{len(runs)} runs on split {split!r} (nDCG@10 with its 95% bootstrap CI over queries)"
    if not quiet:
        print("\n" + header + "\n" + table, file=stream)
    failed = [r for r in runs if r.status != "FINISHED"]
    for r in failed:
        print(f"  {r.variant} {r.status}: {r.failure}", file=stream)
    tracker.log_files(parent_run_id, {R.A_SUMMARY: f"# {header}\n\n{table}\n"})
    tracker.set_tags(parent_run_id, {R.T_CHILDREN: len(runs), R.T_FAILED_CHILDREN: len(failed)})
    return table
