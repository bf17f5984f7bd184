"""The own-data path without guesses, through the real entry points: ingest of a user's mixed Chinese/English folder
(the label unit and the chunk ids to label, the language picked and why), ``ablate.init``'s template (the no-answer
convention; names never repeat, whatever the folder), the one line naming no-answer questions before a run, and a
chunker sweep whose cells would be one run refused before anything runs."""

from __future__ import annotations

import csv
import json
import re
import subprocess
from pathlib import Path

import pytest

from ablate.data.chunk_list import PREVIEW_CHARS
from ablate.data.chunking import ChunkerSpec, check_chunker_sweep, chunk_corpus
from ablate.data.corpus import load_corpus
from ablate.data.language import MIX_SHARE, language_mix
from ablate.data.study_template import build_template
from ablate.data.types import Document, Section
from ablate.errors import ConfigError
from test_ingest import ingest
from test_new_user import _documents, _run


def _mixed_folder(root: Path) -> Path:
    """The new user's folder (:func:`test_new_user._documents`: four English documents in Markdown, HTML, Word and
    PDF, two Chinese ones in text and Markdown) and two more that state their effective date in the text, one in
    each language."""
    _documents(root)
    (root / "faq.txt").write_text(
        "Expense FAQ\n\nThis FAQ takes effect on 2026-03-01.\n\nKeep every receipt for five years.\n",
        encoding="utf-8",
    )
    (root / "报销.txt").write_text(
        "住宿报销规定\n\n本规定自2026年1月1日起生效。\n\n第1条 住宿费每晚不超过650元。\n", encoding="utf-8"
    )
    return root


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    tmp = tmp_path_factory.mktemp("own")
    out = tmp / "corpus"
    p = ingest(str(_mixed_folder(tmp / "docs")), "--out", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    return out, p


def test_a_mixed_folder_gets_one_line_and_the_multilingual_default(mixed):
    out, p = mixed
    lines = [line for line in p.stdout.splitlines() if "mix languages" in line]
    assert len(lines) == 1, p.stdout
    (line,) = lines
    assert "3 Chinese and 5 English documents" in line and "language zh" in line
    assert "multilingual-e5-small" in line and "corpus.language=en" in line and "language: en" in line
    text = (out / "corpus.yaml").read_text(encoding="utf-8")
    assert "# detected per document: 3 Chinese and 5 English documents" in text
    (out / "queries.jsonl").write_text('{"_id": "q1", "text": "taxi"}\n', encoding="utf-8")
    snap = load_corpus(out)
    assert snap.language == "zh" and snap.qrels_unit == "chunk"
    langs = {d: doc.metadata["lang"] for d, doc in snap.documents.items()}
    assert {d for d, lang in langs.items() if lang == "zh"} == {"ZH-REIMB", "ZH-SAFETY", "报销"}
    assert "| 报销 | 报销.txt | text | zh |" in (out / "ingest_report.md").read_text(encoding="utf-8")


def test_dates_stated_in_the_text_and_not_read_get_one_line(mixed):
    out, p = mixed
    lines = [line for line in p.stdout.splitlines() if "effective date in their text" in line]
    assert len(lines) == 1, p.stdout
    (line,) = lines
    assert line.startswith("note: 2 document(s) state an effective date in their text (")
    assert "faq: 'takes effect on 2026-03-01'" in line and "报销: '2026年1月1日起生效'" in line
    assert "(1 document(s) are dated, from their front matter or sidecar)" in line  # POL-TRAVEL
    assert "effective_date: YYYY-MM-DD" in line
    dates = {d["_id"]: d.get("effective_date") for d in map(json.loads, (out / "corpus.jsonl").open("rb"))}
    assert {d: v for d, v in dates.items() if v} == {"POL-TRAVEL": "2026-01-01"}


def test_one_language_gets_no_line(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(3):
        (docs / f"p{i}.md").write_text(f"# Policy {i}\n\n## 1. Rule\n\nRule number {i} applies.\n", "utf-8")
    p = ingest(str(docs), "--out", str(tmp_path / "c"), "--quiet")
    assert p.returncode == 0, p.stderr
    assert "mix languages" not in p.stdout and "language en" in p.stdout
    assert "# detected per document" not in (tmp_path / "c" / "corpus.yaml").read_text(encoding="utf-8")


def test_the_corpus_language_follows_the_documents_counted_one_by_one():
    n = 20
    few = round(MIX_SHARE * n)
    assert language_mix(["zh"] * (few - 1) + ["en"] * (n - few + 1)).language == "en"  # a stray, not a mix
    mix = language_mix(["zh"] * few + ["en"] * (n - few))
    assert mix.mixed and mix.language == "zh" and mix.counts == {"zh": few, "en": n - few}
    assert language_mix(["zh"] * n).language == "zh" and not language_mix(["zh"] * n).mixed
    assert language_mix([]).language == "en"
    # one long English document with a few Chinese ones: pooled characters would say en; per document it is a mix
    docs = ["word " * 5000, "中文文件" * 10, "中文规定" * 10]
    from ablate.data.language import corpus_language, detect_language

    assert detect_language(docs) == "en" and corpus_language(docs).language == "zh"


def test_qrels_unit_and_the_chunk_ids_to_label_are_written_and_said(mixed):
    out, p = mixed
    text = (out / "corpus.yaml").read_text(encoding="utf-8")
    assert (
        "qrels_unit: chunk\n" in text and "# the ids your labels (qrels/*.tsv, corpus-id column) name" in text
    )
    with (out / "chunks.tsv").open(encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    assert rows[0] == ["chunk-id", "doc-id", "version", "text"]
    snap = load_corpus(out)
    assert [r[0] for r in rows[1:]] == [c.chunk_id for c in snap.chunks]
    assert [r[1] for r in rows[1:]] == [c.doc_id for c in snap.chunks]
    assert all(0 < len(r[3]) <= PREVIEW_CHARS and "\n" not in r[3] for r in rows[1:])
    assert "POL-TRAVEL#2" in {r[0] for r in rows} and "报销#art-1" in {r[0] for r in rows}
    said = [line for line in p.stdout.splitlines() if "chunks.tsv" in line and "qrels_unit: chunk" in line]
    assert len(said) == 1 and str(out / "chunks.tsv") in said[0]


def test_a_kept_qrels_unit_is_not_rewritten_and_a_doc_unit_is_said(mixed, tmp_path):
    out, _ = mixed
    docs = tmp_path / "docs"
    _mixed_folder(docs)
    again = tmp_path / "again"
    assert ingest(str(docs), "--out", str(again), "--quiet").returncode == 0
    text = (again / "corpus.yaml").read_text(encoding="utf-8").replace("qrels_unit: chunk", "qrels_unit: doc")
    (again / "corpus.yaml").write_text(text, encoding="utf-8")
    p = ingest(str(docs), "--out", str(again), "--quiet")
    assert p.returncode == 0, p.stderr
    assert "qrels_unit: doc\n" in (again / "corpus.yaml").read_text(encoding="utf-8")
    assert any("labels name document ids (qrels_unit: doc" in line for line in p.stdout.splitlines())


def _docs(spec: dict[str, int]) -> dict[str, Document]:
    """Documents named as a user names them (``expense-policy``), each with the given number of sections."""
    return {
        d: Document(
            d, d.title(), "", sections=tuple(Section(str(i + 1), f"Rule {i} of {d}.") for i in range(n))
        )
        for d, n in spec.items()
    }


@pytest.mark.parametrize("unit", ["doc", "chunk"])
@pytest.mark.parametrize(
    "spec",
    [{"expense-policy": 4}, {"expense-policy": 3, "travel": 1}, {"a": 1, "b": 1, "c": 5}, {"only": 1}],
    ids=["one-doc", "two-docs", "three-docs", "one-chunk"],
)
def test_the_template_never_names_one_unit_twice_in_a_question(unit, spec):
    docs = _docs(spec)
    t = build_template(docs, chunk_corpus(docs, ChunkerSpec("clause")), unit, {})
    for q in t.queries:
        assert not re.search(r"(\w[\w.#-]*) and \1\b", q["text"]), q["text"]
        parts = [s["evidence"][0] for s in q.get("subquestions", [])]
        assert len(parts) == len(set(parts))
    assert len(t.labels) == len(set((q, u) for q, u, _ in t.labels))  # no label row twice


def test_init_states_the_no_answer_rule_and_where_the_ids_are(mixed, tmp_path):
    out, _ = mixed
    corpus = tmp_path / "c"
    import shutil

    shutil.copytree(out, corpus)
    (corpus / "queries.jsonl").unlink()
    (corpus / "chunks.tsv").unlink()
    p = _run("ablate.init", [str(corpus)], tmp_path)
    assert p.returncode == 0, p.stderr
    assert (corpus / "chunks.tsv").is_file() and f"wrote {corpus / 'chunks.tsv'}" in p.stdout
    steps = (corpus / "NEXT.md").read_text(encoding="utf-8")
    assert "chunks.tsv" in steps and "grade-0 rows only" in steps and "no-answer question" in steps
    template = [json.loads(line) for line in (corpus / "queries.jsonl").read_text("utf-8").splitlines()]
    (na,) = [q for q in template if "no-answer" in q["tags"]]
    assert "grade-0 rows only" in na["text"] and na["answers"] == []


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return _run("ablate", args, cwd)


def test_questions_without_a_relevant_row_get_one_line_before_the_run(mixed, tmp_path, mlflow_uri):
    out, _ = mixed
    import shutil

    corpus = tmp_path / "c"
    shutil.copytree(out, corpus)
    qs = [
        {"_id": "q1", "text": "How much is a taxi ride in Shanghai?", "answers": ["80 yuan"]},
        {"_id": "q2", "text": "Can I bring my dog to the office?", "answers": []},
        {"_id": "q3", "text": "Where is the canteen?", "answers": []},
    ]
    (corpus / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qs), encoding="utf-8")
    (corpus / "qrels").mkdir()
    (corpus / "qrels" / "labels.tsv").write_text("q1\tPOL-TRAVEL#2\t2\nq2\tHR-LEAVE#1\t0\n", encoding="utf-8")
    args = ["corpus=beir", f"corpus.path={corpus}", "variant=A", "stats.bootstrap=50",
            f"tracking.uri={mlflow_uri}", "tracking.experiment=own-na"]  # fmt: skip
    p = _cli(args, tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    notes = [line for line in p.stderr.splitlines() if "no-answer" in line]
    assert len(notes) == 1, p.stderr
    (note,) = notes
    assert "1 question(s) of split 'labels' have no label of grade >= 1 (q2)" in note
    assert "scored as no-answer questions" in note and "grade 2" in note
    assert "1 question(s) of queries.jsonl are in no labels file and never run (q3)" in note


def test_a_chunker_size_sweep_that_changes_no_chunk_is_refused_before_anything_runs(
    mixed, tmp_path, mlflow_uri
):
    out, _ = mixed
    import shutil

    corpus = tmp_path / "c"
    shutil.copytree(out, corpus)
    (corpus / "queries.jsonl").write_text('{"_id": "q1", "text": "taxi Shanghai"}\n', encoding="utf-8")
    (corpus / "qrels").mkdir()
    (corpus / "qrels" / "labels.tsv").write_text("q1\tPOL-TRAVEL#2\t2\n", encoding="utf-8")
    args = ["-m", "corpus=beir", f"corpus.path={corpus}", "variant=A", "++corpus.chunker.kind=clause,tokens",
            "++corpus.chunker.size=100,200", f"tracking.uri={mlflow_uri}", "tracking.experiment=own-sweep"]  # fmt: skip
    p = _cli(args, tmp_path)
    assert p.returncode == 2, p.stderr[-3000:]
    assert p.stderr.strip().count("\n") == 0 and "Traceback" not in p.stderr
    assert p.stderr.startswith(
        "error: corpus.chunker.size='100,200' is not valid; under corpus.chunker.kind=clause"
    )
    assert "these 2 cells would be one run" in p.stderr and "corpus.chunker.kind=tokens alone" in p.stderr
    assert not (tmp_path / "multirun").exists()
    p = _cli(
        [*args[:4], "corpus.chunker={kind:clause,size:100},{kind:clause,size:200}", *args[-2:]], tmp_path
    )
    assert (
        p.returncode == 2
        and "error: corpus.chunker='{kind:clause,size:100},{kind:clause,size:200}'" in p.stderr
    )
    assert not (tmp_path / "multirun").exists()


def test_the_sweep_check_reads_every_form_of_the_override():
    clause = ChunkerSpec("clause")
    sized = [(["corpus.chunker.size=100"], ChunkerSpec("tokens", 100, 20))]
    check_chunker_sweep([*sized, (["corpus.chunker.size=200"], ChunkerSpec("tokens", 200, 20))])
    check_chunker_sweep([(["variant=A"], clause), (["variant=B"], clause)])  # other settings: other cells
    check_chunker_sweep(
        [(["variant=A"], clause), (["variant=A"], clause)]
    )  # one cell twice: not the chunker's
    with pytest.raises(ConfigError, match="corpus.chunker.overlap='10,20'"):
        check_chunker_sweep(
            [(["++corpus.chunker.overlap=10"], None), (["++corpus.chunker.overlap=20"], None)]
        )
