"""Where a corpus's growing labels live: ``<labels dir>/<corpus>/`` (``./labels/demo/`` by default).

::

    labels/<corpus>/
        pools/<name>.tsv        qid, unit, runs, best_rank (python -m ablate.label pool)
        pools/<name>.json       what the pool was made from (corpus, unit, label version, runs, depth)
        journal.jsonl           every judgement, one JSON object per line, appended as it is made
        answer_pools/<name>.jsonl  distinct answers of some runs, to grade (python -m ablate.label pool --kind answers)
        answer_pools/<name>.json   what the answers pool was made from; <name>.validation/ its validate report
        answer_journal.jsonl    every grade of an answer (correct / partly / wrong), appended as it is made
        human_sample.json       the random sample of questions people check (python -m ablate.label sample);
                                answer_human_sample.json for answers
        validation/<assessor>/  validation.md, validation.json, pairs.csv (python -m ablate.label validate)
        versions/<NAME>/        a committed label version: the qrels files, version.json, CHANGELOG.md

The corpus name and every name given on the command line become folder or file names, so they must be plain names
(:func:`ablate.safenames.name_problem`) and every path is built through :func:`ablate.safenames.inside`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ablate.errors import ConfigError
from ablate.labels.kind import RELEVANCE, Kind
from ablate.safenames import PLAIN_NAME_RULE, inside, name_problem

#: The default labels folder, relative to the working directory (like ``./outputs/``).
DEFAULT_DIR = "labels"


def check_name(key: str, name: str) -> str:
    """``name`` when it is a plain name, else a one-line :class:`ConfigError` naming ``key``."""
    problem = name_problem(name)
    if problem:
        raise ConfigError(key, name, f"{problem}; give {PLAIN_NAME_RULE}")
    return name


def assessor_folder(assessor: str) -> str:
    """A folder name for an assessor identity (``llm:qwen2.5-coder-1.5b-instruct@ab12...`` -> ``llm-qwen2.5-...``)."""
    return re.sub(r"[^\w.@+-]+", "-", assessor).strip("-.") or "assessor"


@dataclass(frozen=True)
class Workspace:
    """The labels folder of one corpus: ``root / corpus``."""

    root: Path
    corpus: str

    def __post_init__(self) -> None:
        check_name("corpus.name", self.corpus)

    @property
    def dir(self) -> Path:
        return inside(Path(self.root), self.corpus)

    def journal_of(self, kind: Kind) -> Path:
        """``journal.jsonl`` (relevance) or ``answer_journal.jsonl`` (answers)."""
        return self.dir / kind.journal

    @property
    def journal(self) -> Path:
        return self.journal_of(RELEVANCE)

    def sample_of(self, kind: Kind) -> Path:
        """``human_sample.json`` (relevance) or ``answer_human_sample.json`` (answers)."""
        return self.dir / kind.sample

    @property
    def versions(self) -> Path:
        return self.dir / "versions"

    def pool(self, name: str, kind: Kind = RELEVANCE) -> Path:
        """``pools/<name>.tsv`` (relevance) or ``answer_pools/<name>.jsonl`` (answers)."""
        return inside(self.dir / kind.pools, check_name("--name", name) + kind.suffix)

    def version(self, name: str) -> Path:
        """``versions/<name>/``."""
        return inside(self.versions, check_name("--version", name))

    def validation(self, assessor: str) -> Path:
        """``validation/<assessor folder>/``."""
        return inside(self.dir / "validation", assessor_folder(assessor))
