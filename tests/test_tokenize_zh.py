"""Chinese and mixed text (issue 12): identifiers, clause numbers, grade codes, amounts, decimals, percentages,
full-width forms, mixed sentences; then the same cases at BM25 level; the corpus language and where it came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ablate.data.corpus import load_corpus
from ablate.data.types import Chunk, Query
from ablate.stages.retrievers.bm25 import BM25Index
from ablate.stages.text.tokenize import TOKENIZER_VERSION, Tokenizer

ZH = Tokenizer("zh")  # what the BM25 stage builds for a Chinese corpus (its default stemmer is "porter")
ZH_PORTER = Tokenizer("zh", stemmer="porter")
EN = Tokenizer("en", stemmer="porter")


def tok(text: str) -> list[str]:
    toks = ZH.tokenize(text)
    # none of these cases has an English word the stemmer would change
    assert ZH_PORTER.tokenize(text) == toks
    return toks


# -- identifiers -------------------------------------------------------------------------------------------------------
def test_invoice_number_whole_plus_parts() -> None:
    # the whole code makes INV-102 beat INV-103 (they share only "inv"); the parts let "INV 102" match
    assert tok("INV-102") == ["inv-102", "inv", "102"]
    assert tok("ＩＮＶ－１０２") == ["inv-102", "inv", "102"]
    assert tok("发票INV-102、INV-103") == ["发票", "inv-102", "inv", "102", "inv-103", "inv", "103"]


def test_clause_identifier_also_yields_its_dotted_number() -> None:
    assert tok("4.2-a") == ["4.2-a", "4.2", "4", "2"]  # "a" is an English stopword as a part
    assert tok("条款4.2-A规定") == ["条款", "4.2-a", "4.2", "4", "2", "a", "规定"]  # a capital is a code
    assert tok("第4.2-a条") == ["第", "4.2-a", "4.2", "4", "2", "条"]


@pytest.mark.parametrize("text", ["第4.2条", "第 4.2 条", "第４．２条", "第 4.2条"])
def test_clause_number_the_same_however_written(text: str) -> None:
    assert tok(text) == ["第", "4.2", "4", "2", "条"]


def test_clause_number_without_ordinal() -> None:
    assert tok("4.2条") == ["4.2", "4", "2", "条"]
    assert tok("4.2") == ["4.2", "4", "2"]


def test_grade_codes_stay_one_token() -> None:
    assert tok("P6") == ["p6"]
    assert tok("Ｐ６级") == ["p6", "级"]
    assert tok("M2及以上") == ["m2", "以上"]
    assert tok("P6-P7职级") == ["p6-p7", "p6", "p7", "职级"]


def test_capital_letters_are_codes_not_stopwords() -> None:
    assert tok("A类费用") == ["a", "类", "费用"]
    assert tok("IT部门") == ["it", "部门"]
    assert tok("it is a test") == ["test"]  # lower-case English words still lose their stopwords
    assert EN.tokenize("IT department") == ["depart"]  # English corpora: unchanged


# -- numbers -----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["80元", "80 元", "８０元", "８０ 元", "¥80元", "￥８０元"])
def test_amounts_with_units(text: str) -> None:
    assert tok(text) == ["80", "元"]


def test_decimals_kept_whole_plus_parts() -> None:
    assert tok("118.50") == ["118.50", "118", "50"]
    assert tok("１１８．５０元") == ["118.50", "118", "50", "元"]
    # no canonical form: 118.5 is not 118.50 (and clause 4.10 is not clause 4.1); they share only "118"
    assert tok("118.5") == ["118.5", "118", "5"]


def test_thousands_separators_join() -> None:
    assert tok("1,200元") == ["1200", "元"]
    assert tok("1200元") == ["1200", "元"]
    assert tok("RMB 12,345.50") == ["rmb", "12345.50", "12345", "50"]
    assert tok("1,2,3") == ["1", "2", "3"]  # not digit groups
    assert tok("100，200") == ["100", "200"]  # the Chinese comma separates, it never groups
    assert EN.tokenize("1,200") == ["1", "200"]  # English corpora: unchanged


def test_percentages() -> None:
    assert tok("10%") == ["10%", "10"]
    assert tok("１０％") == ["10%", "10"]
    assert tok("报销比例不超过12.5%") == ["报销", "比例", "超过", "12.5%", "12.5", "12", "5"]
    assert tok("10%-20%") == ["10%", "10", "20%", "20"]
    assert EN.tokenize("10%") == ["10"]  # English corpora: unchanged


# -- punctuation and mixed sentences ------------------------------------------------------------------------------------
def test_full_width_punctuation_never_becomes_a_token() -> None:
    assert tok("，。：；（）！？、“”《》【】…—·") == []
    assert tok("报销标准：（一）交通费；（二）住宿费。") == [
        "报销",
        "标准",
        "一",
        "交通",
        "交通费",
        "二",
        "住宿",
        "宿费",
        "住宿费",
    ]


def test_mixed_question_with_an_identifier() -> None:
    assert tok("请问INV-102的报销额度是多少？") == ["inv-102", "inv", "102", "报销", "额度"]


def test_mixed_english_and_chinese_words() -> None:
    assert tok("Shanghai 的市内交通费上限") == ["shanghai", "市内", "交通", "交通费", "上限"]
    assert ZH_PORTER.tokenize("Hotels in Shanghai的住宿标准") == ["hotel", "shanghai", "住宿", "标准"]


def test_version_bumped_and_jieba_deterministic() -> None:
    assert TOKENIZER_VERSION == "ablate-tokenizer/2"
    text = "根据《差旅费管理办法》第4.2条，P6及以上员工在Shanghai的市内交通费上限为80元/次。"
    first = Tokenizer("zh").tokenize(text)
    assert first == ZH.tokenize(text) == Tokenizer("zh").tokenize_many([text, text])[1]
    # the identifiers come out the same whatever Han text surrounds them (jieba never sees them)
    assert ["4.2", "4", "2"] == [t for t in first if t[0].isdigit()][:3] and "p6" in first and "80" in first


# -- BM25 ------------------------------------------------------------------------------------------------------------
DOCS = {
    "inv102": "发票INV-102：上海出租车费用，金额 118.50 元，已报销。",
    "inv103": "发票INV-103：北京住宿费用，金额 1,200 元，待审批。",
    "c41": "第 4.1 条 住宿标准：P6 及以上员工每晚不超过 500 元。",
    "c42": "第 4.2 条 市内交通：Shanghai 市内交通费每次上限 80 元，超出部分需直属上级审批。",
    "c43": "第 4.3 条 餐费补贴：每天 100 元，出差不满半天按 50% 发放。",
    "c24": "附件 2.4：报销流程说明，发票须在 30 天内提交。",
}


@pytest.fixture(scope="module")
def index() -> BM25Index:
    chunks = [Chunk(k, k, v) for k, v in DOCS.items()]
    return BM25Index(chunks, Tokenizer("zh", stemmer="porter"))


def _ids(index: BM25Index, query: str) -> list[str]:
    return [h.chunk_id for h in index.search([Query("q", query)], depth=10).get("q")]


def test_bm25_invoice_number_beats_its_neighbour(index: BM25Index) -> None:
    hits = index.search([Query("q", "INV-102 金额")], depth=10).get("q")
    assert [h.chunk_id for h in hits[:2]] == ["inv102", "inv103"]
    assert hits[0].score > 2 * hits[1].score


def test_bm25_clause_number_however_written(index: BM25Index) -> None:
    for q in ("第4.2条", "4.2条", "第４．２条"):
        assert _ids(index, q)[0] == "c42", q


def test_bm25_full_width_amount_matches(index: BM25Index) -> None:
    assert _ids(index, "８０元")[0] == "c42"
    assert _ids(index, "1200元")[0] == "inv103"
    assert _ids(index, "118.50")[0] == "inv102"


def test_bm25_percentage_and_grade_code(index: BM25Index) -> None:
    assert _ids(index, "50%")[0] == "c43"
    assert _ids(index, "P6住宿")[0] == "c41"


def test_bm25_mixed_language_query(index: BM25Index) -> None:
    assert _ids(index, "Shanghai 的市内交通费上限")[0] == "c42"
    assert _ids(index, "请问Shanghai taxi的上限是多少？")[0] == "c42"


# -- the corpus language: declared or detected, and recorded ---------------------------------------------------------
def _corpus(root: Path, docs: list[str], manifest: str | None = None) -> Path:
    root.mkdir()
    lines = [json.dumps({"_id": f"d{i}", "text": t}, ensure_ascii=False) for i, t in enumerate(docs)]
    (root / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "INV-102"}) + "\n", encoding="utf-8")
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td0\t1\n", encoding="utf-8")
    if manifest is not None:
        (root / "corpus.yaml").write_text(manifest, encoding="utf-8")
    return root


def test_corpus_language_detected_declared_or_set(tmp_path: Path) -> None:
    zh_docs = ["发票INV-102的金额是118.50元", "第4.2条市内交通费上限80元"]
    detected = load_corpus(_corpus(tmp_path / "a", zh_docs))
    assert (detected.language, detected.language_source) == ("zh", "detected")
    declared = load_corpus(_corpus(tmp_path / "b", zh_docs, "name: b\nlanguage: zh\n"))
    assert (declared.language, declared.language_source) == ("zh", "declared")
    auto = load_corpus(_corpus(tmp_path / "c", ["An English invoice INV-102"], "name: c\nlanguage: auto\n"))
    assert (auto.language, auto.language_source) == ("en", "detected")
    setting = load_corpus(tmp_path / "b", language="en")
    assert (setting.language, setting.language_source) == ("en", "setting")
    rec = detected.manifest_record()
    assert (rec["language"], rec["language_source"]) == ("zh", "detected")
