"""RRF against the worked example of seed 000 (混合检索: 先对齐身份, 再融合名次)."""

import pytest

from ablate.data.types import Hit, Run
from ablate.errors import ConfigError
from ablate.stages.fusion.rrf import RRF, rrf, rrf_scores
from ablate.testing.contracts import FuserContract

BM25 = ["4.2", "6.1", "3.5"]
DENSE = ["5.3", "6.1", "4.2"]


def test_seed_example_k60():
    s = rrf_scores([BM25, DENSE], k=60)
    assert s["4.2"] == pytest.approx(1 / 61 + 1 / 63)
    assert s["6.1"] == pytest.approx(2 / 62)
    assert round(s["4.2"], 4) == round(s["6.1"], 4) == 0.0323
    assert round(s["5.3"], 4) == 0.0164
    assert round(s["3.5"], 4) == 0.0159
    # both-list items first; 4.2 edges 6.1 in the fifth decimal
    assert sorted(s, key=lambda c: -s[c]) == ["4.2", "6.1", "5.3", "3.5"]


def test_seed_example_k1():
    s = rrf_scores([BM25, DENSE], k=1)
    assert s["4.2"] == pytest.approx(0.75)
    assert round(s["6.1"], 2) == 0.67
    assert s["5.3"] == pytest.approx(0.5)


def _run(name, ids):
    return Run(name, {"q": [Hit(c, c.split("#")[0], 100.0 - i) for i, c in enumerate(ids)]})


def test_rrf_run_uses_ranks_only_and_window():
    a = _run("bm25", ["a", "b", "c", "d"])
    b = Run("dense", {"q": [Hit(c, c, s) for c, s in [("d", 0.91), ("b", 0.90), ("e", 0.2)]]})
    fused = rrf([a, b], k=60, window=2)
    ids = [h.chunk_id for h in fused.get("q")]
    # window=2: a,b from bm25; d,b from dense -> b in both lists comes first; c and e never enter
    assert ids[0] == "b"
    assert set(ids) == {"a", "b", "d"}
    # scores are RRF values, not the inputs' scores
    assert fused.get("q")[0].score == pytest.approx(1 / 62 + 1 / 62)
    # rescaling a retriever's scores changes nothing
    b2 = Run("dense", {"q": [Hit(h.chunk_id, h.doc_id, h.score * 1000 + 7) for h in b.get("q")]})
    assert [h.chunk_id for h in rrf([a, b2], k=60, window=2).get("q")] == ids


def test_rrf_ties_follow_declared_rule_and_queries_union():
    a = Run("x", {"q1": [Hit("z", "z", 1.0)], "q2": [Hit("m", "m", 1.0)]})
    b = Run("y", {"q1": [Hit("y", "y", 1.0)]})
    fused = rrf([a, b], k=60)
    assert [h.chunk_id for h in fused.get("q1")] == ["y", "z"]  # equal RRF score -> chunk id asc
    assert [h.chunk_id for h in fused.get("q2")] == ["m"]


def test_rrf_rejects_bad_params():
    with pytest.raises(ConfigError, match="rrf.k"):
        rrf_scores([["a"]], k=-1)
    with pytest.raises(ConfigError, match="retrieval.window"):
        rrf([_run("a", ["x"])], window=0)


class TestRRFContract(FuserContract):
    option = "fusion/rrf"
    variations = {"k": 10, "window": 3}
    invalid = {"k": -1, "window": 0}
    refusal_keys = {"window": "retrieval.window"}  # the config feeds rrf.window from retrieval.window

    def make(self, **params):
        return RRF(**params)


def test_rrf_stage_validates_and_fuses():
    for bad in (float("nan"), float("inf"), -1, "60"):
        with pytest.raises(ConfigError, match="rrf.k"):
            RRF(k=bad)
    with pytest.raises(ConfigError, match="retrieval.window"):
        RRF(window=0)
    a = Run("a", {"q": [Hit(c, c, 1.0) for c in BM25]})
    b = Run("b", {"q": [Hit(c, c, 1.0) for c in DENSE]})
    out = RRF(k=60, window=3).fuse([a, b], depth=2)
    assert [h.chunk_id for h in out.get("q")] == ["4.2", "6.1"] and out.name == "rrf"


def _coded_pair(rng, table, qids, n_lists, dup):
    """The same random runs twice: carrying integer codes over ``table``, and as plain Hit lists."""
    from ablate.data.types import RunCodes

    coded, plain = [], []
    for j in range(n_lists):
        codes, scores = [], []
        for _ in qids:
            n = rng.randint(0, 12)
            c = [rng.randrange(len(table)) for _ in range(n)]
            if not dup:
                c = list(dict.fromkeys(c))
            codes.append(c)
            scores.append([float(len(c) - i) for i in range(len(c))])
        rc = RunCodes.from_lists(table, qids, codes, scores)
        run = Run.from_codes(f"r{j}", rc)
        coded.append(run)
        plain.append(Run(run.name, run.results))  # no codes: fused by the per-query loop
    return coded, plain


@pytest.mark.parametrize("dup", [False, True])
def test_rrf_on_codes_equals_the_loop(dup):
    """Runs that carry codes are fused on integers: same ids, same float scores, same order (ties by id), for any
    window, depth and k, with empty lists and (dup) ids named twice in one list."""
    import random

    from ablate.data.types import IdTable

    rng = random.Random(3)
    ids = [f"c{rng.randrange(10**6)}#{i % 3}" for i in range(40)]
    table = IdTable(ids, [i.split("#")[0] for i in ids], [None if i % 2 else "v1" for i in range(40)])
    for trial in range(60):
        qids = [f"q{i}" for i in range(rng.randint(1, 6))]
        coded, plain = _coded_pair(rng, table, qids, rng.randint(1, 3), dup)
        k, window, depth = rng.choice([0.0, 1.0, 60.0]), rng.randint(1, 14), rng.choice([None, 1, 5, 30])
        got, want = rrf(coded, k, window, depth), rrf(plain, k, window, depth)
        assert got.codes is not None and want.codes is None
        assert got.results == want.results, (trial, k, window, depth)
        assert [[h.score for h in hs] for hs in got.results.values()] == [
            [h.score for h in hs] for hs in want.results.values()
        ]
        assert got.meta == want.meta


def test_rrf_falls_back_to_the_loop_when_codes_do_not_cover_every_query():
    from ablate.data.types import IdTable, RunCodes

    table = IdTable(["a", "b", "c"], ["a", "b", "c"], [None] * 3)
    one = Run.from_codes("bm25", RunCodes.from_lists(table, ["q1", "q2"], [[0, 1], [2]], [[2.0, 1.0], [1.0]]))
    two = Run("dense", {"q1": [Hit("c", "c", 0.9)], "q3": [Hit("a", "a", 0.5)]})
    fused = rrf([one, two], k=60, window=10)
    assert fused.codes is None
    assert list(fused.results) == ["q1", "q2", "q3"]
    assert [h.chunk_id for h in fused.results["q1"]] == ["a", "c", "b"]
