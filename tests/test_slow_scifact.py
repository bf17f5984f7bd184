"""Slow: reproduce the SciFact BM25 figure on the real data set (../shared/datasets/scifact), through the same
composition and pipeline a ``python -m ablate corpus=beir corpus.path=... variant=A`` run uses."""

import pytest

from conftest import DATASETS

pytestmark = pytest.mark.slow


def test_scifact_bm25_reproduces_the_published_figure(tmp_path):
    from hydra import compose, initialize_config_dir

    from ablate.app.config import job_from_config
    from ablate.app.paths import CONF_DIR, register_resolvers
    from ablate.cache import Cache
    from ablate.data.corpus import load_corpus
    from ablate.runner.pipeline import run_pipeline

    root = DATASETS / "scifact"
    if not root.exists():
        pytest.skip("shared datasets not present")
    snap = load_corpus(root)
    assert (len(snap.chunks), len(snap.split_qids("test"))) == (5183, 300)
    register_resolvers()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=["corpus=beir", f"corpus.path={root}", "variant=A", "eval.ks=[10,100]"],
            return_hydra_config=True,
        )
    job = job_from_config(cfg)
    res = run_pipeline(
        snap, "test", job.pipeline, job.settings, Cache(tmp_path), variant="A", access=job.corpus.access
    )
    ndcg = res.evaluation.means["ndcg@10"]
    # Porter stemming + Lucene stopwords = Anserini's flat BM25 (published 0.679); BEIR's multi-field figure is 0.665
    assert ndcg == pytest.approx(0.6754, abs=0.001)
    assert abs(ndcg - 0.665) <= 0.02
    assert res.evaluation.means["recall@100"] == pytest.approx(0.928, abs=0.002)
