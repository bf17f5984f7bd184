"""Grading answers: the answers pool file, the answer journal (append, resume, undo, bad lines), the labelling page
for answers (Flask's test client), and ``python -m ablate.label validate --kind answers`` with the rule (its kappa
equals sklearn's on its own pairs.csv; rates counted by hand)."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
from dataclasses import asdict
from pathlib import Path

import pytest
from sklearn.metrics import cohen_kappa_score

from ablate.app import label_common
from ablate.errors import InputError
from ablate.labels import journal, poolfile
from ablate.labels.journal import append_objects
from ablate.labels.kind import ANSWERS
from ablate.labels.page import PageData, QuestionText, answer_grades, create_app
from ablate.labels.workspace import Workspace
from test_label_serve import client

REPO = Path(__file__).resolve().parents[1]

_SNAPSHOTS: dict[str, object] = {}


def snapshot(corpus: str):
    if corpus not in _SNAPSHOTS:
        block = label_common.plain(label_common.compose([f"corpus={corpus}"]), "corpus")
        _SNAPSHOTS[corpus] = (label_common.load(label_common.corpus_from_mapping(block)), block)
    return _SNAPSHOTS[corpus]


def hand_answers(corpus: str, n_questions: int) -> dict[str, list[tuple[str, str, tuple[str, ...]]]]:
    """Per question with gold answers, answers written by hand as two 'runs' would: the gold as a short final
    answer, a wrong one, and (run B) the same right answer again plus a refusal."""
    snap, _ = snapshot(corpus)
    qids = [q.qid for q in snap.queries.values() if q.answers][:n_questions]
    a, b = [], []
    for q in qids:
        gold = snap.queries[q].answers[0]
        ctx = tuple(list(snap.chunk_text)[:2])
        a += [(q, f"The policy says so.\nAnswer: {gold}", ctx), (q, "Answer: 12345 yuan", ctx)]
        b += [(q, f"The policy says so.\nAnswer: {gold}", ctx), (q, "NO_ANSWER", ())]
    return {"A": a, "B": b}


def make_pool(labels: Path, corpus: str = "demo", n_questions: int = 3, name: str = "A-B-answers") -> Path:
    snap, block = snapshot(corpus)
    answers = hand_answers(corpus, n_questions)
    questions = {
        q: (snap.queries[q].text, snap.queries[q].answers) for q in dict.fromkeys(x[0] for x in answers["A"])
    }
    meta = poolfile.PoolMeta(
        corpus=corpus,
        corpus_path=str(snap.root),
        split="dev",
        snapshot=snap.fingerprint,
        language=snap.language,
        runs={"A": "run-a", "B": "run-b"},
        answers_read=sum(len(v) for v in answers.values()),
        corpus_config=block,
        created=journal.now(),
    )
    path = Workspace(labels, corpus).pool(name, ANSWERS)
    poolfile.write(path, poolfile.Pool(meta, poolfile.collect(answers, questions)))
    return path


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``python -m ablate.label *args`` in ``cwd``, run in this process (tests/inprocess.py)."""
    from inprocess import run_module

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return run_module("ablate.label", args, cwd=cwd, env=env)


# ---------------------------------------------------------------------------------------------------- the pool


def test_pool_deduplicates_identical_answers_and_reads_back(tmp_path: Path) -> None:
    path = make_pool(tmp_path / "labels")
    assert path == tmp_path / "labels" / "demo" / "answer_pools" / "A-B-answers.jsonl"
    pool = poolfile.read_answers(path)
    # 3 questions x (one right answer both runs wrote, A's wrong one, B's refusal)
    assert len(pool.entries) == 9
    right = [e for e in pool.entries if e.answer.startswith("The policy says so")]
    assert [e.runs for e in right] == [("A", "B")] * 3
    assert [e.runs for e in pool.entries if e.answer == "NO_ANSWER"] == [("B",)] * 3
    snap, _ = snapshot("demo")
    e = pool.entries[0]
    assert e.question == snap.queries[e.qid].text and e.golds == snap.queries[e.qid].answers
    assert e.answer_sha256 == poolfile.answer_sha256(e.answer) and len(e.context) == 2
    assert pool.meta.corpus == "demo" and pool.meta.runs == {"A": "run-a", "B": "run-b"}
    row = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    assert list(row) == list(poolfile.ANSWER_FIELDS)


def test_pool_line_with_a_wrong_hash_is_refused(tmp_path: Path) -> None:
    path = make_pool(tmp_path / "labels")
    rows = path.read_text(encoding="utf-8").splitlines()
    bad = json.loads(rows[1])
    bad["answer"] += " (edited)"
    rows[1] = json.dumps(bad)
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    with pytest.raises(
        InputError, match=r"A-B-answers.jsonl:2: answer_sha256 is not the SHA-256 of its answer"
    ):
        poolfile.read_answers(path)


# ------------------------------------------------------------------------------------------------- the journal


def test_journal_append_undo_resume_and_torn_last_line(tmp_path: Path) -> None:
    j = tmp_path / "answer_journal.jsonl"
    journal.append(j, journal.grade("q001", "Answer: 80 yuan", "correct", "human:alice"))
    journal.append(j, journal.grade("q001", "Answer: 80 yuan", "partly", "human:bob"))
    journal.append(j, journal.grade("q001", "Answer: 80 yuan", None, "human:bob"))  # bob's undo
    journal.append(j, journal.grade("q002", "no", "wrong", "human"))
    journal.append(j, journal.grade("q002", "no", "correct", "llm:m@1"))
    written = lines(j)
    assert [list(x) for x in written] == [list(journal.ANSWER_FIELDS)] * 5
    assert written[2]["grade"] is None
    with j.open("ab") as f:
        f.write(b'{"qid": "q003", "answer_sha')  # a crash mid-write: never acknowledged
    grades = journal.read_grades(j)
    assert len(grades) == 5
    human = journal.human(grades)
    sha = poolfile.answer_sha256
    assert {k: g.grade for k, g in human.items()} == {
        ("q001", sha("Answer: 80 yuan")): "correct",  # bob took his back: alice's stands
        ("q002", sha("no")): "wrong",  # the LLM's grade is not a human grade
    }


@pytest.mark.parametrize(
    "change, message",
    [
        ({"qid": "q999"}, "answer_journal.jsonl:2: question 'q999' is not in demo's queries.jsonl"),
        (
            {"answer_sha256": "0" * 64},
            "answer_journal.jsonl:2: answer_sha256 '000000000000' is not the SHA-256",
        ),
        ({"grade": "right"}, "answer_journal.jsonl:2: grade 'right' is not one of correct, partly, wrong"),
        (
            {"assessor": "alice"},
            "answer_journal.jsonl:2: assessor 'alice' is not human, human:<name> or llm:",
        ),
        ({"extra": 1}, "answer_journal.jsonl:2: has unknown key(s) 'extra'"),
    ],
)
def test_bad_journal_lines_name_file_and_line(tmp_path: Path, change: dict, message: str) -> None:
    j = tmp_path / "answer_journal.jsonl"
    good = journal.grade("q001", "Answer: 80 yuan", "correct", "human")
    journal.append(j, good)
    append_objects(j, [{**asdict(good), **change}])
    with pytest.raises(InputError) as e:
        journal.read_grades(j, label_common.pair_check(snapshot("demo")[0], ANSWERS))
    assert message in str(e.value)


# ---------------------------------------------------------------------------------------------------- the page


def app_for(pool_path: Path, labels: Path, assessor: str = "human:alice"):
    pool = poolfile.read_answers(pool_path)
    snap, _ = snapshot(pool.meta.corpus)
    q = snap.queries
    data = PageData(
        kind=ANSWERS,
        pool=pool_path.stem,
        entries=pool.entries,
        questions={
            e.qid: QuestionText(e.qid, e.question, q[e.qid].persona, q[e.qid].as_of) for e in pool.entries
        },
        passages={},
        grades=answer_grades(snap.language),
        journal=Workspace(labels, snap.name).journal_of(ANSWERS),
        assessor=assessor,
        language=snap.language,
    )
    return create_app(data), data


def shown(html: str) -> tuple[str, str]:
    qid = re.search(r'name="qid" value="([^"]*)"', html)
    sha = re.search(r'name="answer_sha256" value="([^"]*)"', html)
    assert qid and sha, html
    return qid.group(1), sha.group(1)


def test_page_grades_skips_undoes_and_resumes(tmp_path: Path) -> None:
    labels = tmp_path / "labels"
    app, data = app_for(make_pool(labels), labels)
    order = [e.key for e in data.entries]
    c = client(app)
    page = c.get("/").get_data(as_text=True)
    assert shown(page) == order[0]
    e0 = data.entries[0]
    snap, _ = snapshot("demo")
    assert e0.question in page and snap.queries[e0.qid].persona in page and e0.golds[0] in page
    assert 'id="all-done">0<' in page and 'id="all-left">9<' in page and 'id="q-left">3<' in page
    r = c.post("/judge", data={"qid": e0.qid, "answer_sha256": e0.answer_sha256, "grade": "correct"})
    assert r.status_code == 303
    page = c.get(r.headers["Location"]).get_data(as_text=True)
    assert shown(page) == order[1] and 'id="all-done">1<' in page
    (j,) = lines(data.journal)
    assert [j[k] for k in ("qid", "answer_sha256", "answer", "grade", "assessor")] == [
        e0.qid, e0.answer_sha256, e0.answer, "correct", "human:alice"]  # fmt: skip
    # skip 1, grade 2 wrong; undo takes back the grade of 2 and shows it again
    page = c.get("/?after=1").get_data(as_text=True)
    assert shown(page) == order[2]
    c.post("/judge", data={"qid": order[2][0], "answer_sha256": order[2][1], "grade": "wrong"})
    r = c.post("/undo")
    assert shown(c.get(r.headers["Location"]).get_data(as_text=True)) == order[2]
    assert [x["grade"] for x in lines(data.journal)] == ["correct", "wrong", None]
    # a restarted server (a new app on the same journal) resumes at the first ungraded answer
    app2, _ = app_for(data.journal.parent / "answer_pools" / "A-B-answers.jsonl", labels)
    page = app2.test_client().get("/").get_data(as_text=True)
    assert shown(page) == order[1] and 'id="all-done">1<' in page
    # refused: an answer outside the pool, a grade outside the three
    assert (
        c.post("/judge", data={"qid": "q001", "answer_sha256": "0" * 64, "grade": "correct"}).status_code
        == 400
    )
    bad = {"qid": order[1][0], "answer_sha256": order[1][1], "grade": "2"}
    assert c.post("/judge", data=bad).status_code == 400
    assert len(lines(data.journal)) == 3


def test_page_speaks_chinese_for_a_chinese_corpus(tmp_path: Path) -> None:
    labels = tmp_path / "labels"
    app, data = app_for(make_pool(labels, corpus="demo_zh"), labels)
    page = app.test_client().get("/").get_data(as_text=True)
    assert 'lang="zh-CN"' in page and "部分正确" in page and "标准答案" in page
    assert data.entries[0].question in page and "元" in data.entries[0].golds[0]


# -------------------------------------------------------------------------------------- validate --kind answers


def grade_all(labels: Path, pool_path: Path, grades: dict[str, str], assessor: str = "human:lead") -> None:
    """Grade every answer of the pool by its kind: the right one, the wrong one, the refusal."""
    out = []
    for e in poolfile.read_answers(pool_path).entries:
        kind = (
            "right"
            if e.answer.startswith("The policy")
            else "refusal"
            if e.answer == "NO_ANSWER"
            else "wrong"
        )
        out.append(journal.grade(e.qid, e.answer, grades[kind], assessor))
    journal.append(Workspace(labels, poolfile.read_answers(pool_path).meta.corpus).journal_of(ANSWERS), out)


def test_validate_answers_rule_kappa_equals_sklearn_and_rates(tmp_path: Path) -> None:
    labels = tmp_path / "labels"
    pool_path = make_pool(labels, n_questions=4)
    # the human calls the gold-bearing answer partly on purpose for one kind: a disagreement the rule must show
    grade_all(labels, pool_path, {"right": "correct", "wrong": "wrong", "refusal": "partly"})
    entries = poolfile.read_answers(pool_path).entries
    first_right = next(e for e in entries if e.answer.startswith("The policy"))
    journal.append(  # one right answer graded partly by a person (latest wins)
        Workspace(labels, "demo").journal_of(ANSWERS),
        journal.grade(first_right.qid, first_right.answer, "partly", "human:lead"),
    )
    p = cli(
        ["validate", "--kind", "answers", "--pool", str(pool_path), "--labels-dir", str(labels)], tmp_path
    )
    assert p.returncode == 0, p.stderr
    assert "WARNING: under 30 graded answers" in p.stdout
    folder = pool_path.with_suffix(".validation")
    rows = list(csv.DictReader((folder / "pairs.csv").open(encoding="utf-8")))
    assert len(rows) == 12 and set(rows[0]) == {
        "qid",
        "answer_sha256",
        "human",
        "rule",
        "judge",
        "judge_rationale",
    }
    # the rule: the gold-bearing short answers correct, the wrong number and the refusal not
    assert sorted({(r["human"], r["rule"]) for r in rows}) == [
        ("correct", "correct"), ("partly", "correct"), ("partly", "wrong"), ("wrong", "wrong")]  # fmt: skip
    report = json.loads((folder / "validation_answers.json").read_text(encoding="utf-8"))
    h = [int(r["human"] == "correct") for r in rows]
    k = [int(r["rule"] == "correct") for r in rows]
    rule = report["rule_agreement"]
    assert rule["binary"]["kappa"] == pytest.approx(cohen_kappa_score(h, k), abs=1e-12)
    assert rule["binary"]["low"] <= rule["binary"]["kappa"] <= rule["binary"]["high"]
    # false positives: 1 of the 9 not-correct answers is called correct; no false negative among the 3 correct
    assert (rule["false_positive"]["errors"], rule["false_positive"]["n"]) == (1, 9)
    assert rule["false_positive"]["rate"] == pytest.approx(1 / 9)
    assert (rule["false_negative"]["errors"], rule["false_negative"]["n"]) == (0, 3)
    assert rule["confusion"] == [[3, 0], [1, 4], [0, 4]]
    assert report["n"] == 12 and report["warning"] is True and report["judge"] is None
    md = (folder / "validation_answers.md").read_text(encoding="utf-8")
    assert "Warning: only 12 graded answers (under 30)" in md and "false positive" in md


def test_validate_answers_refusals(tmp_path: Path) -> None:
    labels = tmp_path / "labels"
    pool_path = make_pool(labels)
    base = ["validate", "--kind", "answers", "--pool", str(pool_path), "--labels-dir", str(labels)]
    # no journal; then a journal with no human grade of this pool
    p = cli(base, tmp_path)
    assert p.returncode == 2 and "answer_journal.jsonl: no such journal of answer grades" in p.stderr
    j = Workspace(labels, "demo").journal_of(ANSWERS)
    journal.append(j, journal.grade("q001", "another answer", "correct", "human"))
    p = cli(base, tmp_path)
    assert (
        p.returncode == 2
        and "holds no human grade of an answer of pool A-B-answers.jsonl (1 of other pools)" in (p.stderr)
    )
    # a line naming a question the corpus does not have
    journal.append(j, journal.grade("q999", "x", "correct", "human"))
    p = cli(base, tmp_path)
    assert (
        p.returncode == 2
        and "answer_journal.jsonl:2: question 'q999' is not in demo's queries.jsonl" in p.stderr
    )
    # the pool read on another corpus
    p = cli([*base, "corpus=demo_zh"], tmp_path)
    assert p.returncode == 2 and "A-B-answers.jsonl was made on corpus demo (" in p.stderr
    for p_ in (p,):
        assert p_.stderr.count("\n") == 1 and "Traceback" not in p_.stderr
    assert not pool_path.with_suffix(".validation").exists()


@pytest.mark.parametrize(
    "argv, now",
    [
        (["pool-answers", "--parent", "X"], "pool --kind answers"),
        (["validate-answers", "--pool", "P.jsonl"], "validate --kind answers"),
        (["serve", "--answers", "P.jsonl"], "serve --pool"),
    ],
)
def test_an_earlier_versions_answer_command_says_what_it_is_now(argv: list[str], now: str, capsys) -> None:
    from ablate.app.label import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"is now python -m ablate.label {now}" in err
