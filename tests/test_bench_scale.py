"""experiments/bench_scale.py at tiny sizes, in this process: every kind yields positive figures, the synthetic chunks
index exactly what the tokenizer makes of their text, and the power-law fit recovers a known exponent."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from conftest import DATASETS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))

import bench_scale as bs  # noqa: E402

from ablate.stages.retrievers import faiss_index  # noqa: E402

# ivf_pq differs from ivf_pq_np only by FAISS's polysemous training (the "np" suffix), which costs minutes of CPU
# whatever the size; the code path measured is the same.
KINDS = ("tokenize", "bm25s", "rank_bm25", "flat", "hnsw", "ivf_pq_np")
SIZES = (300, 600)  # PQ48x8 needs at least 256 training vectors


def test_fit_power_recovers_an_exact_power_law() -> None:
    ns = [1e4, 1e5, 1e6]
    a, s = bs.fit_power(ns, [3.0 * n**1.7 for n in ns])
    assert s == pytest.approx(1.7, abs=1e-9)
    assert a == pytest.approx(3.0, rel=1e-6)
    a, s = bs.fit_power(ns, [50.0 * n**-0.5 for n in ns])  # throughput falls with N
    assert s == pytest.approx(-0.5, abs=1e-9)
    c, m = bs.fit_linear(ns, [120.0 + 0.002 * n for n in ns])
    assert (c, m) == (pytest.approx(120.0), pytest.approx(0.002))


def test_factory_strings_and_nlist_are_the_dense_stages() -> None:
    """The benchmark builds the index the dense stage builds with its defaults, at every size: at 1,000 vectors
    ``round(4 * sqrt(n))`` would be 126 lists, the stage caps it at ``n // 39`` = 25."""
    assert bs.factory_string("flat", 10_000) == "Flat"
    assert bs.factory_string("hnsw", 10_000) == "HNSW32,Flat"
    assert bs.factory_string("ivf_pq", 1_000_000) == "IVF4000,PQ48x8"
    assert bs.factory_string("ivf_pq", 1_000) == "IVF25,PQ48x8"
    assert bs.factory_string("ivf_pq_np", 1_000) == "IVF25,PQ48x8np"
    for kind in faiss_index.INDEX_KINDS:
        for n in (300, 1_000, 10_000, 100_000, 1_000_000):
            assert bs.factory_string(kind, n) == faiss_index.factory_string(kind, None, n, bs.DIM), (kind, n)
    assert bs.ivf_nlist(100_000) == round(4 * math.sqrt(100_000)) == 1265
    assert bs.ivf_nlist(10_000) == 10_000 // 39 == 256
    hnsw, ivf = faiss_index.DEFAULTS["hnsw"], faiss_index.DEFAULTS["ivf_pq"]
    assert (bs.HNSW_M, bs.HNSW_EF_CONSTRUCTION, bs.HNSW_EF_SEARCH) == (
        hnsw["m"],
        hnsw["ef_construction"],
        hnsw["ef_search"],
    )
    assert bs.IVF_NPROBE == ivf["nprobe"]


@pytest.fixture(scope="module")
def records() -> list[dict]:
    if not (DATASETS / "scifact" / "corpus.jsonl").exists():
        pytest.skip("shared datasets not present")
    setup = bs.Setup(dataset=DATASETS / "scifact", queries=20, rank_bm25_queries=10)
    return bs.run_all(SIZES, KINDS, setup, raw=None, in_process=True)


@pytest.mark.slow  # every index kind built and queried at two sizes of the shared SciFact (~15 s): make test-slow
def test_every_kind_at_every_size_has_positive_figures(records: list[dict]) -> None:
    assert {(r["kind"], r["n"]) for r in records} == {(k, n) for k in KINDS for n in SIZES}
    for r in records:
        assert r["build_wall"] > 0 and r["build_cpu"] >= 0 and r["peak_rss_mb"] > 0, r
        if r["kind"] != "tokenize":
            assert r["qps"] > 0 and r["n_queries"] > 0, r
        if r["kind"] in ("bm25s", "flat", "hnsw", "ivf_pq_np"):
            assert r["disk_mb"] > 0, r
        if r["kind"] in ("hnsw", "ivf_pq_np"):
            assert 0.0 <= r["recall_at_10"] <= 1.0
    hnsw = [r for r in records if r["kind"] == "hnsw"]
    assert min(r["recall_at_10"] for r in hnsw) >= 0.8  # a 600-point HNSW graph is close to exact


@pytest.mark.slow  # every index kind built and queried at two sizes of the shared SciFact (~15 s): make test-slow
def test_synthetic_tokens_equal_tokenizing_the_text(records: list[dict]) -> None:
    for r in records:
        if r["kind"] == "tokenize":
            assert r["same_as_per_word"] == 1.0
    toks = [r for r in records if r["kind"] == "bm25s"]
    assert toks[1]["tokens"] > toks[0]["tokens"] > 0


def test_the_chunks_do_not_depend_on_the_size() -> None:
    if not (DATASETS / "scifact" / "corpus.jsonl").exists():
        pytest.skip("shared datasets not present")
    model = bs.text_model(DATASETS / "scifact")
    assert bs.synth_texts(model, 50) == bs.synth_texts(model, 120)[:50]
    assert (bs.synth_vectors(50, None, 0.5, 0) == bs.synth_vectors(120, None, 0.5, 0)[:50]).all()


@pytest.mark.slow  # every index kind built and queried at two sizes of the shared SciFact (~15 s): make test-slow
def test_report_has_each_kind_and_a_plot(records: list[dict], tmp_path: Path) -> None:
    out = bs.report(records, bs.Setup(), {"machine": "test"}, tmp_path / "bench_scale.md")
    text = out.read_text()
    for kind in KINDS:
        assert f"| {kind} |" in text
    assert "at 10M" in text
    assert (tmp_path / "bench_scale.png").stat().st_size > 0
