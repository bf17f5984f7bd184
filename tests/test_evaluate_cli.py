"""``python -m ablate.evaluate``: JSON keys and values, the human table, the unjudged CSV, one-line errors."""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import pytest

from inprocess import run_module

RUN = """q1 Q0 A 1 3.0 sys
q1 Q0 X 2 2.0 sys
q1 Q0 B 3 1.0 sys
q2 Q0 Y 1 3 sys
q2 Q0 Z 2 2 sys
q2 Q0 D 3 1 sys
q3 Q0 U 1 3 sys
q3 Q0 V 2 2 sys
q3 Q0 W 3 1 sys
q9 Q0 D 1 1 sys
"""
QRELS = "q1 0 A 2\nq1 0 B 1\nq1 0 C 2\nq1 0 X 0\nq2 0 D 1\nq3 0 E 1\nq3 0 F 1\n"


def cli(*args: str) -> subprocess.CompletedProcess:
    """``python -m ablate.evaluate *args``, run in this process (tests/inprocess.py)."""
    return run_module("ablate.evaluate", args, cwd=os.getcwd())


#: A refusal: the same call, named for what the test expects of it.
refused = cli


@pytest.fixture
def files(tmp_path: Path) -> tuple[str, str]:
    r = tmp_path / "run.trec"
    q = tmp_path / "qrels.txt"
    r.write_text(RUN, encoding="utf-8")
    q.write_text(QRELS, encoding="utf-8")
    return str(r), str(q)


def test_json_keys_and_values(files):
    p = cli(*files, "--ks", "1,3", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)  # exactly one JSON object
    for k in ("ndcg@3", "recall@3", "hit@3", "mrr@3", "judged@3", "complete@3", "unjudged@3", "ndcg@1"):
        assert k in d
    assert d["recall@3"] == pytest.approx((2 / 3 + 1 + 0) / 3, abs=1e-12)
    assert d["hit@3"] == pytest.approx(2 / 3, abs=1e-12)
    assert d["mrr@3"] == pytest.approx((1 + 1 / 3) / 3, abs=1e-12)
    ndcg_q1 = 3.5 / (3 + 3 / math.log2(3) + 0.5)
    ndcg_q2 = 1 / 2
    assert d["ndcg@3"] == pytest.approx((ndcg_q1 + ndcg_q2 + 0) / 3, abs=1e-12)
    assert d["unjudged@3"] == pytest.approx((0 + 2 + 3) / 3)
    acc = d["accounting"]
    assert acc["total"] == 3 and acc["answerable"] == 3 and acc["not_in_query_set"] == 1
    assert "budget" in acc["rules"]
    assert d["settings"]["ks"] == [1, 3] and d["settings"]["gain"] == "exponential"
    assert "docid asc" in d["tie_rule"]


def test_json_linear_gain_trec_eval_ties_and_per_query(files):
    p = cli(*files, "--ks", "3", "--gain", "linear", "--ties", "trec_eval", "--json", "--per-query")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["settings"]["gain"] == "linear" and "trec_eval" in d["tie_rule"]
    rows = {r["qid"]: r for r in d["per_query"]}
    assert rows["q1"]["ndcg@3"] == pytest.approx(2.5 / (2 + 2 / math.log2(3) + 0.5), abs=1e-12)


def test_missing_query_is_counted(tmp_path, files):
    q = tmp_path / "more.txt"
    q.write_text(QRELS + "q4 0 G 1\n", encoding="utf-8")
    zero = json.loads(cli(files[0], str(q), "--ks", "3", "--json").stdout)
    assert zero["accounting"]["missing_from_run"] == 1 and zero["hit@3"] == pytest.approx(2 / 4)
    excl = json.loads(cli(files[0], str(q), "--ks", "3", "--json", "--missing", "exclude").stdout)
    assert excl["accounting"]["missing_from_run"] == 1 and excl["hit@3"] == pytest.approx(2 / 3)


def test_human_table_and_unjudged_csv(tmp_path, files):
    out = tmp_path / "unjudged.csv"
    p = cli(*files, "--ks", "1,3", "--unjudged-csv", str(out))
    assert p.returncode == 0, p.stderr
    assert "ties: score desc, then docid asc" in p.stdout
    assert "recall" in p.stdout and "0.5556" in p.stdout and "@3" in p.stdout
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "qid,unit_id,rank,chunk_id,doc_id"
    assert "q2,Y,1,Y,Y" in lines and len(lines) == 1 + 5  # Y, Z, U, V, W


def test_bad_run_line_is_one_line_error_naming_file_and_line(tmp_path, files):
    bad = tmp_path / "bad.trec"
    bad.write_text("q1 Q0 A 1 3.0 sys\nq1 Q0 B 2 sys\n", encoding="utf-8")
    p = refused(str(bad), files[1], "--json")
    assert p.returncode == 2
    assert p.stdout == ""
    assert "Traceback" not in p.stderr
    err = p.stderr.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("error: ") and f"{bad}:2" in err


@pytest.mark.parametrize(
    "args",
    [
        ["--ks", "1,x"],
        ["--ks", "0"],
        ["--budget", "pages"],
        ["--relevance-level", "0"],
    ],
)
def test_bad_options_are_one_line_errors(files, args):
    p = refused(*files, *args)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and p.stderr.startswith("error: ")


def test_missing_files_and_doc_qrels_at_chunk_unit(tmp_path, files):
    p = refused(str(tmp_path / "nope.trec"), files[1])
    assert p.returncode == 2 and "file not found" in p.stderr and "Traceback" not in p.stderr
    # --unit chunk reads both at chunk level: allowed
    assert cli(*files, "--unit", "chunk", "--json").returncode == 0


DEMO = Path(__file__).resolve().parents[1] / "corpora" / "demo"


def _demo_run(tmp_path: Path) -> str:
    """A chunk-id run on the demo's dev labels (each question's judged chunks, then the others, in reverse)."""
    lines = [line.split("\t") for line in (DEMO / "qrels" / "dev.tsv").read_text().splitlines()[1:]]
    by_q: dict[str, list[str]] = {}
    for q, cid, _ in lines:
        by_q.setdefault(q, []).append(cid)
    every = sorted({cid for _, cid, _ in lines})
    run = tmp_path / "run.trec"
    with run.open("w") as out:
        for q, judged in by_q.items():
            ranked = list(reversed(judged)) + [c for c in every if c not in judged]
            for i, cid in enumerate(ranked[:20]):
                out.write(f"{q} Q0 {cid} {i + 1} {20 - i} demo\n")
    return str(run)


def test_chunk_labels_give_the_chunk_unit_and_the_notes_are_in_the_json_too(tmp_path, files):
    run, qrels = _demo_run(tmp_path), str(DEMO / "qrels" / "dev.tsv")
    text, as_json = cli(run, qrels), cli(run, qrels, "--json")
    assert text.returncode == 0 and as_json.returncode == 0, (text.stderr, as_json.stderr)
    d = json.loads(as_json.stdout)
    assert d["unit"] == "chunk" and "unit=chunk " in text.stdout
    notes = d["notes"]
    assert notes and all(n in text.stdout.splitlines() for n in notes)  # the table's notes, whole
    assert any(n.startswith("unit=chunk, from the labels") for n in notes)
    # the labels are the demo's: the note gives the options that score a run as ablate made it
    how = next(n for n in notes if "--identity per_query --as-of per_query" in n)
    assert f"--corpus {DEMO} --split dev" in how
    # the same figures with the unit named: ids are scored as given either way
    assert json.loads(cli(run, qrels, "--json", "--unit", "doc").stdout)["ndcg@10"] == d["ndcg@10"]
    # plain document ids (trec_eval style) stay at the doc unit, with no unit note
    plain = json.loads(cli(*files, "--json").stdout)
    assert plain["unit"] == "doc" and not any(n.startswith("unit=") for n in plain["notes"])
