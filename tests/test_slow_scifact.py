"""Slow: reproduce the SciFact BM25 figure on the real data set (../shared/datasets/scifact)."""

import pytest

from conftest import DATASETS

pytestmark = pytest.mark.slow


def test_scifact_bm25_reproduces_the_published_figure(tmp_path):
    from ablate.cache import Cache
    from ablate.data.corpus import load_corpus
    from ablate.evaluation import EvalSettings
    from ablate.runner.pipeline import VariantSpec, run_variant

    root = DATASETS / "scifact"
    if not root.exists():
        pytest.skip("shared datasets not present")
    snap = load_corpus(root)
    assert (len(snap.chunks), len(snap.split_qids("test"))) == (5183, 300)
    res = run_variant(snap, "test", VariantSpec("A", ("bm25",)), EvalSettings(ks=(10, 100)), Cache(tmp_path))
    ndcg = res.evaluation.means["ndcg@10"]
    # Porter stemming + Lucene stopwords = Anserini's flat BM25 (published 0.679); BEIR's multi-field figure is 0.665
    assert ndcg == pytest.approx(0.6754, abs=0.001)
    assert abs(ndcg - 0.665) <= 0.02
    assert res.evaluation.means["recall@100"] == pytest.approx(0.928, abs=0.002)
