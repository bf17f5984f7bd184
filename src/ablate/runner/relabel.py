"""Re-score a whole sweep on a new label version and log each re-score as a run of its own
(``python -m ablate.report --parent ID --labels NAME``).

Every finished child of the sweep is scored again from its logged ``run.trec`` (and ``answers.csv``) through the one
scoring path (:func:`ablate.runner.rescore.rescore` with ``labels=``): nothing is retrieved or generated again. Each
re-score becomes a NEW run of the same experiment, under a new sweep parent (``<parent name> @ labels NAME``,
tagged ``ablate.rescored_from=<old parent>``), so ``python -m ablate.report --parent NEWPARENT`` reports it like any
sweep. A new run carries:

* the original's params, plus the labels' provenance (``labels.parent``, ``labels.llm_made``);
* the original's tags that say what ran and where it stands (variant, sweep index, split, fingerprints, the
  held-out verdict and configuration fingerprint: a re-score of a test run is the same test run scored on other
  labels, never a new one, so the held-out guard is not consulted), with the label identity of the new labels
  (``ablate.label_version``, ``ablate.qrels_hash``, ``ablate.qrels_file_sha256``, ``ablate.snapshot``) and
  ``ablate.rescored_from=<run>``; never the reuse identity (``ablate.cell``, ``ablate.original``): a re-score is not
  a run a later job may stand in for;
* the re-scored metrics (timings, counters of work and the funnel are not re-derivable and are not logged);
* ``per_query.csv``, ``unjudged.csv``, ``slices.csv``, ``accounting.json`` and ``corpus_manifest.json`` of the
  re-score, the original's ``run.trec``, ``answers.csv``, ``prompt.txt``, ``abstention.json`` and
  ``components.json`` as they are, and its ``config.yaml`` with ``corpus.labels`` set to the version's folder (so
  ``python -m ablate.evaluate --from-run NEWRUN`` gives its metrics back).

The old runs are only read, and every file read from them is checked against the sha256 their sealed record lists
(:class:`ablate.record_digest.RunFiles`): a ``run.trec`` (``answers.csv``, ``config.yaml``, ...) edited after the run
stops the call with one line naming the file before anything is scored or logged. Running it again reuses the
re-scored runs of the same sweep and label version (the same content, every file of its folder, both views:
``ablate.labels_sha256``) only while the run each re-scores is the same run with the same bytes
(``ablate.rescored_inputs``: its id, seal and the sha256 of each file read); a changed input is re-scored anew. Each
re-scored run is sealed with its own record digest.
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from ablate import record as R
from ablate.data.corpus import label_folder
from ablate.data.labelsets import LabelVersion, read_label_version
from ablate.errors import AblateError, ConfigError
from ablate.record import RecordedRun
from ablate.record_digest import RunFiles, seal
from ablate.runner.emit import label_params, per_query_frame, slices_csv
from ablate.runner.orphans import process_tags
from ablate.runner.rescore import Rescored, rescore
from ablate.tracking import Tracker

#: Tags of the original that a re-score does not carry: MLflow's own, the reuse identity, the process that ran it,
#: what a report or a failure wrote on it, and the label identity (set anew from the new labels).
DROPPED_TAGS: tuple[str, ...] = (
    R.T_CELL,
    R.T_ORIGINAL,
    R.T_RECORD_DIGEST,
    R.T_REUSED_FROM,
    R.T_HOST,
    R.T_PID,
    R.T_PID_START,
    R.T_FAILURE,
    R.T_REPORT_BASELINE,
    R.T_QRELS_SOURCE,
    R.T_UNIT_CHANGE,
    R.T_SNAPSHOT,
    R.T_QRELS_HASH,
    R.T_QRELS_FILE,
    R.T_LABEL_VERSION,
)
#: Artifacts of the original a re-score carries over as they are (when the original has them).
COPIED_ARTIFACTS: tuple[str, ...] = (R.A_RUN, R.A_ANSWERS, R.A_PROMPT, R.A_ABSTENTION, R.A_COMPONENTS)
#: Every artifact of the original a re-score reads: their sha256 (checked against its sealed record) key the reuse.
INPUT_ARTIFACTS: tuple[str, ...] = (R.A_CONFIG, R.A_MANIFEST, *COPIED_ARTIFACTS)


class RelabelError(AblateError):
    """The sweep or the label version cannot be re-scored as asked."""


@dataclass(frozen=True)
class Target:
    """What to re-score: the old sweep ``parent``, its finished ``children`` (``skipped``: the others), its
    ``experiment``, the label ``version`` and the sha256 of its label files."""

    parent: RecordedRun
    children: list[RecordedRun]
    experiment: str
    version: LabelVersion
    labels_sha: str
    skipped: list[str] = field(default_factory=list)


@dataclass
class Relabelled:
    """The new sweep parent and, per old child run id, its re-scored run id; ``reused``: those found from an earlier
    call; ``notes``: what the re-scores said."""

    parent: str
    runs: dict[str, str]
    reused: set[str] = field(default_factory=set)
    reused_parent: bool = False
    notes: list[str] = field(default_factory=list)


def labels_sha(version: LabelVersion) -> str:
    """sha256 over every file of the version's folder (its path inside the folder and its content): the headline
    qrels, the assessor view (``assessor/``), ``judged.csv``, the answer grades and ``version.json`` (the human
    sample), so a re-score is reused only for the version's whole content, both views."""
    h = hashlib.sha256()
    root = version.folder
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        name = f.relative_to(root).as_posix()
        h.update(name.encode("utf-8") + b"\0" + hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def resolve_target(tracker: Tracker, parent_id: str, labels: str, labels_dir: str | Path) -> Target:
    """The sweep ``parent_id`` and the label version ``labels`` (a name under ``<labels_dir>/<corpus>/versions/``, or
    a folder), checked before anything is written: the parent exists and has finished children of one corpus, each
    with its ``run.trec`` and ``config.yaml``, and the version exists and was made for that corpus."""
    parent = tracker.get_run(parent_id)
    if parent is None:
        raise RelabelError(
            f"no run {parent_id!r} in {tracker.uri}; fix: pass the sweep's parent run id (printed by the sweep, tag "
            f"{R.T_ROLE}={R.ROLE_SWEEP_PARENT})"
        )
    children = [tracker.whole(r) for r in tracker.children(parent_id)]
    done = [r for r in children if r.status == "FINISHED"]
    skipped = [f"{r.name} ({r.run_id}): {r.status}" for r in children if r.status != "FINISHED"]
    if not done:
        raise RelabelError(
            f"run {parent_id} ({parent.name}) has no finished child runs to re-score; fix: pass a sweep's parent run "
            f"id (tag {R.T_ROLE}={R.ROLE_SWEEP_PARENT})"
        )
    corpora = sorted({str(r.params.get(R.P_CORPUS_NAME, "")) for r in done})
    if len(corpora) != 1 or not corpora[0]:
        raise RelabelError(
            f"the runs of {parent_id} are on {len(corpora)} corpora ({', '.join(corpora)}): a label version belongs "
            "to one corpus; fix: re-score the runs of one corpus (one sweep per corpus)"
        )
    corpus = corpora[0]
    try:
        folder = label_folder(labels, corpus, labels_dir)
    except ConfigError as e:
        raise ConfigError("--labels", labels, str(e).split("; ", 1)[-1]) from None
    version = read_label_version(folder)
    made_for = version.raw.get("corpus")
    if made_for not in (None, corpus):
        raise ConfigError(
            "--labels",
            labels,
            f"label version {version.name} was committed for corpus {made_for}, the sweep ran on {corpus}; give a "
            f"version of {corpus}",
        )
    for r in done:
        for name in (R.A_RUN, R.A_CONFIG):
            if not tracker.has_artifact(r.run_id, name):
                raise RelabelError(
                    f"run {r.name} ({r.run_id}) has no {name} artifact, so it cannot be re-scored; fix: re-run it"
                )
    return Target(
        parent,
        done,
        tracker.experiment_name(parent.experiment_id),
        version,
        labels_sha(version),
        skipped,
    )


def _existing(
    tracker: Tracker, target: Target, inputs: dict[str, str]
) -> tuple[RecordedRun | None, dict[str, RecordedRun]]:
    """The new parent an earlier call made for this sweep and version, and its finished re-scored runs by the run
    they re-score: only those made from that run's files as they are now (``inputs``: the run's id -> the key of its
    files, :meth:`RunFiles.key`)."""
    filt = (
        f"tags.`{R.T_RESCORED_FROM}` = '{target.parent.run_id}' and tags.`{R.T_LABELS_SHA}` = '{target.labels_sha}' "
        f"and tags.`{R.T_ROLE}` = '{R.ROLE_SWEEP_PARENT}'"
    )
    found = tracker.find_runs([target.parent.experiment_id], filt)
    if not found:
        return None, {}
    parent = found[0]
    runs = {
        str(r.tags.get(R.T_RESCORED_FROM)): r
        for r in tracker.children(parent.run_id)
        if r.status == "FINISHED"
        and r.tags.get(R.T_LABELS_SHA) == target.labels_sha
        and r.tags.get(R.T_RESCORED_INPUTS) == inputs.get(str(r.tags.get(R.T_RESCORED_FROM)))
    }
    return parent, runs


def _read_inputs(tracker: Tracker, target: Target, tmp: str) -> dict[str, RunFiles]:
    """Every file a re-score of each child reads, downloaded and checked against the child's sealed record (a
    mismatch raises before anything is scored or logged)."""
    out = {}
    for r in target.children:
        files = RunFiles(tracker, r, Path(tmp) / r.run_id)
        for name in INPUT_ARTIFACTS:
            files.get(name)
        out[r.run_id] = files
    return out


def relabel_sweep(tracker: Tracker, target: Target, stream: IO[str] | None = None) -> Relabelled:
    """Re-score every finished child of ``target.parent`` on ``target.version`` and log each as a new run under a new
    sweep parent (see the module docstring). Every re-score is computed before anything is logged, so a run that
    cannot be re-scored leaves nothing behind (a call that found an earlier parent only adds to it)."""
    stream = stream or sys.stdout
    with tempfile.TemporaryDirectory(prefix="ablate-relabel-") as tmp:
        inputs = _read_inputs(tracker, target, tmp)
        return _relabel(tracker, target, inputs, stream)


def _relabel(tracker: Tracker, target: Target, inputs: dict[str, RunFiles], stream: IO[str]) -> Relabelled:
    parent, done = _existing(tracker, target, {k: f.key() for k, f in inputs.items()})
    todo = [r for r in target.children if r.run_id not in done]
    folder = target.version.folder
    computed = {r.run_id: rescore(tracker, r.run_id, labels=folder) for r in todo}
    out = Relabelled(parent.run_id if parent else "", {}, reused_parent=parent is not None)
    for res in computed.values():
        out.notes.extend(n for n in res.notes if n not in out.notes)
    if parent is None:
        out.parent = tracker.start(target.experiment, _parent_name(target), _parent_tags(target))
    try:
        for r in target.children:
            if r.run_id in done:
                out.runs[r.run_id] = done[r.run_id].run_id
                out.reused.add(r.run_id)
                continue
            out.runs[r.run_id] = _log_rescored(
                tracker, target, r, computed[r.run_id], out.parent, inputs[r.run_id]
            )
    except BaseException as e:
        tracker.end(out.parent, "FAILED", f"{type(e).__name__}: {e}")
        raise
    tracker.end(out.parent, "FINISHED")
    _say(target, out, stream)
    return out


def _parent_name(target: Target) -> str:
    return f"{target.parent.name} @ labels {target.version.name}"


def _parent_tags(target: Target) -> dict[str, str]:
    from ablate.runner.job import git_commit

    old = target.parent.tags
    tags = {
        R.T_ROLE: R.ROLE_SWEEP_PARENT,
        R.T_RESCORED_FROM: target.parent.run_id,
        R.T_LABEL_VERSION: target.version.name,
        R.T_LABELS_SHA: target.labels_sha,
        R.T_GIT: git_commit(),
        R.T_EXPECTED_CHILDREN: str(len(target.children)),
        **process_tags(),
    }
    for key in (R.T_OVERRIDES, R.T_TEST_CONFIRMED):
        if key in old:
            tags[key] = old[key]
    return tags


def _config_yaml(path: Path, folder: Path) -> str:
    """The run's ``config.yaml`` with ``corpus.labels`` set to the label version's folder."""
    import yaml

    from ablate.safeyaml import safe_load

    cfg = safe_load(path.read_text(encoding="utf-8"))
    cfg["corpus"]["labels"] = str(folder)
    return str(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True))


def _log_rescored(
    tracker: Tracker, target: Target, old: RecordedRun, res: Rescored, parent: str, inputs: RunFiles
) -> str:
    """Log the re-score ``res`` of ``old`` as a new run under ``parent`` (its files from ``inputs``, the checked
    copies of ``old``'s), sealed with its own record digest; returns its id."""
    import json

    snapshot, split = res.snapshot, res.corpus.split
    qrels = snapshot.split_qrels(split)
    tags = {k: v for k, v in old.tags.items() if not k.startswith("mlflow.") and k not in DROPPED_TAGS}
    tags.update(
        {
            R.T_RESCORED_FROM: old.run_id,
            R.T_RESCORED_INPUTS: inputs.key(),
            R.T_LABEL_VERSION: target.version.name,
            R.T_LABELS_SHA: target.labels_sha,
            R.T_SNAPSHOT: snapshot.fingerprint,
            R.T_QRELS_HASH: qrels.content_hash(),
            R.T_QRELS_FILE: qrels.source_sha256,
            **process_tags(),
        }
    )
    params = {**old.params, **label_params(snapshot)}
    ev = res.scores.evaluation
    files: dict[str, str | bytes] = {
        R.A_PER_QUERY: per_query_frame(ev, res.scores.answers, None, snapshot).to_csv(
            index=True, index_label="qid"
        ),
        R.A_UNJUDGED: ev.unjudged_csv(),
        R.A_SLICES: slices_csv(res.scores.slices),
        R.A_MANIFEST: json.dumps(snapshot.manifest_record(), indent=2, ensure_ascii=False),
        R.A_ACCOUNTING: json.dumps(
            {"accounting": ev.accounting, "permissions": res.inputs.permissions},
            indent=2,
            ensure_ascii=False,
            default=str,
        ),
    }
    for name in COPIED_ARTIFACTS:
        if name in inputs.hashes:
            files[name] = (inputs.dst / name).read_bytes()
    files[R.A_CONFIG] = _config_yaml(
        inputs.dst / R.A_CONFIG, target.version.folder
    )  # resolve_target checked it
    with tracker.run(target.experiment, old.name, tags, parent) as run_id:
        tracker.log_run(run_id, params=params, metrics=res.metrics)
        tracker.log_files(run_id, files)
        seal(tracker, run_id)  # the record is complete: its digest, read back from the store
    return run_id


def _say(target: Target, out: Relabelled, stream: IO[str]) -> None:
    for note in out.notes:
        print(note, file=sys.stderr)
    fresh = len(out.runs) - len(out.reused)
    what = f"{fresh} re-scored" + (f", {len(out.reused)} already re-scored (reused)" if out.reused else "")
    print(
        f"{len(out.runs)} runs of {target.parent.name} ({target.parent.run_id}) on label version "
        f"{target.version.name}: {what}; nothing retrieved again. New sweep parent {out.parent}"
        + (" (reused)" if out.reused_parent else ""),
        file=stream,
    )
    for line in target.skipped:
        print(f"  left out (not finished): {line}", file=stream)
