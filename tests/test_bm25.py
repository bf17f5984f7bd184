"""BM25: differential tests against rank_bm25 and the hand-computed Lucene formula, masks, identifiers, rules."""

from __future__ import annotations

import math

import bm25s
import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from ablate.data.types import Chunk, Query, rank_hits
from ablate.errors import ConfigError, InputError
from ablate.stages.retrievers.base import Retriever
from ablate.stages.retrievers.bm25 import BM25Index, BM25Retriever
from ablate.stages.text.tokenize import Tokenizer
from ablate.testing.contracts import RetrieverContract

K1, B = 0.9, 0.4

# Every term is in at most half of the 8 documents, so no Robertson idf is negative and rank_bm25's epsilon floor
# (which replaces negative idfs by epsilon * mean idf) never fires: the two libraries must agree with defaults.
CORPUS = [
    "the travel policy covers flights and hotels for staff",
    "hotels must be booked through the travel portal",
    "invoice INV-102 covers the hotel stay in Berlin",
    "invoice INV-120 covers flights to Paris",
    "expense claims need receipts and a manager approval",
    "the manager approves travel above the limit",
    "receipts are scanned and attached to the claim",
    "per diem rates depend on the destination city",
]
QUERIES = [
    "travel policy flights",
    "INV-102 hotel",
    "manager approval receipts",
    "per diem city rates",
    "hotels booked portal",
    "claims",
]


def _chunks(texts: list[str], prefix: str = "c") -> list[Chunk]:
    return [Chunk(f"{prefix}{i:02d}", f"D{i:02d}", t, version="1") for i, t in enumerate(texts)]


def _queries(texts: list[str]) -> list[Query]:
    return [Query(f"q{i}", t) for i, t in enumerate(texts)]


TOK = Tokenizer("en")


def _full_scores_bm25s(corpus_tokens, query_tokens, method):
    bm = bm25s.BM25(k1=K1, b=B, method=method)
    bm.index(corpus_tokens, show_progress=False)
    return np.array([bm.get_scores([t for t in q if t in bm.vocab_dict]) for q in query_tokens])


# -- differential: the libraries themselves --------------------------------------------------------------------------
def test_no_idf_is_negative_in_the_differential_corpus():
    toks = TOK.tokenize_many(CORPUS)
    df: dict[str, int] = {}
    for doc in toks:
        for t in set(doc):
            df[t] = df.get(t, 0) + 1
    assert max(df.values()) <= len(CORPUS) / 2


def test_bm25s_robertson_equals_rank_bm25_okapi():
    """bm25s drops Okapi's constant (k1 + 1) numerator factor; otherwise the scores are the same numbers."""
    corpus_tokens = TOK.tokenize_many(CORPUS)
    query_tokens = TOK.tokenize_many(QUERIES)
    ours = _full_scores_bm25s(corpus_tokens, query_tokens, "robertson")
    okapi = BM25Okapi(corpus_tokens, k1=K1, b=B)  # default epsilon: the floor never fires on this corpus
    ref = np.array([okapi.get_scores(q) for q in query_tokens]) / (K1 + 1)
    assert np.allclose(ours, ref, rtol=1e-5, atol=1e-6)
    for a, b in zip(ours, ref, strict=True):
        assert list(np.lexsort((np.arange(len(a)), -a))) == list(np.lexsort((np.arange(len(b)), -b)))


def test_rank_bm25_epsilon_zero_matches_bm25s_floor_on_common_terms():
    """With a term in most documents, Robertson's idf goes negative: bm25s floors it at 0, rank_bm25 at eps * mean."""
    texts = CORPUS + ["travel travel travel"] * 8  # "travel" now in 11 of 16 documents
    corpus_tokens = TOK.tokenize_many(texts)
    query_tokens = [["travel"], ["travel", "hotel"]]
    ours = _full_scores_bm25s(corpus_tokens, query_tokens, "robertson")
    with_floor = np.array([BM25Okapi(corpus_tokens, k1=K1, b=B).get_scores(q) for q in query_tokens]) / (
        K1 + 1
    )
    assert not np.allclose(ours, with_floor)  # the default epsilon=0.25 disagrees ...
    eps0 = BM25Okapi(corpus_tokens, k1=K1, b=B, epsilon=0.0)
    assert np.allclose(
        ours, np.array([eps0.get_scores(q) for q in query_tokens]) / (K1 + 1), atol=1e-6
    )  # ... 0 agrees


def _lucene_by_hand(corpus_tokens, query):
    """Lucene's BM25Similarity (>= 8): idf = ln(1 + (N - df + .5)/(df + .5)); tf / (tf + k1 (1 - b + b |d|/avgdl))."""
    n = len(corpus_tokens)
    avgdl = sum(len(d) for d in corpus_tokens) / n
    out = np.zeros(n)
    for t in query:
        df = sum(1 for d in corpus_tokens if t in d)
        if df == 0:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for i, d in enumerate(corpus_tokens):
            tf = d.count(t)
            out[i] += idf * tf / (tf + K1 * (1 - B + B * len(d) / avgdl))
    return out


def test_bm25s_lucene_equals_the_formula_by_hand():
    corpus_tokens = TOK.tokenize_many(
        CORPUS + ["travel travel travel"] * 8
    )  # negative-Robertson terms included
    query_tokens = TOK.tokenize_many(QUERIES + ["travel travel"])  # a repeated query term counts twice
    ours = _full_scores_bm25s(corpus_tokens, query_tokens, "lucene")
    ref = np.array([_lucene_by_hand(corpus_tokens, q) for q in query_tokens])
    assert np.allclose(ours, ref, rtol=1e-5, atol=1e-6)


# -- differential: our two backends -------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["lucene", "robertson"])
def test_both_backends_give_the_same_run(method):
    chunks = _chunks(CORPUS + ["travel travel travel"] * 3)
    queries = _queries(QUERIES + ["travel", "nothing matches zzz"])
    runs = [
        BM25Index(chunks, TOK, k1=K1, b=B, impl=impl, method=method).search(queries, depth=5)
        for impl in ("bm25s", "rank_bm25")
    ]
    for q in queries:
        a, b = runs[0].get(q.qid), runs[1].get(q.qid)
        assert [h.chunk_id for h in a] == [h.chunk_id for h in b], q.text
        assert np.allclose([h.score for h in a], [h.score for h in b], rtol=1e-5)


# -- rules --------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def retriever() -> BM25Index:
    return BM25Index(_chunks(CORPUS), TOK)


def test_index_stats_and_stage_fingerprint(retriever):
    assert retriever.name == "bm25"
    assert retriever.stats["index_seconds"] >= 0 and retriever.stats["n_chunks"] == len(CORPUS)
    stage = BM25Retriever(stemmer=None, language="en")
    assert isinstance(stage, Retriever)
    fp = stage.fingerprint()
    assert (fp.params["impl"], fp.params["method"], fp.params["k1"], fp.params["b"]) == (
        "bm25s",
        "lucene",
        0.9,
        0.4,
    )
    assert fp.resources["tokenizer"] == TOK.fingerprint() and fp.libraries["bm25s"] == bm25s.__version__


def test_identifier_query_ranks_exact_code_first(retriever):
    hits = retriever.search([Query("q", "INV-102")], depth=10).get("q")
    assert [h.doc_id for h in hits[:2]] == ["D02", "D03"]  # INV-102 first, INV-120 (shares only "inv") second
    assert hits[0].score > 2 * hits[1].score


def test_hits_sorted_by_tie_rule_and_limited_to_depth(retriever):
    run = retriever.search(_queries(QUERIES), depth=3)
    for hits in run.results.values():
        assert len(hits) <= 3 and hits == rank_hits(hits)
        assert all(h.version == "1" and h.doc_id == "D" + h.chunk_id[1:] for h in hits)


def test_zero_score_chunks_are_not_results(retriever):
    run = retriever.search(_queries(["Berlin", "the of and", "", "quantum chromodynamics"]), depth=10)
    assert [h.chunk_id for h in run.get("q0")] == ["c02"]  # only the chunk that shares a term
    assert (
        run.get("q1") == [] and run.get("q2") == [] and run.get("q3") == []
    )  # stopwords / nothing / unknown terms


def test_allowed_mask_filters_inside_retrieval():
    chunks = _chunks(CORPUS)
    queries = _queries(["invoice covers Berlin", "travel"])
    mask = np.ones(len(chunks), dtype=bool)
    mask[2] = False  # the best chunk for "invoice covers Berlin"
    for impl in ("bm25s", "rank_bm25"):
        r = BM25Index(chunks, TOK, impl=impl)
        full = r.search(queries, depth=2)
        masked = r.search(queries, depth=2, allowed=mask)
        assert full.get("q0")[0].chunk_id == "c02"
        assert all(h.chunk_id != "c02" for hits in masked.results.values() for h in hits)
        assert len(masked.get("q0")) == 2  # the freed slot goes to the next allowed chunk
        nothing = r.search(queries, depth=5, allowed=np.zeros(len(chunks), dtype=bool))
        assert nothing.results == {"q0": [], "q1": []}


def test_bad_mask_shape_is_an_input_error(retriever):
    with pytest.raises(InputError, match="allowed mask"):
        retriever.search(_queries(["travel"]), depth=3, allowed=np.ones(3, dtype=bool))


@pytest.mark.parametrize("impl", ["bm25s", "rank_bm25"])
def test_tie_at_the_cutoff_follows_the_tie_rule(impl):
    # five identical chunks tie; the two with the smallest ids must make the cut whatever the heap order
    ids = ["e", "b", "d", "a", "c"]
    chunks = [Chunk(i, i, "flight booking") for i in ids] + [Chunk("z", "z", "hotel")]
    r = BM25Index(chunks, TOK, impl=impl)
    assert [h.chunk_id for h in r.search(_queries(["flight"]), depth=2).get("q0")] == ["a", "b"]
    mask = np.array([True, True, True, False, True, True])  # "a" is not allowed
    assert [h.chunk_id for h in r.search(_queries(["flight"]), depth=2, allowed=mask).get("q0")] == ["b", "c"]


def test_chinese_and_mixed_corpus():
    zh = Tokenizer("zh")
    chunks = _chunks(["发票INV-102的金额是500元", "发票INV-120的金额是700元", "差旅政策适用于所有员工"])
    run = BM25Index(chunks, zh).search(_queries(["INV-102的金额是多少", "差旅政策"]), depth=3)
    assert run.get("q0")[0].chunk_id == "c00" and run.get("q1")[0].chunk_id == "c02"
    assert [h.chunk_id for h in run.get("q1")] == ["c02"]


def test_many_queries_in_one_batch(retriever):
    queries = [Query(f"q{i}", QUERIES[i % len(QUERIES)]) for i in range(2000)]
    run = retriever.search(queries, depth=5)
    assert len(run) == 2000 and run.get("q1") == run.get(f"q{1 + len(QUERIES)}")


def test_empty_corpus_and_corpus_without_terms():
    for chunks in ([], _chunks(["", "the of"])):
        r = BM25Index(chunks, TOK)
        assert r.search(_queries(["travel"]), depth=5).results == {"q0": []}


def test_invalid_settings_raise_config_error():
    with pytest.raises(
        ConfigError, match=r"bm25.impl='lucene_java' is not valid; valid options: bm25s, rank_bm25"
    ):
        BM25Retriever(impl="lucene_java")
    with pytest.raises(ConfigError, match="bm25.method"):
        BM25Retriever(method="bm25l")
    with pytest.raises(ConfigError, match="rank_bm25 supports: lucene, robertson"):
        BM25Retriever(impl="rank_bm25", method="atire")
    for bad in (float("nan"), float("inf"), -1, "x", True):
        with pytest.raises(ConfigError, match="bm25.k1"):
            BM25Retriever(k1=bad)
    with pytest.raises(ConfigError, match="bm25.b"):
        BM25Index(_chunks(CORPUS), TOK, b=1.5)
    with pytest.raises(ConfigError, match="depth"):
        BM25Index(_chunks(CORPUS), TOK).search(_queries(["x"]), depth=0)


# -- the stage contract every retriever runs -----------------------------------------------------------------------
class TestBM25Contract(RetrieverContract):
    option = "retrievers/bm25"
    invalid = {
        "impl": "lucene",
        "k1": -1,
        "b": 1.5,
        "method": "okapi",
        "stopwords": "yes",
        "stemmer": "klingon",
        "language": "fr",
        "jieba_mode": "fast",
    }
    variations = {
        "impl": "rank_bm25",
        "k1": 1.2,
        "b": 0.75,
        "method": "robertson",
        "stopwords": False,
        "stemmer": "english",
        "language": "zh",
        "jieba_mode": "precise",
    }

    def make(self, **params):
        return BM25Retriever(**params)
