"""The vectorised placement (ids read as bytes, dedup and judgement lookup by sorting per query) against the plain
Python reference placement (``evaluate(..., vectorised=False)``): identical per-query tables, means, accounting and
unjudged exports on rankings with repeated units, long and non-ASCII ids, empty and missing queries, both budgets,
condensed lists, and with the fallback paths forced (hash collisions, an id holding the separator)."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest

import ablate.evaluation.ideal as ideal
import ablate.evaluation.placement as placement
import ablate.evaluation.retrieval as retrieval
from ablate.data.types import Hit, Qrels, Run
from ablate.evaluation import EvalSettings, evaluate

NAMES = ["d1", "doc-0000000017", "政策-旅行-2026", "x", "", "p" * 30, "d10", "d01", "a\x00", "a", "é" * 3]


def chunk_run(rng: random.Random, nq: int) -> tuple[Run, dict[str, dict[str, int]], list[str]]:
    """Chunk rankings over a small pool of documents (repeats at unit doc), some queries empty or missing, some
    unlabelled; ids of 0 to 30 bytes, ASCII and not."""
    run: dict[str, list[Hit]] = {}
    judgements: dict[str, dict[str, int]] = {}
    qids = [f"q{i}" for i in range(nq)]
    for q in qids:
        kind = rng.random()
        if kind < 0.05:
            continue  # missing from the run
        n = 0 if kind < 0.1 else rng.randint(1, 30)
        chunks = list(dict.fromkeys(f"{rng.choice(NAMES)}#{rng.randint(0, 3)}" for _ in range(n)))
        run[q] = [Hit(c, c.rsplit("#", 1)[0], float(100 - j)) for j, c in enumerate(chunks)]
        if rng.random() < 0.9:
            judgements[q] = {rng.choice(NAMES): rng.randint(-1, 3) for _ in range(rng.randint(0, 6))}
    return Run("r", run), judgements, qids


def assert_same(a, b) -> None:
    pd.testing.assert_frame_equal(a.per_query, b.per_query, check_exact=True)
    assert a.means.keys() == b.means.keys()
    for k in a.means:
        assert a.means[k] == b.means[k] or (np.isnan(a.means[k]) and np.isnan(b.means[k])), k
    assert a.accounting == b.accounting
    pd.testing.assert_frame_equal(a.unjudged, b.unjudged, check_exact=True)


SETTINGS = [
    EvalSettings(ks=(1, 3, 5, 10), unit="doc", budget=budget, unjudged=unjudged, gain=gain, missing=missing)
    for budget in ("chunks", "docs")
    for unjudged in ("nonrelevant", "condensed")
    for gain, missing in (("exponential", "zero"), ("linear", "exclude"))
]


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: f"{s.budget}-{s.unjudged}-{s.gain}-{s.missing}")
def test_vectorised_equals_reference_at_unit_doc(settings, monkeypatch):
    monkeypatch.setattr(retrieval, "_BLOCK_QUERIES", 7)  # many blocks, including a short last one
    run, judgements, qids = chunk_run(random.Random(5), 60)
    qrels = Qrels(judgements, unit="doc")
    calls: list[int] = []
    real_python = placement.block_python
    monkeypatch.setattr(placement, "block_python", lambda *a: calls.append(1) or real_python(*a))
    fast = evaluate(run, qrels, qids, settings)
    assert not calls  # every block was placed by the vectorised path
    ref = evaluate(run, qrels, qids, settings, vectorised=False)
    assert_same(fast, ref)
    assert fast.per_query["n_units"].lt(fast.per_query["n_results"]).any()  # repeats were exercised
    assert fast.accounting["missing_from_run"] > 0 and fast.accounting["empty_result"] > 0


def test_vectorised_equals_reference_at_unit_chunk_and_lifted():
    run, _, qids = chunk_run(random.Random(8), 40)
    rng = random.Random(9)
    chunk_ids = sorted({h.chunk_id for hits in run.results.values() for h in hits})
    chunk_to_doc = {c: c.rsplit("#", 1)[0] for c in chunk_ids}
    judgements = {q: {rng.choice(chunk_ids): rng.randint(0, 3) for _ in range(4)} for q in qids[::2]}
    qrels = Qrels(judgements, unit="chunk")
    for unit in ("chunk", "doc"):
        s = EvalSettings(ks=(1, 2, 4, 8, 16), unit=unit)
        assert_same(
            evaluate(run, qrels, qids, s, chunk_to_doc=chunk_to_doc),
            evaluate(run, qrels, qids, s, chunk_to_doc=chunk_to_doc, vectorised=False),
        )


def test_every_hash_colliding_falls_back_to_the_exact_path(monkeypatch):
    """With every id hashed alike, equal neighbours are checked byte for byte, the check fails, and each block is
    placed by the reference path: the figures do not change."""
    run, judgements, qids = chunk_run(random.Random(3), 30)
    qrels = Qrels(judgements, unit="doc")
    s = EvalSettings(ks=(1, 5, 10), unit="doc")
    expected = evaluate(run, qrels, qids, s, vectorised=False)
    real_tokens = placement._tokens
    used: list[bool] = []

    def colliding(ids):
        out = real_tokens(ids)
        assert out is not None
        lengths, words, h = out
        return lengths, words, np.zeros_like(h)

    real_python = placement.block_python

    def spy(*args):
        used.append(True)
        return real_python(*args)

    monkeypatch.setattr(placement, "_tokens", colliding)
    monkeypatch.setattr(placement, "block_python", spy)
    assert_same(evaluate(run, qrels, qids, s), expected)
    assert used  # the fallback really ran


def test_an_id_holding_the_separator_is_scored_exactly():
    run = Run("r", {"q": [Hit("a\x1fb", "a\x1fb", 3.0), Hit("a", "a", 2.0), Hit("b", "b", 1.0)]})
    qrels = Qrels({"q": {"a\x1fb": 2, "b": 1}}, unit="doc")
    res = evaluate(run, qrels, ["q"], EvalSettings(ks=(1, 3)))
    assert res.per_query.loc["q", "recall@1"] == 0.5
    assert res.per_query.loc["q", "recall@3"] == 1.0
    assert res.per_query.loc["q", "unjudged@3"] == 1.0
    assert_same(res, evaluate(run, qrels, ["q"], EvalSettings(ks=(1, 3)), vectorised=False))


def test_ids_equal_in_their_first_eight_bytes_stay_apart():
    """Multi-word ids that share a prefix (and one-word ids that differ only by a trailing NUL) are different
    units; the same id repeated is one unit."""
    ids = ["passage-000001-a", "passage-000001-b", "passage-000001-a", "a", "a\x00"]
    run = Run("r", {"q": [Hit(c, c, float(10 - i)) for i, c in enumerate(ids)]})
    qrels = Qrels({"q": {"passage-000001-b": 1, "a\x00": 3}}, unit="doc")
    res = evaluate(run, qrels, ["q"], EvalSettings(ks=(1, 2, 5), budget="docs"))
    row = res.per_query.loc["q"]
    assert row["n_units"] == 4
    assert row["hit@1"] == 0.0 and row["hit@2"] == 1.0 and row["rr@5"] == 0.5
    assert row["unjudged@5"] == 2.0  # passage-000001-a and a
    assert_same(res, evaluate(run, qrels, ["q"], EvalSettings(ks=(1, 2, 5), budget="docs"), vectorised=False))


def test_block_boundaries_follow_the_cell_cap(monkeypatch):
    monkeypatch.setattr(retrieval, "_BLOCK_CELLS", 100)
    widths = np.array([10, 10, 60, 5, 200, 1, 1])
    blocks = retrieval._blocks(widths)
    assert blocks[0][0] == 0 and blocks[-1][1] == len(widths)
    assert all(a < b for a, b in blocks) and all(
        b == c for (_, b), (c, _) in zip(blocks[:-1], blocks[1:], strict=True)
    )
    for a, b in blocks:
        assert b - a == 1 or (b - a) * widths[a:b].max() <= 100
    assert retrieval._blocks(np.zeros(0, dtype=np.int64)) == [(0, 0)]


@pytest.mark.parametrize("level", [1, 2])
def test_ideal_lists_from_counts_equal_the_sorted_ones(level, monkeypatch):
    """The ideal lists built from per-grade counts (few grade levels) equal those built by sorting."""
    rng = np.random.default_rng(level)
    n_labels = rng.integers(0, 30, 400)
    n_labels[:5] = 0
    grades = rng.integers(-1, 6, int(n_labels.sum()))
    counted = ideal.ideal_lists(n_labels, grades, level, depth=12)
    monkeypatch.setattr(ideal, "_IDEAL_COUNTED", 0)
    sorted_ = ideal.ideal_lists(n_labels, grades, level, depth=12)
    for a, b in zip(counted, sorted_, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert counted[2].shape[1] == 12 and (counted[2][:, 0] >= level).sum() == (counted[1] > 0).sum()


def test_judged_grades_read_every_value_exactly():
    from ablate.evaluation.coded import judged_grades

    small = [{"a": 0, "b": 3}, {}, {"c": 255}]
    assert judged_grades(small, 3).tolist() == [0, 3, 255]
    # Values a byte cannot hold take the plain path, unchanged.
    wide = [{"a": -2, "b": 300}, {"c": True}, {"d": 2.0}]
    assert judged_grades(wide, 4).tolist() == [-2, 300, 1, 2]
    assert judged_grades(wide, 4).dtype == np.int64
