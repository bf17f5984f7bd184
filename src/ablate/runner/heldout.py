"""Held-out discipline (seed 000, "防止评测泄漏"): tune on dev, run the held-out test split once.

The first job (or the first sweep) that runs a study on the test split *registers* the configurations it ran. A later
test run of a configuration outside that set means the held-out set is being used as a second dev set: it is
allowed, but warned about loudly and tagged (``ablate.test_reuse=true``) so reports show it. Re-running a registered
configuration is a repeat, tagged ``ablate.test_repeat=true`` (same numbers, no new information).

A study is one MLflow experiment on one corpus snapshot and one label version. A configuration is identified by
:func:`config_fingerprint`: every component's fingerprint except the split itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ablate import record as R
from ablate.cache import key_of

HELD_OUT_SPLITS = ("test",)


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
