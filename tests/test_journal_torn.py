"""A journal line torn by a crash mid-append (both journals: relevance judgements and answer grades): the next open
cuts the bytes after the last newline to a side file ``<journal>.torn-<time>`` with one warning naming both files,
so the next judgement starts a line of its own and every acknowledged one is kept -- through the library, through
the pages' real requests, and with a real child process killed (SIGKILL) while it appends."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ablate.labels import journal
from ablate.labels.page import ordered
from test_label_serve import client

REPO = Path(__file__).resolve().parents[1]
TORN = b'{"qid": "q9", "unit": "D#'  # what a kill mid-write leaves: a line without its end


def relevance(path: Path, i: int) -> None:
    journal.append(path, journal.judgement(f"q{i}", "D#1", i % 3, "human:a", "p"))


def answers(path: Path, i: int) -> None:
    journal.append(path, journal.grade(f"q{i}", f"Answer: {i} yuan", "correct", "human:a"))


def read_keys(path: Path, which: str) -> list[str]:
    if which == "relevance":
        return [j.qid for j in journal.read(path)]
    return [g.qid for g in journal.read_grades(path)]


WRITERS = {"relevance": relevance, "answers": answers}


def side_files(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".torn-*"))


def one_warning(err: str, path: Path, side: Path) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0] == (
        f"warning: {path} ended in a partial line of {len(TORN)} bytes (a write cut short by a crash, never "
        f"acknowledged): moved it to {side}; every whole line is kept"
    )


@pytest.mark.parametrize("which", WRITERS)
def test_the_next_append_after_a_torn_line_is_a_line_of_its_own(tmp_path: Path, capsys, which: str) -> None:
    path = tmp_path / "j.jsonl"
    write = WRITERS[which]
    write(path, 1)
    write(path, 2)
    with path.open("ab") as f:
        f.write(TORN)  # a kill mid-write
    write(path, 3)  # acknowledged: it must be there, whole
    (side,) = side_files(path)
    assert side.read_bytes() == TORN
    assert side.name.startswith("j.jsonl.torn-2") and side.name.endswith("Z")
    one_warning(capsys.readouterr().err, path, side)
    raw = path.read_bytes()
    assert raw.endswith(b"\n") and TORN not in raw
    assert all(json.loads(x) for x in raw.decode().splitlines())  # nothing glued: every line parses
    assert read_keys(path, which) == ["q1", "q2", "q3"]
    assert capsys.readouterr().err == ""  # cut once, reported once


@pytest.mark.parametrize("which", WRITERS)
def test_reading_cuts_a_torn_line_too_and_a_second_one_gets_its_own_side_file(
    tmp_path: Path, capsys, which: str
) -> None:
    path = tmp_path / "j.jsonl"
    WRITERS[which](path, 1)
    with path.open("ab") as f:
        f.write(TORN)
    assert read_keys(path, which) == ["q1"]
    (side,) = side_files(path)
    one_warning(capsys.readouterr().err, path, side)
    assert path.read_bytes().endswith(b"}\n")
    with path.open("ab") as f:
        f.write(TORN)
    WRITERS[which](path, 2)
    assert len(side_files(path)) == 2 and all(s.read_bytes() == TORN for s in side_files(path))
    assert read_keys(path, which) == ["q1", "q2"]


def test_a_whole_last_line_without_its_newline_is_kept(tmp_path: Path, capsys) -> None:
    """A journal edited by hand whose last line lacks only its newline: the line stands, the next one is not glued
    to it, and nothing is moved aside."""
    path = tmp_path / "journal.jsonl"
    line = {"qid": "q1", "unit": "D#1", "grade": 2, "assessor": "human:a", "time": "t", "pool": ""}
    path.write_text(json.dumps(line), encoding="utf-8")
    relevance(path, 2)
    assert [(j.qid, j.grade) for j in journal.read(path)] == [("q1", 2), ("q2", 2)]
    assert side_files(path) == [] and capsys.readouterr().err == ""


def test_a_torn_multi_byte_character_is_a_torn_line(tmp_path: Path, capsys) -> None:
    path = tmp_path / "answer_journal.jsonl"
    answers(path, 1)
    torn = '{"qid": "q2", "answer": "八十'.encode()[:-1]  # cut inside a character
    with path.open("ab") as f:
        f.write(torn)
    answers(path, 3)
    (side,) = side_files(path)
    assert side.read_bytes() == torn
    assert [g.qid for g in journal.read_grades(path)] == ["q1", "q3"]


# ---------------------------------------------------------------- through the pages' real requests


def test_judging_on_the_page_after_a_torn_line_keeps_every_acknowledged_judgement(
    tmp_path: Path, capsys
) -> None:
    import test_label_serve as t

    labels = tmp_path / "labels"
    app, data = t.app_for(t.make_pool(labels), labels)
    c = client(app)
    order = ordered(data.entries)
    for e, grade in zip(order[:2], ("2", "0"), strict=True):
        assert c.post("/judge", data={"qid": e.qid, "unit": e.unit, "grade": grade}).status_code == 303
    with data.journal.open("ab") as f:
        f.write(TORN)  # the server was killed mid-append
    e = order[2]
    assert c.post("/judge", data={"qid": e.qid, "unit": e.unit, "grade": "1"}).status_code == 303
    got = [(j.qid, j.unit, j.grade) for j in journal.read(data.journal)]
    assert got == [(order[0].qid, order[0].unit, 2), (order[1].qid, order[1].unit, 0), (e.qid, e.unit, 1)]
    (side,) = side_files(data.journal)
    assert side.read_bytes() == TORN
    assert f"moved it to {side}" in capsys.readouterr().err
    assert 'id="all-done">3<' in c.get("/").get_data(as_text=True)


def test_grading_on_the_answer_page_after_a_torn_line_keeps_every_acknowledged_grade(tmp_path: Path) -> None:
    import test_label_answers as t

    labels = tmp_path / "labels"
    app, data = t.app_for(t.make_pool(labels), labels)
    c = client(app)
    e0, e1 = data.entries[:2]
    assert (
        c.post(
            "/judge", data={"qid": e0.qid, "answer_sha256": e0.answer_sha256, "grade": "wrong"}
        ).status_code
        == 303
    )
    with data.journal.open("ab") as f:
        f.write(b'{"qid": "q001", "answer_sha256": "5b')
    assert (
        c.post(
            "/judge", data={"qid": e1.qid, "answer_sha256": e1.answer_sha256, "grade": "partly"}
        ).status_code
        == 303
    )
    assert [(g.key, g.grade) for g in journal.read_grades(data.journal)] == [
        (e0.key, "wrong"),
        (e1.key, "partly"),
    ]
    (side,) = side_files(data.journal)
    assert side.read_bytes() == b'{"qid": "q001", "answer_sha256": "5b'


# ---------------------------------------------------------------- a real process killed while it appends

CHILD = """
import sys
from pathlib import Path
from ablate.labels import journal
path, start = Path(sys.argv[1]), int(sys.argv[2])
for i in range(start, start + 100000):
    journal.append(path, journal.judgement(f"q{i}", "D#" + "x" * (i % 5000), i % 3, "human:kid", "p"))
    print(i, flush=True)  # acknowledged: on disk
"""


def test_a_child_killed_while_appending_loses_no_acknowledged_judgement(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    acknowledged: list[str] = []
    rng = random.Random(37)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    start = 0
    for _ in range(3):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(path), str(start)], stdout=subprocess.PIPE, text=True, env=env
        )
        assert child.stdout is not None
        until = len(acknowledged) + rng.randint(5, 40)
        while len(acknowledged) < until:
            line = child.stdout.readline()
            assert line, "the child stopped appending"
            acknowledged.append(f"q{int(line)}")
        time.sleep(rng.uniform(0, 0.02))  # somewhere in the middle of an append
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        acknowledged += [f"q{int(x)}" for x in child.stdout.read().split()]  # acknowledged before the kill
        child.stdout.close()
        # then the next judgement, and everything read back
        nxt = int(acknowledged[-1][1:]) + 1_000_000
        journal.append(path, journal.judgement(f"q{nxt}", "D#1", 1, "human:a", "p"))
        acknowledged.append(f"q{nxt}")
        qids = [j.qid for j in journal.read(path)]
        assert set(acknowledged) <= set(qids)
        assert qids[-1] == f"q{nxt}"
        assert all(json.loads(x) for x in path.read_text(encoding="utf-8").splitlines())
        start = nxt + 1
    for side in side_files(path):  # a tear, if the kill made one, holds a part of one line only
        assert b"\n" not in side.read_bytes()
