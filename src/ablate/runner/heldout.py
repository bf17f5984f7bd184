"""Held-out discipline (seed 000, "防止评测泄漏"): tune on dev, run the held-out test split once.

The first job (or the first sweep) that runs a study on the test split *registers* the configurations it ran. A later
test run of a configuration outside that set means the held-out set is being used as a second dev set: it is
allowed, but warned about loudly and tagged (``ablate.test_reuse=true``) so reports show it. Re-running a registered
configuration is a repeat, tagged ``ablate.test_repeat=true`` (same numbers, no new information).

A study is one MLflow experiment on one corpus snapshot and one label version. A configuration is identified by
:func:`config_fingerprint`: every component's fingerprint except the split itself.

A *sweep* (``-m``, more than one cell) with any cell on a held-out split is tuning on test unless the user says it is
the one final run of settings chosen on dev: :func:`check_test_sweep` refuses it before anything runs unless it is
confirmed (``--confirm-test`` on the command line, or ``heldout.confirm_test=true``). A single run on test needs no
confirmation: it is the "run once" case, and a later changed configuration is caught by the reuse tagging above.
Confirmed test runs are tagged ``ablate.test_confirmed=true``.

A corpus with exactly one labels file (``qrels/test.tsv``, ``qrels/labels.tsv``, ...) and no split file has no
held-out split: it is an *exploratory pilot* (:func:`pilot_corpus`). Its runs score that file's questions whatever
``corpus.split`` says (there is no other split to run), sweep freely, are never judged as test runs, and say
"no held-out split: exploratory" in their tags (``ablate.heldout=exploratory``), the console and the report, with the
command that makes a held-out split (``python -m ablate.split CORPUS_DIR``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ablate import record as R
from ablate.cache import key_of
from ablate.data.corpus import pilot_split
from ablate.errors import AblateError
from ablate.record import HELD_OUT_SPLITS
from ablate.runner.settings import CorpusSpec

__all__ = [
    "EXPLORATORY",
    "HELD_OUT_SPLITS",
    "HeldOutSweepRefused",
    "HeldOutVerdict",
    "PriorTestRun",
    "check_test_sweep",
    "config_fingerprint",
    "confirmed_tags",
    "exploratory_line",
    "exploratory_tags",
    "judge_test_run",
    "pilot_corpus",
]

#: What every table of an exploratory pilot says (console, report, the tag ``ablate.exploratory``).
EXPLORATORY = "no held-out split: exploratory"


class HeldOutSweepRefused(AblateError):
    """A sweep on the held-out split that the user did not confirm as the final run."""


def pilot_corpus(corpus: CorpusSpec, split_named: bool = False) -> tuple[CorpusSpec, str | None]:
    """``corpus`` as an exploratory pilot when its folder has one labels file and no split file is given
    (:func:`ablate.data.corpus.pilot_split`): its ``split`` is that file's (a corpus with one labels file has no
    other split to run, so ``corpus.split``, ``test`` by default for ``corpus=beir``, is not asked to match it) and
    ``exploratory`` is set. Returns the spec and a note when ``corpus.split`` (a default) named another split; other
    corpora unchanged.

    ``split_named``: the user typed ``corpus.split`` (on the command line). Then a split the folder does not have is
    refused (:class:`~ablate.errors.ConfigError`) instead of running the one labels file: asking for ``dev`` and
    scoring the ``test`` questions would tune on the held-out set."""
    if corpus.split_file:
        return corpus, None
    split = pilot_split(corpus.path)
    if split is None:
        return corpus, None
    if split_named and corpus.split != split:
        from ablate.errors import ConfigError

        raise ConfigError(
            "corpus.split",
            corpus.split,
            f"the corpus {corpus.path} has one labels file, qrels/{split}.tsv, so its only split is {split!r}. "
            f"Fix: make a dev and a test side with python -m ablate.split {corpus.path} and tune with "
            f"corpus.split_file=<its split.tsv> corpus.split=dev (docs/your-data.md, Dev and test); or drop "
            f"corpus.split to run an exploratory pilot on all {split!r} questions",
        )
    note = None
    if corpus.split != split:
        note = (
            f"note: corpus.split={corpus.split}: the corpus has one labels file, qrels/{split}.tsv, so its split "
            f"{split!r} runs ({EXPLORATORY})"
        )
    return replace(corpus, split=split, exploratory=True), note


def exploratory_line(corpus_path: str) -> str:
    """The line a pilot's console output and report carry: what it is and how to get a held-out test."""
    return (
        f"{EXPLORATORY}: every labelled question is scored and settings are picked on the same questions, so the "
        f"scores read high; for a held-out test run python -m ablate.split {corpus_path}, tune with "
        "corpus.split_file=<its split.tsv> corpus.split=dev, then run the chosen settings once on corpus.split=test"
    )


def exploratory_tags() -> dict[str, str]:
    """Tags of a pilot's run: ``ablate.heldout=exploratory`` and ``ablate.exploratory`` saying so."""
    return {R.T_HELDOUT: "exploratory", R.T_EXPLORATORY: EXPLORATORY}


def check_test_sweep(
    splits: Sequence[str], confirmed: Sequence[bool], multirun: bool, exploratory: Sequence[bool] = ()
) -> None:
    """Refuse a sweep that would run cells on a held-out split without confirmation.

    ``splits``/``confirmed``: each cell's ``corpus.split`` and whether that cell was confirmed (``--confirm-test`` or
    ``heldout.confirm_test=true``); ``exploratory``: whether the cell's corpus is a pilot (no held-out split, so never
    refused). Refused when ``multirun`` and there is more than one cell and some held-out cell is not confirmed. A
    single run (or a one-cell ``-m``) is never refused: that is running test once.
    """
    if not multirun or len(splits) < 2:
        return
    pilot = list(exploratory) or [False] * len(splits)
    held = [i for i, s in enumerate(splits) if s in HELD_OUT_SPLITS and not pilot[i]]
    if not held or all(confirmed[i] for i in held):
        return
    split = splits[held[0]]
    of = f"{len(held)} cells" if len(held) == len(splits) else f"{len(held)} of its {len(splits)} cells"
    raise HeldOutSweepRefused(
        f"corpus.split={split}: this sweep would run {of} on the held-out split {split!r}; picking settings by their "
        "scores on test is tuning on test, and its scores then read high. Fix: tune on dev (corpus.split=dev) and "
        "pass --confirm-test (or set heldout.confirm_test=true) only when this is the one final run of settings "
        "chosen on dev"
    )


def confirmed_tags(split: str, confirmed: bool) -> dict[str, str]:
    """``{ablate.test_confirmed: "true"}`` for a confirmed run on a held-out split, else nothing."""
    return {R.T_TEST_CONFIRMED: "true"} if confirmed and split in HELD_OUT_SPLITS else {}


def config_fingerprint(components: Mapping[str, Mapping[str, Any]], eval_settings: Mapping[str, Any]) -> str:
    comps = {k: dict(v) for k, v in components.items()}
    snap = comps.get("snapshot", {})
    for k in ("split", "qrels"):
        snap.pop(k, None)
    return key_of(comps, dict(eval_settings))


@dataclass(frozen=True)
class PriorTestRun:
    run_id: str
    config: str  # config fingerprint
    sweep: str | None  # the sweep it belonged to (None: a single run)
    start_time: int


@dataclass
class HeldOutVerdict:
    status: str  # "first", "same-session", "repeat", "reuse"
    registered_by: str | None = None
    previous: list[str] = field(default_factory=list)
    message: str = ""

    def tags(self) -> dict[str, str]:
        t = {R.T_HELDOUT: self.status}
        if self.status == "reuse":
            t[R.T_TEST_REUSE] = "true"
            t[R.T_TEST_REUSE_PREVIOUS] = ",".join(self.previous[:20])
        if self.status == "repeat":
            t[R.T_TEST_REPEAT] = "true"
        if self.status == "first":
            t[R.T_TEST_FIRST] = "true"
        return t


def judge_test_run(prior: Sequence[PriorTestRun], config: str, sweep: str | None) -> HeldOutVerdict:
    """Classify a new test-split run against the study's earlier test runs (finished or not, oldest first)."""
    if not prior:
        return HeldOutVerdict("first")
    first = min(prior, key=lambda p: p.start_time)
    session = [p for p in prior if first.sweep is not None and p.sweep == first.sweep] or [first]
    registered = {p.config for p in session}
    if sweep is not None and sweep == first.sweep:
        return HeldOutVerdict("same-session", registered_by=first.run_id)
    if config in registered:
        return HeldOutVerdict("repeat", registered_by=first.run_id)
    previous = [p.run_id for p in sorted(prior, key=lambda p: p.start_time)]
    msg = (
        "WARNING: the held-out test split was already run in this study with another configuration "
        f"(first test run {first.run_id}); running test again with a changed configuration turns it into a second "
        "dev set and its scores will read high. Tune on corpus.split=dev; this run is tagged ablate.test_reuse=true."
    )
    return HeldOutVerdict("reuse", registered_by=first.run_id, previous=previous, message=msg)
