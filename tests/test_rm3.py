"""BM25 + RM3: the stage contract, its reference case (original_query_weight=1 is BM25), and expansion at work."""

import pytest

from ablate.cache import Cache
from ablate.data.corpus import load_corpus
from ablate.errors import ConfigError
from ablate.stages.base import StageContext
from ablate.stages.retrievers.bm25 import BM25Retriever
from ablate.stages.retrievers.rm3 import RM3Retriever
from ablate.testing.contracts import RetrieverContract, contract_corpus
from conftest import write_corpus


class TestRM3Contract(RetrieverContract):
    option = "retrievers/rm3"
    invalid = {"fb_docs": 0, "fb_terms": 0, "original_query_weight": 1.5, "k1": -1}
    variations = {"fb_docs": 3, "fb_terms": 5, "original_query_weight": 0.8, "k1": 1.2, "stemmer": None}

    def make(self, **params):
        return RM3Retriever(**params)


def _prepared(stage, snap, tmp_path):
    stage = stage.bind(snap, "dev")
    stage.prepare(StageContext(snap, Cache(tmp_path / "cache")))
    return stage


def test_original_query_weight_one_ranks_like_bm25(tmp_path):
    snap = contract_corpus(tmp_path / "c")
    queries = [snap.queries[q] for q in snap.split_qids("dev")]
    plain = _prepared(BM25Retriever(), snap, tmp_path).search(queries, 10)
    rm3 = _prepared(RM3Retriever(original_query_weight=1.0), snap, tmp_path).search(queries, 10)
    assert {q: [h.chunk_id for h in hs] for q, hs in rm3.results.items()} == {
        q: [h.chunk_id for h in hs] for q, hs in plain.results.items()
    }


DOCS = [
    {"_id": f"d{i}", "text": t}
    for i, t in enumerate(
        [
            "espresso machine descaling guide for the office kitchen",
            "espresso machine descaling with citric acid",
            "descaling the espresso machine every month",
            "the kitchen kettle needs citric acid descaling too",
            "parking permits are issued by facilities",
            "facilities manages parking and badges",
            "quarterly report on revenue",
            "badges are printed at reception",
            "revenue grew in the third quarter",
            "reception opens at eight",
            "printer toner is ordered by facilities",
            "travel bookings go through the portal",
            *(
                f"filler note number {i} about topic {i}" for i in range(40)
            ),  # keeps feedback terms under 10% df
        ]
    )
]


def test_feedback_terms_bring_in_a_chunk_the_query_does_not_match(tmp_path):
    queries = [{"_id": "q", "text": "espresso machine", "split": "dev"}]
    snap = load_corpus(write_corpus(tmp_path / "coffee", DOCS, queries, {"dev": [("q", "d1", 1)]}))
    q = [snap.queries["q"]]
    plain = [h.chunk_id for h in _prepared(BM25Retriever(), snap, tmp_path).search(q, 10).get("q")]
    stage = _prepared(RM3Retriever(fb_docs=3, fb_terms=5), snap, tmp_path)
    expanded = [h.chunk_id for h in stage.search(q, 10).get("q")]
    assert "d3" not in plain  # shares no term with "espresso machine"
    assert "d3" in expanded  # reached through the feedback terms "descaling" / "citric acid"
    assert expanded[:3] == plain[:3]  # the original matches stay on top


def test_settings_are_checked():
    for key, bad in (("fb_docs", 0), ("fb_terms", -1), ("original_query_weight", 1.5), ("k1", float("nan"))):
        with pytest.raises(ConfigError, match=f"rm3.{key}"):
            RM3Retriever(**{key: bad})
    with pytest.raises(ConfigError, match="bm25s backend only"):
        RM3Retriever(impl="rank_bm25")
