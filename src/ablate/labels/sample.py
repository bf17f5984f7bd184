"""The random human sample: which questions people check, drawn at random so that the assessor's error measured on
them stands for every question (prediction-powered inference is valid only for a random sample).

``python -m ablate.label sample --pool FILE --questions N --seed S`` draws N of the *population*: the questions of
the pool's split that a run scores (relevance: every question of the split; answers: those with gold answers, the
ones answer correctness is scored on). The draw, to re-derive it::

    population = sorted(qids)                                   # by qid, compared as strings
    picked = numpy.random.default_rng(S).choice(len(population), size=N, replace=False)
    questions = sorted(population[i] for i in picked)

It is written to the corpus's labels folder, ``human_sample.json`` (answers: ``answer_human_sample.json``;
:class:`ablate.labels.kind.Kind`)::

    {"questions": ["q003", "q011"], "seed": 7, "drawn_by": "sample", "pool": "A-B-C-top10.tsv", "population": 20,
     "split": "dev", "kind": "relevance", "created": "2026-12-05T10:00:00Z"}

and stays there (a later version records the same draw); ``python -m ablate.label commit`` copies ``questions``,
``seed``, ``drawn_by``, ``pool`` and ``population`` into the version's ``version.json``. A version whose people
checked questions without a recorded draw records them as ``{"questions": [...], "drawn_by": "hand"}``
(:func:`hand`): hand-picked questions are no random sample, and get no interval from them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ablate.cache import atomic_write_bytes
from ablate.errors import ConfigError, InputError

#: ``drawn_by`` of a draw by ``python -m ablate.label sample``, and of questions people checked without one.
DRAWN, HAND = "sample", "hand"
#: The fewest questions a sample may hold: an interval needs the spread of at least two.
MIN_QUESTIONS = 2


@dataclass(frozen=True)
class HumanSample:
    """The questions people check (sorted), how they were chosen (``drawn_by``: ``sample`` or ``hand``), and for a
    draw its ``seed``, the ``pool`` file it was drawn for and the ``population`` size it was drawn from."""

    questions: tuple[str, ...]
    seed: int | None
    drawn_by: str
    pool: str = ""
    population: int | None = None

    @property
    def random(self) -> bool:
        """Whether the questions were drawn at random (by ``sample``), not picked by hand."""
        return self.drawn_by == DRAWN

    def record(self) -> dict[str, Any]:
        """What a version's ``version.json`` holds of it."""
        if not self.random:
            return {"questions": list(self.questions), "drawn_by": self.drawn_by}
        return {
            "questions": list(self.questions),
            "seed": self.seed,
            "drawn_by": self.drawn_by,
            "pool": self.pool,
            "population": self.population,
        }


def check_count(n: object, key: str = "--questions") -> int:
    """``n`` when it is a whole number of at least :data:`MIN_QUESTIONS`; else one line naming it."""
    if isinstance(n, bool) or not isinstance(n, int) or n < MIN_QUESTIONS:
        raise ConfigError(
            key, n, f"give at least {MIN_QUESTIONS} questions (an interval needs the spread of two), e.g. 10"
        )
    return n


def check_size(n: object, population: int, key: str = "--questions") -> int:
    """``n`` when it is a whole number from :data:`MIN_QUESTIONS` to ``population``; else one line naming it."""
    n = check_count(n, key)
    if n > population:
        raise ConfigError(key, n, f"the population holds {population} question(s): give at most {population}")
    return n


def check_seed(seed: object, key: str = "--seed") -> int:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(key, seed, "give a whole number >= 0, e.g. 0")
    return seed


def draw(population: Iterable[str], n: int, seed: int) -> tuple[str, ...]:
    """``n`` of ``population`` uniformly at random without replacement, seeded (the module docstring's draw)."""
    ordered = sorted(set(population))
    check_size(n, len(ordered))
    picked = np.random.default_rng(check_seed(seed)).choice(len(ordered), size=n, replace=False)
    return tuple(sorted(ordered[int(i)] for i in picked))


def hand(questions: Iterable[str]) -> HumanSample:
    """Questions people checked without a recorded draw."""
    return HumanSample(tuple(sorted(set(questions))), None, HAND)


def write_sample(path: Path, sample: HumanSample, extra: Mapping[str, Any]) -> None:
    """The sample file at ``path`` (atomically): the sample's record and ``extra`` (split, kind, when)."""
    data = {**sample.record(), **extra}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, (json.dumps(data, ensure_ascii=False, indent=2) + "\n").encode("utf-8"))


def read_sample(path: Path) -> HumanSample | None:
    """The sample file at ``path``; ``None`` when there is none; one line naming it when it is not a sample."""
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(str(path), f"is not JSON ({e})", _REDRAW) from None
    return from_record(raw, str(path))


_REDRAW = "draw it again with python -m ablate.label sample --replace"


def from_record(raw: object, where: str) -> HumanSample:
    """A sample from its record (a sample file, or ``human_sample`` in a version's ``version.json``)."""
    if not isinstance(raw, Mapping):
        raise InputError(where, "is not a JSON object", _REDRAW)
    questions, drawn_by, seed = raw.get("questions"), raw.get("drawn_by"), raw.get("seed")
    if not isinstance(questions, list) or not all(isinstance(q, str) for q in questions):
        raise InputError(where, "has no list of question ids under 'questions'", _REDRAW)
    if drawn_by not in (DRAWN, HAND):
        raise InputError(where, f"drawn_by is {drawn_by!r}, not {DRAWN!r} or {HAND!r}", _REDRAW)
    if drawn_by == DRAWN and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise InputError(where, f"a draw without its seed (seed {seed!r})", _REDRAW)
    population = raw.get("population")
    return HumanSample(
        tuple(sorted(questions)),
        seed if drawn_by == DRAWN else None,
        str(drawn_by),
        str(raw.get("pool") or ""),
        population if isinstance(population, int) and not isinstance(population, bool) else None,
    )
