"""Local cross-encoder fine-tuning: training pairs, content-addressed model cache, saved folder, CLI."""

from __future__ import annotations

import json
import os
import random

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import pytest

from ablate.app.train_reranker import main
from ablate.cache import Cache
from ablate.errors import ConfigError, InputError, ModelUnavailableError
from ablate.stages.rerank.training import META_FILE, TRAINED_KIND, effective_epochs, train_cross_encoder
from ablate.stages.rerank.training_pairs import build_pairs, pairs_from_snapshot, pairs_sha256
from ablate.stages.text.models import resolve_model

CHUNKS = {f"c{i}": f"passage number {i}" for i in range(40)}
QUERIES = {"q1": "first question", "q2": "second question", "q0": "a question nobody answered"}
POS = {"q1": ["c1"], "q2": ["c2", "c3"]}
NEG = {  # BM25 order; positives are in there too, as they would be
    "q1": ["c1", "c5", "c6", "c7", "c8", "c9", "c10"],
    "q2": [f"c{i}" for i in range(2, 32)],
    "q0": ["c4", "c5"],
}


# -- build_pairs ----------------------------------------------------------------------------------------------------
def test_pairs_positives_first_never_as_negatives():
    pairs = build_pairs(QUERIES, POS, NEG, CHUNKS, max_negatives=7, seed=13)
    by_q: dict[str, list[tuple[str, float]]] = {}
    for q, p, y in pairs:
        by_q.setdefault(q, []).append((p, y))
    assert set(by_q) == {"first question", "second question"}  # q0 has no positive: skipped
    q1 = by_q["first question"]
    assert q1[0] == ("passage number 1", 1.0)
    assert [p for p, y in q1 if y == 0.0] == [CHUNKS[c] for c in NEG["q1"][1:]]  # 6 < 7: all, in rank order
    q2 = by_q["second question"]
    assert [y for _, y in q2] == [1.0, 1.0] + [0.0] * 7
    negs = [p for p, y in q2 if y == 0.0]
    assert not {"passage number 2", "passage number 3"} & set(negs)
    ranks = [int(p.split()[-1]) for p in negs]
    assert ranks == sorted(ranks)  # sampled negatives keep BM25 order


def test_pairs_are_deterministic_and_seeded():
    a = build_pairs(QUERIES, POS, NEG, CHUNKS, max_negatives=3, seed=13)
    b = build_pairs(dict(reversed(list(QUERIES.items()))), POS, NEG, CHUNKS, max_negatives=3, seed=13)
    assert a == b  # independent of the mappings' order
    c = build_pairs(QUERIES, POS, NEG, CHUNKS, max_negatives=3, seed=14)
    assert c != a and len(c) == len(a)  # another seed samples other negatives from the pool of 28
    assert pairs_sha256(a) == pairs_sha256(b) != pairs_sha256(list(reversed(a)))


def test_pairs_exclude_and_limits():
    pairs = build_pairs(QUERIES, POS, NEG, CHUNKS, max_negatives=2, seed=1, exclude={"q1": ["c5", "c6"]})
    q1_negs = [p for q, p, y in pairs if q == "first question" and y == 0.0]
    assert len(q1_negs) == 2 and not {"passage number 5", "passage number 6"} & set(q1_negs)
    none = build_pairs(QUERIES, POS, NEG, CHUNKS, max_negatives=0)
    assert all(y == 1.0 for _, _, y in none) and len(none) == 3
    with pytest.raises(ConfigError, match="max_negatives"):
        build_pairs(QUERIES, POS, NEG, CHUNKS, max_negatives=-1)
    with pytest.raises(InputError, match="chunk 'c1'"):
        build_pairs(QUERIES, POS, NEG, {}, max_negatives=2)


# -- training -------------------------------------------------------------------------------------------------------
TINY = [
    ("Who wrote Hamlet?", "Hamlet is a tragedy written by William Shakespeare.", 1.0),
    ("Who wrote Hamlet?", "Paris is the capital of France.", 0.0),
    ("Who wrote Hamlet?", "Spiders have eight legs.", 0.0),
    ("Who wrote Hamlet?", "Water boils at 100 degrees Celsius.", 0.0),
    ("What is the capital of France?", "Paris is the capital of France.", 1.0),
    ("What is the capital of France?", "Hamlet is a tragedy written by William Shakespeare.", 0.0),
    ("What is the capital of France?", "Spiders have eight legs.", 0.0),
    ("What is the capital of France?", "Water boils at 100 degrees Celsius.", 0.0),
]


@pytest.fixture(scope="module")
def trained_twice(tmp_path_factory):
    import sentence_transformers.cross_encoder.losses  # noqa: F401  (importing it draws from `random`; training must not)
    import transformers  # noqa: F401

    root = tmp_path_factory.mktemp("ce-cache")
    random.seed(5)
    np.random.seed(5)
    expected = (random.random(), float(np.random.random()))
    random.seed(5)
    np.random.seed(5)
    first = train_cross_encoder(
        TINY, epochs=1, batch_size=8, max_length=64, min_steps=0, cache=Cache(root), show_progress=False
    )
    after = (random.random(), float(np.random.random()))
    second = train_cross_encoder(
        TINY, epochs=1, batch_size=8, max_length=64, min_steps=0, cache=Cache(root), show_progress=False
    )
    return root, first, second, expected, after


def test_same_inputs_train_once(trained_twice):
    root, first, second, _, _ = trained_twice
    assert first.trained and not second.trained
    assert first.path == second.path and first.fingerprint == second.fingerprint and first.key == second.key
    assert first.n_pairs == second.n_pairs == len(TINY)
    # Layout: <cache>/reranker-trained/<key[:2]>/<key>/, nothing left over from the atomic save.
    folder = Cache(root).dir_for(TRAINED_KIND, first.key)
    assert first.path == str(folder.resolve())
    assert [p.name for p in folder.parent.iterdir()] == [first.key]
    meta = json.loads((folder / META_FILE).read_text())
    assert (
        meta["n_pairs"] == len(TINY)
        and meta["n_positive"] == 2
        and meta["pairs_sha256"] == pairs_sha256(TINY)
    )
    assert meta["hyper_parameters"]["max_length"] == 64 and meta["base_model"] == "all-MiniLM-L6-v2"


def test_training_restores_the_callers_random_state(trained_twice):
    _, _, _, expected, after = trained_twice
    assert after == expected


def test_saved_folder_is_a_cross_encoder(trained_twice):
    from sentence_transformers import CrossEncoder

    _, first, _, _, _ = trained_twice
    assert resolve_model(first.path).fingerprint == first.fingerprint
    model = CrossEncoder(first.path, device="cpu")
    scores = model.predict([(q, p) for q, p, _ in TINY[:2]])
    assert model.num_labels == 1 and scores.shape == (2,) and np.isfinite(scores).all()


def test_small_splits_are_cycled_up_to_min_steps():
    assert effective_epochs(190, 16, epochs=1, min_steps=100) == 9  # the demo corpus: 12 steps an epoch
    assert effective_epochs(10_000, 16, epochs=1, min_steps=100) == 1  # a real split is untouched
    assert effective_epochs(1, 16, epochs=1, min_steps=100) == 10  # a single pair is not repeated 100 times
    assert effective_epochs(32, 8, epochs=5, min_steps=0) == 5 and effective_epochs(8, 8, 20, 100) == 20


def test_bad_training_inputs_fail_before_any_work(tmp_path):
    cache = Cache(tmp_path)
    with pytest.raises(InputError, match="no pairs"):
        train_cross_encoder([], cache=cache)
    with pytest.raises(InputError, match="label 2"):
        train_cross_encoder([("q", "p", 2)], cache=cache)
    with pytest.raises(ConfigError, match="train_reranker.epochs"):
        train_cross_encoder(TINY, epochs=0, cache=cache)
    with pytest.raises(ConfigError, match="train_reranker.lr"):
        train_cross_encoder(TINY, lr=0.0, cache=cache)
    with pytest.raises(ModelUnavailableError, match="train_reranker.base_model"):
        train_cross_encoder(TINY, base_model="org/no-such-model-xyz", cache=cache)


# -- from a corpus, and the CLI -------------------------------------------------------------------------------------
TRAVEL_DOCS = [
    {"_id": f"T{i}", "title": f"Travel rule {i}", "text": f"Travel rule {i}: {body}"}
    for i, body in enumerate(
        [
            "taxi fares in the city are reimbursed up to 80 yuan per trip",
            "hotel rates are capped per night by city tier",
            "train travel is second class unless the trip exceeds six hours",
            "meal allowances for travel are paid per day",
            "travel insurance is arranged by the company",
            "visa fees for business travel are reimbursed",
        ]
    )
]
TRAVEL_QUERIES = [
    {"_id": "t1", "text": "how much taxi travel is reimbursed per trip", "split": "train"},
    {"_id": "t2", "text": "hotel travel cap per night", "split": "train"},
    {"_id": "t3", "text": "what about pets on travel", "split": "train"},  # no positive: skipped
]
TRAVEL_QRELS = {"train": [("t1", "T0", 2), ("t2", "T1", 1), ("t2", "T3", 0)]}


@pytest.fixture
def travel_corpus(tmp_path):
    from conftest import write_corpus

    return write_corpus(
        tmp_path / "travel", TRAVEL_DOCS, TRAVEL_QUERIES, TRAVEL_QRELS
    )  # BEIR: doc qrels, no manifest


def test_pairs_from_snapshot_uses_train_labels_and_bm25_negatives(travel_corpus):
    from ablate.data.corpus import load_corpus

    snap = load_corpus(travel_corpus)
    pairs = pairs_from_snapshot(snap, "train", max_negatives=3)
    assert pairs == pairs_from_snapshot(snap, "train", max_negatives=3)
    assert {q for q, _, _ in pairs} == {
        "how much taxi travel is reimbursed per trip",
        "hotel travel cap per night",
    }
    for q, pos in (
        ("how much taxi travel is reimbursed per trip", "T0"),
        ("hotel travel cap per night", "T1"),
    ):
        rows = [(p, y) for qq, p, y in pairs if qq == q]
        assert rows[0] == (snap.chunk_text[pos], 1.0) and [y for _, y in rows] == [1.0, 0.0, 0.0, 0.0]
        assert snap.chunk_text[pos] not in [p for p, y in rows[1:]]
    with pytest.raises(ConfigError, match="corpus.split"):
        pairs_from_snapshot(snap, "no-such-split")  # the snapshot names the splits it has


def test_cli_trains_then_hits_the_cache(travel_corpus, tmp_path, capsys):
    args = [
        "--corpus",
        str(travel_corpus),
        "--cache-dir",
        str(tmp_path),
        "--max-length",
        "64",
        "--min-steps",
        "0",
        "--quiet",
    ]
    assert main(args) == 0
    first = capsys.readouterr().out.strip()
    assert main(args) == 0
    assert capsys.readouterr().out.strip() == first
    assert (tmp_path / TRAINED_KIND).is_dir() and first.startswith(str(tmp_path.resolve()))


def test_cli_reports_user_errors_in_one_line(tmp_path, capsys):
    assert main(["--corpus", str(tmp_path / "missing"), "--cache-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_num_threads_is_not_in_the_trained_models_key_and_is_restored(trained_twice):
    """A different thread count finds the model trained with torch's default (it changes no weight beyond float
    rounding), and leaves torch's setting as it was."""
    import torch

    root, first, _, _, _ = trained_twice
    before = torch.get_num_threads()
    again = train_cross_encoder(
        TINY,
        epochs=1,
        batch_size=8,
        max_length=64,
        min_steps=0,
        cache=Cache(root),
        show_progress=False,
        num_threads=1 if before != 1 else 2,
    )
    assert not again.trained and again.key == first.key
    assert torch.get_num_threads() == before


def test_training_precision_is_validated_before_any_work(tmp_path):
    with pytest.raises(
        ConfigError, match=r"^train_reranker\.precision='fp16' is not valid; valid options: fp32, bf16"
    ):
        train_cross_encoder(TINY, cache=Cache(tmp_path), show_progress=False, precision="fp16")
