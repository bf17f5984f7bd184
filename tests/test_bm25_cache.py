"""The BM25 index cache: a warm build tokenises no chunk and ranks exactly like a fresh build; the key follows every
tokenizer and BM25 parameter and the chunk texts; a damaged entry is rebuilt, never crashed on.

Real parts throughout: the demo corpus (147 chunks), bm25s / rank_bm25, an on-disk :class:`~ablate.cache.Cache`.
"Tokenises no chunk" is proved by counting calls of :meth:`Tokenizer.tokenize_many` (the corpus path) and the texts
it is given, not by timing.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ablate.cache import Cache
from ablate.data.corpus import load_corpus
from ablate.data.snapshot import Snapshot
from ablate.data.types import Chunk, Query
from ablate.stages.base import StageContext
from ablate.stages.retrievers import bm25 as bm25_mod
from ablate.stages.retrievers.bm25 import CACHE_KIND, BM25Index, BM25Retriever
from ablate.stages.text.tokenize import Tokenizer

DEMO = Path(__file__).resolve().parents[1] / "corpora" / "demo"


@pytest.fixture(scope="module")
def demo() -> Snapshot:
    return load_corpus(DEMO)


@pytest.fixture
def counted(monkeypatch) -> dict[str, int]:
    """Counts calls of the tokenizer's corpus path and the texts it tokenised."""
    seen = {"calls": 0, "texts": 0}
    original = Tokenizer.tokenize_many

    def tokenize_many(self, texts):
        out = original(self, texts)
        seen["calls"] += 1
        seen["texts"] += len(out)
        return out

    monkeypatch.setattr(Tokenizer, "tokenize_many", tokenize_many)
    return seen


def prepared(stage: BM25Retriever, snap: Snapshot, cache: Cache) -> BM25Retriever:
    """The stage as the runner prepares it in a fresh process (bound to the corpus, a new instance each time)."""
    bound = stage.bind(snap, "test")
    bound.prepare(StageContext(snap, cache))
    return bound


def ranked(stage: BM25Retriever, queries: list[Query], allowed: np.ndarray | None = None):
    run = stage.search(queries, 20, allowed)
    return {q.qid: [(h.chunk_id, h.score) for h in run.get(q.qid)] for q in queries}


def assert_same_rankings(a, b) -> None:
    assert a.keys() == b.keys()
    for qid in a:
        assert [c for c, _ in a[qid]] == [c for c, _ in b[qid]], qid
        np.testing.assert_allclose([s for _, s in a[qid]], [s for _, s in b[qid]], rtol=1e-6, atol=0)


@pytest.mark.parametrize("impl", ["bm25s", "rank_bm25"])
def test_a_warm_build_hits_tokenises_no_chunk_and_ranks_identically(demo, tmp_path, counted, impl):
    queries = list(demo.queries.values())
    cold_cache = Cache(tmp_path)
    cold = prepared(BM25Retriever(impl=impl), demo, cold_cache)
    assert counted == {"calls": 1, "texts": len(demo.chunks)}
    assert cold_cache.stats.by_kind[CACHE_KIND] == {"hits": 0, "misses": 1}
    assert cold.stats["chunks_tokenized"] == len(demo.chunks) and cold.stats["index_cache_hits"] == 0

    warm_cache = Cache(tmp_path)  # a new process: same folder, fresh counters
    warm = prepared(BM25Retriever(impl=impl), demo, warm_cache)
    assert counted == {"calls": 1, "texts": len(demo.chunks)}  # nothing more was tokenised
    assert warm_cache.stats.by_kind[CACHE_KIND] == {"hits": 1, "misses": 0}
    assert warm.stats["chunks_tokenized"] == 0 and warm.stats["index_cache_hits"] == 1
    assert warm.stats["vocab_size"] == cold.stats["vocab_size"] > 100

    assert_same_rankings(ranked(cold, queries), ranked(warm, queries))
    # with a permission mask (every third chunk hidden): same rankings, and no hidden chunk appears
    allowed = np.arange(len(demo.chunks)) % 3 != 0
    hidden = {c.chunk_id for c, ok in zip(demo.chunks, allowed, strict=True) if not ok}
    cold_m, warm_m = ranked(cold, queries, allowed), ranked(warm, queries, allowed)
    assert_same_rankings(cold_m, warm_m)
    assert sum(len(v) for v in warm_m.values()) > 0
    assert not {c for v in warm_m.values() for c, _ in v} & hidden


def test_the_cached_matrix_equals_a_fresh_build(demo, tmp_path):
    tok = BM25Retriever().bind(demo, "test").tokenizer
    cache = Cache(tmp_path)
    fresh = BM25Index(demo.chunks, tok)  # no cache at all
    BM25Index(demo.chunks, tok, cache=cache)
    warm = BM25Index(demo.chunks, tok, cache=cache)
    assert warm.stats["index_cache_hits"] == 1
    for name in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(warm._bm25.scores[name], fresh._bm25.scores[name])
    assert warm._bm25.vocab_dict == fresh._bm25.vocab_dict


# One change per case, each of which must reach a different cache entry (a miss). The tokenizer's fingerprint holds
# language, lowercase, stopwords, stemmer, jieba_mode (and library / rule versions, which a test cannot vary).
STAGE_CHANGES = [
    {"k1": 1.2},
    {"b": 0.75},
    {"method": "robertson"},
    {"method": "atire"},
    {"impl": "rank_bm25"},
    {"stopwords": False},
    {"stemmer": "english"},
    {"stemmer": None},
    {"language": "zh"},
    {"jieba_mode": "precise"},
]


@pytest.mark.parametrize("change", STAGE_CHANGES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_any_bm25_or_tokenizer_parameter_change_misses(demo, tmp_path, counted, change):
    cache = Cache(tmp_path)
    base = prepared(BM25Retriever(), demo, cache)
    changed = prepared(BM25Retriever(**change), demo, cache)
    assert cache.stats.by_kind[CACHE_KIND] == {"hits": 0, "misses": 2}
    assert changed.stats["chunks_tokenized"] == len(demo.chunks)
    assert changed._index.index_key() != base._index.index_key()
    assert changed.fingerprint().key != base.fingerprint().key
    again = prepared(BM25Retriever(**change), demo, cache)  # and the changed setting's own entry then hits
    assert again.stats["index_cache_hits"] == 1
    assert counted["texts"] == 2 * len(demo.chunks)


def test_lowercase_reaches_the_key(demo, tmp_path):
    """``lowercase`` is a Tokenizer field the stage does not expose: set directly on the engine's tokenizer."""
    cache = Cache(tmp_path)
    tok = Tokenizer(language="en", stopwords=True, stemmer="porter")
    a = BM25Index(demo.chunks, tok, cache=cache)
    b = BM25Index(demo.chunks, replace(tok, lowercase=False), cache=cache)
    assert a.index_key() != b.index_key()
    assert b.stats["index_cache_hits"] == 0 and cache.stats.by_kind[CACHE_KIND]["misses"] == 2


def test_one_changed_chunk_text_or_id_misses(demo, tmp_path):
    tok = BM25Retriever().bind(demo, "test").tokenizer
    cache = Cache(tmp_path)
    base = BM25Index(demo.chunks, tok, cache=cache)
    chunks = list(demo.chunks)
    chunks[5] = Chunk(chunks[5].chunk_id, chunks[5].doc_id, chunks[5].text + " amended", chunks[5].version)
    edited = BM25Index(chunks, tok, cache=cache)
    assert edited.stats["index_cache_hits"] == 0 and edited.index_key() != base.index_key()
    reordered = BM25Index(list(reversed(demo.chunks)), tok, cache=cache)  # same texts, other positions
    assert reordered.stats["index_cache_hits"] == 0
    assert cache.stats.by_kind[CACHE_KIND] == {"hits": 0, "misses": 3}


def test_the_rule_versions_reach_the_key(demo, tmp_path, monkeypatch):
    tok = BM25Retriever().bind(demo, "test").tokenizer
    cache = Cache(tmp_path)
    key = BM25Index(demo.chunks, tok, cache=cache).index_key()
    monkeypatch.setattr(bm25_mod, "CODE_VERSION", "ablate-bm25/test")
    assert BM25Index(demo.chunks, tok, cache=cache).stats["index_cache_hits"] == 0
    monkeypatch.setattr("ablate.stages.text.tokenize.TOKENIZER_VERSION", "ablate-tokenizer/test")
    assert tok.fingerprint()["version"] == "ablate-tokenizer/test"
    assert BM25Index(demo.chunks, tok, cache=cache).index_key() != key


def _entry(cache: Cache, index: BM25Index) -> Path:
    (p,) = (cache.root / CACHE_KIND).rglob(f"{index.index_key()}.npz")
    return p


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty"])
def test_a_damaged_entry_is_rebuilt_with_a_warning(demo, tmp_path, capsys, counted, damage):
    tok = BM25Retriever().bind(demo, "test").tokenizer
    cache = Cache(tmp_path)
    first = BM25Index(demo.chunks, tok, cache=cache)
    path = _entry(cache, first)
    blob = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(blob[: len(blob) // 2])
    elif damage == "flip":  # one byte inside the score data: the zip member's CRC-32 no longer matches
        mid = len(blob) // 3
        path.write_bytes(blob[:mid] + bytes([blob[mid] ^ 0xFF]) + blob[mid + 1 :])
    else:
        path.write_bytes(b"")
    capsys.readouterr()
    rebuilt = BM25Index(demo.chunks, tok, cache=cache)
    err = capsys.readouterr().err
    assert "warning: cache entry" in err and "rebuilding it" in err and str(path) in err
    assert rebuilt.stats["index_cache_hits"] == 0 and rebuilt.stats["chunks_tokenized"] == len(demo.chunks)
    assert cache.stats.corrupt == 1
    q = list(demo.queries.values())
    a, b = first.search(q, 10), rebuilt.search(q, 10)
    assert [[h.chunk_id for h in a.get(x.qid)] for x in q] == [[h.chunk_id for h in b.get(x.qid)] for x in q]
    # the rebuild rewrote the entry whole: the next build hits
    assert BM25Index(demo.chunks, tok, cache=cache).stats["index_cache_hits"] == 1
    assert counted["texts"] == 2 * len(demo.chunks)


def test_an_entry_for_other_chunks_is_refused_by_its_header(demo, tmp_path, capsys):
    """Structural validation: an entry that loads but was built over other chunks (e.g. copied by hand under the
    wrong name) is a miss, not a silently wrong index."""
    tok = BM25Retriever().bind(demo, "test").tokenizer
    cache = Cache(tmp_path)
    small = BM25Index(demo.chunks[:20], tok, cache=cache)
    full = BM25Index(demo.chunks, tok, cache=cache)
    _entry(cache, full).write_bytes(_entry(cache, small).read_bytes())
    again = BM25Index(demo.chunks, tok, cache=cache)
    assert again.stats["index_cache_hits"] == 0
    assert "built over other chunks" in capsys.readouterr().err


def test_no_pickle_in_the_entry(demo, tmp_path):
    tok = BM25Retriever().bind(demo, "test").tokenizer
    cache = Cache(tmp_path)
    idx = BM25Index(demo.chunks, tok, cache=cache)
    with np.load(_entry(cache, idx), allow_pickle=False) as z:  # would raise on an object array
        assert set(z.files) == {"data", "indices", "indptr", "term_ids", "__header__"}
        assert all(z[f].dtype != object for f in z.files)
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_disabled_cache_stores_nothing(demo, tmp_path, counted):
    tok = BM25Retriever().bind(demo, "test").tokenizer
    cache = Cache(tmp_path, enabled=False)
    BM25Index(demo.chunks, tok, cache=cache)
    BM25Index(demo.chunks, tok, cache=cache)
    assert counted["texts"] == 2 * len(demo.chunks) and not list(tmp_path.rglob("*.npz"))


def test_a_run_in_a_new_process_that_misses_its_candidates_tokenises_nothing(tiny_corpus, tmp_path):
    """Through the runner: the second job (another identity, so its candidate lists are not cached; a new session,
    as in a new process) prepares BM25 again, and the index comes from the cache: the job's logged counters say
    ``bm25.chunks_tokenized`` 0 and ``bm25.index_cache_hits`` 1."""
    from ablate.evaluation import EvalSettings
    from ablate.runner.pipeline import Pipeline, run_pipeline
    from ablate.runner.session import Session
    from ablate.runner.settings import RunSettings

    snap = load_corpus(tiny_corpus)
    pipe = Pipeline((BM25Retriever(),))
    settings = RunSettings(eval=EvalSettings(ks=(1, 3)))
    cold = run_pipeline(snap, "dev", pipe, settings, Cache(tmp_path), identity="employee", session=Session())
    warm = run_pipeline(snap, "dev", pipe, settings, Cache(tmp_path), identity="finance", session=Session())
    assert cold.counters["bm25.chunks_tokenized"] == len(snap.chunks) > 0
    assert cold.counters["bm25.index_cache_hits"] == 0
    assert warm.counters["candidate_cache_misses"] == 1  # the retriever had to search
    assert warm.counters["bm25.chunks_tokenized"] == 0 and warm.counters["bm25.index_cache_hits"] == 1
