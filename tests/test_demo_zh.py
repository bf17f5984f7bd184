"""corpora/demo_zh is the demo's Chinese twin: same ids, versions, permissions, labels and splits; Chinese text;
every answer written verbatim in a grade-2 section of its question (the demo's convention)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ablate.data.corpus import load_corpus
from ablate.data.language import detect_language, han_share
from ablate.evaluation.generation import normalize_answer

CORPORA = Path(__file__).resolve().parents[1] / "corpora"
DEMO, ZH = CORPORA / "demo", CORPORA / "demo_zh"


@pytest.fixture(scope="module")
def both():
    return load_corpus(DEMO), load_corpus(ZH)


def _docs(snap):
    docs = snap.documents
    return {d.doc_id: d for d in (docs.values() if isinstance(docs, dict) else docs)}


def _judgements(snap):
    out: dict[str, dict[str, int]] = {}
    for sp in snap.splits:
        for qid, j in snap.split_qrels(sp).judgements.items():
            out.setdefault(qid, {}).update(j)
    return out


def test_manifest(both):
    _, zh = both
    assert (zh.name, zh.language, zh.qrels_unit, zh.label_version) == (
        "demo_zh",
        "zh",
        "chunk",
        "demo-zh-labels-v1",
    )
    assert zh.identities == load_corpus(DEMO).identities


def test_documents_and_chunks_mirror_the_demo(both):
    en, zh = both
    de, dz = _docs(en), _docs(zh)
    assert list(de) == list(dz) and len(dz) == 21
    for doc_id, e in de.items():
        z = dz[doc_id]
        assert (z.version, z.effective_date, z.acl, z.series) == (
            e.version,
            e.effective_date,
            e.acl,
            e.series,
        )
        assert [s.sid for s in z.sections] == [s.sid for s in e.sections]
        assert z.title != e.title
    assert [c.chunk_id for c in zh.chunks] == [c.chunk_id for c in en.chunks] and len(zh.chunks) == 147
    assert [(c.doc_id, c.version, c.acl) for c in zh.chunks] == [
        (c.doc_id, c.version, c.acl) for c in en.chunks
    ]


def test_qrels_are_the_demos(both):
    en, zh = both
    for sp in ("train", "dev", "test"):
        assert (ZH / "qrels" / f"{sp}.tsv").read_bytes() == (DEMO / "qrels" / f"{sp}.tsv").read_bytes()
        assert zh.split_qrels(sp).judgements == en.split_qrels(sp).judgements
        assert zh.split_qids(sp) == en.split_qids(sp)


def test_queries_mirror_the_demo(both):
    en, zh = both
    assert list(zh.queries) == list(en.queries) and len(zh.queries) == 64
    for qid, e in en.queries.items():
        z = zh.queries[qid]
        assert (z.tags, z.persona, z.as_of, z.split, z.group) == (
            e.tags,
            e.persona,
            e.as_of,
            e.split,
            e.group,
        )
        assert [(s.sid, s.evidence) for s in z.subquestions] == [(s.sid, s.evidence) for s in e.subquestions]
        assert len(z.answers) == len(e.answers) and len(z.answer_parts) == len(e.answer_parts)
        assert z.text != e.text and all(
            s.text != t.text for s, t in zip(z.subquestions, e.subquestions, strict=True)
        )


def test_every_answer_is_written_in_a_grade_2_section_of_its_question(both):
    _, zh = both
    text = {f"{d.doc_id}#{s.sid}": s.text for d in _docs(zh).values() for s in d.sections}
    judged = _judgements(zh)
    missing = []
    for qid, q in zh.queries.items():
        for a in (*q.answers, *(alias for part in q.answer_parts for alias in part)):
            gold = [u for u, g in judged.get(qid, {}).items() if g == 2]
            if not any(a in text[u] and normalize_answer(a) in normalize_answer(text[u]) for u in gold):
                missing.append((qid, a))
    assert not missing
    no_answer = [q for q in zh.queries.values() if "no-answer" in q.tags]
    assert no_answer and all(not q.answers for q in no_answer)


def test_the_text_is_chinese(both):
    _, zh = both
    assert detect_language([c.text for c in zh.chunks]) == "zh"
    for d in _docs(zh).values():
        assert detect_language([d.title, *(s.text for s in d.sections)]) == "zh", d.doc_id
    for q in zh.queries.values():
        assert detect_language(q.text) == "zh", q.qid
        assert all(han_share(a) > 0 or re.fullmatch(r"[\d\-.,%]+", a) for a in q.answers), q.qid


def test_identifiers_and_amounts_are_kept_verbatim(both):
    _, zh = both
    text = {f"{d.doc_id}#{s.sid}": s.text for d in _docs(zh).values() for s in d.sections}
    assert "80 元" in text["POL-TRAVEL-2026#4.2-a"] and "60 元" in text["POL-TRAVEL-2025#4.2"]
    assert all(x in text["POL-TRAVEL-2026#4.2-b"] for x in ("118.50 元", "38.50 元", "直属上级", "4.2-a"))
    assert "INV-102" in text["INV-102#header"] and "INV-102" in text["FIN-AUDIT-2026#2"]
    assert text["TBL-HOTEL-2026#row-shanghai"].startswith("上海 | 一线 | 员工：650 元")
    # exact-id questions still name the identifier they ask about
    for q in zh.queries.values():
        if "exact-id" in q.tags:
            assert re.search(r"INV-\d{3}|第 \d\.\d 条", q.text), q.qid


def test_readme_counts(both):
    _, zh = both
    readme = (ZH / "README.md").read_text(encoding="utf-8")
    m = re.search(
        r"documents: (\d+) \((\d+) finance-only\); sections \(= clause chunks\): (\d+);\s+queries: (\d+); "
        r"groups: (\d+)",
        readme,
    )
    docs = _docs(zh).values()
    assert m and tuple(map(int, m.groups())) == (
        len(docs),
        sum(1 for d in docs if d.acl),
        len(zh.chunks),
        len(zh.queries),
        len({q.group for q in zh.queries.values()}),
    )


def test_the_multirun_flag_may_follow_the_overrides():
    from ablate.app.argv import flags_first

    assert flags_first(["corpus=demo_zh", "-m", "variant=A,B"]) == ["-m", "corpus=demo_zh", "variant=A,B"]
    assert flags_first(["--multirun", "variant=A,B"]) == ["--multirun", "variant=A,B"]
    assert flags_first(["variant=A"]) == ["variant=A"]


def test_non_space_count_is_str_isspace_over_every_code_point():
    """The corpus-wide character count uses str.split(); it must agree with str.isspace on every character."""
    from ablate.data.language import _non_space

    text = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    assert _non_space(text) == sum(1 for c in text if not c.isspace())
    assert _non_space(" \u3000a\u00a0b\u2028") == 2
