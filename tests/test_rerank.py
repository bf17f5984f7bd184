"""CrossEncoderScorer: ordering by a real (tiny, locally fine-tuned) cross-encoder, tail rule, score cache."""

from __future__ import annotations

import copy
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest

from ablate.cache import Cache, read_json_entry
from ablate.data.types import Hit, Run, rank_hits
from ablate.errors import ConfigError, InputError, ModelUnavailableError
from ablate.stages.rerank.cross_encoder import CrossEncoderReranker, CrossEncoderScorer
from ablate.stages.rerank.pair_scores import SCORE_KIND, CachedPairScorer
from ablate.stages.rerank.training import train_cross_encoder
from ablate.testing.contracts import RerankerContract

# Eight facts: each question's own passage is its positive, three other passages its negatives.
FACTS = {
    "paris": ("What is the capital of France?", "Paris is the capital and largest city of France."),
    "spider": ("How many legs does a spider have?", "Spiders have eight legs and two body segments."),
    "titanic": ("When did the Titanic sink?", "The Titanic sank in April 1912 after striking an iceberg."),
    "plants": ("What gas do plants absorb?", "Plants absorb carbon dioxide from the air for photosynthesis."),
    "hamlet": ("Who wrote Hamlet?", "Hamlet is a tragedy written by William Shakespeare."),
    "water": ("What is the boiling point of water?", "Water boils at 100 degrees Celsius at sea level."),
    "mars": (
        "Which planet is known as the red planet?",
        "Mars is called the red planet because of iron oxide.",
    ),
    "ocean": ("What is the largest ocean?", "The Pacific Ocean is the largest and deepest ocean on Earth."),
}
IDS = list(FACTS)
QUERY_TEXT = {k: q for k, (q, _) in FACTS.items()}
CHUNK_TEXT = {f"D-{k}": p for k, (_, p) in FACTS.items()}


def _pairs() -> list[tuple[str, str, float]]:
    out = []
    for i, k in enumerate(IDS):
        out.append((FACTS[k][0], FACTS[k][1], 1.0))
        out.extend((FACTS[k][0], FACTS[IDS[(i + j) % len(IDS)]][1], 0.0) for j in (1, 2, 3))
    return out


@pytest.fixture(scope="module")
def model_path(tmp_path_factory) -> str:
    """A real cross-encoder: the bundled MiniLM fine-tuned for a few seconds on the 32 pairs above."""
    cache = Cache(tmp_path_factory.mktemp("ce-train"))
    trained = train_cross_encoder(
        _pairs(), epochs=5, batch_size=8, lr=2e-4, min_steps=0, cache=cache, show_progress=False
    )
    return trained.path


def _run(order: dict[str, list[str]]) -> Run:
    """A run whose original scores descend 10, 9, 8, ... in the listed order."""
    results = {
        q: [Hit(f"D-{k}", f"D-{k}", float(10 - i), "v1") for i, k in enumerate(keys)]
        for q, keys in order.items()
    }
    return Run("bm25", results, {"retriever": {"k1": 0.9}})


# The relevant passage sits at rank 3 and 4; the tail (ranks 5-8) must keep its order.
ORDER = {
    "hamlet": ["paris", "spider", "hamlet", "titanic", "plants", "water", "mars", "ocean"],
    "water": ["mars", "ocean", "paris", "water", "hamlet", "spider", "titanic", "plants"],
}


def test_relevant_passage_moves_to_the_top(model_path, tmp_path):
    rr = CrossEncoderScorer(model_path, cache=Cache(tmp_path))
    out = rr.rerank(_run(ORDER), QUERY_TEXT, CHUNK_TEXT, depth=4)
    assert out.get("hamlet")[0].chunk_id == "D-hamlet"
    assert out.get("water")[0].chunk_id == "D-water"
    assert rr.stats["pairs_scored"] == 8 and rr.stats["pairs_cached"] == 0 and rr.stats["model_loads"] == 1


def test_head_is_the_same_set_and_tail_keeps_order_with_monotone_scores(model_path, tmp_path):
    run = _run(ORDER)
    before = copy.deepcopy(run)
    out = CrossEncoderScorer(model_path, cache=Cache(tmp_path)).rerank(run, QUERY_TEXT, CHUNK_TEXT, depth=3)
    assert run == before  # the input run is untouched
    assert out.name == "bm25>rerank" and out is not run
    assert out.meta["retriever"] == {"k1": 0.9}
    assert out.meta["rerank"]["depth"] == 3
    assert out.meta["rerank"]["fingerprint"]["max_length"] == 256
    for q, keys in ORDER.items():
        hits = out.get(q)
        assert {h.chunk_id for h in hits[:3]} == {f"D-{k}" for k in keys[:3]}
        assert [h.chunk_id for h in hits[3:]] == [f"D-{k}" for k in keys[3:]]
        scores = [h.score for h in hits]
        assert all(a >= b for a, b in zip(scores[:3], scores[1:3], strict=False))
        assert all(
            a > b for a, b in zip(scores[2:], scores[3:], strict=False)
        )  # tail strictly below, descending
        assert rank_hits(hits) == hits  # the run's order is its TIE_RULE order
        assert all(h.version == "v1" and h.doc_id == h.chunk_id for h in hits)


def test_ties_broken_by_chunk_id(model_path, tmp_path):
    # Two chunks with the same text get the same score: the smaller chunk id comes first.
    chunk_text = dict(CHUNK_TEXT, **{"A-copy": CHUNK_TEXT["D-hamlet"], "Z-copy": CHUNK_TEXT["D-hamlet"]})
    run = Run(
        "r", {"hamlet": [Hit("Z-copy", "Z", 3.0), Hit("D-paris", "D-paris", 2.0), Hit("A-copy", "A", 1.0)]}
    )
    rr = CrossEncoderScorer(model_path, cache=Cache(tmp_path))
    out = rr.rerank(run, QUERY_TEXT, chunk_text, depth=3)
    assert [h.chunk_id for h in out.get("hamlet")] == ["A-copy", "Z-copy", "D-paris"]
    assert (
        rr.stats["pairs_scored"] == 2 and rr.stats["pairs_cached"] == 1
    )  # one (query, text) pair scored once


def test_warm_cache_scores_nothing_and_returns_the_same_run(model_path, tmp_path):
    cache = Cache(tmp_path)
    cold = CrossEncoderScorer(model_path, cache=cache).rerank(_run(ORDER), QUERY_TEXT, CHUNK_TEXT, depth=5)
    warm_rr = CrossEncoderScorer(model_path, cache=Cache(tmp_path))
    warm = warm_rr.rerank(_run(ORDER), QUERY_TEXT, CHUNK_TEXT, depth=5)
    assert warm == cold
    assert warm_rr.stats["pairs_scored"] == 0 and warm_rr.stats["pairs_cached"] == 10
    assert warm_rr.stats["model_loads"] == 0 and warm_rr._model is None
    # Layout: one JSON entry per query text, mapping chunk-text hashes to scores.
    entries = sorted((tmp_path / SCORE_KIND).rglob("*.json"))
    assert len(entries) == 2
    value = read_json_entry(entries[0])
    fp = value["fingerprint"]
    assert len(value["scores"]) == 5 and fp["max_length"] == 256 and fp["score"] == "logit"
    assert fp["code_version"] and fp["libraries"]["torch"]


def test_depth_sweep_scores_each_pair_once(model_path, tmp_path):
    rr = CrossEncoderScorer(model_path, cache=Cache(tmp_path))
    scored = []
    for depth in (2, 4, 8):
        rr.rerank(_run(ORDER), QUERY_TEXT, CHUNK_TEXT, depth=depth)
        scored.append(rr.stats["pairs_scored"])
    assert scored == [4, 8, 16]  # 2 queries x (2, +2, +4) new pairs
    assert rr.stats["pairs_cached"] == 4 + 8
    # A second process sees every pair on disk.
    fresh = CrossEncoderScorer(model_path, cache=Cache(tmp_path))
    for depth in (8, 4, 2):
        fresh.rerank(_run(ORDER), QUERY_TEXT, CHUNK_TEXT, depth=depth)
    assert fresh.stats["pairs_scored"] == 0 and fresh.stats["model_loads"] == 0


def test_no_disk_cache_still_scores_each_pair_once(model_path):
    rr = CrossEncoderScorer(model_path, cache=None)
    a = rr.rerank(_run(ORDER), QUERY_TEXT, CHUNK_TEXT, depth=4)
    b = rr.rerank(_run(ORDER), QUERY_TEXT, CHUNK_TEXT, depth=4)
    assert a == b and rr.stats["pairs_scored"] == 8 and rr.stats["pairs_cached"] == 8


def test_max_length_is_part_of_the_cache_key(model_path, tmp_path):
    CrossEncoderScorer(model_path, cache=Cache(tmp_path)).rerank(_run(ORDER), QUERY_TEXT, CHUNK_TEXT, depth=2)
    short = CrossEncoderScorer(model_path, cache=Cache(tmp_path), max_length=64)
    short.rerank(_run(ORDER), QUERY_TEXT, CHUNK_TEXT, depth=2)
    assert short.stats["pairs_scored"] == 4
    assert short.fingerprint()["max_length"] == 64


def test_empty_queries_and_short_lists(model_path, tmp_path):
    run = Run("r", {"hamlet": [], "water": [Hit("D-water", "D-water", 1.0)]})
    out = CrossEncoderScorer(model_path, cache=Cache(tmp_path)).rerank(run, QUERY_TEXT, CHUNK_TEXT, depth=50)
    assert out.get("hamlet") == [] and [h.chunk_id for h in out.get("water")] == ["D-water"]


def test_missing_texts_and_bad_depth_are_user_errors(model_path, tmp_path):
    rr = CrossEncoderScorer(model_path, cache=Cache(tmp_path))
    with pytest.raises(InputError, match="query 'hamlet' has hits but no text"):
        rr.rerank(_run(ORDER), {"water": "x"}, CHUNK_TEXT, depth=2)
    with pytest.raises(InputError, match="chunk 'D-paris'"):
        rr.rerank(_run(ORDER), QUERY_TEXT, {}, depth=2)
    for bad in (0, -1, 2.5):
        with pytest.raises(ConfigError, match="rerank.depth"):
            rr.rerank(_run(ORDER), QUERY_TEXT, CHUNK_TEXT, depth=bad)
    assert rr.stats["pairs_scored"] == 0 and rr._model is None


def test_unavailable_model_fails_fast_naming_both_remedies(tmp_path):
    with pytest.raises(ModelUnavailableError) as err:
        CrossEncoderScorer("cross-encoder/no-such-reranker-xyz", cache=Cache(tmp_path))
    msg = str(err.value)
    assert "rerank.model=trained" in msg and "rerank.model=/path/to/model" in msg


def test_plain_encoder_checkpoint_is_refused():
    # all-MiniLM-L6-v2 is a bi-encoder: as a cross-encoder its head would be random.
    with pytest.raises(ConfigError, match="rerank.model=trained"):
        CrossEncoderScorer("all-MiniLM-L6-v2")


def test_bad_settings_are_config_errors(model_path):
    with pytest.raises(ConfigError, match="rerank.batch_size"):
        CrossEncoderReranker(model=model_path, batch_size=0)
    with pytest.raises(ConfigError, match="rerank.max_length"):
        CrossEncoderReranker(model=model_path, max_length=0)
    with pytest.raises(ConfigError, match="rerank.depth"):
        CrossEncoderReranker(model=model_path, depth=0)
    with pytest.raises(ConfigError, match="rerank.train.epochs"):
        CrossEncoderReranker(model="trained", train={"epochs": 0})
    with pytest.raises(ConfigError, match="rerank.train.epoch"):
        CrossEncoderReranker(model="trained", train={"epoch": 2})


def test_stage_fingerprint_follows_model_content_and_logs_train_only_when_trained(model_path):
    stage = CrossEncoderReranker(model=model_path, depth=7)
    fp = stage.fingerprint()
    # num_threads is logged (params()) but not in the fingerprint: it changes no score
    assert fp.params == {
        "model": model_path,
        "depth": 7,
        "batch_size": 32,
        "max_length": 256,
        "precision": "fp32",
    }
    assert stage.params()["num_threads"] is None
    assert len(fp.resources["model"]) == 64 and fp.libraries["sentence-transformers"]
    trained = CrossEncoderReranker(model="trained", train={"base_model": "all-MiniLM-L6-v2"})
    assert trained.params()["train"]["min_steps"] == 100
    assert trained.fingerprint().key != stage.fingerprint().key


class TestCrossEncoderContract(RerankerContract):
    option = "reranker/cross_encoder"
    variations = {"model": "trained", "depth": 5, "batch_size": 8, "max_length": 128}
    invalid = {"depth": 0, "batch_size": 0, "max_length": 4, "precision": "fp8", "num_threads": -1}
    derived = frozenset({"train.base_model_source", "train.precision_native", "precision_native"})

    @pytest.fixture(autouse=True)
    def _model(self, model_path):
        type(self).model = model_path

    def make(self, **params):
        return CrossEncoderReranker(**{"model": self.model, "depth": 3, **params})


class _Flaky(CachedPairScorer):
    """Scores by passage length; raises once it reaches a passage containing "boom" (an interrupted model)."""

    model_label = "flaky"
    flush_pairs = 1

    def fingerprint(self) -> dict[str, object]:
        return {"kind": "flaky-test-scorer"}

    def _predict(self, pairs):
        if any("boom" in p for _, p in pairs):
            raise KeyboardInterrupt
        self.stats.setdefault("calls", 0)
        self.stats["calls"] += 1
        return [float(len(p)) for _, p in pairs]


def test_an_interrupted_scorer_keeps_every_query_it_finished(tmp_path):
    texts = {"q1": "first", "q2": "second", "q3": "third"}
    chunks = {"a": "aa", "b": "bbbb", "c": "boom"}
    run = Run(
        "r",
        {
            "q1": [Hit("a", "d", 2.0), Hit("b", "d", 1.0)],
            "q2": [Hit("b", "d", 2.0), Hit("a", "d", 1.0)],
            "q3": [Hit("c", "d", 2.0), Hit("a", "d", 1.0)],
        },
    )
    with pytest.raises(KeyboardInterrupt):
        _Flaky(Cache(tmp_path)).rerank(run, texts, chunks, depth=2)
    again = _Flaky(Cache(tmp_path))
    out = again.rerank(Run("r", {q: run.results[q] for q in ("q1", "q2")}), texts, chunks, depth=2)
    assert (
        again.stats["pairs_scored"] == 0 and again.stats["pairs_cached"] == 4
    )  # q1, q2 survived the interrupt
    assert [h.chunk_id for h in out.results["q1"]] == ["b", "a"]
