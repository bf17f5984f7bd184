"""The runner: candidate lists reused as prefixes (the basis of cheap sweeps), permission filtering inside retrieval,
and caches keyed by the stage fingerprint only."""

import pytest

from ablate.cache import Cache
from ablate.data.corpus import load_corpus
from ablate.evaluation import EvalSettings
from ablate.runner.candidates import CandidateSource
from ablate.runner.pipeline import Pipeline, run_pipeline
from ablate.runner.session import Session
from ablate.runner.settings import RunSettings
from ablate.stages import base as stage_base
from ablate.stages.fusion.rrf import RRF, rrf
from ablate.stages.retrievers import bm25 as bm25_module
from ablate.stages.retrievers.bm25 import BM25Retriever


def _ids(run):
    return {q: [(h.chunk_id, h.score) for h in hits] for q, hits in run.results.items()}


def _bm25(snap):
    return BM25Retriever().bind(snap, "dev")


def test_prefix_reuse_equals_cold_runs(tiny_corpus, tmp_path):
    snap = load_corpus(tiny_corpus)
    queries = [snap.queries[q] for q in snap.split_qids("dev")]
    groups = ["staff"]
    warm = CandidateSource(snap, Cache(tmp_path / "warm"), Session())
    deep = warm.candidates(_bm25(snap), queries, 5, groups, cache_depth=5)
    assert warm.counters["candidate_cache_misses"] == 1
    for depth in (1, 2, 3):
        from_cache = warm.candidates(_bm25(snap), queries, depth, groups, cache_depth=5)
        cold_src = CandidateSource(snap, Cache(tmp_path / f"cold{depth}"), Session())
        cold = cold_src.candidates(_bm25(snap), queries, depth, groups, cache_depth=depth)
        assert _ids(from_cache) == _ids(cold) == {q: v[:depth] for q, v in _ids(deep).items()}
    assert warm.counters["candidate_cache_hits"] == 3
    # a fusion window over cached prefixes equals fusion over cold lists
    a = warm.candidates(_bm25(snap), queries, 2, groups, cache_depth=5)
    b = CandidateSource(snap, Cache(tmp_path / "cold-f"), Session()).candidates(
        _bm25(snap), queries, 2, groups, 2
    )
    assert _ids(rrf([a], k=60, window=2)) == _ids(rrf([b], k=60, window=2))


def test_warm_variant_run_matches_cold_and_filters_inside_retrieval(tiny_corpus, tmp_path):
    snap = load_corpus(tiny_corpus)
    pipe = Pipeline((BM25Retriever(),))
    settings = RunSettings(eval=EvalSettings(ks=(1, 3, 10)))
    cold = run_pipeline(snap, "dev", pipe, settings, Cache(tmp_path / "c"), identity="employee")
    warm = run_pipeline(snap, "dev", pipe, settings, Cache(tmp_path / "c"), identity="employee")
    assert _ids(cold.run) == _ids(warm.run)
    assert warm.counters["candidate_cache_hits"] == 1 and cold.counters["candidate_cache_misses"] == 1
    assert cold.evaluation.means == warm.evaluation.means
    assert cold.permissions["leaks"] == 0 and cold.permissions["queries_made_unanswerable"] == 1
    assert all(h.chunk_id != "FIN-1#p0" for hits in cold.run.results.values() for h in hits)
    # the finance identity sees the audit memo; q4 becomes answerable
    fin = run_pipeline(snap, "dev", pipe, settings, Cache(tmp_path / "c"), identity="finance")
    assert fin.evaluation.accounting["answerable"] == cold.evaluation.accounting["answerable"] + 1
    # what ran is recorded: the stage's fingerprint under its name
    assert cold.fingerprints["bm25"] == BM25Retriever().bind(snap, "dev").fingerprint().key
    assert set(cold.fingerprints) == {"bm25", "snapshot", "identity", "eval", "abstain"}


def test_two_retrievers_need_a_fuser_and_names_are_unique():
    with pytest.raises(Exception, match="need a fuser"):
        Pipeline((BM25Retriever(), BM25Retriever(name="bm25b")))
    with pytest.raises(Exception, match="own name"):
        Pipeline((BM25Retriever(), BM25Retriever()), RRF())


def _candidates(snap, cache, retriever):
    src = CandidateSource(snap, cache, Session())
    src.candidates(retriever, [snap.queries["q1"]], 3, None, cache_depth=3)
    return src.counters


def test_candidate_cache_misses_when_code_or_library_version_changes(tiny_corpus, tmp_path, monkeypatch):
    snap = load_corpus(tiny_corpus)
    cache = Cache(tmp_path / "c")
    assert _candidates(snap, cache, _bm25(snap))["candidate_cache_misses"] == 1
    # nothing changed: a fresh process (new session) hits the disk cache
    assert _candidates(snap, cache, _bm25(snap))["candidate_cache_hits"] == 1
    # a new code version of the module misses
    monkeypatch.setattr(bm25_module, "CODE_VERSION", "ablate-bm25/999")
    assert _candidates(snap, cache, _bm25(snap))["candidate_cache_misses"] == 1
    monkeypatch.undo()
    assert _candidates(snap, cache, _bm25(snap))["candidate_cache_hits"] == 1
    # an upgraded library misses
    real = stage_base.library_versions

    def upgraded(*dists):
        return {d: ("99.0" if d == "bm25s" else v) for d, v in real(*dists).items()}

    monkeypatch.setattr(stage_base, "library_versions", upgraded)
    assert _candidates(snap, cache, _bm25(snap))["candidate_cache_misses"] == 1
    monkeypatch.undo()
    # a new contract version (rules every stage shares) misses too
    monkeypatch.setattr(stage_base, "CONTRACT_VERSION", "ablate-stage-contract/999")
    assert _candidates(snap, cache, _bm25(snap))["candidate_cache_misses"] == 1
