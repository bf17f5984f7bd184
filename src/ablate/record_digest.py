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

from ablate.record import A_FULL_TAG_VALUES, A_RECORD_DIGEST, MDE_PREFIX, T_RECORD_DIGEST, RecordedRun

if TYPE_CHECKING:
    from ablate.tracking import Tracker

#: Bump when what the manifest covers or how it is written changes (older digests then no longer match).
DIGEST_VERSION = "ablate-record-digest/1"
#: How many changed items a note names before "and N more".
NAMED = 3


def manifest(params: Mapping[str, str], metrics: Mapping[str, float], artifacts: Mapping[str, str]) -> bytes:
    """The canonical bytes of a record: params and metrics as the store holds them (but a report's ``mde_*``),
    artifacts as ``{relative path: sha256 of the bytes}``."""
    body = {
        "version": DIGEST_VERSION,
        "params": {str(k): str(v) for k, v in params.items()},
        "metrics": {str(k): repr(float(v)) for k, v in metrics.items() if not str(k).startswith(MDE_PREFIX)},
        "artifacts": {str(k): str(v) for k, v in artifacts.items()},
    }
    return (json.dumps(body, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def digest(manifest_bytes: bytes) -> str:
    return hashlib.sha256(manifest_bytes).hexdigest()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
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
    body = manifest(run.params, run.metrics, hashes)
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
        text = " ".join(str(e).split())[:200]
        return Checked(f"its artifacts could not be read ({type(e).__name__}: {text})")
    now = manifest(run.params, run.metrics, hashes)
    if digest(now) == sealed:
        return Checked(None, hashes)
    return Checked(f"{what_changed(stored, sealed, now)} (digest mismatch)", hashes)


def what_changed(stored: bytes | None, sealed: str, now: bytes) -> str:
    """What differs between the sealed record (its stored manifest, if it still hashes to ``sealed``) and ``now``."""
    if stored is None:
        return f"its record no longer matches its digest, and its {A_RECORD_DIGEST} is missing"
    if digest(stored) != sealed:
        return f"its record no longer matches its digest, and its {A_RECORD_DIGEST} was changed"
    was, is_ = json.loads(stored), json.loads(now)
    if was.get("version") != DIGEST_VERSION:
        return f"it was sealed by another version of the record digest ({was.get('version')})"
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
