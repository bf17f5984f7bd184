"""What is judged: the two kinds of labels one labelling core serves.

* ``relevance``: how relevant a unit (a chunk, or a document for document labels) is to a question, on the corpus's
  grade legend (:mod:`ablate.labels.legend`). Pools of (question, unit) pairs come from runs' rankings; the
  judgements become label versions (``python -m ablate.label commit``).
* ``answers``: how correct an answer a run wrote is (``correct`` / ``partly`` / ``wrong``). Pools of distinct answers
  come from runs' ``answers.csv``; the grades validate the answer rule and an LLM answer judge.

A :class:`Kind` names where each kind lives in ``labels/<corpus>/`` (its journal, its pools folder and file ending,
its random human sample) and which field names the judged item (``unit``, ``answer_sha256``): every label command
takes ``--kind``, and the journal, the pool files, the sample, the page, the validation and a committed version read
what differs from here.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    name: str
    journal: str  # the journal's file name in labels/<corpus>/
    pools: str  # the pools' folder in labels/<corpus>/
    suffix: str  # a pool file's ending
    item: str  # the field that names the judged item, beside qid (pool rows, journal lines, the page's form)
    items: str  # what a pool holds, in a sentence: "(question, unit) pairs", "answers"
    sample: str  # the random human sample's file in labels/<corpus>/ (python -m ablate.label sample)
    sample_key: str  # its key in a committed version's version.json


RELEVANCE = Kind(
    "relevance",
    "journal.jsonl",
    "pools",
    ".tsv",
    "unit",
    "(question, unit) pairs",
    "human_sample.json",
    "human_sample",
)
ANSWERS = Kind(
    "answers",
    "answer_journal.jsonl",
    "answer_pools",
    ".jsonl",
    "answer_sha256",
    "answers",
    "answer_human_sample.json",
    "answer_human_sample",
)
KINDS = {k.name: k for k in (RELEVANCE, ANSWERS)}

#: The grades of an answer, best first, and their order for the graded (3-level) agreement.
ANSWER_GRADES = ("correct", "partly", "wrong")
ANSWER_LEVEL = {"correct": 2, "partly": 1, "wrong": 0}


def answer_sha256(answer: str) -> str:
    """The name of an answer: the SHA-256 of its UTF-8 text (exactly as the run wrote it)."""
    return hashlib.sha256(answer.encode("utf-8")).hexdigest()
