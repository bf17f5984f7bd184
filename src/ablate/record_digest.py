"""A finished run's record, sealed by one sha256: reuse copies a run only while its record is still what it logged.

The *record* of a run is what a reuse copies: every param (name and value as the store holds them), every metric
(name and float value as the store holds them) and every artifact (relative path and the sha256 of its bytes). Its
*manifest* is that record written out canonically (JSON, sorted keys, each float as its exact ``repr``); the
*digest* is the sha256 of the manifest's bytes.

* :func:`seal` runs when a job's record is complete: it reads the run back from the store (params and metrics from
  MLflow, artifacts listed and hashed where they are kept), logs the manifest as the artifact
  ``record_digest.json`` and the digest as the tag ``ablate.record_digest``, last: a run without the tag never
  finished writing its record, or was made before ablate sealed records.
* :func:`check` rebuilds the manifest the same way, now, and compares digests. When they differ, the stored
  manifest (trusted only if it still hashes to the tag) says what changed: a metric or param edited, added or
  removed, an artifact missing, changed or added.
* A reused run is sealed from what it logged (:func:`manifest` over the copied params, metrics and artifact hashes,
  its own ``config.yaml`` in place of the source's): the same function, so writer and checker cannot drift.

Left out, and why: tags (they say where a run stands, not what it measured; the ones a reuse copies name its inputs,
which the reuse search matched on), the ``mde_<metric>`` metrics a report logs on the runs it compares (they
describe a comparison with a baseline, made after the run finished, not what the run measured) and
``record_digest.json`` itself (a file cannot list its own bytes; the tag
seals it). Every artifact is in, ``config.yaml`` included: a reused run gets its own and is sealed with it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ablate.errors import AblateError
from ablate.record import A_FULL_TAG_VALUES, A_RECORD_DIGEST, MDE_PREFIX, T_RECORD_DIGEST, RecordedRun

if TYPE_CHECKING:
    from ablate.tracking import Tracker

#: Bump when what the manifest covers or how it is written changes (older digests then no longer match). Version 2
#: names the run the record is of, so a byte-identical copy of a run's record is never taken for that run.
DIGEST_VERSION = "ablate-record-digest/2"
#: Records sealed before the manifest named its run: still checked, as they were written.
UNBOUND_VERSION = "ablate-record-digest/1"
#: How many changed items a note names before "and N more".
NAMED = 3
#: Bytes read at a time when hashing an artifact (1 MiB): large files never sit in memory whole.
READ_BLOCK = 1 << 20
#: Characters of a store's error kept in the one-line note (its first line says what failed; the rest is a trace).
ERROR_CHARS = 200


def manifest(
    params: Mapping[str, str],
    metrics: Mapping[str, float],
    artifacts: Mapping[str, str],
    run_id: str | None = None,
) -> bytes:
    """The canonical bytes of a record: params and metrics as the store holds them (but a report's ``mde_*``),
    artifacts as ``{relative path: sha256 of the bytes}``, and the id of the run it is the record of (without one:
    the form records had before they named their run, :data:`UNBOUND_VERSION`)."""
    body: dict[str, Any] = {
        "version": DIGEST_VERSION if run_id else UNBOUND_VERSION,
        "params": {str(k): str(v) for k, v in params.items()},
        "metrics": {str(k): repr(float(v)) for k, v in metrics.items() if not str(k).startswith(MDE_PREFIX)},
        "artifacts": {str(k): str(v) for k, v in artifacts.items()},
    }
    if run_id:
        body["run"] = run_id
    return (json.dumps(body, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def digest(manifest_bytes: bytes) -> str:
    return hashlib.sha256(manifest_bytes).hexdigest()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(READ_BLOCK), b""):
            h.update(block)
    return h.hexdigest()


def _read_artifacts(tracker: Tracker, run_id: str) -> tuple[dict[str, str], bytes | None]:
    """The sha256 of every artifact the run holds now (but the manifest, and the whole values of tags too long for
    MLflow: tags are not in the digest), and the stored manifest's bytes."""
    with tracker.artifact_files(run_id) as files:
        hashes = {
            rel: file_sha256(p)
            for rel, p in files.items()
            if rel != A_RECORD_DIGEST and not rel.startswith(A_FULL_TAG_VALUES + "/")
        }
        stored = files[A_RECORD_DIGEST].read_bytes() if A_RECORD_DIGEST in files else None
    return hashes, stored


def seal(tracker: Tracker, run_id: str) -> str:
    """Read the run's record back from the store, log its manifest and digest (the tag last); returns the digest."""
    run = tracker.get_run(run_id)
    if run is None:
        raise RuntimeError(f"run {run_id} cannot be read back to seal its record")
    hashes, _ = _read_artifacts(tracker, run_id)
    body = manifest(run.params, run.metrics, hashes, run_id)
    tracker.log_files(run_id, {A_RECORD_DIGEST: body})
    sealed = digest(body)
    tracker.set_tags(run_id, {T_RECORD_DIGEST: sealed})
    return sealed


@dataclass(frozen=True)
class Checked:
    """A run's record checked now: ``problem`` is None when it still matches its digest, else why not (one clause);
    ``artifacts`` are its artifacts' hashes as checked (a reuse seals its copy with them)."""

    problem: str | None
    artifacts: dict[str, str] = field(default_factory=dict)


def check(tracker: Tracker, run: RecordedRun) -> Checked:
    """Does ``run``'s record (its params and metrics as read from the store, its artifacts hashed now) still match
    the digest it was sealed with? Runs without a digest do not."""
    sealed = run.tags.get(T_RECORD_DIGEST)
    if not sealed:
        return Checked("it carries no record digest (it finished before ablate sealed records)")
    try:
        hashes, stored = _read_artifacts(tracker, run.run_id)
    except Exception as e:  # noqa: BLE001 - a store that cannot serve the files: the cell runs, the note says why
        text = " ".join(str(e).split())[:ERROR_CHARS]
        return Checked(f"its artifacts could not be read ({type(e).__name__}: {text})")
    now = manifest(run.params, run.metrics, hashes, None if _unbound(stored, sealed) else run.run_id)
    if digest(now) == sealed:
        return Checked(None, hashes)
    return Checked(f"{what_changed(stored, sealed, now)} (digest mismatch)", hashes)


def _unbound(stored: bytes | None, sealed: str) -> bool:
    """Whether the run's stored manifest is an intact record of the form before records named their run."""
    if stored is None or digest(stored) != sealed:
        return False
    try:
        return bool(json.loads(stored).get("version") == UNBOUND_VERSION)
    except (ValueError, AttributeError):
        return False


def what_changed(stored: bytes | None, sealed: str, now: bytes) -> str:
    """What differs between the sealed record (its stored manifest, if it still hashes to ``sealed``) and ``now``."""
    if stored is None:
        return f"its record no longer matches its digest, and its {A_RECORD_DIGEST} is missing"
    if digest(stored) != sealed:
        return f"its record no longer matches its digest, and its {A_RECORD_DIGEST} was changed"
    was, is_ = json.loads(stored), json.loads(now)
    if was.get("version") not in (DIGEST_VERSION, UNBOUND_VERSION) or "version" not in was:
        return f"it was sealed by another version of the record digest ({was.get('version')})"
    if was.get("run") != is_.get("run"):
        return f"its {A_RECORD_DIGEST} is the record of run {was.get('run')}, not of this run (a copy)"
    parts: list[str] = []
    for section, noun in (("artifacts", "artifact"), ("metrics", "metric"), ("params", "param")):
        before: dict[str, Any] = was.get(section, {})
        after: dict[str, Any] = is_[section]
        missing = sorted(set(before) - set(after))
        changed = sorted(k for k in set(before) & set(after) if before[k] != after[k])
        added = sorted(set(after) - set(before))
        if missing:
            parts.append(f"its {_items(noun, missing)} {_be(missing)} missing")
        if changed:
            parts.append(f"its {_items(noun, changed)} {_be(changed, past=True)} changed after it finished")
        if added:
            parts.append(f"{_items(noun, added)} {_be(added, past=True)} added after it finished")
    return ", ".join(parts) or "its record no longer matches its digest"


def _items(noun: str, names: list[str]) -> str:
    shown = ", ".join(names[:NAMED]) + (f" and {len(names) - NAMED} more" if len(names) > NAMED else "")
    return f"{noun}{'s' if len(names) > 1 else ''} {shown}"


def _be(names: list[str], past: bool = False) -> str:
    if past:
        return "were" if len(names) > 1 else "was"
    return "are" if len(names) > 1 else "is"


# -- reading a run's artifacts back: each checked against the digest its record was sealed with ---------------------
class ArtifactMismatch(AblateError):
    """An artifact a finished run's sealed record lists is not what the run logged (edited, removed or added after
    the run finished): nothing may be computed from it."""


#: What a mismatch tells the user to do.
MISMATCH_FIX = (
    "restore the file as the run logged it (a backup, or the copy a reused run shares), or re-run the cell "
    "(python -m ablate with the run's overrides)"
)


class RunFiles:
    """The artifacts of ``run`` read back into ``dst``, each checked, on every read, against the sha256 the run's
    sealed record (``record_digest.json``, itself checked against the tag ``ablate.record_digest``) lists for it. A
    run sealed before records named their run is checked the same way; a run without a seal (made before ablate
    sealed records) cannot be checked: :attr:`unsealed` says so and its files are read as they are.

    :attr:`hashes` holds the sha256 of every file read; :meth:`key` binds them to the run's id and seal, so a result
    computed from them is reused only for this run with these bytes."""

    def __init__(self, tracker: Tracker, run: RecordedRun, dst: str | Path) -> None:
        self.tracker, self.run, self.dst = tracker, run, Path(dst)
        self.hashes: dict[str, str] = {}
        self._listed: dict[str, str] | None = None
        self._loaded = False

    @property
    def who(self) -> str:
        return f"run {self.run.name} ({self.run.run_id})"

    @property
    def unsealed(self) -> bool:
        return not self.run.tags.get(T_RECORD_DIGEST)

    def listed(self) -> dict[str, str] | None:
        """``{artifact: sha256}`` as the sealed record lists them; None for a run without a seal."""
        if self._loaded:
            return self._listed
        sealed = self.run.tags.get(T_RECORD_DIGEST)
        if sealed:
            where = self.dst / ".sealed"
            got = self.tracker.download_artifact(self.run.run_id, A_RECORD_DIGEST, where)
            if got is None:
                raise ArtifactMismatch(
                    f"{self.who}: its {A_RECORD_DIGEST} is missing, so its artifacts cannot be checked against the "
                    f"record it was sealed with (tag {T_RECORD_DIGEST}={sealed}). Fix: {MISMATCH_FIX}"
                )
            body = got.read_bytes()
            if digest(body) != sealed:
                raise ArtifactMismatch(
                    f"{self.who}: its {A_RECORD_DIGEST} has sha256 {digest(body)}, not the {sealed} of its tag "
                    f"{T_RECORD_DIGEST}: it was changed after the run finished. Fix: {MISMATCH_FIX}"
                )
            record = json.loads(body)
            bound = record.get("run")
            if record.get("version") != UNBOUND_VERSION and bound != self.run.run_id:
                raise ArtifactMismatch(
                    f"{self.who}: its {A_RECORD_DIGEST} is the record of run {bound}, not of this run: its files are "
                    f"a copy of another run's. Fix: {MISMATCH_FIX}"
                )
            self._listed = {str(k): str(v) for k, v in (record.get("artifacts") or {}).items()}
        self._loaded = True
        return self._listed

    def get(self, name: str) -> Path | None:
        """The artifact ``name`` downloaded and checked; None when the run has none (and its record lists none).
        :class:`ArtifactMismatch` (one line: the file, the sha256 expected and found, the fix) when it differs from
        the record, is missing from it or was added after it."""
        listed = self.listed()
        got = self.tracker.download_artifact(self.run.run_id, name, self.dst)
        expected = None if listed is None else listed.get(name)
        if got is None:
            if expected is not None:
                raise ArtifactMismatch(
                    f"{self.who}: its artifact {name} is missing; the record it was sealed with lists it with "
                    f"sha256 {expected}. Fix: {MISMATCH_FIX}"
                )
            return None
        found = file_sha256(got)
        if listed is not None and expected is None:
            raise ArtifactMismatch(
                f"{self.who}: its artifact {name} (sha256 {found}) was added after the run finished: the record it "
                f"was sealed with has no such file. Fix: remove it, or re-run the cell"
            )
        if expected is not None and found != expected:
            raise ArtifactMismatch(
                f"{self.who}: its artifact {name} was changed after the run finished (sha256 {found}, expected "
                f"{expected} as its sealed record lists it). Fix: {MISMATCH_FIX}"
            )
        self.hashes[name] = found
        return got

    def key(self) -> str:
        """sha256 over the run's id, its seal and the sha256 of every file read: what a result computed from them
        is reused under."""
        body = {
            "run": self.run.run_id,
            "sealed": self.run.tags.get(T_RECORD_DIGEST, ""),
            "files": dict(sorted(self.hashes.items())),
        }
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()
