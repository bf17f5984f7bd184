"""The random human sample and the two views of a label version: ``python -m ablate.label sample`` draws N of the
split's questions (re-derived here with numpy), the page offers the sampled questions' items first and then those
whose LLM repeats flipped, and ``commit`` keeps a human judgement beside the assessor's: the headline qrels take the
human grade, ``assessor/`` the assessor's, ``judged.csv`` who said what, ``version.json`` the sample (a draw, or
questions checked by hand); :func:`ablate.labels.views.read_views` reads it back with the checked questions, every
file checked against its recorded sha256. Answers the same way."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from ablate.errors import ConfigError, InputError
from ablate.labels import journal, poolfile
from ablate.labels.kind import ANSWERS, RELEVANCE
from ablate.labels.page import ordered
from ablate.labels.sample import HumanSample, check_size, draw, from_record
from ablate.labels.views import hand_checked, read_views
from ablate.labels.workspace import Workspace
from inprocess import run_module
from labels_loop import read_beir
from test_label_answers import make_pool as make_answer_pool
from test_label_serve import app_for, client, make_pool, shown, snapshot

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "corpora" / "demo"
LLM = "llm:fake-assessor@0123456789ab+cafebabe+f00d00"
JUDGE = "llm:fake-judge@12345678+87654321"


def label(args: list[str], cwd: Path):
    """``python -m ablate.label ARGS`` in this process (the demo loads in seconds)."""
    return run_module("ablate.label", args, cwd=cwd, env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})


def one_error(p) -> str:
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stderr.count("error:") == 1 and "Traceback" not in p.stderr, p.stderr
    return p.stderr


# ------------------------------------------------------------------------------------------------------- the draw
def test_the_draw_is_numpys_seeded_choice_over_the_sorted_questions():
    population = [f"q{i:03d}" for i in range(40, 0, -1)]  # given out of order: the draw sorts first
    got = draw(population, 7, 11)
    ordered_pop = sorted(population)
    picked = np.random.default_rng(11).choice(40, size=7, replace=False)
    assert got == tuple(sorted(ordered_pop[int(i)] for i in picked))
    assert draw(population, 7, 11) == got and draw(population, 7, 12) != got
    assert len(set(got)) == 7 and list(got) == sorted(got)
    assert draw(population, 40, 0) == tuple(ordered_pop)  # the whole population


@pytest.mark.parametrize(
    "n, needle", [(1, "at least 2"), (0, "at least 2"), (41, "at most 40"), (True, "at least")]
)
def test_a_sample_size_outside_2_to_the_population_is_one_line(n, needle):
    with pytest.raises(ConfigError) as e:
        check_size(n, 40)
    assert needle in str(e.value) and "--questions" in str(e.value) and "\n" not in str(e.value)


def test_a_sample_record_reads_back_and_a_bad_one_is_refused():
    s = HumanSample(("q1", "q2"), 3, "sample", "p.tsv", 20)
    assert from_record(s.record(), "x") == s and s.random
    assert s.record() == {
        "questions": ["q1", "q2"],
        "seed": 3,
        "drawn_by": "sample",
        "pool": "p.tsv",
        "population": 20,
    }
    hand = from_record({"questions": ["q2", "q1"], "drawn_by": "hand"}, "x")
    assert hand == HumanSample(("q1", "q2"), None, "hand") and not hand.random
    assert hand.record() == {"questions": ["q1", "q2"], "drawn_by": "hand"}
    for bad in ({"questions": "q1", "drawn_by": "sample", "seed": 1}, {"questions": [], "drawn_by": "me"},
                {"questions": ["q1"], "drawn_by": "sample"}):  # fmt: skip
        with pytest.raises(InputError):
            from_record(bad, "x")


# ------------------------------------------------------------------------------------------------ the command
def test_sample_draws_writes_and_refuses_a_second_draw_without_replace(tmp_path: Path):
    labels = tmp_path / "labels"
    pool = make_pool(labels)
    p = label(["sample", "--pool", str(pool), "--questions", "5", "--seed", "3"], tmp_path)
    assert p.returncode == 0, p.stderr
    dev = snapshot("demo").split_qids("dev")
    expected = draw(dev, 5, 3)
    data = json.loads((labels / "demo" / "human_sample.json").read_text(encoding="utf-8"))
    assert data["questions"] == list(expected) and data["seed"] == 3 and data["drawn_by"] == "sample"
    assert (
        data["pool"] == "C-top10.tsv" and data["population"] == len(dev) == 20 and data["kind"] == "relevance"
    )
    assert ", ".join(expected) in p.stdout and "python -m ablate.label serve --pool" in p.stdout
    before = (labels / "demo" / "human_sample.json").read_bytes()
    err = one_error(label(["sample", "--pool", str(pool), "--questions", "5", "--seed", "4"], tmp_path))
    assert "holds a draw already" in err and "--replace" in err
    assert (labels / "demo" / "human_sample.json").read_bytes() == before
    assert "at most 20" in one_error(
        label(["sample", "--pool", str(pool), "--questions", "21", "--seed", "4", "--replace"], tmp_path)
    )
    assert "at least 2" in one_error(
        label(["sample", "--pool", str(pool), "--questions", "1", "--seed", "4"], tmp_path)
    )
    p = label(["sample", "--pool", str(pool), "--questions", "4", "--seed", "4", "--replace"], tmp_path)
    assert p.returncode == 0 and "replaced" in p.stdout
    assert json.loads((labels / "demo" / "human_sample.json").read_text())["questions"] == list(
        draw(dev, 4, 4)
    )


def test_sample_of_answers_draws_from_the_questions_with_gold_answers(tmp_path: Path):
    labels = tmp_path / "labels"
    pool = make_answer_pool(labels)
    p = label(["sample", "--pool", str(pool), "--questions", "3", "--seed", "0"], tmp_path)
    assert p.returncode == 0, p.stderr
    snap = snapshot("demo")
    answerable = [q for q in snap.split_qids("dev") if any(a.strip() for a in snap.queries[q].answers)]
    assert 2 < len(answerable) < len(snap.split_qids("dev"))
    data = json.loads((labels / "demo" / ANSWERS.sample).read_text(encoding="utf-8"))
    assert data["questions"] == list(draw(answerable, 3, 0)) and data["population"] == len(answerable)
    assert data["kind"] == "answers" and not (labels / "demo" / RELEVANCE.sample).exists()


# ----------------------------------------------------------------------------------------------------- the page
def test_the_page_offers_the_sample_first_then_flipped_pairs(tmp_path: Path):
    labels = tmp_path / "labels"
    pool_path = make_pool(labels, qids=("q025", "q003", "q029"), per_question=2)
    entries = poolfile.read(pool_path).entries
    plain = [(e.qid, e.unit) for e in ordered(entries)]
    assert [q for q, _ in plain] == ["q025"] * 2 + ["q003"] * 2 + ["q029"] * 2
    ws = Workspace(labels, "demo")
    (ws.dir / RELEVANCE.sample).write_text(
        json.dumps(
            {"questions": ["q029", "q099"], "seed": 1, "drawn_by": "sample", "pool": "x", "population": 20}
        )
    )
    flipped_pair = plain[3]  # q003's second pair: the LLM's repeats disagree
    journal.append(ws.journal, [
        journal.judgement(*plain[2], 1, LLM, "C-top10", repeats=(1, 1, 1)),  # agreed: not offered early
        journal.judgement(*flipped_pair, 1, LLM, "C-top10", repeats=(2, 1, 0)),
    ])  # fmt: skip
    app, data = app_for(pool_path, labels)
    assert data.sample == {"q029", "q099"} and data.flipped == {flipped_pair}
    order = [(e.qid, e.unit) for e in ordered(data.entries, data.sample, data.flipped)]
    assert order == [plain[4], plain[5], flipped_pair, plain[0], plain[1], plain[2]]
    c = client(app)
    page = c.get("/").get_data(as_text=True)
    assert shown(page) == plain[4] and "in the random sample" in page
    for pair in (plain[4], plain[5]):
        c.post("/judge", data={"qid": pair[0], "unit": pair[1], "grade": "0"})
    page = c.get("/").get_data(as_text=True)
    assert shown(page) == flipped_pair and "repeats disagree" in page


# ---------------------------------------------------------------------------------------------------- commit
@pytest.fixture(scope="module")
def committed(tmp_path_factory):
    """The demo with pool pairs of q025 (in the sample, checked by alice), q029 (in the sample, half checked) and
    q027 (not sampled) judged by a validated LLM assessor; bob regrades one existing label by hand. Committed as
    v3 from the corpus labels, then v4 (corpus.labels=v3) with the same journal."""
    cwd = tmp_path_factory.mktemp("views")
    labels = cwd / "labels"
    pool_path = make_pool(labels, qids=("q025", "q029", "q027"), per_question=3)
    pairs = [(e.qid, e.unit) for e in ordered(poolfile.read(pool_path).entries)]
    ws = Workspace(labels, "demo")
    old = next(iter(read_beir(DEMO / "qrels" / "dev.tsv")))
    lines = [journal.judgement(q, u, 2, LLM, "C-top10", repeats=(2, 2, 1)) for q, u in pairs]
    lines += [
        journal.judgement(q, u, g, "human:alice", "C-top10")
        for (q, u), g in zip(pairs[:3], (0, 2, 1), strict=True)
    ]
    lines += [journal.judgement(*pairs[3], 0, "human:alice", "C-top10")]  # one of q029's three
    lines += [journal.judgement(*pairs[0], 2, LLM, "C-top10")]  # the LLM again, later: the human still stands
    lines += [journal.judgement(*old, 0, "human:bob")]
    journal.append(ws.journal, lines)
    report = ws.validation(LLM) / "validation.json"
    report.parent.mkdir(parents=True)
    report.write_text(json.dumps({"assessor": LLM, "corpus": "demo"}))
    sample = {"questions": ["q025", "q029", "q040"], "seed": 0, "drawn_by": "sample", "pool": pool_path.name,
              "population": 20, "split": "dev", "kind": "relevance"}  # fmt: skip
    (ws.dir / RELEVANCE.sample).write_text(json.dumps(sample), encoding="utf-8")
    p = label(["commit", "--version", "v3"], cwd)
    assert p.returncode == 0, p.stderr
    return {"cwd": cwd, "ws": ws, "pairs": pairs, "old": old, "sample": sample, "out": p.stdout,
            "folder": ws.version("v3")}  # fmt: skip


def _judged(folder: Path) -> dict[tuple[str, str], tuple[str, str]]:
    rows = csv.DictReader(io.StringIO((folder / "judged.csv").read_text(encoding="utf-8")))
    return {(r["qid"], r["unit"]): (r["human"], r["assessor"]) for r in rows}


def test_the_headline_takes_the_human_grade_the_assessor_view_the_llms(committed):
    folder, pairs, old = committed["folder"], committed["pairs"], committed["old"]
    head, view = read_beir(folder / "dev.tsv"), read_beir(folder / "assessor" / "dev.tsv")
    human = {pairs[0]: 0, pairs[1]: 2, pairs[2]: 1, pairs[3]: 0, old: 0}
    for pair in pairs:
        assert head[pair] == human.get(pair, 2)  # the human's where one judged, else the LLM's
        assert view[pair] == 2  # every pair the LLM judged: its grade, even where a person overruled it
    assert view[old] == head[old] == 0  # a pair only a person judged: as in the headline
    expected = read_beir(DEMO / "qrels" / "dev.tsv")
    assert {k: v for k, v in view.items() if k not in pairs} == {**expected, old: 0}
    assert _judged(folder) == {
        **{p: (str(human[p]) if p in human else "", "2") for p in pairs},
        old: ("0", ""),
    }
    # the journal keeps both lines of a pair judged twice
    mine = [j for j in journal.read(committed["ws"].journal) if j.key == pairs[0]]
    assert {j.assessor for j in mine} == {LLM, "human:alice"}


def test_version_json_records_the_view_the_sample_and_every_files_digest(committed):
    folder = committed["folder"]
    v = json.loads((folder / "version.json").read_text(encoding="utf-8"))
    assert v["views"] == {"assessor": "assessor"}
    s = committed["sample"]
    assert v["human_sample"] == {k: s[k] for k in ("questions", "seed", "drawn_by", "pool", "population")}
    import hashlib

    on_disk = {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in folder.rglob("*")
        if p.is_file()
        and p.name not in ("version.json", "CHANGELOG.md")
        or p.parent.name == "assessor"
        and p.name == "version.json"
    }
    assert v["files"] == on_disk and "assessor/dev.tsv" in v["files"] and "judged.csv" in v["files"]
    sub = json.loads((folder / "assessor" / "version.json").read_text(encoding="utf-8"))
    assert sub["name"] == "v3@assessor" and sub["parent"] == "v3" and sub["assessors"] == {LLM: 9}
    log = (folder / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## The assessor view" in log and "## Human sample (relevance)" in log
    assert "assessor view" in committed["out"] and "human sample (relevance): 3 questions" in committed["out"]


def test_read_views_gives_both_views_and_the_checked_questions(committed):
    folder, pairs = committed["folder"], committed["pairs"]
    views = read_views(folder)
    assert views.sample is not None and views.sample.random and views.sample.seed == 0
    assert views.headline["dev"] == read_beir_nested(folder / "dev.tsv")
    assert views.assessor is not None and views.assessor["dev"] == read_beir_nested(
        folder / "assessor" / "dev.tsv"
    )
    # checked: sampled, and every pair the assessor judged has a human judgement (none judged: checked too)
    llm_by_q: dict[str, set] = {}
    for q, u in pairs:
        llm_by_q.setdefault(q, set()).add(u)
    human = {pairs[0], pairs[1], pairs[2], pairs[3]}
    expected = {q for q in views.sample.questions if all((q, u) in human for u in llm_by_q.get(q, ()))}
    assert views.checked == frozenset(expected)
    assert views.checked == {"q025", "q040"}  # q040: the assessor judged none of it
    assert views.human == frozenset(human | {committed["old"]})
    assert views.answers is None


def read_beir_nested(path: Path) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (q, u), g in read_beir(path).items():
        out.setdefault(q, {})[u] = g
    return out


def test_an_edited_or_added_view_file_is_refused_on_read(committed, tmp_path: Path):
    import shutil

    copy = tmp_path / "v3"
    shutil.copytree(committed["folder"], copy)
    with open(copy / "assessor" / "dev.tsv", "a", encoding="utf-8") as fh:
        fh.write("q025\tINV-999#x\t1\n")
    with pytest.raises(
        InputError, match=r"assessor/dev\.tsv: was changed after the label version was committed"
    ):
        read_views(copy)
    shutil.copy(committed["folder"] / "assessor" / "dev.tsv", copy / "assessor" / "dev.tsv")
    (copy / "judged.csv").write_text("split,qid,unit,human,assessor\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"judged\.csv: was changed"):
        read_views(copy)
    shutil.copy(committed["folder"] / "judged.csv", copy / "judged.csv")
    (copy / "assessor" / "extra.tsv").write_text("", encoding="utf-8")
    with pytest.raises(InputError, match=r"extra\.tsv: was added after"):
        read_views(copy)


def test_the_same_journal_on_top_adds_nothing(committed):
    p = label(["commit", "--version", "v4", "corpus.labels=v3"], committed["cwd"])
    assert "adds nothing to v3" in one_error(p)


def test_questions_checked_by_hand_are_recorded_as_such_and_give_no_draw(committed, tmp_path: Path):
    """The same journal without a draw: the questions people checked are recorded, drawn_by hand."""
    import shutil

    cwd = tmp_path
    shutil.copytree(committed["ws"].dir, cwd / "labels" / "demo", ignore=shutil.ignore_patterns("versions"))
    (cwd / "labels" / "demo" / RELEVANCE.sample).unlink()
    p = label(["commit", "--version", "h1"], cwd)
    assert p.returncode == 0, p.stderr
    v = json.loads((cwd / "labels" / "demo" / "versions" / "h1" / "version.json").read_text())
    assert v["human_sample"] == {"questions": ["q025"], "drawn_by": "hand"}
    views = read_views(cwd / "labels" / "demo" / "versions" / "h1")
    assert views.sample is not None and not views.sample.random and views.checked == {"q025"}
    assert hand_checked({"a": [(1, 1)], "b": [(None, 2), (1, 2)], "c": [(1, None)], "d": []}) == {"a"}


def test_a_version_without_llm_judgements_has_no_view_and_no_sample(tmp_path: Path):
    labels = tmp_path / "labels"
    pool_path = make_pool(labels, qids=("q025",), per_question=2)
    pairs = [(e.qid, e.unit) for e in poolfile.read(pool_path).entries]
    journal.append(
        Workspace(labels, "demo").journal, [journal.judgement(q, u, 1, "human:alice") for q, u in pairs]
    )
    p = label(["commit", "--version", "h"], tmp_path)
    assert p.returncode == 0, p.stderr
    folder = labels / "demo" / "versions" / "h"
    v = json.loads((folder / "version.json").read_text())
    assert "views" not in v and "human_sample" not in v and not (folder / "assessor").exists()
    views = read_views(folder)
    assert views.assessor is None and views.sample is None and views.checked == frozenset()


# ---------------------------------------------------------------------------------------------------- answers
def test_answer_grades_keep_the_judge_beside_the_human_and_the_sample(tmp_path: Path):
    labels = tmp_path / "labels"
    pool_path = make_answer_pool(labels, n_questions=4)
    entries = poolfile.read_answers(pool_path).entries
    ws = Workspace(labels, "demo")
    qids = list(dict.fromkeys(e.qid for e in entries))
    path = ws.journal_of(ANSWERS)
    journal.append(path, [journal.grade(e.qid, e.answer, "correct", JUDGE) for e in entries])
    # a person grades every answer of the first question, one of the second's
    first = [e for e in entries if e.qid == qids[0]]
    journal.append(path, [journal.grade(e.qid, e.answer, "wrong", "human:alice") for e in first])
    second = next(e for e in entries if e.qid == qids[1])
    journal.append(path, journal.grade(second.qid, second.answer, "partly", "human:alice"))
    (ws.dir / ANSWERS.sample).write_text(json.dumps(
        {"questions": qids[:3], "seed": 5, "drawn_by": "sample", "pool": pool_path.name, "population": 9}))  # fmt: skip
    p = label(["commit", "--version", "a1"], tmp_path)  # no relevance judgement: the answers alone are new
    assert p.returncode == 0, p.stderr
    folder = ws.version("a1")
    v = json.loads((folder / "version.json").read_text())
    assert v["answer_human_sample"]["questions"] == qids[:3] and v["answer_human_sample"]["seed"] == 5
    assert "answer_grades.csv" in v["files"] and v["added"] == 0 and "views" not in v
    assert v["answer_grades"] == {"answers": len(entries), "human": len(first) + 1, "llm": len(entries)}
    views = read_views(folder).answers
    assert views is not None and views.assessor is not None
    for e in entries:
        assert views.assessor[e.key] == "correct"
        want = "wrong" if e.qid == qids[0] else "partly" if e.key == second.key else "correct"
        assert views.headline[e.key] == want
    assert set(views.human) == {e.key for e in first} | {second.key}
    # q1 fully graded by a person: checked; q2 half: not; q3 none graded: not
    assert views.checked == {qids[0]}
