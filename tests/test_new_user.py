"""A new user's first hour on their own documents, step by step through the real entry points, each step's output
checked: documents -> (ingest) -> ``ablate.init`` -> hand-written questions and labels -> an exploratory sweep of
A, B, C (one labels file: no held-out split) -> ``ablate.split`` -> a dev sweep -> one confirmed test run.

Real parts only: the command line in subprocesses, MLflow's sqlite store, the shipped dense encoder, the report CLI.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.tracking import Tracker


def _ingested_corpus(tmp: Path) -> Path:
    """FIXTURE, to be replaced at merge by a real ``python -m ablate.ingest DOCS_DIR --out CORPUS_DIR`` over
    documents in four formats: writes what ingest writes (``corpus.jsonl`` with sections, ``corpus.yaml``) for six
    small policies, four English and two Chinese."""
    root = tmp / "policies"
    root.mkdir(parents=True)

    def doc(did: str, title: str, sections: list[tuple[str, str]], **extra: object) -> dict:
        return {"_id": did, "title": title, "sections": [{"id": i, "text": t} for i, t in sections], **extra}

    docs = [
        doc(
            "POL-TRAVEL",
            "Travel policy",
            [
                ("1", "Scope: this policy covers business trips of all employees."),
                ("2", "Taxi rides in Shanghai are reimbursed up to 80 yuan per trip."),
                ("3", "Any amount above a limit needs the line manager's approval before the claim is paid."),
            ],
        ),
        doc(
            "TBL-HOTEL",
            "Hotel rate table",
            [
                ("row-shanghai", "Shanghai | Staff: 650 yuan | Manager: 800 yuan"),
                ("row-beijing", "Beijing | Staff: 600 yuan | Manager: 750 yuan"),
            ],
        ),
        doc(
            "HR-LEAVE",
            "Leave policy",
            [
                ("1", "Employees get 15 days of paid annual leave each calendar year."),
                ("2", "Sick leave of up to 10 days is paid when a doctor's note is handed in."),
            ],
        ),
        doc(
            "IT-SEC",
            "IT security rules",
            [
                ("1", "Passwords must have at least 12 characters and are changed every 90 days."),
                ("2", "A lost laptop must be reported to the IT service desk within 24 hours."),
            ],
            acl=["it"],
        ),
        doc(
            "ZH-REIMB",
            "差旅报销规定",
            [("第1条", "员工出差餐费补贴标准为每天100元。"), ("第2条", "报销申请须在出差结束后30天内提交。")],
        ),
        doc(
            "ZH-SAFETY",
            "消防安全规定",
            [("第1条", "办公室消防演练每半年举行一次。"), ("第2条", "发现火情应立即拨打119并通知安保部门。")],
        ),
    ]
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8"
    )
    (root / "corpus.yaml").write_text(
        "name: policies\nqrels_unit: chunk\nchunker: {kind: clause}\nidentities:\n  staff: [staff]\n"
        "  it: [staff, it]\n",
        encoding="utf-8",
    )
    return root


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
    ("q09", "How long must a password be?", ["permission"], [("IT-SEC#1", 2)]),
    ("q10", "Whom do I tell when my laptop is lost?", ["permission"], [("IT-SEC#2", 2)]),
    ("q11", "出差餐费补贴每天多少钱？", ["single-hop"], [("ZH-REIMB#第1条", 2)]),
    ("q12", "报销申请要在多少天内提交？", ["single-hop"], [("ZH-REIMB#第2条", 2)]),
    ("q13", "消防演练多久举行一次？", ["single-hop"], [("ZH-SAFETY#第1条", 2)]),
    ("q14", "发现火情应该拨打什么电话？", ["single-hop"], [("ZH-SAFETY#第2条", 2)]),
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
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "ABLATE_CACHE_DIR": str(cwd / "cache"),
    }
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def _children(uri: str, exp: str, sweep_parent: bool = True) -> list:
    t = Tracker(uri)
    exp_id = t.experiment_id(exp, create=False)
    runs = t.find_runs([exp_id]) if exp_id else []
    return [r for r in runs if r.parent] if sweep_parent else runs


def test_a_new_users_first_hour(tmp_path: Path, mlflow_uri: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    exp = "new-user"
    corpus = _ingested_corpus(tmp_path)
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


@pytest.mark.parametrize("name", ["test", "dev"])
def test_one_labels_file_of_any_name_is_a_pilot(tmp_path: Path, mlflow_uri: str, name: str) -> None:
    """The README's BEIR layout (qrels/test.tsv only) sweeps as a pilot too, whatever corpus.split says."""
    corpus = _ingested_corpus(tmp_path)
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
