"""The pipeline's candidate cache: a warm, shallower request is the prefix of a cold deep one, and gives the same
rankings as a cold run at that depth (the basis of cheap sweeps)."""

from ablate.cache import Cache
from ablate.data.corpus import load_corpus
from ablate.evaluation import EvalSettings
from ablate.stages.fusion.rrf import rrf
from ablate.runner.pipeline import CandidateSource, VariantSpec, component_fingerprints, run_variant


def _ids(run):
    return {q: [(h.chunk_id, h.score) for h in hits] for q, hits in run.results.items()}


def test_prefix_reuse_equals_cold_runs(tiny_corpus, tmp_path):
    snap = load_corpus(tiny_corpus)
    queries = [snap.queries[q] for q in snap.split_qids("dev")]
    spec = VariantSpec("A", ("bm25",), cache_depth=5, identity="employee")
    comps = component_fingerprints(snap, spec, "dev")
    warm_cache = Cache(tmp_path / "warm")
    warm = CandidateSource(snap, warm_cache)
    deep = warm.candidates("bm25", spec, comps, queries, 5)
    assert warm.counters["candidate_cache_misses"] == 1
    for depth in (1, 2, 3):
        from_cache = warm.candidates("bm25", spec, comps, queries, depth)
        cold = CandidateSource(snap, Cache(tmp_path / f"cold{depth}")).candidates("bm25", spec, comps, queries, depth)
        assert _ids(from_cache) == _ids(cold) == {q: v[:depth] for q, v in _ids(deep).items()}
    assert warm.counters["candidate_cache_hits"] == 3
    # a fusion window over cached prefixes equals fusion over cold lists
    a = warm.candidates("bm25", spec, comps, queries, 2)
    b = CandidateSource(snap, Cache(tmp_path / "cold-f")).candidates("bm25", spec, comps, queries, 2)
    assert _ids(rrf([a], k=60, window=2)) == _ids(rrf([b], k=60, window=2))


def test_warm_variant_run_matches_cold_and_filters_inside_retrieval(tiny_corpus, tmp_path):
    snap = load_corpus(tiny_corpus)
    spec = VariantSpec("A", ("bm25",), identity="employee", depth=10)
    settings = EvalSettings(ks=(1, 3, 10))
    cold = run_variant(snap, "dev", spec, settings, Cache(tmp_path / "c"))
    warm = run_variant(snap, "dev", spec, settings, Cache(tmp_path / "c"))
    assert _ids(cold.run) == _ids(warm.run)
    assert warm.counters["candidate_cache_hits"] == 1 and cold.counters["candidate_cache_misses"] == 1
    assert cold.evaluation.means == warm.evaluation.means
    assert cold.permissions["leaks"] == 0 and cold.permissions["queries_made_unanswerable"] == 1
    assert all(h.chunk_id != "FIN-1#p0" for hits in cold.run.results.values() for h in hits)
    # the finance identity sees the audit memo; q4 becomes answerable
    fin = run_variant(snap, "dev", VariantSpec("A", ("bm25",), identity="finance", depth=10), settings,
                      Cache(tmp_path / "c"))
    assert fin.evaluation.accounting["answerable"] == cold.evaluation.accounting["answerable"] + 1
