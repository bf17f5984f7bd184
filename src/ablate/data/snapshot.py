"""The snapshot: a corpus folder as loaded, validated and chunked (:class:`Snapshot`), and its fingerprints.

The snapshot fingerprint is a sha256 over the content of every file read and the chunker's parameters, so two runs
with the same fingerprint indexed the very same text. :func:`ablate.data.corpus.load_corpus` builds one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ablate.data.chunking import ChunkerSpec
from ablate.data.projection import Counts
from ablate.data.types import Chunk, Document, IdTable, Qrels, Query, SubQuestion, Unit
from ablate.errors import ConfigError

FORMAT_VERSION = "ablate-corpus-1"


@dataclass(frozen=True)
class LabelProjection:
    """How a snapshot's chunk labels were carried from the labels' own chunking (``native``, corpus.yaml's chunker)
    onto this snapshot's chunks (:mod:`ablate.data.projection`): the rule, its ``min_overlap``, the label version,
    what it did (``counts`` per split; ``evidence`` per question), and what the ORIGINAL labels say at the document
    level (``doc_judgements``: a document's grade is the best grade of its labelled chunks, as lifting does;
    ``doc_evidence``: each sub-question's evidence documents; ``native_judgements``: the labels as written), so
    document-level scores never depend on the projection."""

    native: ChunkerSpec
    min_overlap: float
    rule: str
    label_version: str
    counts: dict[str, Counts]
    evidence: dict[str, Counts]
    native_judgements: dict[str, dict[str, int]]
    doc_judgements: dict[str, dict[str, int]]
    doc_evidence: dict[str, dict[str, tuple[str, ...]]]

    def record(self) -> dict[str, Any]:
        """What runs log and fingerprint (the counts are logged as metrics, not here)."""
        return {
            "from": self.native.params(),
            "rule": self.rule,
            "min_overlap": self.min_overlap,
            "label_version": self.label_version,
        }

    def split_counts(self, split: str, qids: Iterable[str]) -> Counts:
        """The label counts of ``split`` plus the evidence counts of its questions."""
        out = Counts()
        out.add(self.counts.get(split, Counts()))
        for q in qids:
            ev = self.evidence.get(q)
            if ev is not None:
                out.add(ev)
        return out


@dataclass
class Snapshot:
    """A frozen, validated corpus: documents, their chunks, queries, qrels per split, and fingerprints."""

    name: str
    root: Path
    language: str
    qrels_unit: Unit
    documents: dict[str, Document]
    chunks: list[Chunk]
    queries: dict[str, Query]
    qrels: dict[str, Qrels]
    splits: dict[str, list[str]]
    chunker: ChunkerSpec
    files: dict[str, str]  # relative path -> sha256
    manifest: dict[str, Any] = field(default_factory=dict)
    #: where ``language`` came from: ``declared`` (corpus.yaml), ``setting`` (the corpus.language setting) or
    #: ``detected`` (:func:`~ablate.data.language.corpus_language`, per document; ``auto`` or nothing declared)
    language_source: str = "declared"
    #: set when the chunk labels were projected from the labels' own chunking onto ``chunker``'s chunks
    projection: LabelProjection | None = None

    @cached_property
    def fingerprint(self) -> str:
        """sha256 over the files' content hashes and the chunker parameters."""
        return _sha(
            json.dumps(
                {"format": FORMAT_VERSION, "files": self.files, "chunker": self.chunker.params()},
                sort_keys=True,
            )
        )

    @cached_property
    def content_fingerprint(self) -> str:
        """sha256 over the documents' files only (independent of chunking and labels): the index snapshot."""
        return _sha(json.dumps({k: v for k, v in self.files.items() if k == "corpus.jsonl"}, sort_keys=True))

    @cached_property
    def chunk_to_doc(self) -> dict[str, str]:
        return {c.chunk_id: c.doc_id for c in self.chunks}

    @cached_property
    def chunk_version(self) -> dict[str, str | None]:
        return {c.chunk_id: c.version for c in self.chunks}

    @cached_property
    def chunk_text(self) -> dict[str, str]:
        return {c.chunk_id: c.text for c in self.chunks}

    @cached_property
    def chunk_index(self) -> dict[str, int]:
        return self.id_table.index

    @cached_property
    def id_table(self) -> IdTable:
        """The chunk table coded runs over this snapshot refer to (position = code), built once."""
        return IdTable.of(self.chunks)

    @property
    def identities(self) -> dict[str, list[str]]:
        return dict(self.manifest.get("identities") or {})

    @property
    def label_version(self) -> str:
        return str(self.manifest.get("label_version") or "")

    @property
    def label_provenance(self) -> dict[str, Any]:
        """Labels loaded from a committed label version (``corpus.labels``): the version it was made from
        (``label_version_parent``), who made its labels (``label_assessors``) and how many an LLM made
        (``labels_llm_made``); empty for a corpus's own ``qrels/``."""
        m = self.manifest
        if "label_version_parent" not in m:
            return {}
        return {
            "label_version_parent": str(m.get("label_version_parent") or ""),
            "label_assessors": dict(m.get("label_assessors") or {}),
            "labels_llm_made": int(m.get("labels_llm_made") or 0),
        }

    def source_qrels(self, split: str) -> Qrels:
        """The split's labels as written (before any projection): what a document-level score and a comparison
        across chunkers rest on. Without a projection, :meth:`split_qrels` itself."""
        own = self.split_qrels(split)
        if self.projection is None:
            return own
        native = self.projection.native_judgements
        return Qrels(
            {q: dict(native.get(q, {})) for q in own.judgements}, "chunk", own.name, own.source_sha256
        )

    def doc_view(self) -> Snapshot:
        """This snapshot with document-level labels derived from the ORIGINAL labels (a document's grade is the best
        of its labelled chunks; sub-question evidence lifted to documents), so a document-level score is the same
        whatever the chunker. Chunks, files and fingerprints are unchanged. Without a projection: itself (lifting at
        scoring time gives the same labels)."""
        p = self.projection
        if p is None:
            return self
        qrels = {
            s: Qrels(
                {q: dict(p.doc_judgements.get(q, {})) for q in qr.judgements},
                "doc",
                qr.name,
                qr.source_sha256,
            )
            for s, qr in self.qrels.items()
        }
        queries = {
            qid: replace(
                q,
                subquestions=tuple(
                    SubQuestion(s.sid, s.text, p.doc_evidence.get(qid, {}).get(s.sid, ()))
                    for s in q.subquestions
                ),
            )
            for qid, q in self.queries.items()
        }
        view = replace(self, qrels=qrels, queries=queries, qrels_unit="doc")
        view.__dict__.update({k: v for k, v in self.__dict__.items() if k in _SHARED})
        return view

    def split_qids(self, split: str) -> list[str]:
        if split not in self.splits:
            raise ConfigError(
                "corpus.split",
                split,
                f"the corpus {self.name!r} has splits: {', '.join(sorted(self.splits)) or 'none'}; choose one",
            )
        return self.splits[split]

    def split_qrels(self, split: str) -> Qrels:
        self.split_qids(split)
        return self.qrels.get(split) or Qrels({}, unit=self.qrels_unit, name=split)

    def allowed_mask(self, groups: Iterable[str] | None) -> np.ndarray | None:
        """Boolean mask over ``chunks`` for an identity holding ``groups`` (``None`` = no filtering)."""
        if groups is None:
            return None
        groups = list(groups)
        return np.fromiter((c.visible_to(groups) for c in self.chunks), dtype=bool, count=len(self.chunks))

    def manifest_record(self) -> dict[str, Any]:
        """What a run logs about its snapshot (JSON-ready)."""
        return {
            "name": self.name,
            "root": str(self.root),
            "language": self.language,
            "language_source": self.language_source,
            "qrels_unit": self.qrels_unit,
            "fingerprint": self.fingerprint,
            "content_fingerprint": self.content_fingerprint,
            "chunker": self.chunker.params(),
            "files": self.files,
            "n_documents": len(self.documents),
            "n_chunks": len(self.chunks),
            "n_queries": len(self.queries),
            "splits": {s: len(q) for s, q in self.splits.items()},
            "qrels": {
                s: {"sha256": q.source_sha256, "content_hash": q.content_hash(), "queries": len(q.judgements)}
                for s, q in self.qrels.items()
            },
            "label_version": self.label_version,
            **self.label_provenance,
            **({"label_projection": self.projection.record()} if self.projection is not None else {}),
        }


#: Cached values a view of a snapshot shares with it (same chunks and files).
_SHARED = ("fingerprint", "content_fingerprint", "chunk_to_doc", "chunk_version", "chunk_text", "id_table")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
