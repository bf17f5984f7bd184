"""How each row of a report stands to the held-out split, by one rule (:data:`ablate.record.HELD_OUT_SPLITS`).

A row on a held-out split is *test-tuned* when its run carries ``ablate.test_reuse=true`` (its configuration was
changed after the test split had been seen in the study), else *dev-tuned*; a row on any other split is a
*dev-split* row. A table that mixes dev-tuned and test-tuned rows, or dev-split rows with held-out rows, gets a
``HELD-OUT MIX`` line above it naming the rows and why; test-tuned rows are marked ``†`` (always) and dev-split rows
``‡`` (in a table with held-out rows). The report's warnings (:func:`split_warnings`) read held-out splits the same way.

A run of an exploratory pilot (a corpus with one labels file, tag ``ablate.heldout=exploratory``) is on no held-out
split, whatever its split is called: its row is *exploratory*, counted with the dev-split rows beside held-out rows,
and a table with such rows says "no held-out split: exploratory" above it with the command that makes one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ablate import record as R
from ablate.record import RecordedRun

#: Row markers of the held-out marking (:func:`heldout_marking`).
TEST_TUNED_MARK, DEV_SPLIT_MARK = "†", "‡"
DEV_SPLIT, DEV_TUNED, TEST_TUNED = "dev-split", "dev-tuned", "test-tuned"
EXPLORATORY_KIND = "exploratory"
#: the start of the line above a table of exploratory rows (:data:`ablate.runner.heldout.EXPLORATORY` says the same)
EXPLORATORY_LINE = "no held-out split: exploratory"


@dataclass(frozen=True)
class HeldOutMarking:
    """How each row of a table stands to the held-out split (:func:`heldout_marking`)."""

    kinds: dict[
        str, str
    ]  # run id -> "dev-split" | "dev-tuned" | "test-tuned" | "exploratory" | "" (split unknown)
    marks: dict[str, str]  # run id -> "", " †" (test-tuned) or " ‡" (dev-split row beside held-out rows)
    warning: str = ""  # the line printed above the table ("" when nothing is mixed and nothing is test-tuned)

    @property
    def exploratory_only(self) -> bool:
        """The line above the table is the pilot's note, not a warning about mixed or test-tuned rows."""
        return self.warning.startswith(EXPLORATORY_LINE)

    @property
    def mixed(self) -> bool:
        return self.warning.startswith("HELD-OUT MIX")

    def label(self, run_id: str, label: str) -> str:
        return label + self.marks.get(run_id, "")

    def labels(self, labels: dict[str, str]) -> dict[str, str]:
        return {rid: self.label(rid, lab) for rid, lab in labels.items()}


def is_held_out(split: str | None) -> bool:
    """Whether ``split`` is a held-out split (:data:`ablate.record.HELD_OUT_SPLITS`): the one rule of this module."""
    return bool(split) and split in R.HELD_OUT_SPLITS


def is_exploratory(run: RecordedRun) -> bool:
    """Whether ``run`` is a run of an exploratory pilot (tag ``ablate.heldout=exploratory``): on no held-out split."""
    return run.tags.get(R.T_HELDOUT) == "exploratory"


def _pilot_line(runs: Sequence[RecordedRun], labels: dict[str, str]) -> str:
    paths = sorted({str(r.params.get("corpus.path") or "CORPUS_DIR") for r in runs})
    return (
        f"{EXPLORATORY_LINE} ({_names([r.run_id for r in runs], labels)}): every labelled question is scored and "
        "settings are picked on the same questions, so the scores read high; for a held-out test run python -m "
        f"ablate.split {paths[0] if len(paths) == 1 else 'CORPUS_DIR'}, tune with corpus.split_file=<its split.tsv> "
        "corpus.split=dev, then run the chosen settings once on corpus.split=test"
    )


def tuning_of(run: RecordedRun) -> str:
    """``"test-tuned"``: a run on a held-out split (:data:`ablate.record.HELD_OUT_SPLITS`) that carries
    ``ablate.test_reuse=true`` (the runner tags a test run whose configuration is new to the study after test had
    been run: its settings were changed after its test scores had been seen); ``"dev-tuned"``: any other run on a
    held-out split (the first test run or sweep of the study, or a repeat of it); ``"dev-split"``: a run on any other
    split; ``"exploratory"``: a run of a pilot (no held-out split, tag ``ablate.heldout=exploratory``); ``""``: the
    run records no split."""
    if not run.split:
        return ""
    if is_exploratory(run):
        return EXPLORATORY_KIND
    if not is_held_out(run.split):
        return DEV_SPLIT
    return TEST_TUNED if str(run.tags.get(R.T_TEST_REUSE, "")).lower() == "true" else DEV_TUNED


def _names(run_ids: Sequence[str], labels: dict[str, str]) -> str:
    shown = [labels.get(rid, rid[:8]) for rid in run_ids[:8]]
    return ", ".join(shown) + (f" and {len(run_ids) - 8} more" if len(run_ids) > 8 else "")


def heldout_marking(runs: Sequence[RecordedRun], labels: dict[str, str]) -> HeldOutMarking:
    """Mark the rows of one table: test-tuned rows ``†``; when the table also has dev-split rows beside held-out
    rows, those ``‡``. The warning line (for above the table) names the rows and why when the table mixes dev-tuned
    with test-tuned rows or dev-split with held-out rows, or, unmixed, when some row is test-tuned."""
    kinds = {r.run_id: tuning_of(r) for r in runs}
    by: dict[str, list[str]] = {DEV_SPLIT: [], DEV_TUNED: [], TEST_TUNED: []}
    for rid, kind in kinds.items():
        if kind:  # an exploratory row stands to held-out rows as a dev-split row does
            by[DEV_SPLIT if kind == EXPLORATORY_KIND else kind].append(rid)
    held = by[DEV_TUNED] + by[TEST_TUNED]
    split_mix = bool(by[DEV_SPLIT]) and bool(held)
    marks = {rid: f" {TEST_TUNED_MARK}" for rid in by[TEST_TUNED]}
    if split_mix:
        marks.update({rid: f" {DEV_SPLIT_MARK}" for rid in by[DEV_SPLIT]})
    shown = {rid: labels.get(rid, rid[:8]) for rid in kinds}
    why = (
        f"{TEST_TUNED_MARK} test-tuned rows ({_names(by[TEST_TUNED], shown)}) were run on the held-out split with a "
        "configuration changed after its scores had been seen (tag ablate.test_reuse=true): test served as a second "
        "dev set and they read high"
    )
    reasons = []
    if by[TEST_TUNED] and by[DEV_TUNED]:
        reasons.append("dev-tuned and test-tuned settings")
    if split_mix:
        reasons.append("dev-split rows with held-out rows")
    pilots = [r for r in runs if kinds[r.run_id] == EXPLORATORY_KIND]
    if not reasons:
        warning = f"TEST-TUNED: {why}" if by[TEST_TUNED] else (_pilot_line(pilots, shown) if pilots else "")
        return HeldOutMarking(kinds, marks, warning)
    parts = []
    if by[TEST_TUNED]:
        parts.append(why)
    if by[DEV_TUNED]:
        parts.append(
            f"dev-tuned held-out rows (settings chosen before test was seen): {_names(by[DEV_TUNED], shown)}"
        )
    if split_mix:
        parts.append(
            f"{DEV_SPLIT_MARK} dev-split rows ({_names(by[DEV_SPLIT], shown)}) are scored on the queries settings are "
            "tuned on, not on the held-out split"
        )
    warning = (
        f"HELD-OUT MIX: this table mixes {' and '.join(reasons)}; {'; '.join(parts)}. Do not pick settings across "
        "these rows: compare dev rows on dev, and read held-out rows only for settings chosen on dev"
    )
    return HeldOutMarking(kinds, marks, warning)


def split_warnings(records: Sequence[RecordedRun], kind: str) -> list[str]:
    """The report's warnings about splits: runs that mix a held-out split with others, and a sweep of several cells
    on a held-out split (tuning on it)."""
    records = [r for r in records if not is_exploratory(r)]  # a pilot's split is held out by no one
    splits = {r.split for r in records}
    held = sorted(str(s) for s in splits if is_held_out(s))
    name = " and ".join(held)
    out = []
    if len(splits) > 1 and held:
        out.append(
            f"SPLIT MIX: the runs mix the held-out {name} split with "
            + ", ".join(sorted(str(s) for s in splits if not is_held_out(s)))
            + f": tune on dev, then run the chosen setting once on {name}"
        )
    elif held and len(splits) == 1 and kind == "sweep" and len(records) > 1:
        confirmed = all(r.tags.get(R.T_TEST_CONFIRMED) == "true" for r in records)
        out.append(
            f"a parameter sweep on the held-out {name} split is tuning on it"
            + (
                " (it was run with --confirm-test as the final run: report the cell chosen on dev)"
                if confirmed
                else ""
            )
            + f": pick settings on dev, then run the chosen one on {name} once"
        )
    return out
