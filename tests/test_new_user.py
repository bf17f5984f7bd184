"""A new user's first hour on their own documents, step by step through the real entry points, each step's output
checked: documents in five formats -> ``ablate.ingest`` -> ``ablate.init`` -> hand-written questions and labels -> an exploratory sweep of
A, B, C (one labels file: no held-out split) -> ``ablate.split`` -> a dev sweep -> one confirmed test run.

Real parts only: the command line in subprocesses, MLflow's sqlite store, the shipped dense encoder, the report CLI.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ablate.tracking import Tracker


def _documents(root: Path) -> None:
    """Six small policies as a user has them: Markdown with front matter, an HTML rate table, a Word file, a PDF with
    an ACL sidecar, a Chinese text file and a Chinese Markdown file (real files, made with python-docx and reportlab)."""
    import docx
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    root.mkdir(parents=True)
    (root / "POL-TRAVEL.md").write_text(
        "---\ntitle: Travel policy\nversion: '2026'\neffective_date: 2026-01-01\n---\n# Travel policy\n\n"
        "## 1. Scope\n\nThis policy covers business trips of all employees.\n\n"
        "## 2. Taxi\n\nTaxi rides in Shanghai are reimbursed up to 80 yuan per trip.\n\n"
        "## 3. Approval\n\nAny amount above a limit needs the line manager's approval before the claim is paid.\n",
        encoding="utf-8",
    )
    (root / "TBL-HOTEL.html").write_text(
        "<html><head><title>Hotel rate table</title></head><body><h1>Hotel rate table</h1><table>"
        "<tr><th>City</th><th>Staff</th><th>Manager</th></tr>"
        "<tr><td>Shanghai</td><td>650 yuan</td><td>800 yuan</td></tr>"
        "<tr><td>Beijing</td><td>600 yuan</td><td>750 yuan</td></tr></table></body></html>",
        encoding="utf-8",
    )
    word = docx.Document()
    word.add_heading("Leave policy", 0)
    word.add_heading("1 Annual leave", 1)
    word.add_paragraph("Employees get 15 days of paid annual leave each calendar year.")
    word.add_heading("2 Sick leave", 1)
    word.add_paragraph("Sick leave of up to 10 days is paid when a doctor's note is handed in.")
    word.save(str(root / "HR-LEAVE.docx"))
    pdf = canvas.Canvas(str(root / "IT-SEC.pdf"), pagesize=A4)
    lines = [
        "IT security rules",
        "Article 1 Passwords",
        "Passwords must have at least 12 characters and are changed every 90 days.",
        "Article 2 Lost devices",
        "A lost laptop must be reported to the IT service desk within 24 hours.",
    ]
    for i, line in enumerate(lines):
        pdf.drawString(72, 800 - 20 * i, line)
    pdf.save()
    (root / "IT-SEC.pdf.meta.yaml").write_text("title: IT security rules\nacl: [it]\n", encoding="utf-8")
    (root / "ZH-REIMB.txt").write_text(
        "差旅报销规定\n\n第1条 员工出差餐费补贴标准为每天100元。\n\n第2条 报销申请须在出差结束后30天内提交。\n",
        encoding="utf-8",
    )
    (root / "ZH-SAFETY.md").write_text(
        "# 消防安全规定\n\n第一条 办公室消防演练每半年举行一次。\n\n第二条 发现火情应立即拨打119并通知安保部门。\n",
        encoding="utf-8",
    )


#: What ingest must find in those files: document id -> its section ids.
SECTIONS = {
    "POL-TRAVEL": ["1", "2", "3"],
    "TBL-HOTEL": ["row-shanghai", "row-beijing"],
    "HR-LEAVE": ["1", "2"],
    "IT-SEC": ["art-1", "art-2"],
    "ZH-REIMB": ["art-1", "art-2"],
    "ZH-SAFETY": ["art-1", "art-2"],
}


def _ingested_corpus(tmp: Path, work: Path) -> Path:
    """Step 0: ``python -m ablate.ingest`` over documents in five formats; the user then names the identities their
    questions ask as in corpus.yaml (the one file ingest leaves to them besides questions and labels)."""
    docs, corpus = tmp / "my-policies", tmp / "policies"
    _documents(docs)
    p = _run("ablate.ingest", [str(docs), "--out", str(corpus), "--quiet"], work)
    assert p.returncode == 0, p.stderr
    assert "ingested 6 document(s)" in p.stdout and "skipped 0" in p.stdout, p.stdout
    assert "python -m ablate.init" in p.stdout
    found = {
        d["_id"]: ([s["id"] for s in d["sections"]], d.get("acl"))
        for d in map(json.loads, (corpus / "corpus.jsonl").read_text(encoding="utf-8").splitlines())
    }
    assert {k: v[0] for k, v in found.items()} == SECTIONS
    assert found["IT-SEC"][1] == ["it"] and found["POL-TRAVEL"][1] is None
    with (corpus / "corpus.yaml").open("a", encoding="utf-8") as f:
        f.write("identities:\n  staff: [staff]\n  it: [staff, it]\n")  # qrels_unit: chunk is ingest's
    return corpus


#: Questions a user writes after reading the template: (id, text, tags, gold chunk ids with grades).
QUESTIONS: list[tuple[str, str, list[str], list[tuple[str, int]]]] = [
    ("q01", "How much is a taxi ride in Shanghai reimbursed?", ["single-hop"], [("POL-TRAVEL#2", 2)]),
    ("q02", "Who approves a claim above the limit?", ["single-hop"], [("POL-TRAVEL#3", 2)]),
    ("q03", "Which trips does the travel policy cover?", ["single-hop"], [("POL-TRAVEL#1", 2)]),
    (
        "q04",
        "My taxi cost 95 yuan in Shanghai; is it paid and who must approve the rest?",
        ["multi-hop"],
        [("POL-TRAVEL#2", 2), ("POL-TRAVEL#3", 2)],
    ),
    ("q05", "Hotel limit per night for staff in Shanghai?", ["table"], [("TBL-HOTEL#row-shanghai", 2)]),
    ("q06", "What may a manager spend on a hotel in Beijing?", ["table"], [("TBL-HOTEL#row-beijing", 2)]),
    ("q07", "How many days of paid annual leave do employees get?", ["single-hop"], [("HR-LEAVE#1", 2)]),
    ("q08", "Is sick leave paid without a doctor's note?", ["single-hop"], [("HR-LEAVE#2", 2)]),
    ("q09", "How long must a password be?", ["permission"], [("IT-SEC#art-1", 2)]),
    ("q10", "Whom do I tell when my laptop is lost?", ["permission"], [("IT-SEC#art-2", 2)]),
    ("q11", "出差餐费补贴每天多少钱？", ["single-hop"], [("ZH-REIMB#art-1", 2)]),
    ("q12", "报销申请要在多少天内提交？", ["single-hop"], [("ZH-REIMB#art-2", 2)]),
    ("q13", "消防演练多久举行一次？", ["single-hop"], [("ZH-SAFETY#art-1", 2)]),
    ("q14", "发现火情应该拨打什么电话？", ["single-hop"], [("ZH-SAFETY#art-2", 2)]),
    ("q15", "Can I bring my dog to the office?", ["no-answer"], [("HR-LEAVE#1", 0)]),
]


def _write_questions(corpus: Path, labels: Path) -> None:
    """Step 3: the user replaces the template by their own questions and labels (same files)."""
    lines = [
        json.dumps({"_id": q, "text": t, "tags": tags, "answers": [] if "no-answer" in tags else ["..."]})
        for q, t, tags, _ in QUESTIONS
    ]
    (corpus / "queries.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    rows = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{c}\t{g}" for q, _, _, gold in QUESTIONS for c, g in gold]
    labels.write_text("\n".join(rows) + "\n", encoding="utf-8")


def _run(module: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}  # the session's cache
    env.pop("MLFLOW_TRACKING_URI", None)
    from inprocess import run_module  # in this process: tests/inprocess.py

    return run_module(module, args, cwd=cwd, env=env)


def _children(uri: str, exp: str, sweep_parent: bool = True) -> list:
    t = Tracker(uri)
    exp_id = t.experiment_id(exp, create=False)
    runs = t.find_runs([exp_id]) if exp_id else []
    return [r for r in runs if r.parent] if sweep_parent else runs


@pytest.mark.slow  # a new user's whole first hour, ingest to A/B/C table, on a cold cache (~25 s): make test-slow
def test_a_new_users_first_hour(tmp_path: Path, mlflow_uri: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    exp = "new-user"
    corpus = _ingested_corpus(tmp_path, work)
    track = [f"tracking.uri={mlflow_uri}", f"tracking.experiment={exp}", "stats.bootstrap=200"]
    on = ["corpus=beir", f"corpus.path={corpus}", *track]

    # 1. init: a template of every kind on the corpus's real sections, a labels file, the next commands
    p = _run("ablate.init", [str(corpus)], work)
    assert p.returncode == 0, p.stderr
    labels = corpus / "qrels" / "labels.tsv"
    assert (corpus / "queries.jsonl").is_file() and labels.is_file() and (corpus / "NEXT.md").is_file()
    template = [
        json.loads(line) for line in (corpus / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    kinds = {t for q in template for t in q["tags"]} - {"template"}
    assert kinds == {"single-hop", "multi-hop", "no-answer", "conflict", "table", "permission"}
    chunk_ids = {
        f"{d['_id']}#{s['id']}"
        for d in map(json.loads, (corpus / "corpus.jsonl").read_text(encoding="utf-8").splitlines())
        for s in d["sections"]
    }
    with labels.open(encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    assert rows[0] == ["query-id", "corpus-id", "score"]
    assert {r[0] for r in rows[1:]} == {q["_id"] for q in template}  # one example row (or more) per question
    assert {r[1] for r in rows[1:]} <= chunk_ids  # real chunk ids at the corpus's unit
    assert "TBL-HOTEL#row-shanghai" in {r[1] for r in rows[1:]}  # the table question points at a table row
    assert any(q.get("persona") == "staff" and "IT-SEC" in q["text"] for q in template)  # cross-permission
    multi = next(q for q in template if "multi-hop" in q["tags"])
    assert len(multi["subquestions"]) == 2 and all(
        s["evidence"][0] in chunk_ids for s in multi["subquestions"]
    )
    assert (
        "python -m ablate.split" in p.stdout
        and "variant=A,B,C" in p.stdout
        and "--confirm-test" not in p.stdout
    )
    # never overwrites: a second init keeps every file as it is
    before = (corpus / "queries.jsonl").read_bytes()
    p = _run("ablate.init", [str(corpus)], work)
    assert p.returncode == 0 and "kept" in p.stdout and (corpus / "queries.jsonl").read_bytes() == before

    # 2. the template as written is refused with one line naming its first line, nothing created
    p = _run("ablate", ["-m", *on, "variant=A,B"], work)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().count("\n") == 0 and "queries.jsonl:1" in p.stderr
    assert "fill or delete the template questions" in p.stderr
    assert _children(mlflow_uri, exp, sweep_parent=False) == [] and not (work / "multirun").exists()

    # 3. hand-written questions and labels; 4. an exploratory sweep of A, B, C runs on the one labels file
    _write_questions(corpus, labels)
    p = _run("ablate", ["-m", *on, "variant=A,B,C"], work)
    assert p.returncode == 0, p.stderr
    assert "no held-out split: exploratory" in p.stdout and f"python -m ablate.split {corpus}" in p.stdout
    assert "HELD-OUT MIX" not in p.stdout + p.stderr and "second dev set" not in p.stderr
    pilot = _children(mlflow_uri, exp)
    assert len(pilot) == 3 and all(r.status == "FINISHED" for r in pilot)
    assert {r.tags["ablate.split"] for r in pilot} == {"labels"}
    assert all(r.tags["ablate.heldout"] == "exploratory" for r in pilot)
    assert all(r.tags["ablate.exploratory"] == "no held-out split: exploratory" for r in pilot)
    assert not any(k in r.tags for r in pilot for k in ("ablate.test_reuse", "ablate.test_confirmed"))
    report = next(work.glob("multirun/*/*/ablation.md"), None) or next(work.glob("multirun/**/ablation.md"))
    md = report.read_text(encoding="utf-8")
    assert "no held-out split: exploratory" in md and "HELD-OUT MIX" not in md

    # 5. a held-out split: under the outputs folder, both sides non-empty, no leakage
    p = _run("ablate.split", [str(corpus), "--quiet"], work)
    assert p.returncode == 0, p.stderr
    split_file = work / "outputs" / "splits" / "policies-dev0.5-seed0" / "split.tsv"
    assert split_file.is_file() and not (work / "splits").exists()
    sides = [line.split("\t")[1] for line in split_file.read_text(encoding="utf-8").splitlines()[1:] if line]
    assert sides.count("dev") >= 3 and sides.count("test") >= 3, sides

    # 6. a dev sweep on it: not exploratory, needs no confirmation
    split = [f"corpus.split_file={split_file}"]
    p = _run("ablate", ["-m", *on, *split, "corpus.split=dev", "variant=A,B,C"], work)
    assert p.returncode == 0, p.stderr
    assert "exploratory" not in p.stdout
    dev = [r for r in _children(mlflow_uri, exp) if r.tags.get("ablate.split") == "dev"]
    assert len(dev) == 3 and all(r.status == "FINISHED" for r in dev)
    assert not any("ablate.heldout" in r.tags for r in dev)

    # 7. the held-out guard holds on test: a sweep is refused, one confirmed run of the chosen variant runs
    p = _run("ablate", ["-m", *on, *split, "corpus.split=test", "variant=A,C"], work)
    assert p.returncode == 2 and "held-out split 'test'" in p.stderr
    p = _run("ablate", [*on, *split, "corpus.split=test", "variant=C", "--confirm-test"], work)
    assert p.returncode == 0, p.stderr
    assert "exploratory" not in p.stdout
    test = [r for r in _children(mlflow_uri, exp, sweep_parent=False) if r.tags.get("ablate.split") == "test"]
    assert len(test) == 1 and test[0].status == "FINISHED"
    assert test[0].tags["ablate.test_confirmed"] == "true" and test[0].tags["ablate.heldout"] == "first"
    assert "ablate.test_reuse" not in test[0].tags


@pytest.fixture(scope="module")
def ingested(tmp_path_factory) -> Path:
    """The documents ingested once (step 0, its checks included); each test works on a copy of the corpus."""
    tmp = tmp_path_factory.mktemp("ingested")
    return _ingested_corpus(tmp, tmp)


@pytest.mark.parametrize("name", ["test", "dev"])
def test_one_labels_file_of_any_name_is_a_pilot(
    ingested: Path, tmp_path: Path, mlflow_uri: str, name: str
) -> None:
    """The README's BEIR layout (qrels/test.tsv only) sweeps as a pilot too, whatever corpus.split says."""
    corpus = Path(shutil.copytree(ingested, tmp_path / ingested.name))
    labels = corpus / "qrels" / f"{name}.tsv"
    labels.parent.mkdir()
    _write_questions(corpus, labels)
    exp = f"pilot-{name}"
    args = [
        "-m",
        "corpus=beir",
        f"corpus.path={corpus}",
        f"tracking.uri={mlflow_uri}",
        f"tracking.experiment={exp}",
    ]
    p = _run("ablate", [*args, "stats.bootstrap=50", "variant=A", "bm25.k1=0.9,1.2"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert "no held-out split: exploratory" in p.stdout and "HELD-OUT MIX" not in p.stdout
    if name != "test":  # corpus=beir's default split is test: the one file runs, with a note
        assert f"qrels/{name}.tsv, so its split {name!r} runs" in p.stderr
    runs = _children(mlflow_uri, exp)
    assert len(runs) == 2 and {r.tags["ablate.heldout"] for r in runs} == {"exploratory"}
    assert not any("ablate.test_reuse" in r.tags or "ablate.config_fp" in r.tags for r in runs)
