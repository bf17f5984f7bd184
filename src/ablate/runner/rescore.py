"""Re-score a tracked run exactly as it was scored, and check the result against its record.

:func:`rescore` reads what the run recorded — its ``config.yaml`` (the corpus folder, chunker, language, extra
labels, split file, identity, dates, version policy, evaluation rules, bootstrap), its ``run.trec``, its
``answers.csv`` (the passages each question's generator read and what it wrote) and its applied abstention threshold
(``abstention.json``) — rebuilds the scoring inputs the way the pipeline builds them (:mod:`ablate.runner.scoring`)
and calls the one scoring function, :func:`ablate.evaluation.scoring.score_run`, then flattens the scores as the run
did (:func:`ablate.runner.emit.score_metrics`). Nothing is retrieved or generated again. Every artifact is read
through :class:`ablate.record_digest.RunFiles`: one that differs from the sha256 the run's sealed record lists (edited,
removed or added after the run finished) stops the re-score with one line naming the file, both digests and the fix.

:func:`compare` holds the re-scored metrics against the logged ones: equal to 1e-9, different (named), or not
re-derivable from what the run recorded (timings, counters of work done, the funnel over the stages, which need the
run's intermediate lists).
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ablate import record as R
from ablate.data.snapshot import Snapshot
from ablate.data.types import Run
from ablate.errors import AblateError
from ablate.evaluation.answer_scores import AnswerCosts, Answered
from ablate.evaluation.scoring import Scores, score_run
from ablate.record_digest import RunFiles
from ablate.runner.access import Resolver
from ablate.runner.emit import permission_metrics, score_metrics, split_defined
from ablate.runner.scoring import ScoringInputs, scoring_inputs
from ablate.runner.session import shared_session
from ablate.runner.settings import CorpusSpec, RunSettings
from ablate.tracking import Tracker

#: Two numbers agree when they differ by at most this (absolute).
TOLERANCE = 1e-9
#: Logged metrics a re-score cannot derive from run.trec and answers.csv, by prefix, and why.
NOT_REDERIVED: tuple[tuple[str, str], ...] = (
    ("time_", "wall-clock timings of the run"),
    ("funnel/", "the funnel needs every stage's list, not only the final ranking"),
    ("metrics_undefined", "counts the run's undefined metrics, timings and funnel included"),
)


@dataclass
class Rescored:
    """A re-score: ``scores`` (what :func:`score_run` returned), ``metrics`` (as the run logs them, NaN dropped),
    ``inputs`` (labels and context), ``snapshot`` and notes (e.g. the corpus changed since the run)."""

    run_id: str
    run: Run
    scores: Scores
    metrics: dict[str, float]
    inputs: ScoringInputs
    snapshot: Snapshot
    settings: RunSettings
    corpus: CorpusSpec
    logged: dict[str, float] = field(default_factory=dict)  # the run's metrics as they are in the store now
    notes: list[str] = field(default_factory=list)
    #: sha256 over the run's id, its seal and the artifacts read (:meth:`ablate.record_digest.RunFiles.key`)
    inputs_key: str = ""


@dataclass
class Comparison:
    equal: list[str]
    different: list[tuple[str, float, float]]  # logged name, logged, re-scored
    not_rederived: dict[str, list[str]]  # why -> logged names
    only_rescored: list[str]

    @property
    def ok(self) -> bool:
        return not self.different


def _config(tracker: Tracker, run_id: str, tmp: str, files: RunFiles | None = None) -> dict[str, Any]:
    """The run's ``config.yaml``; read through ``files`` (checked against the run's sealed record) when given."""
    import yaml

    from ablate.safeyaml import safe_load

    got = files.get(R.A_CONFIG) if files is not None else tracker.download_artifact(run_id, R.A_CONFIG, tmp)
    if got is None:
        raise AblateError(
            f"run {run_id}: has no {R.A_CONFIG} artifact, so how it was scored is unknown. Fix: re-run it"
        )
    try:
        cfg = safe_load(Path(got).read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise AblateError(f"run {run_id}: its {R.A_CONFIG} cannot be read ({e}). Fix: re-run it") from None
    if not isinstance(cfg, dict) or not isinstance(cfg.get("corpus"), dict):
        raise AblateError(f"run {run_id}: its {R.A_CONFIG} has no corpus block. Fix: re-run it")
    return cfg


def _block(cfg: Mapping[str, Any], key: str) -> dict[str, Any]:
    v = cfg.get(key)
    return dict(v) if isinstance(v, Mapping) else {}


def recorded_settings(cfg: Mapping[str, Any]) -> tuple[CorpusSpec, RunSettings]:
    """The corpus and scoring settings of a run's ``config.yaml`` (validated as a job validates them)."""
    corpus = CorpusSpec.from_mapping(_block(cfg, "corpus"), _block(cfg, "versions"), _block(cfg, "eval"))
    settings = RunSettings.from_mapping(
        _block(cfg, "eval"), _block(cfg, "retrieval"), _block(cfg, "abstain"), _block(cfg, "stats")
    )
    return corpus, settings


def on_snapshot(raw: Run, snapshot: Snapshot, run_path: str) -> Run:
    """A run file's hits as chunks of ``snapshot`` (doc id and version from the corpus), or an error naming an id the
    corpus does not have."""
    c2d, version = snapshot.chunk_to_doc, snapshot.chunk_version
    unknown = [h.chunk_id for hits in raw.results.values() for h in hits if h.chunk_id not in c2d]
    if unknown:
        raise AblateError(
            f"{run_path}: {len(unknown)} result id(s) are not chunks of {snapshot.root} (e.g. {unknown[0]!r}). Fix: "
            "score the run against the corpus it was made on (same chunker)"
        )
    return Run(
        raw.name,
        {
            q: [replace(h, doc_id=c2d[h.chunk_id], version=version.get(h.chunk_id)) for h in hits]
            for q, hits in raw.results.items()
        },
        raw.meta,
    )


def read_answers(path: Path) -> dict[str, Answered]:
    """``answers.csv`` of a run as the generator's output per question."""
    import pandas as pd

    df = pd.read_csv(path, dtype={"qid": str}, keep_default_na=False)
    out: dict[str, Answered] = {}
    for row in df.to_dict(orient="records"):
        context = (
            tuple(json.loads(row["context_ids"]))
            if "context_ids" in row
            else tuple(str(row["context"]).split())
        )
        texts = tuple(json.loads(row["answer_texts"])) if "answer_texts" in row else (str(row["answer"]),)
        grades, rationales = _judged(row)
        out[str(row["qid"])] = Answered(
            context=context,
            texts=texts,
            latency_s=float(row["latency_s"]),
            tokens_in=int(row["tokens_in"]),
            tokens_out=int(row["tokens_out"]),
            cached=str(row["cached"]).lower() == "true",
            grades=grades,
            rationales=rationales,
            dropped=int(row.get("context_dropped") or 0),
        )
    return out


def _judged(row: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """An LLM judge's grades (every repeat's) and rationale as ``answers.csv`` keeps them; empty when the rule
    judged the run or the question was not judged."""
    grade = str(row.get("judge_grade", "") or "")
    if not grade:
        return (), ()
    many = str(row.get("judge_grades", "") or "")
    grades = tuple(str(g) for g in json.loads(many)) if many else (grade,)
    return grades, (str(row.get("judge_rationale", "") or ""),)


def _threshold(files: RunFiles, settings: RunSettings) -> float | None:
    """The abstention threshold the run applied: its abstention.json (a threshold chosen on dev), else the setting."""
    got = files.get(R.A_ABSTENTION)
    if got is not None:
        applied = json.loads(Path(got).read_text(encoding="utf-8")).get("applied") or {}
        t = applied.get("threshold")
        return None if t is None else float(t)
    t = settings.abstain_threshold
    return float(t) if isinstance(t, (int, float)) else None


def _costs(params: Mapping[str, str]) -> AnswerCosts | None:
    if params.get(R.P_GENERATOR, R.NONE) == R.NONE:
        return None
    name = params[R.P_GENERATOR]

    def number(key: str) -> float | None:
        v = params.get(f"{name}.{key}")
        return None if v in (None, "None", "null", "") else float(v)

    repeats = number("repeats")
    return AnswerCosts(int(repeats or 1), number("price_in_per_1k"), number("price_out_per_1k"))


def _label_free(files: Mapping[str, Any]) -> dict[str, str]:
    """A snapshot's file hashes without its label files (``qrels/*``)."""
    return {str(k): str(v) for k, v in files.items() if not str(k).startswith("qrels/")}


def _corpus_changed(files: RunFiles, logged: str | None, snapshot: Snapshot, new_labels: bool) -> bool:
    """Whether the corpus differs from the one the run was scored on. With new labels (``labels=``) the snapshot
    fingerprint always differs (it covers the label files), so the run's ``corpus_manifest.json`` is compared
    without its label files: documents, questions, corpus.yaml and the chunker."""
    if logged is None or logged == snapshot.fingerprint:
        return False
    if not new_labels:
        return True
    got = files.get(R.A_MANIFEST)
    if got is None:
        return True
    try:
        manifest = json.loads(Path(got).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return True
    chunker = json.loads(json.dumps(snapshot.chunker.params(), default=str))
    return (
        _label_free(manifest.get("files") or {}) != _label_free(snapshot.files)
        or manifest.get("chunker") != chunker
    )


def _unchecked(files: RunFiles) -> list[str]:
    """The note for a run whose artifacts have no sealed record to be checked against."""
    if not files.unsealed:
        return []
    return [
        f"note: {files.who} carries no record digest (it finished before ablate sealed records): its {R.A_RUN} and "
        "other artifacts are read as they are, unchecked; re-run it to have them checked"
    ]


def rescore(
    tracker: Tracker,
    run_id: str,
    run_path: str | None = None,
    qrels_path: str | None = None,
    ties: str = "docid-asc",
    labels: str | Path | None = None,
) -> Rescored:
    """Score the tracked run ``run_id`` again as it was scored (see the module docstring). ``run_path`` /
    ``qrels_path``: score another run file or other labels under the run's settings instead (then the record is not
    what they should equal). ``labels``: a label version folder (:mod:`ablate.data.labelsets`) read instead of the
    one the run recorded, every split and the rest of the run's settings unchanged."""
    from ablate.evaluation.io import read_qrels, read_trec_run

    rec = tracker.get_run(run_id)
    if rec is None or "corpus.path" not in rec.params:
        raise AblateError(
            f"run {run_id!r}: not found in {tracker.uri}, or not an ablate run. Fix: pass a run id of this "
            "store (--tracking-uri)"
        )
    tmp = tempfile.mkdtemp(prefix="ablate-rescore-")
    files = RunFiles(tracker, rec, tmp)  # every artifact read is checked against the run's sealed record
    corpus, settings = recorded_settings(_config(tracker, run_id, tmp, files))
    if labels is not None:
        corpus = replace(corpus, labels=str(Path(labels).expanduser().resolve()))
    snapshot = shared_session().snapshot(corpus)
    notes = _unchecked(files)
    if _corpus_changed(files, rec.tags.get(R.T_SNAPSHOT), snapshot, labels is not None):
        notes.append(
            f"note: the corpus folder {snapshot.root} changed since the run (snapshot {snapshot.fingerprint[:12]}, "
            f"the run's {rec.tags.get(R.T_SNAPSHOT, '')[:12]}): re-scored on the corpus as it is now"
        )
    own = run_path is None
    if run_path is None:
        got = files.get(R.A_RUN)
        if got is None:
            raise AblateError(f"run {run_id}: has no {R.A_RUN} artifact. Fix: pass the run file")
        run_path = str(got)
    run = on_snapshot(read_trec_run(run_path, ties=ties), snapshot, run_path)
    if own:  # the pipeline ranks every question of the split: one without a line had an empty result
        for q in snapshot.split_qids(corpus.split):
            run.results.setdefault(q, [])
    answers_file = files.get(R.A_ANSWERS)
    answers = read_answers(answers_file) if answers_file is not None else None
    access = corpus.access
    resolver = Resolver(snapshot, access)
    resolver.check(snapshot.split_qids(corpus.split))
    raw = read_qrels(qrels_path, unit=snapshot.qrels_unit) if qrels_path else None
    inputs = scoring_inputs(
        snapshot,
        corpus.split,
        access,
        raw_labels=raw,
        abstain_threshold=_threshold(files, settings),
        answers=answers,
        resolver=resolver,
    )
    scores = score_run(run, inputs.labels, inputs.qids, settings.eval, inputs.context)
    inputs.permissions["leaks"] = resolver.leaks(run)
    metrics = score_metrics(scores, settings.bootstrap, settings.seed, None, _costs(rec.params))
    metrics.update(permission_metrics(inputs.permissions))
    defined, _ = split_defined(metrics)
    del defined["metrics_undefined"]  # the run counts its timings and funnel too: not a score of run.trec
    return Rescored(
        run_id,
        run,
        scores,
        defined,
        inputs,
        snapshot,
        settings,
        corpus,
        dict(rec.metrics),
        notes,
        files.key(),
    )


def compare(rescored: Mapping[str, float], logged: Mapping[str, float]) -> Comparison:
    """Re-scored metrics (library keys) against a run's logged metrics (MLflow names)."""
    mine = {R.metric_key(k): v for k, v in rescored.items()}
    equal, different = [], []
    for name in sorted(set(mine) & set(logged)):
        a, b = float(logged[name]), float(mine[name])
        if math.isclose(a, b, rel_tol=0.0, abs_tol=TOLERANCE):
            equal.append(name)
        else:
            different.append((name, a, b))
    not_rederived: dict[str, list[str]] = {}
    for name in sorted(set(logged) - set(mine)):
        why = next((w for p, w in NOT_REDERIVED if name.startswith(p)), "counters of work done by the stages")
        not_rederived.setdefault(why, []).append(name)
    return Comparison(equal, different, not_rederived, sorted(set(mine) - set(logged)))
