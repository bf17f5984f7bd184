"""The app edge of the prediction-powered figures of ``python -m ablate.report --parent SWEEP --labels V``: read the
label version's views (:func:`ablate.labels.views.read_views`), decide from its recorded human sample whether PPI
applies, re-score the sweep's runs on the version's assessor view (in memory: :func:`ablate.runner.rescore.rescore`,
nothing logged), read the people's grades of the runs' answers, and hand the report plain values
(:class:`ablate.study.ppi_inputs.PPIInputs`).

PPI is decided from the version alone, never from a re-scored run's tags:

* relevance: the version holds an LLM assessor's judgements (its assessor view) and a random human sample
  (``drawn_by: sample``); a sample picked by hand, or none, is one line saying so (and the command that fixes it),
  and no figure. A version without assessor judgements: nothing at all.
* answers: runs whose answers an LLM judge graded (``answer.judge=llm``), and a random answer sample in the version
  (``answer_human_sample``); a question is checked for a run when people graded every answer the run wrote to it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from ablate import record as R
from ablate.data.labelsets import read_label_version
from ablate.evaluation.answer_scores import correct_of
from ablate.labels.kind import ANSWERS, RELEVANCE, Kind, answer_sha256
from ablate.labels.sample import HumanSample
from ablate.labels.views import LabelViews, read_views
from ablate.record_digest import RunFiles
from ablate.runner.emit import per_query_frame
from ablate.runner.relabel import Relabelled, Target
from ablate.runner.rescore import read_answers, rescore
from ablate.study.fetch import RunRecord
from ablate.study.ppi_inputs import PPIInputs
from ablate.tracking import Tracker


def _pool_hint(version_folder: Path, kind: Kind) -> str:
    """The pool to name in a fix: the corpus's only pool of the kind, else a placeholder in its folder."""
    pools = version_folder.parent.parent / kind.pools
    found = sorted(pools.glob(f"*{kind.suffix}")) if pools.is_dir() else []
    path = found[0] if len(found) == 1 else pools / f"NAME{kind.suffix}"
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def why_no_ppi(sample: HumanSample | None, version: str, kind: Kind, pool: str) -> str:
    """One line saying why the version's ``sample`` gives no PPI figure, with the fix; ``""`` when it is a random
    draw."""
    what = "relevance labels" if kind is RELEVANCE else "answer grades by the LLM judge"
    serve = f"python -m ablate.label serve --pool {pool}"
    if sample is None:
        return (
            f"PPI: label version {version} records no random human sample for its {what} ({kind.sample_key} in "
            f"version.json), so no PPI figure; fix: python -m ablate.label sample --pool {pool} --questions N "
            f"--seed S, check the sampled questions ({serve} offers them first), then commit a new version "
            "(python -m ablate.label commit --version NAME)"
        )
    if not sample.random:
        return (
            f"PPI: the {len(sample.questions)} question(s) people checked for label version {version}'s {what} "
            f"were picked by hand ({kind.sample_key} drawn_by hand in version.json), not drawn at random, so no PPI "
            f"interval (it holds only for a random sample); fix: python -m ablate.label sample --pool {pool} "
            "--questions N --seed S, check the sampled questions, then commit a new version"
        )
    return ""


def _assessor_tables(tracker: Tracker, done: Relabelled, folder: Path) -> dict[str, pd.DataFrame]:
    """Each re-scored run's per-query table (keyed by its new run id) on the assessor view ``folder``, scored from
    the original run's files as the headline was (nothing logged)."""
    out = {}
    for old, new in done.runs.items():
        res = rescore(tracker, old, labels=folder)
        out[new] = per_query_frame(res.scores.evaluation, res.scores.answers, None, res.snapshot)
    return out


def llm_judged(rec: RunRecord) -> bool:
    """Whether an LLM judge graded the run's answers (``answer.judge=llm``)."""
    return str(R.judge_label(rec.params) or "").startswith("llm")


def human_correct(
    answers: Mapping[str, Sequence[str]], human: Mapping[tuple[str, str], str], questions: Sequence[str]
) -> pd.Series:
    """People's correctness of a run's answers (``answers``: qid -> the texts of its repeats) to each of
    ``questions`` whose every answer people graded (``human``: (qid, answer_sha256) -> grade); index qid."""
    out: dict[str, float] = {}
    for q in questions:
        texts = answers.get(q) or ()
        grades = [human.get((q, answer_sha256(t))) for t in texts]
        if texts and all(g is not None for g in grades):
            out[q] = correct_of([str(g) for g in grades])
    return pd.Series(out, dtype=float)


def _answer_y(
    tracker: Tracker, runs: Sequence[RunRecord], views: LabelViews, sample: HumanSample
) -> dict[str, pd.Series]:
    human = views.answers.human if views.answers is not None else {}
    out = {}
    with tempfile.TemporaryDirectory(prefix="ablate-ppi-") as tmp:
        for r in runs:
            got = RunFiles(tracker, r, Path(tmp) / r.run_id).get(R.A_ANSWERS)  # checked against its seal
            if got is None:
                continue
            texts = {q: a.texts for q, a in read_answers(Path(got)).items() if a.grades}
            out[r.run_id] = human_correct(texts, human, sample.questions)
    return out


def check_views(target: Target) -> LabelViews:
    """The views of ``target``'s label version, every file checked against its recorded sha256 (the assessor view's
    own ``version.json`` too) before anything is re-scored or logged: an edited file is one line naming it."""
    views = read_views(target.version.folder)
    if views.assessor_folder is not None:
        read_label_version(views.assessor_folder)
    return views


def ppi_inputs(
    tracker: Tracker, target: Target, views: LabelViews, done: Relabelled, runs: Sequence[RunRecord]
) -> PPIInputs | None:
    """What the report's PPI figures need for the sweep ``target`` re-scored as ``done`` (``runs``: the re-scored
    runs; ``views``: :func:`check_views`), or None when the version holds no assessor judgements and no run was
    judged by an LLM. Prints nothing: the lines saying why a figure is missing travel in :attr:`PPIInputs.notes`."""
    version = target.version
    notes: list[str] = []
    assessor: dict[str, pd.DataFrame] = {}
    if views.assessor is not None and views.assessor_folder is not None:
        why = why_no_ppi(views.sample, version.name, RELEVANCE, _pool_hint(version.folder, RELEVANCE))
        if why:
            notes.append(why)
        else:
            assessor = _assessor_tables(tracker, done, views.assessor_folder)
    judged = [r for r in runs if llm_judged(r)]
    answer_y: dict[str, pd.Series] = {}
    answer_sample = views.answers.sample if views.answers is not None else None
    if judged:
        why = why_no_ppi(answer_sample, version.name, ANSWERS, _pool_hint(version.folder, ANSWERS))
        if why:
            notes.append(why)
        elif answer_sample is not None:
            answer_y = _answer_y(tracker, judged, views, answer_sample)
    if not (notes or assessor or answer_y):
        return None
    return PPIInputs(
        version=version.name,
        assessor=assessor,
        checked=views.checked,
        seed=views.sample.seed if views.sample is not None else None,
        answer_y=answer_y,
        answer_seed=answer_sample.seed if answer_sample is not None else None,
        notes=tuple(notes),
    )
