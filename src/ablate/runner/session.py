"""What the jobs of one process share: loaded snapshots, prepared stages and candidate lists.

Hydra's basic launcher runs a sweep's jobs one after another in one process (a joblib worker runs several); a
:class:`Session` lets them reuse the corpus and the built indexes instead of rebuilding them per job. Everything is
keyed by content (the corpus files' stamps; a stage's fingerprint), so a changed file or parameter is never served
stale. The disk caches (:class:`ablate.cache.Cache`) sit below this and outlive the process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, TypeVar

from ablate.cache import Cache
from ablate.data.corpus import load_corpus
from ablate.data.snapshot import Snapshot
from ablate.data.split_files import apply_split_file, file_stamp
from ablate.data.types import Run
from ablate.runner.settings import CorpusSpec
from ablate.stages.base import Fingerprint, StageContext


class Preparable(Protocol):
    def fingerprint(self) -> Fingerprint: ...

    def prepare(self, context: StageContext) -> None: ...


S = TypeVar("S", bound=Preparable)


def _stamp(root: Path) -> tuple[tuple[str, int, int], ...]:
    if not root.is_dir():
        return ()
    return tuple(
        (str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(root.rglob("*")) if p.is_file()
    )


class Session:
    """In-process memo of snapshots (one corpus at a time), prepared stages and deep candidate runs."""

    def __init__(self) -> None:
        self._snapshot_key: tuple[Any, ...] | None = None
        self._snapshot: Snapshot | None = None
        self._stages: dict[tuple[str, str, str], Any] = {}
        self.candidates: dict[str, Run] = {}

    def snapshot(self, corpus: CorpusSpec) -> Snapshot:
        """The loaded corpus (validated), reused while its files and loading settings are unchanged."""
        root = Path(corpus.path).expanduser()
        key = (
            str(root.resolve()) if root.exists() else corpus.path,
            corpus.chunker,
            corpus.language,
            corpus.name,
            corpus.extra_qrels,
            _stamp(root),
            corpus.split_file,
            file_stamp(corpus.split_file),
            corpus.min_overlap,
            corpus.doc_labels,
            corpus.labels,
        )
        if key != self._snapshot_key or self._snapshot is None:
            snap = load_corpus(
                corpus.path,
                corpus.chunker,
                language=corpus.language,
                name=corpus.name,
                extra_qrels=corpus.extra_qrels,
                min_overlap=corpus.min_overlap,
                labels=corpus.labels,
            )
            # a leakage-safe split (python -m ablate.split) reassigns questions and labels
            if corpus.split_file:
                snap = apply_split_file(snap, corpus.split_file)
            # eval.unit=doc: document labels from the original labels, whatever the chunker
            if corpus.doc_labels:
                snap = snap.doc_view()
            self._snapshot_key, self._snapshot = key, snap
            self._stages.clear()  # one corpus at a time keeps memory bounded across corpus sweeps
            self.candidates.clear()
        return self._snapshot

    def prepared(self, stage: S, snapshot: Snapshot, cache: Cache, show_progress: bool) -> S:
        """``stage`` (already bound) prepared over ``snapshot``: the instance an earlier job prepared when one with
        the same fingerprint exists, else this one, prepared now."""
        fp = stage.fingerprint()
        key = (snapshot.fingerprint, fp.key, str(cache.root))
        done = self._stages.get(key)
        if done is not None:
            return done
        stage.prepare(StageContext(snapshot, cache, show_progress))
        self._stages[key] = stage
        return stage

    def stage_stats(self, extra: Any = ()) -> dict[int, tuple[str, dict[str, float]]]:
        """``id(stage) -> (name, a copy of its stats)`` for every prepared stage and ``extra`` ones: a job compares
        two of these to count what *it* did, whichever instance (its own or one an earlier job prepared) did it."""
        out = {id(s): (s.name, dict(s.stats)) for s in self._stages.values()}
        out.update({id(s): (s.name, dict(s.stats)) for s in extra})
        return out


_SHARED: Session | None = None


def shared_session() -> Session:
    """The process's session (created on first use): what a sweep's jobs in this process share."""
    global _SHARED
    if _SHARED is None:
        _SHARED = Session()
    return _SHARED
