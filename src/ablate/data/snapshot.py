"""The snapshot: a corpus folder as loaded, validated and chunked (:class:`Snapshot`), and its fingerprints.

The snapshot fingerprint is a sha256 over the content of every file read and the chunker's parameters, so two runs
with the same fingerprint indexed the very same text. :func:`ablate.data.corpus.load_corpus` builds one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ablate.data.chunking import ChunkerSpec
from ablate.data.types import Chunk, Document, IdTable, Qrels, Query, Unit
from ablate.errors import ConfigError

FORMAT_VERSION = "ablate-corpus-1"


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
    #: ``detected`` (:func:`~ablate.data.language.detect_language` over the documents; ``auto`` or nothing declared)
    language_source: str = "declared"

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
        }


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
