"""Prediction-powered figures beside the report's headline ones: ``python -m ablate.report --parent SWEEP --labels V``
on a label version whose LLM assessor's labels people checked on a random sample of the questions (and answer
correctness by an LLM judge whose grades people checked on a random sample of answers).

For each run's metric and each paired difference (run - the report's baseline), over the questions the headline
figure is the mean of (a run: the questions it scores under the version's headline qrels; a difference: those both
runs score):

* Y: the *checked* questions under the headline qrels (people's grades where they judged a pair, the assessor's
  elsewhere);
* Ŷ: the same questions under the version's assessor view (a question with no relevant unit under it scores 0);
* Ŷu: the other questions under the assessor view.

Answer correctness: Y the people's grades of the run's answers to the checked questions, Ŷ the run's LLM judge's
grades of them, Ŷu the judge's of the other questions (correctness of grades by
:func:`ablate.evaluation.answer_scores.correct_of`). A figure is :func:`ablate.evaluation.stats.ppi_mean` on them
(``ppi_py``'s PPI++ estimate and 95% interval); none with fewer than 2 checked questions.

Pure: plain values in (:class:`~ablate.study.ppi_inputs.PPIInputs`: the app edge reads the label version's views
and re-scores the runs on the assessor view), figures and text out (:class:`PPISection`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass

import pandas as pd

from ablate.evaluation import stats
from ablate.evaluation.stats.ppi import MIN_CHECKED
from ablate.study.answers import CORRECT, scored_questions
from ablate.study.ppi_inputs import PPIInputs
from ablate.study.report.compute import Computed
from ablate.tables import format_table

#: The metric name of answer correctness in the rows and in the PPI keys (the per-question column it is the mean of).
ANSWER_METRIC = "answer_correct"
#: The third part of a comparison's PPI key: ``(run_id, metric, DELTA)``.
DELTA = "delta"
#: A PPI figure's key: ``(run_id, metric)`` for a run's value, ``(run_id, metric, DELTA)`` for its difference from
#: the baseline.
PPIKey = tuple[str, str] | tuple[str, str, str]
#: The section's title (Markdown heading and console line) and its table's columns.
TITLE = "PPI (n checked, N unchecked)"
COLUMNS = ("run", "metric", "headline", "PPI [95% CI]", "n, N", "Δ headline", "PPI Δ [95% CI]", "n, N (Δ)")


@dataclass(frozen=True)
class PPISection:
    """The figures (keyed as :mod:`.as_json` reads them), the report's Markdown section and its console lines."""

    figures: dict[PPIKey, stats.PPIResult]
    markdown: str
    console: str


def _ppi(y: pd.Series, yhat: pd.Series, checked: Collection[str]) -> stats.PPIResult | None:
    """PPI over the questions of ``yhat`` (the assessor's values, defined on every one): Y = ``y`` on those of them
    in ``checked``, Ŷ = ``yhat`` on the same, Ŷu = ``yhat`` on the rest. None below :data:`MIN_CHECKED` checked."""
    keep = set(checked)
    is_checked = [q in keep for q in yhat.index]
    on = yhat.index[is_checked]
    if len(on) < MIN_CHECKED:
        return None
    rest = yhat.index[[not c for c in is_checked]]
    return stats.ppi_mean(
        y.reindex(on).to_numpy(float), yhat.loc[on].to_numpy(float), yhat.loc[rest].to_numpy(float)
    )


def _zero_filled(table: pd.DataFrame, col: str, questions: pd.Index) -> pd.Series:
    """``table[col]`` on ``questions``; a question it does not score (no relevant unit under that view) is 0."""
    return pd.to_numeric(table[col], errors="coerce").reindex(questions).fillna(0.0).astype(float)


def _retrieval(c: Computed, inputs: PPIInputs) -> dict[PPIKey, stats.PPIResult]:
    out: dict[PPIKey, stats.PPIResult] = {}
    base = c.base.run_id
    for r in c.plan.ordered:
        rid = r.run_id
        view = inputs.assessor.get(rid)
        if view is None:
            continue
        head, pop = c.tables[rid], c.scored[rid]
        base_view = inputs.assessor.get(base)
        common = c.scored[base].intersection(pop, sort=False)
        for m, col in zip(c.metrics, c.cols, strict=True):
            if col not in view.columns:
                continue
            got = _ppi(head[col], _zero_filled(view, col, pop), inputs.checked)
            if got is not None:
                out[(rid, m)] = got
            if rid == base or base_view is None or col not in base_view.columns:
                continue
            y = head[col].reindex(common) - c.tables[base][col].reindex(common)
            yhat = _zero_filled(view, col, common) - _zero_filled(base_view, col, common)
            got = _ppi(y, yhat, inputs.checked)
            if got is not None:
                out[(rid, m, DELTA)] = got
    return out


def _answers(c: Computed, inputs: PPIInputs) -> dict[PPIKey, stats.PPIResult]:
    out: dict[PPIKey, stats.PPIResult] = {}
    if c.answers is None or not inputs.answer_y:
        return out
    table = c.answers.table
    base = str(table.loc[table["role"] == "baseline", "run_id"].iloc[0])
    judge = {
        str(rid): pd.to_numeric(scored_questions(c.tables[str(rid)])[CORRECT], errors="coerce").astype(float)
        for rid in table["run_id"]
    }
    for rid in map(str, table["run_id"]):
        y = inputs.answer_y.get(rid)
        if y is None:
            continue
        got = _ppi(y, judge[rid], y.index)
        if got is not None:
            out[(rid, ANSWER_METRIC)] = got
        y_base = inputs.answer_y.get(base)
        if rid == base or y_base is None:
            continue
        common = judge[base].index.intersection(judge[rid].index, sort=False)
        both = y.index.intersection(y_base.index, sort=False)
        got = _ppi(
            y.reindex(both) - y_base.reindex(both), judge[rid].loc[common] - judge[base].loc[common], both
        )
        if got is not None:
            out[(rid, ANSWER_METRIC, DELTA)] = got
    return out


def _est(f: stats.PPIResult | None, signed: bool = False) -> str:
    if f is None:
        return "-"
    form = "{:+.3f}" if signed else "{:.3f}"
    return f"{form.format(f.estimate)} [{form.format(f.low)}, {form.format(f.high)}]"


def _num(v: float, signed: bool = False) -> str:
    if v is None or math.isnan(v):
        return "-"
    return f"{v:+.3f}" if signed else f"{v:.3f}"


def _nN(f: stats.PPIResult | None) -> str:  # noqa: N802 - n checked, N unchecked
    return "-" if f is None else f"{f.n_checked}, {f.n_unchecked}"


def _rows(c: Computed, figures: Mapping[PPIKey, stats.PPIResult], metrics: list[str]) -> list[dict[str, str]]:
    """One row per run and metric with a figure: the headline value, its PPI, the difference from the baseline and
    its PPI; answer correctness last."""
    labels, base = c.plan.shown, c.base.run_id
    rows = []
    for m, col in zip(c.metrics, c.cols, strict=True):
        if m not in metrics:
            continue
        for r in c.plan.ordered:
            rid = r.run_id
            run, delta = figures.get((rid, m)), figures.get((rid, m, DELTA))
            if run is None and delta is None:
                continue
            is_base = rid == base
            rows.append(
                {
                    "run": labels[rid] + (" (baseline)" if is_base else ""),
                    "metric": m,
                    "headline": _num(c.cis[rid][col][0]),
                    "PPI [95% CI]": _est(run),
                    "n, N": _nN(run),
                    "Δ headline": "-" if is_base else _num(c.results[rid][col].delta, signed=True),
                    "PPI Δ [95% CI]": _est(delta, signed=True),
                    "n, N (Δ)": _nN(delta),
                }
            )
    if c.answers is not None and ANSWER_METRIC in metrics:
        for _, row in c.answers.table.iterrows():
            rid = str(row["run_id"])
            run, delta = figures.get((rid, ANSWER_METRIC)), figures.get((rid, ANSWER_METRIC, DELTA))
            if run is None and delta is None:
                continue
            is_base = row["role"] == "baseline"
            rows.append(
                {
                    "run": labels.get(rid, str(row["run"])) + (" (baseline)" if is_base else ""),
                    "metric": ANSWER_METRIC,
                    "headline": _num(float(row["correct"])),
                    "PPI [95% CI]": _est(run),
                    "n, N": _nN(run),
                    "Δ headline": "-" if is_base else _num(float(row["correct_delta"]), signed=True),
                    "PPI Δ [95% CI]": _est(delta, signed=True),
                    "n, N (Δ)": _nN(delta),
                }
            )
    return rows


def _what(inputs: PPIInputs, figures: Mapping[PPIKey, stats.PPIResult]) -> list[str]:
    """The lines saying what the figures are."""
    lines = []
    if any(k[1] != ANSWER_METRIC for k in figures):
        lines.append(
            f"relevance: label version {inputs.version}'s assessor view (its LLM assessor's grades) on every "
            f"question, corrected by its error on the questions people checked of its random human sample (python "
            f"-m ablate.label sample, seed {inputs.seed}): Y = the checked questions under the headline labels "
            "(people's grades, the assessor's where no one judged), Ŷ = the same under the assessor view, Ŷu = the "
            "other scored questions under the assessor view (a question with no relevant unit there scores 0)"
        )
    if any(k[1] == ANSWER_METRIC for k in figures):
        lines.append(
            "answers: the run's LLM judge on every answer, corrected by its error on the questions of the random "
            f"answer sample (seed {inputs.answer_seed}) whose answers people graded: Y = people's grades, Ŷ = the "
            "judge's on the same questions, Ŷu = the judge's on the other scored questions"
        )
    lines.append(
        "estimate and 95% interval: PPI++ (ppi_py.ppi_mean_pointestimate / ppi_mean_ci, lam=None); n: checked "
        "questions, N: unchecked; headline: the table's figure"
    )
    return lines


def ppi_section(c: Computed, inputs: PPIInputs) -> PPISection:
    """The prediction-powered figures of the report ``c`` (see the module docstring), its Markdown section and
    console lines (the headline metric and answer correctness; every metric in the Markdown)."""
    figures = {**_retrieval(c, inputs), **_answers(c, inputs)}
    notes = list(inputs.notes)
    if inputs.assessor and not any(k[1] != ANSWER_METRIC for k in figures):
        notes.append(
            f"PPI: fewer than {MIN_CHECKED} questions of label version {inputs.version}'s random sample that the "
            "runs score are checked, so no PPI figure for the retrieval metrics; fix: judge every pair of the "
            "sampled questions (python -m ablate.label serve offers them first), then commit a new version"
        )
    if inputs.answer_y and not any(k[1] == ANSWER_METRIC for k in figures):
        notes.append(
            f"PPI: fewer than {MIN_CHECKED} questions of label version {inputs.version}'s random answer sample have "
            "every answer of a run graded by people, so no PPI figure for answer correctness; fix: grade their "
            "answers (python -m ablate.label serve --pool labels/<corpus>/answer_pools/NAME.jsonl), then commit a "
            "new version"
        )
    md = [f"## {TITLE}", ""]
    console: list[str] = []
    if figures:
        md += [*(f"- {x}" for x in _what(inputs, figures)), ""]
        md.append(format_table(_rows(c, figures, [*c.metrics, ANSWER_METRIC]), list(COLUMNS)))
        console.append(f"{TITLE}, label version {inputs.version}:")
        console.append(format_table(_rows(c, figures, [c.metrics[0], ANSWER_METRIC]), list(COLUMNS)))
    if notes:
        md += ["", *(f"- {n}" for n in notes)] if figures else [f"- {n}" for n in notes]
        console += notes
    return PPISection(figures, "\n".join(md), "\n".join(console))
