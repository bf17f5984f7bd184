"""Defaults that depend on the corpus language follow it for every corpus, never a list of named corpora: the dense
encoder (``dense.model``) and the trained reranker's checkpoint (``rerank.train.base_model``) are
multilingual-e5-small on a Chinese corpus (declared, set or detected), all-MiniLM-L6-v2 otherwise; a model the user
names always wins; the choice is logged with its source and the fingerprint is the model's, however it was chosen."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ablate.data.corpus import load_corpus
from ablate.stages.rerank.cross_encoder import CrossEncoderReranker
from ablate.stages.retrievers.dense import DenseRetriever
from ablate.study.compare import differing_components, varying_params
from ablate.tracking import Tracker
from conftest import write_corpus
from inprocess import run_module

E5, MINILM = "multilingual-e5-small", "all-MiniLM-L6-v2"

ZH_DOCS = [
    {
        "_id": "d1",
        "title": "差旅费管理办法",
        "text": "市内交通费用每次最多报销八十元，超出部分须经主管审批。",
    },
    {"_id": "d2", "title": "食堂通知", "text": "公司食堂每周三中午提供素食午餐，欢迎员工前往。"},
    {"_id": "d3", "title": "发票说明", "text": "发票编号一零二的金额为一千二百五十元，已经付款。"},
    {"_id": "d4", "title": "年假制度", "text": "员工每年享有十五天带薪年假，须提前两周申请。"},
]
ZH_QUERIES = [
    {"_id": "q1", "text": "打车超标怎么报销？"},
    {"_id": "q2", "text": "食堂什么时候有素食？"},
    {"_id": "q3", "text": "年假有几天？"},
    {"_id": "t1", "text": "发票一零二付了多少钱？"},
]
ZH_QRELS = {"dev": [("q1", "d1", 1), ("q2", "d2", 1), ("q3", "d4", 1)], "train": [("t1", "d3", 1)]}

EN_DOCS = [
    {"_id": "d1", "title": "Travel policy", "text": "City transport is reimbursed up to 80 yuan per trip."},
    {"_id": "d2", "title": "Canteen", "text": "The canteen serves a vegetarian lunch every Wednesday."},
    {"_id": "d3", "title": "Leave", "text": "Employees have fifteen days of paid leave a year."},
]
EN_QUERIES = [{"_id": "q1", "text": "taxi fare limit"}, {"_id": "q2", "text": "vegetarian food"}]
EN_QRELS = {"dev": [("q1", "d1", 1), ("q2", "d2", 1)]}


@pytest.fixture(scope="module")
def zh_folder(tmp_path_factory) -> Path:
    """A Chinese BEIR-layout folder of one's own: no corpus.yaml, no named corpus config; the language is detected."""
    return write_corpus(tmp_path_factory.mktemp("lang") / "my_zh", ZH_DOCS, ZH_QUERIES, ZH_QRELS)


@pytest.fixture(scope="module")
def en_folder(tmp_path_factory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("lang") / "my_en", EN_DOCS, EN_QUERIES, EN_QRELS)


def ablate(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    return run_module("ablate", args, cwd=cwd, env=env)  # in this process: tests/inprocess.py


def _base(folder: Path, uri: str, exp: str, tmp: Path) -> list[str]:
    return [
        "corpus=beir",
        f"corpus.path={folder}",
        "corpus.split=dev",
        "variant=B",
        f"tracking.uri={uri}",
        f"tracking.experiment={exp}",
        f"cache.dir={tmp / 'cache'}",  # embeddings and candidates of its own; the converted e5 stays in the user cache
        "progress=false",
        "stats.bootstrap=100",
    ]


def _runs(uri: str, exp: str) -> dict[str, object]:
    """The experiment's finished job runs by their ``dense.model`` override (``default`` when none was given)."""
    t = Tracker(uri)
    out = {}
    for r in t.find_runs([t.experiment_id(exp, create=False)]):
        assert r.status == "FINISHED", r.tags.get("ablate.failure")
        if "dense.model" not in r.params:  # a sweep's parent
            continue
        overrides = [o.lstrip("+") for o in r.tags.get("ablate.overrides", "").split()]
        given = [o.split("=", 1)[1] for o in overrides if o.startswith("dense.model=")]
        out[given[0] if given else "default"] = r
    return out


def test_a_chinese_folder_of_ones_own_gets_the_multilingual_encoder_and_a_named_model_wins(
    zh_folder, mlflow_uri, tmp_path
):
    base = _base(zh_folder, mlflow_uri, "lang-zh", tmp_path)
    p = ablate(base, tmp_path)  # no dense.model given
    assert p.returncode == 0, p.stderr
    p = ablate([*base, "tracking.reuse=false", "-m", f"dense.model={E5},{MINILM}"], tmp_path)
    assert p.returncode == 0, p.stderr
    runs = _runs(mlflow_uri, "lang-zh")
    default, e5, minilm = runs["default"], runs[E5], runs[MINILM]
    assert (
        default.params["corpus.language"] == "zh" and default.params["corpus.language_source"] == "detected"
    )
    assert default.params["dense.model"] == E5  # not the English MiniLM
    assert default.params["dense.model_source"] == "language:zh"
    assert default.params["dense.query_prefix"] == "query: "  # the model's own prefixes, as for a named e5
    assert (e5.params["dense.model"], e5.params["dense.model_source"]) == (E5, "setting")
    assert (minilm.params["dense.model"], minilm.params["dense.model_source"]) == (MINILM, "setting")
    # the identity is the model's, however it was chosen: one fingerprint, shared caches, no factor between them
    assert default.fingerprints["dense"] == e5.fingerprints["dense"] != minilm.fingerprints["dense"]
    assert differing_components(default.fingerprints, e5.fingerprints) == []
    assert varying_params([default, e5]) == []
    assert default.metrics["dense_passages_encoded"] == len(ZH_DOCS)
    assert e5.metrics["dense_passages_encoded"] == 0 and e5.metrics["candidate_cache_hits"] == 1
    assert e5.metrics["ndcg_at_10"] == default.metrics["ndcg_at_10"]


def test_an_english_folder_keeps_the_english_encoder(en_folder, mlflow_uri, tmp_path):
    p = ablate(_base(en_folder, mlflow_uri, "lang-en", tmp_path), tmp_path)
    assert p.returncode == 0, p.stderr
    run = _runs(mlflow_uri, "lang-en")["default"]
    assert run.params["corpus.language"] == "en"
    assert (run.params["dense.model"], run.params["dense.model_source"]) == (MINILM, "language:en")


@pytest.mark.parametrize(
    ("manifest", "setting", "language", "source"),
    [
        (None, None, "zh", "detected"),
        ("language: zh\n", None, "zh", "declared"),
        ("language: en\n", "zh", "zh", "setting"),  # corpus.language=zh overrides what corpus.yaml declares
        ("language: en\n", None, "en", "declared"),
    ],
)
def test_the_stages_follow_the_language_however_it_was_decided(tmp_path, manifest, setting, language, source):
    folder = write_corpus(tmp_path / "c", ZH_DOCS, ZH_QUERIES, ZH_QRELS, manifest)
    snap = load_corpus(folder, language=setting)
    assert (snap.language, snap.language_source) == (language, source)
    want = E5 if language == "zh" else MINILM
    dense = DenseRetriever().bind(snap, "dev")
    assert (dense.model, dense.params()["model_source"]) == (want, f"language:{language}")
    named = DenseRetriever(model=want).bind(snap, "dev")
    assert named.params()["model_source"] == "setting"
    assert dense.fingerprint().key == named.fingerprint().key  # same model, same vectors and candidates
    rerank = CrossEncoderReranker(model="trained").bind(snap, "dev")
    train = rerank.params()["train"]
    assert (train["base_model"], train["base_model_source"]) == (want, f"language:{language}")
    other = MINILM if want == E5 else E5
    wins = CrossEncoderReranker(model="trained", train={"base_model": other}).bind(snap, "dev")
    assert (wins.params()["train"]["base_model"], wins.params()["train"]["base_model_source"]) == (
        other,
        "setting",
    )
    explicit = CrossEncoderReranker(model="trained", train={"base_model": want}).bind(snap, "dev")
    assert explicit.fingerprint().key == rerank.fingerprint().key != wins.fingerprint().key


def test_an_unbound_stage_whose_model_follows_the_language_has_no_identity_yet():
    stage = DenseRetriever()
    assert stage.params()["model"] is None and stage.params()["model_source"] is None
    with pytest.raises(RuntimeError, match="bind"):
        stage.fingerprint()
