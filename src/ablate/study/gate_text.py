"""What ``python -m ablate.gate`` says: the verdict line first, what changed between the two sides, the questions that
broke most and those fixed most (a broken question with the stage it went wrong at, when the per-question funnels say
it), the console's lines, the Markdown of a CI job summary and the ``--json`` rows.

The words are the report's. What changed is :func:`ablate.study.compare.describe_change` of the two runs (a run file
records no settings: then it is not known). A broken question's stage, from the runs' ``funnel_per_query.csv``:

* a retrieval metric at K whose question no longer hits at K (``hit@K`` 1 -> 0): where it lost its evidence, by the
  report's per-question rule (:func:`ablate.study.per_question.lost_at`: ``lost at rrf``, ``not retrieved``,
  ``candidates below 10``);
* one that still hits: the first stage both runs have, in the candidate's order, whose list found fewer relevant
  units (``fewer relevant from bm25: 2->1 found``) or placed the best one lower (``ranked lower from final: first
  relevant 1->2``) than the baseline's; else ``evidence still in the first K``;
* an answer metric: the same rule along the chain up to the generator's context (``in context (generation)``: the
  context held the evidence and the answer still got worse).

Without the candidate's funnel (a run file, a run logged before ablate recorded it) a question carries no stage.
Pure functions over plain data.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ablate import record as R
from ablate.study.gate import INCONCLUSIVE, PASS, REGRESSION, Decision, overall
from ablate.study.per_question import IN_CONTEXT, NOT_RETRIEVED, UNKNOWN, hits, lost_at

#: the most broken and fixed questions named per metric
SHOWN_QUESTIONS = 5
WORDS = {PASS: "PASS", REGRESSION: "REGRESSION", INCONCLUSIVE: "INCONCLUSIVE"}
_AT_K = re.compile(r"^(?!" + R.DOC_PREFIX + r").+@(\d+)$")


@dataclass(frozen=True)
class Change:
    """One question's change on a metric: candidate − baseline, and where a broken one lost its evidence (None when
    not known or not asked)."""

    qid: str
    delta: float
    where: str | None = None

    def text(self) -> str:
        return f"{self.qid} {self.delta:+.3f}" + (f" [{self.where}]" if self.where else "")

    def as_dict(self) -> dict[str, Any]:
        return {"qid": self.qid, "delta": self.delta, "stage": self.where}


@dataclass
class Verdict:
    """One metric's decision with its broke/fixed questions and the questions left out (no value on either side)."""

    decision: Decision
    broke: list[Change] = field(default_factory=list)
    fixed: list[Change] = field(default_factory=list)
    left_out: int = 0

    @property
    def metric(self) -> str:
        return self.decision.metric


@dataclass
class Gate:
    """Everything printed: the verdicts and what the two sides are (``*_label``: run id or file path; ``*_name``:
    ``run C`` / ``file x.trec``), what changed and the label version."""

    verdicts: list[Verdict]
    baseline_label: str
    candidate_label: str
    baseline_name: str
    candidate_name: str
    changed: str
    label_version: str | None

    @property
    def outcome(self) -> str:
        return overall([v.decision for v in self.verdicts])


def changes(
    metric: str,
    base: Mapping[str, float],
    cand: Mapping[str, float],
    base_table: pd.DataFrame,
    cand_table: pd.DataFrame,
    funnels: tuple[pd.DataFrame | None, pd.DataFrame | None] = (None, None),
    retrievers: Sequence[str] = (),
) -> tuple[list[Change], list[Change]]:
    """(broke most, fixed most) on ``metric``: up to :data:`SHOWN_QUESTIONS` each, largest change first; a broken
    question carries where it lost its evidence when the candidate's funnel says it (``funnels``: the baseline's and
    the candidate's per-question funnel, None when a side has none; the module docstring)."""
    diffs = sorted(((cand[q] - base[q], q) for q in base if q in cand), key=lambda x: (x[0], x[1]))
    broke = [(d, q) for d, q in diffs[:SHOWN_QUESTIONS] if d < 0]
    fixed = [(d, q) for d, q in sorted(diffs, key=lambda x: (-x[0], x[1]))[:SHOWN_QUESTIONS] if d > 0]
    where = _where(metric, [q for _, q in broke], base_table, cand_table, funnels, retrievers)
    return [Change(q, d, where.get(q)) for d, q in broke], [Change(q, d) for d, q in fixed]


def _by_question(funnel: pd.DataFrame | None) -> dict[str, pd.DataFrame]:
    if funnel is None:
        return {}
    return {
        str(q): g.sort_values("position") for q, g in funnel.astype({"qid": str}).groupby("qid", sort=False)
    }


def _where(
    metric: str,
    qids: list[str],
    base_table: pd.DataFrame,
    cand_table: pd.DataFrame,
    funnels: tuple[pd.DataFrame | None, pd.DataFrame | None],
    retrievers: Sequence[str],
) -> dict[str, str]:
    if funnels[1] is None or not qids:
        return {}
    before_rows, rows = _by_question(funnels[0]), _by_question(funnels[1])
    empty = pd.DataFrame(columns=list(R.FUNNEL_PER_QUERY_COLUMNS))
    at_k = _AT_K.match(metric)
    if metric.startswith("answer_"):  # the chain up to the generator's context
        return {q: _lost(lost_at(rows.get(q, empty), retrievers, None, True)) for q in qids}
    if at_k is None:
        return {}
    k = int(at_k.group(1))
    before, now = hits(base_table, f"hit@{k}", metric), hits(cand_table, f"hit@{k}", metric)
    out = {}
    for q in qids:
        if q in now.index and bool(now[q]):
            out[q] = _lower(before_rows.get(q), rows.get(q)) or f"evidence still in the first {k}"
        elif q in before.index and bool(before[q]):
            out[q] = _lost(lost_at(rows.get(q, empty), retrievers, k, False))
    return out


def _lost(where: str) -> str:
    """The report's "lost at" words: a stage as ``lost at rrf``; its other answers as they are."""
    plain = where in (NOT_RETRIEVED, IN_CONTEXT) or where.startswith((UNKNOWN, "candidates below"))
    return where if plain else f"lost at {where}"


def _lower(before: pd.DataFrame | None, now: pd.DataFrame | None) -> str | None:
    """For a question whose evidence is still in the first K: the first stage both runs have (in the candidate's
    order) whose list found fewer relevant units, or ranked the best one lower, than the baseline's; None if none."""
    if before is None or now is None:
        return None
    old = {str(r["stage"]): r for _, r in before.iterrows()}
    for _, r in now.iterrows():
        o = old.get(str(r["stage"]))
        if o is None:
            continue
        found, was = int(r["found"]), int(o["found"])
        if found < was:
            return f"fewer relevant from {r['stage']}: {was}->{found} found"
        rank, rank_was = float(r["first_rank"]), float(o["first_rank"])
        if rank > rank_was or (math.isnan(rank) and not math.isnan(rank_was)):
            return f"ranked lower from {r['stage']}: first relevant {_rank(rank_was)}->{_rank(rank)}"
    return None


def _rank(v: float) -> str:
    return "-" if math.isnan(v) else str(int(v))


# ---------------------------------------------------------------------------------------------------------------
# the console


def _interval(d: Decision) -> str:
    return f"Δ {d.delta:+.3f} [{d.low:+.3f}, {d.high:+.3f}]"


def verdict_line(d: Decision, levels: bool = False) -> str:
    """``PASS ndcg@10 Δ -0.004 [-0.015, +0.007] margin 0.02, 48 questions in 19 clusters`` (with ``levels``: the
    levels Holm gave its two tests)."""
    line = (
        f"{WORDS[d.outcome]}{' (better)' if d.better else ''} {d.metric} {_interval(d)} margin {d.margin:g}, "
        f"{d.n_questions} questions in {d.n_clusters} clusters"
    )
    if levels:
        line += f"; levels {d.level_noninferior:.3g} (non-inferior), {d.level_regression:.3g} (regression)"
    return line


def _undecided(d: Decision) -> str:
    need = d.questions_needed
    return (
        f"this n rules out drops larger than {d.mde:.3f} (80% power, level {d.level_noninferior:.3g}); "
        + (f"about {need} questions would decide it at this margin" if need else "no spread to plan from")
        + f" (within-cluster correlation {d.icc:.2f})"
    )


def head_line(gate: Gate) -> str:
    """The first line with several metrics: the build's outcome and each metric's."""
    vs = gate.verdicts
    each = ", ".join(f"{v.metric} {v.decision.outcome}" for v in vs)
    return f"{WORDS[gate.outcome]} over {len(vs)} metrics (Holm at family alpha {vs[0].decision.alpha:g}): {each}"


def console(gate: Gate) -> str:
    """The console's lines: the verdict first, then what changed and, per metric, the questions that moved."""
    several = len(gate.verdicts) > 1
    changed = f"  {gate.candidate_name} against {gate.baseline_name}: {gate.changed}"
    lines = [head_line(gate), changed] if several else []
    for v in gate.verdicts:
        d = v.decision
        pad = "    " if several else "  "
        lines.append(("  " if several else "") + verdict_line(d, levels=several))
        if d.outcome == INCONCLUSIVE:
            lines.append(pad + _undecided(d))
        if not several:
            lines.append(changed)
        if v.left_out:
            lines.append(f"{pad}{v.left_out} questions without a value on either side left out")
        if v.broke:
            lines.append(pad + "broke most: " + ", ".join(c.text() for c in v.broke))
        if v.fixed:
            lines.append(pad + "fixed most: " + ", ".join(c.text() for c in v.fixed))
        lines += [f"{pad}warning: {w}" for w in d.warnings]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------
# Markdown (a CI job summary)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(gate: Gate) -> str:
    """The decision as Markdown for a CI job summary: the verdict line, the sides, a table of the metrics and the
    questions that broke and were fixed."""
    vs = gate.verdicts
    first = head_line(gate) if len(vs) > 1 else verdict_line(vs[0].decision)
    word, _, rest = first.partition(" ")
    out = [f"### Regression gate: {WORDS[gate.outcome]}", "", f"**{word}** {_cell(rest)}", ""]
    out.append(
        f"Baseline: {_cell(gate.baseline_name)} (`{_cell(gate.baseline_label)}`). Candidate: "
        f"{_cell(gate.candidate_name)} (`{_cell(gate.candidate_label)}`). Changed: {_cell(gate.changed)}. "
        f"Label version: {gate.label_version or 'unknown'}."
    )
    out += [
        "",
        "| metric | outcome | Δ | interval | margin | n | G | level (non-inferior / regression) |",
        "|---|---|---:|---|---:|---:|---:|---|",
    ]
    for v in vs:
        d = v.decision
        outcome = d.outcome + (" (better)" if d.better else "")
        out.append(
            f"| {_cell(d.metric)} | {outcome} | {d.delta:+.3f} | [{d.low:+.3f}, {d.high:+.3f}] | {d.margin:g} | "
            f"{d.n_questions} | {d.n_clusters} | {d.level_noninferior:.3g} / {d.level_regression:.3g} |"
        )
    for v in vs:
        d = v.decision
        notes = [_undecided(d)] if d.outcome == INCONCLUSIVE else []
        if v.left_out:
            notes.append(f"{v.left_out} questions without a value on either side left out")
        items = [("Broke most", v.broke), ("Fixed most", v.fixed)]
        body = [f"- {what}: " + ", ".join(_cell(c.text()) for c in cs) for what, cs in items if cs]
        body += [f"- {_cell(n)}" for n in notes] + [f"- Warning: {_cell(w)}" for w in d.warnings]
        if body:
            out += ["", f"**{_cell(d.metric)}**", "", *body]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------------------------
# --json


def json_rows(gate: Gate) -> list[dict[str, Any]]:
    """One row per metric: the issue's keys (``outcome``, ``exit_code``, ``metric``, ``delta``, ``low``, ``high``,
    ``alpha``, ``margin``, ``n_questions``, ``n_clusters``, ``groups``, ``mde``, ``questions_needed``, ``baseline``,
    ``candidate``, ``label_version``) and the extras: the levels, p-values, ICC, warnings, what changed, the questions
    left out and those that broke and were fixed."""
    rows = []
    for v in gate.verdicts:
        row = v.decision.as_dict()
        row.update(
            baseline=gate.baseline_label,
            candidate=gate.candidate_label,
            label_version=gate.label_version,
            changed=gate.changed,
            questions_left_out=v.left_out,
            broke=[c.as_dict() for c in v.broke],
            fixed=[c.as_dict() for c in v.fixed],
        )
        rows.append({k: (None if isinstance(x, float) and math.isnan(x) else x) for k, x in row.items()})
    return rows
