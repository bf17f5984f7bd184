"""The retrievers' shared helpers (``stages/retrievers/base.py``) and the run type (``data/types.py``): the chunk
table, the mask and depth checks, the tie rule and ``Run.truncated``."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from ablate.data.types import TIE_RULE, Chunk, Hit, Run, rank_hits
from ablate.errors import ConfigError, InputError
from ablate.stages.retrievers.base import ChunkTable, check_depth, check_mask, chunks_sha256, top_by_tie_rule

CHUNKS = [
    Chunk("b#2", "B", "second text", version="2026"),
    Chunk("a", "A", "first text"),
    Chunk("b#10", "B", "third text", version="2026"),
]


def _hand_sha(chunks):
    h = hashlib.sha256()
    for c in chunks:
        h.update(c.chunk_id.encode() + b"\x00" + hashlib.sha256(c.text.encode()).digest())
    return h.hexdigest()


def test_chunk_table_records_the_content_hash_ids_and_id_order():
    t = ChunkTable.of(CHUNKS)
    assert t.sha256 == chunks_sha256(CHUNKS) == _hand_sha(CHUNKS)
    assert t.sha256 != _hand_sha(list(reversed(CHUNKS)))  # order-sensitive
    assert (t.ids.chunk_ids, t.ids.doc_ids, t.ids.versions) == (
        ["b#2", "a", "b#10"],
        ["B", "A", "B"],
        ["2026", None, "2026"],
    )
    # plain string order: "a" < "b#10" < "b#2" (not numeric order)
    assert t.id_order.tolist() == [2, 0, 1]


def test_tie_rule_uses_the_table_order_score_desc_then_id_asc():
    t = ChunkTable.of(CHUNKS)
    scores = np.array([1.0, 1.0, 1.0])
    keep = np.ones(3, dtype=bool)
    assert top_by_tie_rule(scores, 3, t.id_order, keep).tolist() == [1, 2, 0]
    assert top_by_tie_rule(np.array([0.5, 0.2, 0.9]), 2, t.id_order, keep).tolist() == [2, 0]
    assert top_by_tie_rule(scores, 3, t.id_order, np.array([False, True, False])).tolist() == [1]
    assert top_by_tie_rule(scores, 3, t.id_order, np.zeros(3, dtype=bool)).tolist() == []
    hits = [Hit(cid, did, 1.0) for cid, did in zip(t.ids.chunk_ids, t.ids.doc_ids, strict=True)]
    assert [h.chunk_id for h in rank_hits(hits)] == ["a", "b#10", "b#2"]
    assert TIE_RULE == "score desc, then id asc"


def test_check_mask_reports_the_shapes_and_the_fix():
    with pytest.raises(InputError) as e:
        check_mask(np.ones(3, dtype=bool), 4)
    assert e.value.where == "allowed mask"
    assert e.value.problem == "has shape (3,), expected (4,)"
    assert "snapshot's chunks, in order" in e.value.fix
    assert str(e.value) == (
        "allowed mask: has shape (3,), expected (4,). Fix: build it over the snapshot's chunks, in order"
    )
    assert check_mask(np.array([1, 0, 2]), 3).tolist() == [True, False, True]
    assert check_mask(None, 3) is None


def test_check_depth_names_the_key_and_the_bad_value():
    for bad in (0, -3, True, 2.0, "5"):
        with pytest.raises(ConfigError) as e:
            check_depth(bad)
        assert e.value.key == "depth" and e.value.value == bad
        assert str(e.value) == f"depth={bad!r} is not valid; a positive integer"
    assert check_depth(1) == 1 and check_depth(np.int64(7)) == 7


def test_truncated_run_keeps_its_name_and_a_copy_of_its_meta():
    meta = {"tie_rule": "score desc, then id asc", "fusion": "rrf"}
    run = Run("hyb", {"q1": [Hit(c, c, 3.0 - i) for i, c in enumerate("xyz")], "q2": []}, meta)
    cut = run.truncated(2)
    assert cut.name == "hyb"
    assert cut.meta == meta and cut.meta is not run.meta
    assert {q: [h.chunk_id for h in hs] for q, hs in cut.results.items()} == {"q1": ["x", "y"], "q2": []}
    assert len(run.get("q1")) == 3  # the original is not cut
