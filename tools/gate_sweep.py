"""The regression gate over a whole sweep, as a CI job runs it (docs/ci.md, "In CI"; docs/examples/ablate-gate.yml).

    python tools/gate_sweep.py --tracking-uri URI --metric ndcg@10 --margin 0.02 [--alpha 0.05]
        [--cluster evidence|group|none] [--baseline-sweep RUN_ID] [--candidate-sweep RUN_ID] [--summary FILE]

Every cell of the candidate sweep is gated against the cell of the same name in the baseline sweep with
``python -m ablate.gate``'s own entry, run in this process: its decision, checks and exit codes are the ones a
person gets from the command.
A cell's name is the label a sweep gives its run: the variant (``C``), plus the values that tell cells of one variant
apart (``C k=1 window=20``), so the same sweep command names the same cells on both sides.

Which sweeps: the candidate is the latest sweep of the store (as ``python -m ablate.report`` reads it: refused when
sweeps overlap in time), the baseline the newest sweep that started before it; ``--baseline-sweep`` and
``--candidate-sweep`` name either by its parent run id. In the workflow the store holds main's one sweep, restored
from main's cache, and the pull request's sweep run after it.

Exit codes, as the job reads them: 0 when every cell passes or is inconclusive (each inconclusive cell is a warning
annotation under GitHub Actions), 1 when a cell regressed, 2 for bad input (a cell the gate refused, no baseline).
``--summary FILE`` appends a table and each cell's verdict as Markdown (``$GITHUB_STEP_SUMMARY`` is appended to).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ablate import record as R
from ablate.app.parser import OneLineParser, add_choice
from ablate.errors import AblateError
from ablate.record import RecordedRun

#: the gate's exit codes (``python -m ablate.gate``) and what each does to the job
PASS, REGRESSION, BAD_INPUT, INCONCLUSIVE = 0, 1, 2, 3
VERDICTS = {PASS: "pass", REGRESSION: "regression", INCONCLUSIVE: "inconclusive", BAD_INPUT: "bad input"}


class GateSweepError(AblateError):
    """Sweeps that cannot be gated cell by cell."""


@dataclass(frozen=True)
class CellGate:
    """One cell's gate: its name, the two runs, the gate's exit code and what it printed."""

    cell: str
    baseline: str
    candidate: str
    code: int
    text: str


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="python tools/gate_sweep.py",
        description="Gate every cell of a candidate sweep against the baseline sweep's cell of the same name "
        "(python -m ablate.gate): exit 0 pass or inconclusive, 1 a regression, 2 bad input.",
    )
    p.add_argument("--tracking-uri", required=True, help="the MLflow store holding both sweeps")
    p.add_argument(
        "--metric", action="append", required=True, help="a per-question metric (ndcg@10); may repeat"
    )
    p.add_argument("--margin", required=True, help="the largest drop you accept (e.g. 0.02)")
    p.add_argument("--alpha", default="0.05", help="each side's one-sided level (default 0.05)")
    add_choice(p, "--cluster", ("evidence", "group", "none"), "how questions cluster (python -m ablate.gate)")
    p.add_argument("--baseline-sweep", help="the baseline sweep's parent run id (default: the sweep before)")
    p.add_argument(
        "--candidate-sweep", help="the candidate sweep's parent run id (default: the latest sweep)"
    )
    p.add_argument("--summary", type=Path, help="append the verdicts as Markdown (a CI job summary)")
    return p


def _sweep(tracker: Any, run_id: str, option: str) -> RecordedRun:
    run = tracker.get_run(run_id)
    if run is None or run.tags.get(R.T_ROLE) != R.ROLE_SWEEP_PARENT:
        what = "no run" if run is None else f"run {run.name!r}, not a sweep's parent,"
        raise GateSweepError(
            f"{option} {run_id!r}: {what} in {tracker.uri}. Fix: pass a sweep parent's run id"
        )
    return run


def sweeps(tracker: Any, baseline: str | None, candidate: str | None) -> tuple[RecordedRun, RecordedRun]:
    """(baseline, candidate) sweep parents: as named, else the latest sweep and the newest one started before it."""
    from ablate.study.latest import latest_parent

    cand = _sweep(tracker, candidate or latest_parent(tracker), "--candidate-sweep")
    if baseline:
        return _sweep(tracker, baseline, "--baseline-sweep"), cand
    earlier = tracker.find_runs(
        None,
        f"tags.`{R.T_ROLE}` = '{R.ROLE_SWEEP_PARENT}' and attributes.start_time < {cand.start_time}",
        max_results=1,
        newest_first=True,
    )
    if not earlier:
        raise GateSweepError(
            f"no baseline sweep in {tracker.uri}: it holds no sweep started before {cand.name!r}. Fix: restore the "
            "store main's sweep was logged to (in the example workflow, push to main once to cache it), or pass "
            "--baseline-sweep RUN_ID"
        )
    return earlier[0], cand


def cells(tracker: Any, parent: RecordedRun) -> dict[str, RecordedRun]:
    """The sweep's runs by name (each cell's label), in the sweep's order."""
    runs = sorted(tracker.children(parent.run_id), key=lambda r: (r.sweep_index is None, r.sweep_index or 0))
    out: dict[str, RecordedRun] = {}
    for run in runs:
        if run.name in out:
            raise GateSweepError(
                f"sweep {parent.run_id} has two runs named {run.name!r} ({out[run.name].run_id}, {run.run_id}): its "
                "cells cannot be matched by name. Fix: pass the two runs to python -m ablate.gate by id"
            )
        out[run.name] = run
    return out


def gate_cell(
    cell: str, base: RecordedRun, cand: RecordedRun, args: argparse.Namespace, tmp: Path
) -> CellGate:
    """``python -m ablate.gate`` (its entry, in this process) on one pair of runs: its exit code and its console
    text (the verdict line first)."""
    from ablate.app.gate import main as gate

    summary = tmp / f"{base.run_id}-{cand.run_id}.md"
    argv = ["--baseline", base.run_id, "--candidate", cand.run_id]
    for metric in args.metric:
        argv += ["--metric", metric]
    argv += ["--margin", args.margin, "--alpha", args.alpha, "--cluster", args.cluster]
    argv += ["--tracking-uri", args.tracking_uri, "--summary", str(summary)]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = gate(argv)
        except SystemExit as e:  # its argument parser refuses an option this way
            code = e.code if isinstance(e.code, int) else BAD_INPUT
    # the gate writes its summary once it decided, headed by the outcome: an exit code it agrees with is a verdict
    if code in (PASS, REGRESSION, INCONCLUSIVE) and summary.exists():
        heading = summary.read_text(encoding="utf-8").partition("\n")[0]
        if heading.rpartition(": ")[2].lower() == VERDICTS[code]:
            return CellGate(cell, base.run_id, cand.run_id, code, out.getvalue().strip("\n"))
    # a refusal (exit 2), or a failure (a 1 with no decision behind it is the gate's "unexpected" line): its last line
    said = (
        err.getvalue().strip() or out.getvalue().strip() or f"python -m ablate.gate exited {code}"
    ).splitlines()
    return CellGate(cell, base.run_id, cand.run_id, BAD_INPUT, said[-1])


def outcome(gates: Sequence[CellGate]) -> int:
    """The job's exit code: a regression fails it (1), then a cell that could not be gated (2); else 0."""
    codes = {g.code for g in gates}
    return REGRESSION if REGRESSION in codes else (BAD_INPUT if BAD_INPUT in codes else PASS)


def annotation(g: CellGate) -> str | None:
    """A GitHub Actions annotation for a cell that did not pass (the workflow's log shows it on the run's page)."""
    level = {REGRESSION: "error", BAD_INPUT: "error", INCONCLUSIVE: "warning"}.get(g.code)
    if level is None:
        return None
    first = g.text.splitlines()[0] if g.text else VERDICTS[g.code]
    return f"::{level} title=ablate gate: {g.cell}::{first}"


def markdown(
    gates: Sequence[CellGate], args: argparse.Namespace, sides: tuple[RecordedRun, RecordedRun]
) -> str:
    base, cand = sides
    lines = [
        f"### ablate gate: {', '.join(args.metric)}, margin {args.margin}",
        "",
        f"Baseline sweep `{base.run_id}` (commit `{base.tags.get(R.T_GIT, '?')[:12]}`), candidate sweep "
        f"`{cand.run_id}` (commit `{cand.tags.get(R.T_GIT, '?')[:12]}`).",
        "",
        "| cell | verdict | exit |",
        "|---|---|---:|",
        *(f"| {g.cell} | {VERDICTS[g.code]} | {g.code} |" for g in gates),
        "",
    ]
    for g in gates:
        lines += [f"#### {g.cell}", "", "```text", g.text, "```", ""]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from ablate.study.fetch import check_store
    from ablate.tracking import Tracker

    check_store(args.tracking_uri)
    tracker = Tracker(args.tracking_uri)
    base, cand = sweeps(tracker, args.baseline_sweep, args.candidate_sweep)
    before, after = cells(tracker, base), cells(tracker, cand)
    print(
        f"gate: baseline sweep {base.run_id} (commit {base.tags.get(R.T_GIT, '?')[:12]}, {len(before)} runs), "
        f"candidate sweep {cand.run_id} (commit {cand.tags.get(R.T_GIT, '?')[:12]}, {len(after)} runs)"
    )
    shared = [c for c in after if c in before]
    if not shared:
        raise GateSweepError(
            f"no cell of the candidate sweep ({', '.join(after) or 'none'}) has a namesake in the baseline sweep "
            f"({', '.join(before) or 'none'}). Fix: run the same sweep command on both sides"
        )
    for name in [c for c in after if c not in before] + [c for c in before if c not in after]:
        side = "candidate" if name in after else "baseline"
        print(f"note: cell {name!r} is only in the {side} sweep: not gated")
    gates: list[CellGate] = []
    with tempfile.TemporaryDirectory(prefix="ablate-gate-sweep-") as tmp:
        for name in shared:
            g = gate_cell(name, before[name], after[name], args, Path(tmp))
            gates.append(g)
            print(
                f"[{name}] exit {g.code} ({VERDICTS[g.code]})\n"
                + "\n".join(f"  {t}" for t in g.text.splitlines())
            )
    if os.environ.get("GITHUB_ACTIONS") == "true":
        for line in filter(None, map(annotation, gates)):
            print(line)
    if args.summary is not None:
        with args.summary.open("a", encoding="utf-8") as fh:
            fh.write(markdown(gates, args, (base, cand)))
    code = outcome(gates)
    counts = {v: [g.cell for g in gates if VERDICTS[g.code] == v] for v in VERDICTS.values()}
    said = "; ".join(f"{len(c)} {v} ({', '.join(c)})" for v, c in counts.items() if c)
    print(f"gate: {said}: {'the job fails' if code else 'the job passes'} (exit {code})")
    return code


def main(argv: Sequence[str] | None = None) -> int:
    from ablate.app.entry import say_unexpected
    from ablate.secrets import redact

    args = parser().parse_args(argv)
    try:
        return run(args)
    except AblateError as e:
        print(redact(f"error: {e}"), file=sys.stderr)
        return BAD_INPUT
    except Exception as e:  # noqa: BLE001 - one line; never exit 1, which the job reads as a regression
        say_unexpected(e)
        return BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
