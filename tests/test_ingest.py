"""``python -m ablate.ingest``: real files in every format, English and Chinese, made here with well-kept writers
(python-docx, reportlab with the CJK font STSong-Light), read into a corpus folder that ablate's own loader and
``python -m ablate`` accept; sections, ids, tables, metadata, what is skipped and what is refused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.data.corpus import load_corpus
from ablate.ingest.clauses import find_clause
from ablate.ingest.ids import doc_id_of

MD = """---
title: Travel Expense Policy 2026
version: "2026"
effective_date: 2026-01-01
series: POL-TRAVEL
owner: Finance Department
---
# Travel Expense Policy

This policy sets the rules for business travel.

## 4 Transport

4.1 Air travel
All employees fly economy class.
4.2 Intra-city transport
4.2-a Taxis in Shanghai are reimbursed up to 80 yuan per trip.
4.2-b Any excess needs approval by the direct supervisor.

Article 3 Scope
This policy applies to all employees of the company.

## Hotel caps

| City | Staff | Manager |
|---|---|---|
| Shanghai | 650 yuan | 850 yuan |
| Beijing | 600 yuan | 800 yuan |

1. Book through TripDesk
2. Keep the invoice
"""

HTML = """<!doctype html><html><head><meta charset="utf-8"><title>住宿标准 Hotel rates</title>
<style>p {color: red}</style></head><body><nav>Home | Policies</nav>
<h1>住宿费标准</h1><p>本标准适用于国内出差。</p>
<h2>第三章 报销标准</h2>
<p>第十二条 住宿费按下表执行，超出部分自理。</p>
<table><caption>城市住宿上限</caption>
<tr><th>城市</th><th>员工</th><th>经理</th></tr>
<tr><td>上海</td><td>650元</td><td>850元</td></tr>
<tr><td>北京</td><td>600元</td><td>800元</td></tr></table>
<h2>Notes</h2><p>Rates include taxes.<br>Breakfast is not reimbursed.</p>
<table><tr><th>Step</th><th>Who</th></tr><tr><td></td><td>Employee</td></tr><tr><td></td><td>Manager</td></tr></table>
</body></html>"""

PDF_LINES = [
    ["报销管理规定", "第一章 总则", "第一条 本规定适用于公司全体员工。", "第三章 报销标准",
     "第十二条 住宿费每晚不超过650元。", "第4.2条 市内交通每次不超过80元。", "3"],
    [],  # a page without text: named in the report
    ["Article 7 Exceptions", "Exceptions need the approval of the CFO.", "- 3 -"],
]  # fmt: skip


def make_docx(path: Path) -> None:
    import docx

    d = docx.Document()
    d.add_heading("Procurement Policy", 0)  # the Title style
    d.add_paragraph("Rules for buying goods and services.")
    d.add_heading("Section 5 Approvals", 1)
    d.add_paragraph("Purchases need the approval of the budget owner.")
    d.add_heading("5.1 Quotes", 2)
    d.add_paragraph("Purchases above 10,000 yuan need two written quotes.")
    d.add_heading("第4.2条 付款", 2)
    d.add_paragraph("付款须在收到发票后30天内完成。")
    t = d.add_table(rows=3, cols=2)
    for r, (a, b) in enumerate([("Item", "Limit"), ("Laptop", "12,000 yuan"), ("Monitor", "2,500 yuan")]):
        t.cell(r, 0).text, t.cell(r, 1).text = a, b
    d.save(str(path))


def make_pdf(path: Path, pages: list[list[str]], encrypt: str | None = None) -> None:
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont
    from reportlab.pdfgen import canvas

    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    c = canvas.Canvas(str(path))
    for lines in pages:
        c.setFont("STSong-Light", 12)
        if not lines:
            c.rect(50, 400, 300, 200, fill=1)  # a "scanned" page: a picture, no text
        for i, line in enumerate(lines):
            c.drawString(60, 780 - 22 * i, line)
        c.showPage()
    c.save()
    if encrypt:
        import pypdf

        w = pypdf.PdfWriter(clone_from=str(path))
        w.encrypt(user_password=encrypt, owner_password="owner", algorithm="RC4-128")
        w.write(str(path))


def make_docs(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "travel-2026.md").write_text(MD, encoding="utf-8")
    (root / "hotel.html").write_text(HTML, encoding="utf-8")
    make_docx(root / "procurement.docx")
    (root / "cn").mkdir()
    make_pdf(root / "cn" / "报销 规定.pdf", PDF_LINES)
    (root / "cn" / "报销 规定.pdf.meta.yaml").write_text(
        "version: '2025'\neffective_date: 2025-03-01\nseries: POL-RULES\nacl: [finance]\nlang: zh\n",
        encoding="utf-8",
    )
    (root / "faq.txt").write_text(
        "Expense FAQ\n\nSection 2 Receipts\nKeep every receipt for five years.\n\nSection 3 Meals\n"
        "Meals are covered by the daily allowance.\n",
        encoding="utf-8",
    )
    make_pdf(root / "scan.pdf", [[]])
    (root / "empty.pdf").write_bytes(b"")
    make_pdf(root / "locked.pdf", [["Secret salary table"]], encrypt="s3cret")
    (root / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (root / ".hidden.md").write_text("# not read\n")
    return root


def ingest(
    *args: str, cwd: Path | None = None, env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``python -m ablate.ingest *args``, run in this process (tests/inprocess.py)."""
    from inprocess import run_module

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **(env_extra or {})}
    return run_module("ablate.ingest", args, cwd=cwd or os.getcwd(), env=env)


def records(out: Path) -> dict[str, dict]:
    lines = (out / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    return {r["_id"]: r for r in map(json.loads, lines)}


def sections(rec: dict) -> dict[str, dict]:
    return {s["id"]: s for s in rec.get("sections", [])}


@pytest.fixture(scope="module")
def ingested(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    tmp = tmp_path_factory.mktemp("ingest")
    docs = make_docs(tmp / "docs")
    p = ingest(str(docs), "--out", str(tmp / "corpus"))
    return tmp / "corpus", p


# -- clause rule ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "sid"),
    [
        ("4.2 Intra-city transport", "4.2"),
        ("4.2-a Taxis are reimbursed up to 80 yuan.", "4.2-a"),
        ("4.2(b) Any excess needs approval.", "4.2-b"),
        ("4.2.1. Details", "4.2.1"),
        ("Article 3 Scope", "art-3"),
        ("ARTICLE IV Termination", "art-4"),
        ("Section 5 Approvals", "sec-5"),
        ("§ 12 Fees", "sec-12"),
        ("Chapter 2 General", "ch-2"),
        ("Clause 4.2 Transport", "4.2"),
        ("第4.2条 市内交通每次不超过80元。", "4.2"),
        ("第十二条 住宿费按附表执行。", "art-12"),
        ("第12条 住宿费", "art-12"),
        ("第三章 报销标准", "ch-3"),
        ("第二节 审批", "sec-2"),
        ("第一百零五条 附则", "art-105"),
        ("一、总则", "1"),
        ("十二、附则", "12"),
        ("1、适用范围", "1"),
        ("4 Transport", "4"),
        ("3.5 million yuan was spent last year.", None),  # running text that starts with a number
        ("Section 5 of the Act applies.", None),
        ("10 days after the trip the claim lapses, unless the manager agrees.", None),
        ("2026 budget", None),
        ("12", None),  # a page number
        ("The 4.2 clause", None),
        ("一、出差人员应当提前申请；", None),  # an item of a list inside an article
    ],
)
def test_the_clause_rule(line, sid):
    c = find_clause(line)
    assert (c.sid if c else None) == sid


def test_document_ids_come_from_file_names_safely():
    from pathlib import PurePosixPath as P

    assert doc_id_of(P("travel-2026.md")) == "travel-2026"
    assert doc_id_of(P("hr/Leave Policy #2 (draft).docx")) == "hr__Leave-Policy-2-draft"
    assert doc_id_of(P("cn/报销 规定.pdf")) == "cn__报销-规定"
    assert doc_id_of(P("../../etc/passwd.txt")) == "etc__passwd"  # never a path: '..' parts vanish
    assert doc_id_of(P("###.md")) == "doc"


# -- the real entry point on real files -----------------------------------------------------------------------------


def test_every_format_is_read_with_sections_and_the_bad_files_are_reported(ingested):
    out, p = ingested
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and "error:" not in p.stderr
    docs = records(out)
    assert set(docs) == {"travel-2026", "hotel", "procurement", "cn__报销-规定", "faq"}
    for bad, why in [
        ("scan.pdf", "no text layer"),
        ("empty.pdf", "empty file"),
        ("locked.pdf", "encrypted"),
        ("photo.png", "unknown extension '.png'"),
    ]:
        assert any(f"warning: skipped {bad}: " in line and why in line for line in p.stderr.splitlines()), bad
    report = (out / "ingest_report.md").read_text(encoding="utf-8")
    assert "| scan.pdf | no text layer" in report and "| locked.pdf | encrypted" in report
    assert "cn/报销 规定.pdf: no text on page(s) 2 of 3" in report
    assert sorted(p.name for p in out.iterdir()) == [
        "chunks.tsv",
        "corpus.jsonl",
        "corpus.yaml",
        "ingest_report.md",
    ]


def test_markdown_headings_clauses_tables_and_front_matter(ingested):
    rec = records(ingested[0])["travel-2026"]
    assert rec["title"] == "Travel Expense Policy 2026"
    assert (rec["version"], rec["effective_date"], rec["series"]) == ("2026", "2026-01-01", "POL-TRAVEL")
    assert rec["metadata"]["owner"] == "Finance Department" and rec["metadata"]["format"] == "markdown"
    s = sections(rec)
    assert list(s) == [
        "preamble",
        "4.1",
        "4.2-a",
        "4.2-b",
        "art-3",
        "hotel-caps",
        "row-shanghai",
        "row-beijing",
    ]
    assert s["4.2-a"]["text"] == "Taxis in Shanghai are reimbursed up to 80 yuan per trip."
    assert s["4.2-a"]["title"] == "4 Transport › 4.2 Intra-city transport"  # the empty 4.2 heads its parts
    assert s["art-3"]["title"] == "4 Transport › Article 3 Scope"
    assert s["row-shanghai"]["text"] == "City: Shanghai; Staff: 650 yuan; Manager: 850 yuan"
    assert (
        s["hotel-caps"]["text"] == "1. Book through TripDesk\n\n2. Keep the invoice"
    )  # list numbers: not clauses


def test_html_headings_chinese_clauses_and_tables(ingested):
    rec = records(ingested[0])["hotel"]
    assert rec["title"] == "住宿标准 Hotel rates"
    s = sections(rec)
    assert s["art-12"]["text"] == "住宿费按下表执行，超出部分自理。"
    assert s["art-12"]["title"] == "第三章 报销标准 › 第十二条"
    assert s["preamble"]["text"] == "本标准适用于国内出差。"  # under the lone h1, which is no section
    assert s["row-上海"]["text"] == "城市: 上海; 员工: 650元; 经理: 850元"
    assert s["row-上海"]["title"] == "第三章 报销标准 › 第十二条 › 上海"  # the table is in the article
    assert (
        s["notes"]["text"] == "Rates include taxes. Breakfast is not reimbursed."
    )  # lines of a paragraph joined
    assert s["table-2"]["text"] == "Who: Employee\nWho: Manager"  # no key column: one section for the table
    assert "Home" not in rec["text"] and "color" not in rec["text"]  # nav and style left out


def test_docx_headings_and_table(ingested):
    rec = records(ingested[0])["procurement"]
    assert rec["title"] == "Procurement Policy"
    s = sections(rec)
    assert list(s) == ["preamble", "sec-5", "5.1", "4.2", "row-laptop", "row-monitor"]
    assert s["5.1"]["text"] == "Purchases above 10,000 yuan need two written quotes."
    assert s["4.2"]["text"] == "付款须在收到发票后30天内完成。"
    assert s["row-laptop"]["text"] == "Item: Laptop; Limit: 12,000 yuan"


def test_pdf_text_layer_chinese_clauses_and_sidecar(ingested):
    rec = records(ingested[0])["cn__报销-规定"]
    assert rec["title"] == "报销管理规定"
    assert (rec["version"], rec["effective_date"], rec["series"], rec["acl"]) == (
        "2025", "2025-03-01", "POL-RULES", ["finance"]
    )  # fmt: skip
    s = sections(rec)
    assert list(s) == ["art-1", "art-12", "4.2", "art-7"]
    assert (
        s["art-12"]["text"] == "住宿费每晚不超过650元。"
        and s["art-12"]["title"] == "第三章 报销标准 › 第十二条"
    )
    assert s["4.2"]["text"] == "市内交通每次不超过80元。"
    assert s["art-7"]["text"] == "Exceptions need the approval of the CFO."  # the page numbers are gone
    assert rec["metadata"]["lang"] == "zh"


def test_plain_text_title_and_english_sections(ingested):
    rec = records(ingested[0])["faq"]
    assert rec["title"] == "Expense FAQ"
    assert {k: v["text"] for k, v in sections(rec).items()} == {
        "sec-2": "Keep every receipt for five years.",
        "sec-3": "Meals are covered by the daily allowance.",
    }


def test_the_manifest_and_ablates_own_loader(ingested, tmp_path):
    out = tmp_path / "c"
    shutil.copytree(ingested[0], out)
    import yaml

    m = yaml.safe_load((out / "corpus.yaml").read_text(encoding="utf-8"))
    assert m["name"] == "corpus" and m["chunker"] == {"kind": "clause"} and m["qrels_unit"] == "chunk"
    assert (
        m["language"] == "zh"
    )  # two Chinese documents of five: a mix, the multilingual choice (test_own_data.py)
    assert m["ingest"]["documents"] == 5 and m["ingest"]["skipped"] == 4
    (out / "queries.jsonl").write_text('{"_id": "q1", "text": "taxi Shanghai"}\n', encoding="utf-8")
    snap = load_corpus(out)
    ids = {c.chunk_id for c in snap.chunks}
    assert {"travel-2026#4.2-a", "hotel#art-12", "cn__报销-规定#4.2", "procurement#row-laptop"} <= ids
    assert snap.documents["cn__报销-规定"].acl == ("finance",)


def test_the_corpus_runs_and_a_new_ingest_keeps_labels_and_settings(ingested, tmp_path, mlflow_uri):
    out = tmp_path / "c"
    shutil.copytree(ingested[0], out)
    qs = [
        {"_id": "q1", "text": "How much is a taxi in Shanghai?"},
        {"_id": "q2", "text": "住宿费每晚上限是多少？"},
        {"_id": "q3", "text": "Who approves exceptions?"},
    ]
    (out / "queries.jsonl").write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in qs), "utf-8")
    (out / "qrels").mkdir()
    (out / "qrels" / "dev.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\ttravel-2026#4.2-a\t2\nq2\tcn__报销-规定#art-12\t2\nq3\tcn__报销-规定#art-7\t2\n",
        "utf-8",
    )
    with open(out / "corpus.yaml", "a", encoding="utf-8") as fh:
        fh.write("identities:\n  finance: [finance]\n")  # qrels_unit: chunk is ingest's, under clause
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}  # the session's cache
    env.pop("MLFLOW_TRACKING_URI", None)
    args = ["corpus=beir", f"corpus.path={out}", "corpus.split=dev", "corpus.identity=finance", "variant=A",
            f"tracking.uri={mlflow_uri}", "tracking.experiment=ingest", "progress=false", "stats.bootstrap=50"]  # fmt: skip
    p = subprocess.run(
        [sys.executable, "-m", "ablate", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    # an earlier ingest's folder: written again, the labels and the user's keys kept
    docs = tmp_path / "docs"
    make_docs(docs)
    again = ingest(str(docs), "--out", str(out), "--quiet")
    assert again.returncode == 0, again.stderr
    assert (out / "qrels" / "dev.tsv").is_file() and (out / "queries.jsonl").is_file()
    snap = load_corpus(out)
    assert snap.qrels_unit == "chunk" and snap.identities == {"finance": ["finance"]}
    # a clause renumbered in the documents: the labels naming the old id are named before the folder is written
    pdf_lines = [[x.replace("第十二条", "第十三条") for x in page] for page in PDF_LINES]
    make_pdf(docs / "cn" / "报销 规定.pdf", pdf_lines)
    renumbered = ingest(str(docs), "--out", str(out), "--quiet")
    assert renumbered.returncode == 0, renumbered.stderr
    assert (
        "warning: qrels/dev.tsv labels 1 id(s) this ingest no longer makes (cn__报销-规定#art-12)"
        in renumbered.stderr
    )
    assert "cn__报销-规定#art-12" in (out / "ingest_report.md").read_text(encoding="utf-8")


# -- refusals: one line, exit 2, nothing written --------------------------------------------------------------------


def _refused(p: subprocess.CompletedProcess, needle: str) -> str:
    errors = [line for line in p.stderr.splitlines() if line.startswith("error:")]
    assert p.returncode == 2 and len(errors) == 1 and "Traceback" not in p.stderr, p.stderr
    assert needle in errors[0] and "Fix:" in errors[0] or "; give" in errors[0], errors[0]
    return errors[0]


def test_a_bad_sidecar_date_is_one_line_and_writes_nothing(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Some text.\n")
    (docs / "a.txt.meta.yaml").write_text("effective_date: 2026-13-45\n")
    line = _refused(
        ingest(str(docs), "--out", str(tmp_path / "out")), "effective_date '2026-13-45' is not a date"
    )
    assert "a.txt.meta.yaml" in line and "YYYY-MM-DD" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("front", "needle"),
    [
        ("acl: finance", "acl 'finance' is not a list of group names"),
        ("acl: [finance, 3]", "is not a list of group names"),
        ("version: 1.10", "version 1.1 was read as a number"),
        ("effective-date: 2026-01-01", "unknown key 'effective-date'"),
        ("lang: fr", "lang 'fr' is not one of en, zh"),
        ("id: my doc", "id 'my doc' contains white space"),
        ("title: [a", "invalid YAML"),
    ],
)
def test_bad_front_matter_is_one_line_naming_file_and_key(tmp_path, front, needle):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "p.md").write_text(f"---\n{front}\n---\n# P\n\ntext\n")
    line = _refused(ingest(str(docs), "--out", str(tmp_path / "out")), needle)
    assert "p.md" in line and not (tmp_path / "out").exists()


def test_two_files_with_one_id_are_refused_naming_both(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "policy.md").write_text("# Policy\n\ntext\n")
    (docs / "policy.txt").write_text("Policy\n\ntext\n")
    line = _refused(ingest(str(docs), "--out", str(tmp_path / "out")), "both get the document id 'policy'")
    assert "policy.md" in line and "policy.txt" in line and not (tmp_path / "out").exists()
    (docs / "policy.txt.meta.yaml").write_text("id: policy-notes\n")  # the fix the message names
    assert ingest(str(docs), "--out", str(tmp_path / "out")).returncode == 0
    assert set(records(tmp_path / "out")) == {"policy", "policy-notes"}


def test_nothing_readable_is_exit_2_and_writes_nothing(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    make_pdf(docs / "scan.pdf", [[]])
    (docs / "blank.txt").write_text("  \n")
    p = ingest(str(docs), "--out", str(tmp_path / "out"))
    _refused(p, "no document could be read (2 file(s) skipped")
    assert "warning: skipped scan.pdf: no text layer" in p.stderr
    assert not (tmp_path / "out").exists()


def test_a_folder_that_is_not_ours_is_refused_unless_forced(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\ntext\n")
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("x")
    _refused(ingest(str(docs), "--out", str(out)), "not an earlier ablate.ingest output")
    assert sorted(p.name for p in out.iterdir()) == ["thesis.tex"]
    assert ingest(str(docs), "--out", str(out), "--force").returncode == 0
    assert (out / "thesis.tex").read_text() == "x" and (out / "corpus.jsonl").is_file()
    _refused(ingest(str(docs), "--out", str(docs)), "the documents folder itself")


def test_an_output_folder_inside_the_documents_folder_is_not_read_back(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\n4.2 Transport\nTaxis.\n")
    for _ in range(2):
        p = ingest(str(docs), "--out", str(docs / "corpus"))
        assert p.returncode == 0 and "skipped" not in p.stderr, p.stderr
    assert set(records(docs / "corpus")) == {"a"}


def test_table_modes(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "t.md").write_text("# T\n\n| City | Cap |\n|---|---|\n| Shanghai | 650 |\n| Beijing | 600 |\n")
    assert ingest(str(docs), "--out", str(tmp_path / "rows"), "--quiet").returncode == 0
    assert list(sections(records(tmp_path / "rows")["t"])) == ["row-shanghai", "row-beijing"]
    assert (
        ingest(str(docs), "--out", str(tmp_path / "tab"), "--tables", "sections", "--quiet").returncode == 0
    )
    assert sections(records(tmp_path / "tab")["t"]) == {
        "table-1": {
            "id": "table-1",
            "title": "Table 1",
            "text": "City: Shanghai; Cap: 650\nCity: Beijing; Cap: 600",
        }
    }


def test_repeated_ids_are_made_unique_in_document_order(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "r.md").write_text("## 1.1 First\nA.\n## 1.1 Again\nB.\n## 1.1-2\nC.\n## 1.1 Third\nD.\n")
    assert ingest(str(docs), "--out", str(tmp_path / "out"), "--quiet").returncode == 0
    assert list(sections(records(tmp_path / "out")["r"])) == ["1.1", "1.1-2", "1.1-2-2", "1.1-3"]


def test_a_missing_parser_is_one_line_naming_the_extra(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    make_docx(docs / "p.docx")
    code = (
        "import sys; sys.modules['docx'] = None\n"  # as if python-docx were not installed
        "from ablate.app.ingest import main\n"
        f"raise SystemExit(main([{str(docs)!r}, '--out', {str(tmp_path / 'out')!r}]))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    line = _refused(p, "needs python-docx (for docx), which is not installed")
    assert "pip install 'ablate[ingest]'" in line and not (tmp_path / "out").exists()


def test_wrapped_lines_are_joined_without_splitting_words_or_numbers():
    from ablate.ingest.sections import join_lines

    assert (
        join_lines(["reimbursed up to 200 yuan per one-", "way trip."])
        == "reimbursed up to 200 yuan per one-way trip."
    )
    assert join_lines(["Taxis are reimbursed up to", "80 yuan."]) == "Taxis are reimbursed up to 80 yuan."
    assert (
        join_lines(["高管每晚不超过2", ",200元，超出部分", "自理。"])
        == "高管每晚不超过2,200元，超出部分自理。"
    )
