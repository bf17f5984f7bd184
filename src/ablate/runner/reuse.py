"""A finished run whose every input matches is reused, not run again: a sweep costs little more than its new cells.

Every run carries a *cell key* (the tag ``ablate.cell``): the sha256 of everything that decides its numbers.

* every component the one-factor check compares, as the run would record them (``RunResult.components``, known
  before anything runs: :func:`~ablate.runner.pipeline.planned_components`): each stage's fingerprint after binding
  (class, parameters, library versions, ``CODE_VERSION``, the content of the resources it reads), the snapshot and
  its content fingerprint, the split's labels, the identity and its groups, the evaluation and abstention rules;
* every stage's parameters as the job sets them, including the logged ones no fingerprint holds (``dense.num_threads``;
  ``dense.model_source``: a model chosen by the corpus language vs. named), so a copy logs what the job would;
* the variant's name and place in the table, the summary settings (bootstrap resamples, seed, cache depth, the split
  thresholds are tuned on), the corpus settings and the content of a split file;
* the source of the whole ablate package (every ``.py`` file under it: :func:`package_digest`) and the versions of
  the libraries the scoring and the statistics run on.

With ``tracking.reuse=true`` (the command line's default), a job whose key matches a FINISHED run of the same
experiment does not run. It records a new run instead, under this command (a sweep's parent run), with the earlier
run's parameters, metrics, result tags and artifacts, its own start tags (sweep, overrides, process) and its own
``config.yaml``, tagged ``ablate.reused_from=<run id>``. The MLflow UI, the sweep summary and the report then see
every cell of the sweep as they would after a full run.

A copy is made only from a record that still stands (:func:`find_reusable`). The run copied is always an original
(a run that computed its record, tagged ``ablate.original=true``; a reused run never has the tag, so a copy is never
copied), the newest FINISHED one with the key, and its record, read from the store now (metrics and params from
MLflow, artifacts listed and hashed now), must still match the digest it was sealed with when it finished
(:mod:`ablate.record_digest`): an edited metric or param, or a deleted, changed or added artifact fails it, and so
does a run without a digest. Then the cell runs, and one line says which run was not reused and why.

Never reused (:func:`why_not_reusable`): a run on the held-out split (the test split is run once, and every run
there is judged against the earlier ones), a run with a generator (latency, cost and sampled answers are
measurements of that run), a job with ``cache.enabled=false`` (compute everything again), and ``tracking.reuse=false``.
"""

from __future__ import annotations

import functools
import hashlib
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from ablate import record as R
from ablate.cache import key_of
from ablate.record import RecordedRun
from ablate.record_digest import Checked, digest, manifest
from ablate.record_digest import check as check_record
from ablate.runner.heldout import HELD_OUT_SPLITS
from ablate.stages.base import library_versions

if TYPE_CHECKING:
    from ablate.runner.pipeline import Pipeline
    from ablate.runner.settings import CorpusSpec, OutputSpec, RunSettings
    from ablate.tracking import Tracker


class Job(Protocol):
    """What reuse reads of a job (:class:`ablate.runner.job.JobSpec` has it all)."""

    @property
    def variant(self) -> str: ...
    @property
    def run_name(self) -> str: ...
    @property
    def variant_order(self) -> float | None: ...
    @property
    def pipeline(self) -> Pipeline: ...
    @property
    def corpus(self) -> CorpusSpec: ...
    @property
    def settings(self) -> RunSettings: ...
    @property
    def output(self) -> OutputSpec: ...
    @property
    def config_yaml(self) -> str: ...
    @property
    def parent_run_id(self) -> str | None: ...


#: Bump when what a cell key covers changes.
CELL_KEY_VERSION = "ablate-run-cell/2"
#: The libraries scoring, statistics and the artifacts' text run on (the stages' own are in their fingerprints).
SCORING_LIBRARIES = ("numpy", "scipy", "pandas")
PACKAGE_DIR = Path(__file__).resolve().parents[1]
#: Tags a reused run takes from this job, never from the run it reuses.
OWN_TAGS = (
    R.T_VARIANT,
    R.T_VARIANT_ORDER,
    R.T_GIT,
    R.T_SWEEP,
    R.T_OVERRIDES,
    R.T_PARAM_SOURCES,
    R.T_HOST,
    R.T_PID,
    R.T_PID_START,
    R.T_FAILURE,
    R.T_REUSED_FROM,
    R.T_RECORD_DIGEST,
    R.T_ORIGINAL,
)


@functools.cache
def package_digest() -> str:
    """sha256 over the path and content of every ``.py`` file of the ablate package (read once per process): any
    change to the code that computed a run gives its cells a new key."""
    h = hashlib.sha256()
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        h.update(path.relative_to(PACKAGE_DIR).as_posix().encode())
        h.update(b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


@functools.cache
def _file_sha256(path: str) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def cell_key(job: Job, components: dict[str, dict[str, Any]]) -> str:
    """The key of the run ``job`` makes with these components (see the module docstring)."""
    s = job.settings
    corpus = asdict(job.corpus)
    return key_of(
        CELL_KEY_VERSION,
        {
            "components": components,
            # the stages' parameters as this job sets them, logged ones included that no fingerprint holds
            # (dense.num_threads, dense.model_source): a copy must log what this job would have logged
            "params": {stage.name: stage.params() for stage in job.pipeline.stages},
            "variant": job.variant,
            "variant_order": job.variant_order,
            "settings": {
                "bootstrap": s.bootstrap,
                "seed": s.seed,
                "cache_depth": s.cache_depth,
                "tune_split": s.tune_split,
                "abstain_threshold": s.abstain_threshold,
                "eval": s.eval.as_dict(),
            },
            "corpus": corpus,
            "split_file": _file_sha256(job.corpus.split_file) if job.corpus.split_file else None,
            "code": package_digest(),
            "libraries": library_versions(*SCORING_LIBRARIES),
            "python": sys.version_info[:2],
        },
    )


def why_not_reusable(job: Job) -> str | None:
    """None when an earlier identical run may stand for this job; else why it must run."""
    if not job.output.reuse:
        return "tracking.reuse=false"
    if not job.output.cache_enabled:
        return "cache.enabled=false"
    if job.corpus.split in HELD_OUT_SPLITS and not job.corpus.exploratory:
        return f"the held-out split ({job.corpus.split}) is run, never reused"
    if job.pipeline.generator is not None:
        return "a generator's answers, latency and cost are measured anew"
    return None


@dataclass(frozen=True)
class Lookup:
    """What a cell key found. ``source``: a FINISHED original run with the key whose record still matches its digest
    (``artifacts``: its artifacts' hashes as checked); or ``note``: one line saying which run was not reused and why.
    Neither when no run has the key."""

    source: RecordedRun | None = None
    artifacts: dict[str, str] = field(default_factory=dict)
    note: str | None = None


def _note(run_id: str, why: str) -> str:
    return f"note: run {run_id} not reused: {why}; running the cell"


def find_reusable(tracker: Tracker, experiment: str, key: str, experiment_id: str | None = None) -> Lookup:
    """The run that may stand for a job with cell key ``key`` in ``experiment`` (or ``experiment_id`` when the caller
    knows it): the newest FINISHED original run with the key (tagged ``ablate.original``: a copy is never copied, so
    a damaged copy cannot spread), and only while its record still matches its digest
    (:func:`ablate.record_digest.check`). A run with the key but no original among them gets a note."""
    exp_id = experiment_id or tracker.experiment_id(experiment, create=False)
    if exp_id is None:
        return Lookup()
    match = f"tags.`{R.T_CELL}` = '{key}' and attributes.status = 'FINISHED'"
    found = tracker.find_runs(
        [exp_id], f"{match} and tags.`{R.T_ORIGINAL}` = 'true'", max_results=1, newest_first=True
    )
    if not found:  # a run with the key that is not marked an original (its tags were edited)?
        found = tracker.find_runs([exp_id], match, max_results=1, newest_first=True)
        if not found:
            return Lookup()
    run = found[0]
    if R.T_REUSED_FROM in run.tags:
        return Lookup(
            note=_note(run.run_id, f"it is a copy of run {run.tags[R.T_REUSED_FROM]}, not an original")
        )
    checked = check_record(tracker, run)
    if checked.problem is None and run.tags.get(R.T_ORIGINAL) != "true":
        checked = Checked(f"it is not tagged {R.T_ORIGINAL}=true (its tags were edited)")
    if checked.problem is not None:
        return Lookup(note=_note(run.run_id, checked.problem))
    return Lookup(run, checked.artifacts)


def record_reuse(tracker: Tracker, job: Job, found: Lookup, start_tags: dict[str, str]) -> str:
    """A new run of ``job`` standing for ``found.source``: its params, metrics, result tags and artifacts, this job's
    start tags and ``config.yaml``, sealed with its own record digest (the tag is logged last, with the params and
    metrics). Ends FAILED with the reason if copying fails."""
    source = found.source
    if source is None:
        raise ValueError("nothing to reuse")
    copied = {
        k: v
        for k, v in source.tags.items()
        if not k.startswith("mlflow.") and k not in OWN_TAGS and k != R.T_MDE_BASELINE
    }
    # what the run measured; not the MDEs a report logged against some baseline (this sweep's report logs its own)
    metrics = {k: v for k, v in source.metrics.items() if not k.startswith(R.MDE_PREFIX)}
    tags = {**copied, **start_tags, R.T_REUSED_FROM: source.run_id}  # created with the run: one transaction
    artifacts, files, skip = dict(found.artifacts), {}, [R.A_RECORD_DIGEST]
    # this job's own config.yaml (its tracking and output settings may differ from the source's)
    if job.config_yaml:
        files[R.A_CONFIG] = job.config_yaml.encode("utf-8")
        artifacts[R.A_CONFIG] = hashlib.sha256(files[R.A_CONFIG]).hexdigest()
        skip.append(R.A_CONFIG)
    with tracker.run(job.output.experiment, job.run_name or job.variant, tags, job.parent_run_id) as run_id:
        files[R.A_RECORD_DIGEST] = manifest(
            source.params, metrics, artifacts, run_id
        )  # the record of this run
        tracker.copy_artifacts(source.run_id, run_id, skip=skip)
        tracker.log_files(run_id, files)
        sealed = {R.T_RECORD_DIGEST: digest(files[R.A_RECORD_DIGEST])}
        tracker.log_run(run_id, params=source.params, metrics=metrics, tags=sealed)
    return run_id


def print_reused(
    job: Job,
    run_id: str,
    source: RecordedRun,
    uri: str,
    stream: IO[str] | None = None,
    brief: bool = False,
    verbose: bool = False,
) -> None:
    """What a reused job prints: the headline row of the reused metrics and where both runs are; only the accounting
    (:func:`ablate.runner.emit.print_accounting`, from the reused ``queries_*`` metrics) when ``brief`` (a sweep's
    cell, whose one line the command prints)."""
    from ablate.runner.emit import print_accounting
    from ablate.tables import fmt, format_table

    stream = stream or sys.stdout
    accounting = {k[len("queries_") :]: v for k, v in source.metrics.items() if k.startswith("queries_")}
    if not brief:
        cols = [k for k in R.HEADLINE if R.metric_key(k) in source.metrics]
        row = {"variant": job.variant, **{k: fmt(source.metrics[R.metric_key(k)]) for k in cols}}
        print(format_table([row], ["variant", *cols]), file=stream)
    print_accounting(accounting, source.split, job.run_name or job.variant, verbose, stream)
    if brief:
        return
    print(
        f"reused run {source.run_id}: every input is the same (cell key {source.tags.get(R.T_CELL, '')[:12]}) and "
        "its record still matches its digest, so nothing ran again; tracking.reuse=false runs it anew",
        file=stream,
    )
    print(f"mlflow run {run_id} in experiment {job.output.experiment!r} at {uri}", file=stream)
