"""One job: load the corpus, run the pipeline inside a tracked run, record what ran, judge held-out use, print.

:func:`run_job` takes a :class:`JobSpec` (plain typed values: the built stages, the corpus, the settings, where to
write) and a :class:`~ablate.tracking.Tracker`. The corpus is loaded and validated *before* the MLflow run starts,
so bad input leaves no run behind; anything that fails once work has started ends the run FAILED with the reason.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ablate import record as R
from ablate.cache import Cache
from ablate.data.snapshot import Snapshot
from ablate.data.split_files import mark_used_by_test
from ablate.progress import AnswerSink
from ablate.record_digest import seal
from ablate.runner.emit import (
    artifacts_for,
    metrics_for,
    params_for,
    print_run_summary,
    question_table,
    split_defined,
)
from ablate.runner.heldout import (
    HELD_OUT_SPLITS,
    HeldOutVerdict,
    PriorTestRun,
    config_fingerprint,
    confirmed_tags,
    exploratory_line,
    exploratory_tags,
    judge_test_run,
)
from ablate.runner.inputs import check_inputs
from ablate.runner.orphans import process_tags
from ablate.runner.pipeline import Pipeline, RunResult, planned_components, run_pipeline
from ablate.runner.reuse import cell_key, find_reusable, print_reused, record_reuse, why_not_reusable
from ablate.runner.session import Session, shared_session
from ablate.runner.settings import CorpusSpec, OutputSpec, RunSettings
from ablate.tracking import Tracker, shared_tracker

PACKAGE_DIR = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class JobSpec:
    """Everything one job needs, validated. ``variant``: the name the user chose (logged as the ``variant`` param);
    ``variant_order``: its place in the ablation table; ``config_yaml``: the composed config, attached as an artifact;
    ``param_sources``: config keys that feed a stage parameter (``retrieval.window`` -> ``rrf.window``);
    ``overrides``: this job's command-line overrides; ``sweep_id``/``parent_run_id``: the sweep it belongs to;
    ``test_confirmed``: the user confirmed a run on the held-out split as the final one (tagged on test runs);
    ``run_name``: the MLflow run's name (a sweep's cell label, ``C k=1 window=20``; empty: the variant);
    ``sweep_index``: the cell's place in its sweep as declared (tagged, orders the summary and the report)."""

    variant: str
    pipeline: Pipeline
    corpus: CorpusSpec
    settings: RunSettings
    output: OutputSpec
    variant_order: float | None = None
    config_yaml: str = ""
    param_sources: dict[str, str] = field(default_factory=dict)
    overrides: tuple[str, ...] = ()
    sweep_id: str | None = None
    parent_run_id: str | None = None
    test_confirmed: bool = False
    run_name: str = ""
    sweep_index: int | None = None


@dataclass(frozen=True)
class JobResult:
    """A job's run. ``result`` is None when the job reused a finished run (``reused_from``, :mod:`ablate.runner.reuse`);
    ``metrics`` are then that run's logged metrics."""

    run_id: str
    result: RunResult | None
    snapshot: Snapshot
    reused_from: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)

    def headline(self) -> dict[str, Any]:
        """The run id, the headline metrics and, with a generator, ``correct`` (the answerable questions' mean)."""
        if self.result is None:
            out = {"run_id": self.run_id, **{k: self.metrics.get(R.metric_key(k)) for k in R.HEADLINE}}
            if "answer_correct" in self.metrics:
                out["correct"] = self.metrics["answer_correct"]
            return out
        means = self.result.evaluation.means
        out = {"run_id": self.run_id, **{k: means.get(k) for k in R.HEADLINE}}
        answers = self.result.answers
        if answers is not None and bool(answers["answerable"].any()):
            out["correct"] = float(answers[answers["answerable"]]["correct"].mean())
        return out


@functools.cache
def git_commit() -> str:  # once per process: a command's commit does not change under it
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=PACKAGE_DIR,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def start_tags(job: JobSpec) -> dict[str, str]:
    tags = {R.T_VARIANT: job.variant, R.T_GIT: git_commit(), **process_tags()}
    if job.variant_order is not None:
        tags[R.T_VARIANT_ORDER] = f"{job.variant_order:g}"
    if job.sweep_id:
        tags[R.T_SWEEP] = job.sweep_id
    if job.sweep_index is not None:
        tags[R.T_SWEEP_INDEX] = str(job.sweep_index)
    if job.overrides:
        tags[R.T_OVERRIDES] = " ".join(job.overrides)
    if job.param_sources:
        tags[R.T_PARAM_SOURCES] = json.dumps(job.param_sources, sort_keys=True)
    return tags


def result_tags(result: RunResult, snapshot: Snapshot, corpus: CorpusSpec, cell: str) -> dict[str, str]:
    qrels = snapshot.split_qrels(result.split)
    return {
        R.T_CELL: cell,
        R.T_ORIGINAL: "true",  # computed here, not copied: reuse copies only such runs
        R.T_SNAPSHOT: snapshot.fingerprint,
        R.T_INDEX_SNAPSHOT: snapshot.content_fingerprint,
        R.T_QRELS_HASH: qrels.content_hash(),
        R.T_QRELS_FILE: qrels.source_sha256,
        R.T_LABEL_VERSION: snapshot.label_version or "unversioned",
        **(
            {
                R.T_QRELS_SOURCE: snapshot.source_qrels(result.split).content_hash(),
                R.T_UNIT_CHANGE: result.projected_onto,
            }
            if snapshot.projection is not None
            else {}
        ),
        R.T_SPLIT: result.split,
        R.T_CORPUS: snapshot.name,
        R.T_IDENTITY: corpus.identity or "none",
        **{f"{R.T_FP_PREFIX}{k}": v for k, v in result.fingerprints.items()},
    }


def heldout_verdict(
    tracker: Tracker,
    experiment: str,
    run_id: str,
    result: RunResult,
    snapshot: Snapshot,
    settings: RunSettings,
    sweep_id: str | None,
) -> tuple[str, HeldOutVerdict]:
    """This test-split run's configuration fingerprint and how it stands against the study's earlier test runs."""
    cfp = config_fingerprint(result.components, settings.eval.as_dict())
    exp_id = tracker.experiment_id(experiment)
    filt = (
        f"tags.`{R.T_SPLIT}` = 'test' and tags.`{R.T_INDEX_SNAPSHOT}` = '{snapshot.content_fingerprint}' "
        f"and tags.`{R.T_QRELS_HASH}` = '{snapshot.split_qrels('test').content_hash()}'"
    )
    prior = [
        PriorTestRun(r.run_id, r.tags.get(R.T_CONFIG_FP, ""), r.tags.get(R.T_SWEEP), r.start_time)
        for r in tracker.find_runs([exp_id] if exp_id else None, filt)
        if r.run_id != run_id and r.tags.get(R.T_CONFIG_FP)
    ]
    return cfp, judge_test_run(prior, cfp, sweep_id)


def heldout_tags(
    tracker: Tracker, job: JobSpec, run_id: str, result: RunResult, snapshot: Snapshot
) -> dict[str, str]:
    """The held-out tags of a run: a pilot's (no held-out split: nothing to judge it against), a test run's verdict
    (its warning printed), or none."""
    if job.corpus.exploratory:
        return exploratory_tags()
    if result.split not in HELD_OUT_SPLITS:
        return {}
    cfp, verdict = heldout_verdict(
        tracker, job.output.experiment, run_id, result, snapshot, job.settings, job.sweep_id
    )
    if verdict.message:
        print(verdict.message, file=sys.stderr)
    return {R.T_CONFIG_FP: cfp, **verdict.tags(), **confirmed_tags(result.split, job.test_confirmed)}


def run_job(
    job: JobSpec,
    tracker: Tracker | None = None,
    session: Session | None = None,
    stream: IO[str] | None = None,
    answers: AnswerSink | None = None,
) -> JobResult:
    """Run one job inside an MLflow run (see the module docstring); returns the run id and the result. ``answers``
    (a sweep's console) is told of each answer the generator hands back."""
    session = session or shared_session()
    stream = stream or sys.stdout
    snapshot = check_inputs(  # before any run exists: bad input leaves nothing behind
        job.corpus, job.output, job.pipeline, job.settings.eval.relevance_level, session, sweep_orphans=False
    )
    tracker = tracker or shared_tracker(job.output.tracking_uri)
    cache = Cache(job.output.cache_dir, enabled=job.output.cache_enabled)
    planned = planned_components(
        snapshot, job.corpus.split, job.pipeline, job.settings, access=job.corpus.access
    )
    cell = cell_key(job, planned)
    if why_not_reusable(job) is None:
        found = find_reusable(tracker, job.output.experiment, cell)
        if found.note:
            print(found.note, file=sys.stderr)
        if found.source is not None:
            source = found.source
            run_id = record_reuse(tracker, job, found, start_tags(job))
            print_reused(
                job, run_id, source, tracker.uri, stream, job.sweep_id is not None, job.output.verbose
            )
            _say_exploratory(job, snapshot, stream)
            return JobResult(run_id, None, snapshot, reused_from=source.run_id, metrics=dict(source.metrics))
    name = job.run_name or job.variant
    with tracker.run(job.output.experiment, name, start_tags(job), job.parent_run_id) as run_id:
        result = run_pipeline(
            snapshot,
            job.corpus.split,
            job.pipeline,
            job.settings,
            cache,
            variant=job.variant,
            identity=job.corpus.identity,
            access=job.corpus.access,
            session=session,
            show_progress=job.output.progress,
            doc_scores=job.corpus.chunker
            is not None,  # a chosen chunker: runs over chunkers compare at doc level
            answers=answers,
        )
        # a split file a held-out run used may no longer be redrawn
        if result.split in HELD_OUT_SPLITS and job.corpus.split_file:
            mark_used_by_test(job.corpus.split_file, run_id, result.split)
        params = params_for(job.variant, result, snapshot, job.corpus, job.settings)
        # the key names what ran; a stage whose fingerprint only settles while it runs (none of ours) gets a key
        # no later plan matches, so it is never reused
        ran = cell if result.components == planned else cell_key(job, result.components)
        tags = result_tags(result, snapshot, job.corpus, ran)
        tags.update(heldout_tags(tracker, job, run_id, result, snapshot))
        try:
            metrics, undefined = split_defined(
                metrics_for(result, bootstrap=job.settings.bootstrap, seed=job.settings.seed, cache=cache)
            )
        except BaseException:  # the FAILED run still says what ran
            tracker.log_run(run_id, params=params, tags=tags)
            raise
        tracker.log_run(run_id, params=params, metrics=metrics, tags=tags)  # one log_batch: one transaction
        tracker.log_files(run_id, artifacts_for(result, snapshot, job.config_yaml, undefined))
        # the per-question table under one name on every run: MLflow's compare view lines runs up by question
        tracker.log_table(run_id, question_table(result, snapshot), R.A_PER_QUERY_TABLE)
        # the record is complete: seal it with its digest, read back from the store (reuse checks it)
        seal(tracker, run_id)
        where = (run_id, tracker.uri, job.output.experiment)
        brief, verbose = (
            job.sweep_id is not None,
            job.output.verbose,
        )  # a sweep's cell: the command's one line
        print_run_summary(result, *where, stream, tracker.artifact_uri(run_id), brief, verbose, name)
    _say_exploratory(job, snapshot, stream)
    return JobResult(run_id, result, snapshot)


def _say_exploratory(job: JobSpec, snapshot: Snapshot, stream: IO[str]) -> None:
    """A single run of a pilot says it has no held-out split (a sweep says it once, above its summary)."""
    if job.corpus.exploratory and not job.sweep_id:
        print(exploratory_line(str(snapshot.root)), file=stream)
