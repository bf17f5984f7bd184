"""Tokenizer rules: English, Chinese, mixed text, identifiers, stopwords/stemming, determinism."""

from __future__ import annotations

import pytest

from ablate.errors import ConfigError
from ablate.stages.text.tokenize import (
    ENGLISH_STOPWORDS,
    TOKENIZER_VERSION,
    Tokenizer,
    detect_language,
    is_identifier,
)


def test_english_words_lowercased_and_stopwords_removed():
    assert Tokenizer("en").tokenize("The Quick brown FOX jumps over the lazy dog.") == [
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "lazy",
        "dog",
    ]


def test_stopwords_off_keeps_them():
    toks = Tokenizer("en", stopwords=False).tokenize("The fox is in the box")
    assert toks == ["the", "fox", "is", "in", "the", "box"]


def test_stopword_list_is_lucenes_33_words():
    assert len(ENGLISH_STOPWORDS) == 33 and {"the", "a", "with", "will"} <= ENGLISH_STOPWORDS
    assert "what" not in ENGLISH_STOPWORDS


def test_stemming_on_and_off():
    text = "Running runners connected connections"
    assert Tokenizer("en").tokenize(text) == ["running", "runners", "connected", "connections"]
    assert Tokenizer("en", stemmer="english").tokenize(text) == ["run", "runner", "connect", "connect"]
    assert Tokenizer("en", stemmer="porter").tokenize("generalization") == ["gener"]


def test_lowercase_off():
    assert Tokenizer("en", lowercase=False).tokenize("The Fox INV-102") == ["Fox", "INV-102", "INV", "102"]


def test_possessive_and_apostrophes():
    assert Tokenizer("en").tokenize("the patient’s file; don't") == ["patient", "file", "dont"]


@pytest.mark.parametrize(
    "code,whole",
    [
        ("INV-102", "inv-102"),
        ("4.2-a", "4.2-a"),
        ("A-17/3", "a-17/3"),
        ("ISO-9001", "iso-9001"),
        ("v2.1", "v2.1"),
        ("SARS-CoV", "sars-cov"),
        ("MAX_VALUE", "max_value"),
    ],
)
def test_identifiers_kept_whole_plus_parts(code, whole):
    toks = Tokenizer("en").tokenize(f"see {code}.")
    assert toks[0] == "see" and toks[1] == whole
    assert toks.count(whole) == 1  # once, never split into a stopword-eaten or stemmed form


def test_identifier_parts_follow_word_rules():
    # "a" is a stopword as a part; the whole code keeps it
    assert Tokenizer("en").tokenize("A-17/3") == ["a-17/3", "17", "3"]
    assert Tokenizer("en", stemmer="english").tokenize("ISO-9001 standards") == [
        "iso-9001",
        "iso",
        "9001",
        "standard",
    ]


def test_compound_words_are_not_identifiers():
    assert not is_identifier("well-known") and not is_identifier("Well-Known") and not is_identifier("e.g")
    assert Tokenizer("en").tokenize("a well-known X-ray") == ["well", "known", "x", "ray"]


def test_sentence_punctuation_is_not_part_of_identifiers():
    assert Tokenizer("en").tokenize("Pay INV-102. Then v2.1!") == [
        "pay",
        "inv-102",
        "inv",
        "102",
        "v2.1",
        "v2",
        "1",
    ]


def test_full_width_forms_are_normalised():
    assert Tokenizer("en").tokenize("ＩＮＶ－１０２") == Tokenizer("en").tokenize("INV-102")


def test_chinese_segmentation_and_stopwords():
    toks = Tokenizer("zh").tokenize("北京是中国的首都。")
    assert "北京" in toks and "首都" in toks and "中国" in toks
    assert "的" not in toks and "是" not in toks and "。" not in toks
    kept = Tokenizer("zh", stopwords=False).tokenize("北京是中国的首都")
    assert "的" in kept and "是" in kept


def test_chinese_search_mode_emits_inner_words():
    search = Tokenizer("zh").tokenize("中华人民共和国")
    precise = Tokenizer("zh", jieba_mode="precise").tokenize("中华人民共和国")
    assert precise == ["中华人民共和国"]
    assert "人民" in search and "中华人民共和国" in search


def test_mixed_chinese_english_in_one_string():
    toks = Tokenizer("zh").tokenize("发票INV-102的金额是多少")
    assert toks == ["发票", "inv-102", "inv", "102", "金额"]
    # auto picks zh for this text, so the Chinese stopwords go too
    assert Tokenizer("auto").tokenize("发票INV-102的金额是多少") == toks


def test_han_is_segmented_even_in_english_mode():
    toks = Tokenizer("en").tokenize("Contact 北京 office")
    assert toks == ["contact", "北京", "office"]


def test_detect_language():
    assert detect_language(["An English sentence about invoices.", "Another one"]) == "en"
    assert detect_language(["这是一个中文句子。", "发票INV-102的金额是多少"]) == "zh"
    assert detect_language("The word 谢谢 means thank you in Mandarin") == "en"
    assert detect_language([]) == "en"


def test_tokenize_many_and_determinism():
    tok = Tokenizer("auto", stemmer="english")
    texts = ["Invoices INV-102 and INV-120", "发票INV-102的金额是多少", "", "   "]
    first = tok.tokenize_many(texts)
    assert first == [tok.tokenize(t) for t in texts] == tok.tokenize_many(texts)
    assert first[2] == [] and first[3] == []
    assert Tokenizer("auto", stemmer="english").tokenize_many(texts) == first


def test_fingerprint_names_every_parameter_and_version():
    fp = Tokenizer("zh", stopwords=False, stemmer="english").fingerprint()
    assert fp["version"] == TOKENIZER_VERSION
    assert (fp["language"], fp["stopwords"], fp["stemmer"], fp["lowercase"]) == ("zh", False, "english", True)
    assert Tokenizer("en").fingerprint() != Tokenizer("en", stemmer="english").fingerprint()
    assert Tokenizer("en").fingerprint() == Tokenizer("en").fingerprint()


def test_bad_settings_raise_config_error():
    with pytest.raises(ConfigError, match="language"):
        Tokenizer("fr")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="porter"):  # the message lists the valid algorithms
        Tokenizer("en", stemmer="klingon")


def test_stemming_never_yields_an_empty_token():
    toks = Tokenizer("en", stemmer="porter").tokenize("U.S. data on the patients' s-values")
    assert "" not in toks and toks == ["u", "data", "patient", "valu"]
