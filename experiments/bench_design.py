"""Benchmark: the small measurements behind implementation choices in src/ (their docstrings state the choice; the
figures live here).

    /work/main/.venv/bin/python experiments/bench_design.py            # writes experiments/results/bench_design.md

Each contender pair runs side by side in one process, in rounds of alternating order (``_common.interleaved``); the
page gives the best round of each and their ratio (the machine is shared: compare ratios, not absolute seconds).

* ``Hit``: a ``slots`` dataclass (what ``ablate.data.types.Hit`` is) against the same fields ``frozen``: making
  100,000 hits.
* ``_non_space``: ``ablate.data.language`` counts non-space characters with ``str.split`` (in C) against a Python loop
  over the characters, on SciFact's corpus texts.
* ``_installed_version``: ``ablate.stages.base`` memoises ``importlib.metadata.version``; one uncached call.
* ``text_csv``: ``ablate.tables.text_csv`` against ``DataFrame.to_csv(index=False)`` (the same text) on 80,000 rows
  of the unjudged export's shape (query id, chunk id, rank).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from importlib import metadata

from _common import Report, dataset_path, interleaved, machine_facts, say

from ablate.data.language import _non_space
from ablate.data.types import Hit
from ablate.tables import text_csv


@dataclasses.dataclass(frozen=True)
class FrozenHit:
    chunk_id: str
    doc_id: str
    score: float
    version: str | None = None


def _hits(cls: type, n: int) -> None:
    for i in range(n):
        cls(f"c{i}", f"d{i}", float(i), None)


def _loop_non_space(text: str) -> int:
    return sum(1 for ch in text if not ch.isspace())


def _texts(dataset: str) -> list[str]:
    with open(dataset_path(dataset) / "corpus.jsonl", encoding="utf-8") as fh:
        return [f"{d.get('title', '')} {d.get('text', '')}" for d in map(json.loads, fh)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--dataset", default="scifact", help="BEIR folder whose corpus texts the language count reads"
    )
    args = ap.parse_args(argv)

    import pandas as pd

    n_hits, n_rows = 100_000, 80_000
    texts = _texts(args.dataset)
    frame = pd.DataFrame(
        {"query_id": [f"q{i // 100}" for i in range(n_rows)], "chunk_id": [f"doc{i}" for i in range(n_rows)]}
    ).assign(rank=[i % 100 + 1 for i in range(n_rows)])
    assert text_csv(frame) == frame.to_csv(index=False)
    assert sum(map(_non_space, texts)) == sum(map(_loop_non_space, texts))

    pairs = {
        "Hit: slots dataclass": (
            "Hit, 100k made",
            lambda: _hits(Hit, n_hits),
            "frozen",
            lambda: _hits(FrozenHit, n_hits),
        ),
        "_non_space: str.split": (
            "non-space count",
            lambda: sum(map(_non_space, texts)),
            "per-character loop",
            lambda: sum(map(_loop_non_space, texts)),
        ),
        "text_csv": ("80k rows to CSV", lambda: text_csv(frame), "to_csv", lambda: frame.to_csv(index=False)),
    }
    rows = []
    for name, (what, ours, other_name, other) in pairs.items():
        say(f"{name}: {args.rounds} rounds")
        tp = interleaved({"ours": ours, other_name: other}, args.rounds, log=say)
        rows.append(
            [
                what,
                name,
                f"{tp.best('ours'):.4f}",
                other_name,
                f"{tp.best(other_name):.4f}",
                f"{tp.best(other_name) / tp.best('ours'):.1f}x",
            ]
        )
    say("importlib.metadata.version: 20 uncached calls")
    tp = interleaved(
        {"version": lambda: [metadata.version("numpy") for _ in range(20)]}, args.rounds, log=say
    )
    per_call_ms = tp.best("version") / 20 * 1000

    rep = Report(
        "design", "Small measurements behind implementation choices in src/", __doc__.split("\n\n")[0]
    )
    rep.heading("Machine")
    rep.facts(machine_facts(["pandas"]))
    rep.heading("Results (best round, wall seconds)")
    rep.table(["work", "ours", "seconds", "instead", "seconds", "ours faster by"], rows)
    rep.para(
        f"`importlib.metadata.version` (uncached): {per_call_ms:.2f} ms a call; every stage fingerprint asks for "
        "several libraries' versions, so `ablate.stages.base` asks once per process."
    )
    rep.emit()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
