"""The labels workspace's files: the journal (append, read, undo, a torn last line, bad lines), pool files, the
grade legend and a committed label version loaded in place of qrels/."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ablate.data.corpus import load_corpus
from ablate.errors import ConfigError, InputError
from ablate.labels import journal, poolfile
from ablate.labels.legend import legend
from ablate.labels.workspace import Workspace

DEMO = Path(__file__).resolve().parents[1] / "corpora" / "demo"


def test_journal_appends_and_the_latest_judgement_stands(tmp_path: Path) -> None:
    p = tmp_path / "j" / "journal.jsonl"
    journal.append(p, journal.judgement("q1", "D#1", 2, "human:a", "pool1"))
    journal.append(
        p, [journal.judgement("q1", "D#2", 0, "human:a"), journal.judgement("q1", "D#1", 1, "human:b")]
    )
    journal.append(p, journal.judgement("q1", "D#1", None, "human:b"))  # b takes back their 1
    journal.append(p, journal.judgement("q1", "D#2", None, "human:a"))  # a takes back D#2
    got = journal.read(p, grades=[0, 1, 2])
    assert [j.grade for j in got] == [2, 0, 1, None, None]
    standing = journal.latest(got)
    assert {k: v.grade for k, v in standing.items()} == {("q1", "D#1"): 2}
    assert standing[("q1", "D#1")].assessor == "human:a"
    lines = p.read_text(encoding="utf-8").splitlines()
    assert set(json.loads(lines[0])) == set(journal.FIELDS)


def test_a_torn_last_line_is_moved_aside_but_a_bad_line_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "journal.jsonl"
    journal.append(p, journal.judgement("q1", "D#1", 2, "human:a"))
    with p.open("a", encoding="utf-8") as f:
        f.write('{"qid": "q1", "unit": "D#')  # a write cut short by a crash
    assert len(journal.read(p)) == 1
    assert [s.read_text() for s in tmp_path.glob("journal.jsonl.torn-*")] == ['{"qid": "q1", "unit": "D#']
    with p.open("a", encoding="utf-8") as f:
        f.write('{"qid": "q1", "unit": "D#\n')  # a whole line that is not JSON: not a tear
    with pytest.raises(InputError, match=r"journal.jsonl:2"):
        journal.read(p)


@pytest.mark.parametrize(
    ("line", "match"),
    [
        (
            {"qid": "q1", "unit": "D#1", "grade": 5, "assessor": "human:a", "time": "t", "pool": ""},
            "not in the corpus's grade legend",
        ),
        (
            {"qid": "q1", "unit": "D#1", "grade": "2", "assessor": "human:a", "time": "t", "pool": ""},
            "not an integer",
        ),
        ({"qid": "q1", "unit": "D#1", "grade": 1, "time": "t", "pool": ""}, "has no 'assessor'"),
        (
            {"qid": "qX", "unit": "D#1", "grade": 1, "assessor": "human:a", "time": "t", "pool": ""},
            "question 'qX'",
        ),
    ],
)
def test_bad_journal_lines_name_their_line(tmp_path: Path, line: dict[str, object], match: str) -> None:
    p = tmp_path / "journal.jsonl"
    journal.append(p, journal.judgement("q1", "D#1", 2, "human:a"))
    with p.open("a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")

    def check(qid: str, unit: str) -> str | None:
        return None if qid == "q1" else f"question {qid!r} is not in the corpus"

    with pytest.raises(InputError, match=match) as e:
        journal.read(p, check, grades=[0, 1, 2])
    assert f"{p}:2" in str(e.value)


def test_pool_file_round_trips_and_refuses_a_missing_description(tmp_path: Path) -> None:
    ws = Workspace(tmp_path, "demo")
    path = ws.pool("C-top10")
    meta = poolfile.PoolMeta("demo", str(DEMO), "chunk", "v2", "abc", 10, runs={"C": "r1"})
    entries = [poolfile.PoolEntry("q1", "D#1", ("B", "C"), 3), poolfile.PoolEntry("q2", "D 2#1", ("C",), 1)]
    poolfile.write(path, poolfile.Pool(meta, entries))
    back = poolfile.read(path)
    assert back.entries == entries and back.meta == meta
    poolfile.meta_path(path).unlink()
    with pytest.raises(InputError, match="is missing"):
        poolfile.read(path)
    with pytest.raises(ConfigError, match="--name"):
        ws.pool("../x")


def test_legend_from_corpus_yaml_or_from_the_labels() -> None:
    assert legend({"grades": {2: "answers directly", 1: "helps", 0: "not relevant"}}, []).values == [2, 1, 0]
    assert legend({}, [1], "zh").grades == ((1, "相关"), (0, "不相关"))
    assert legend({}, [3, 1]).values == [3, 1, 0]
    with pytest.raises(InputError, match="no 0"):
        legend({"grades": {1: "relevant"}}, [])
    with pytest.raises(InputError, match="not an integer"):
        legend({"grades": {"high": "x", 0: "no"}}, [])


def test_a_committed_label_version_replaces_qrels(tmp_path: Path) -> None:
    version = tmp_path / "labels" / "demo" / "versions" / "v3"
    version.mkdir(parents=True)
    for f in (DEMO / "qrels").glob("*.tsv"):
        shutil.copy(f, version / f.name)
    with (version / "dev.tsv").open("a", encoding="utf-8") as f:
        f.write("q025\tINV-120#check\t1\n")
    info = {"name": "v3", "parent": "demo-labels-v2", "assessors": {"human:a": 1}, "llm_made": 0}
    (version / "version.json").write_text(json.dumps(info), encoding="utf-8")
    old = load_corpus(DEMO)
    new = load_corpus(DEMO, labels=version)
    assert new.label_version == "v3" and old.label_version == "demo-labels-v2"
    assert new.manifest["label_version_parent"] == "demo-labels-v2"
    assert new.qrels["dev"].judgements["q025"]["INV-120#check"] == 1
    assert "INV-120#check" not in old.qrels["dev"].judgements["q025"]
    assert new.fingerprint != old.fingerprint
    with pytest.raises(ConfigError, match="no label version 'v9'"):
        load_corpus(DEMO, labels="v9")
