"""TREC run / TREC qrels / BEIR qrels readers: parsing, declared tie rules, errors naming file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablate.errors import ConfigError, InputError
from ablate.evaluation import read_qrels, read_trec_run


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_trec_run_sorted_by_score_rank_column_ignored(tmp_path):
    p = write(tmp_path, "r.trec", "q1 Q0 b 1 1.0 sys\nq1 Q0 a 2 3.5 sys\n\nq2 Q0 c 1 2 sys\n")
    run = read_trec_run(p)
    assert [h.doc_id for h in run.results["q1"]] == ["a", "b"]
    assert all(h.chunk_id == h.doc_id for h in run.results["q1"])
    assert run.results["q1"][0].score == 3.5
    assert run.name == "sys"
    assert "docid asc" in run.meta["tie_rule"] and len(run.meta["source_sha256"]) == 64


def test_trec_run_tie_rules(tmp_path):
    p = write(tmp_path, "r.trec", "q Q0 b 1 1.0 s\nq Q0 c 2 1.0 s\nq Q0 a 3 1.0 s\nq Q0 z 4 2.0 s\n")
    asc = read_trec_run(p)
    trec = read_trec_run(p, ties="trec_eval")
    assert [h.doc_id for h in asc.results["q"]] == ["z", "a", "b", "c"]
    assert [h.doc_id for h in trec.results["q"]] == ["z", "c", "b", "a"]
    assert "trec_eval" in trec.meta["tie_rule"]
    with pytest.raises(ConfigError, match="ties"):
        read_trec_run(p, ties="random")


def test_trec_run_duplicates_are_refused_with_file_line_and_id(tmp_path):
    """trec_eval refuses a docid listed twice for one query; so do we, instead of scoring one of the two lines."""
    p = write(tmp_path, "r.trec", "q Q0 a 1 2.0 s\nq Q0 b 2 1.5 s\n\nq Q0 a 3 1.0 s\nq2 Q0 a 1 1.0 s\n")
    with pytest.raises(InputError) as e:
        read_trec_run(p)
    assert e.value.where == f"{p}:4"
    assert "query 'q' lists docid 'a' again (first at line 1)" in str(e.value) and "Fix:" in str(e.value)
    assert len(read_trec_run(write(tmp_path, "ok.trec", "q Q0 a 1 2.0 s\nq2 Q0 a 1 1.0 s\n")).results) == 2


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_an_empty_run_file_is_refused(tmp_path, text):
    p = write(tmp_path, "empty.trec", text)
    with pytest.raises(InputError) as e:
        read_trec_run(p)
    assert e.value.where == str(p) and "holds no result line" in str(e.value)


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        ("q1 Q0 a 1 1.0 s\nq1 Q0 b 2 s\n", 2, "expected 6 fields"),
        ("q1 Q0 a 1 high s\n", 1, "not a finite number"),
        ("q1 Q0 a 1 nan s\n", 1, "not a finite number"),
        ("q1\tQ0\ta\t1\t1.0\ts\textra\n", 1, "found 7"),
    ],
)
def test_trec_run_bad_lines_name_file_and_line(tmp_path, text, line, what):
    p = write(tmp_path, "bad.trec", text)
    with pytest.raises(InputError) as e:
        read_trec_run(p)
    assert e.value.where == f"{p}:{line}"
    assert what in str(e.value) and "Fix:" in str(e.value)


def test_missing_file_and_non_utf8(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        read_trec_run(tmp_path / "nope.trec")
    p = tmp_path / "latin1.trec"
    p.write_bytes("q Q0 a 1 1 s\nq Q0 caf\xe9 2 0.5 s\n".encode("latin-1"))
    with pytest.raises(InputError) as e:
        read_trec_run(p)
    assert e.value.where == f"{p}:2"


def test_trec_qrels(tmp_path):
    p = write(tmp_path, "q.txt", "q1 0 a 2\nq1 0 b 0\nq2 0 c -1\nq2 0 d 1.0\nq1 0 a 2\n")
    q = read_qrels(p, unit="chunk")
    assert q.judgements == {"q1": {"a": 2, "b": 0}, "q2": {"c": -1, "d": 1}}
    assert q.unit == "chunk" and q.name == "q.txt" and len(q.source_sha256) == 64


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        ("q1 0 a 2\nq1 0\n", 2, "found 2 fields"),
        ("q1 0 a 2.5\n", 1, "not an integer"),
        ("q1 0 a x\n", 1, "not an integer"),
        ("q1 0 a 2\nq1 0 a 1\n", 2, "judged twice"),
    ],
)
def test_trec_qrels_bad_lines(tmp_path, text, line, what):
    p = write(tmp_path, "q.txt", text)
    with pytest.raises(InputError) as e:
        read_qrels(p)
    assert e.value.where == f"{p}:{line}" and what in str(e.value)


def test_beir_qrels_header_optional_tabs_and_bom(tmp_path):
    p = write(tmp_path, "test.tsv", "query-id\tcorpus-id\tscore\nq1\tdoc 1\t2\nq1\tb\t0\n")
    q = read_qrels(p)
    assert q.judgements == {"q1": {"doc 1": 2, "b": 0}}  # ids may contain spaces in tsv
    no_header = write(tmp_path, "nh.tsv", "q1\ta\t1\n")
    assert read_qrels(no_header).judgements == {"q1": {"a": 1}}
    bom = tmp_path / "bom.tsv"
    bom.write_bytes("\ufeffquery-id\tcorpus-id\tscore\nq1\ta\t1\n".encode())
    assert read_qrels(bom).judgements == {"q1": {"a": 1}}
    t = write(tmp_path, "t.txt", "q1 0 a 1\n")
    assert read_qrels(t).judgements == {"q1": {"a": 1}}


def test_qrels_errors(tmp_path):
    p2 = write(tmp_path, "bad.tsv", "query-id\tcorpus-id\tscore\nq1\ta\t1\nq1 a 1\n")
    with pytest.raises(InputError) as e:
        read_qrels(p2)
    assert e.value.where == f"{p2}:3" and "no tab" in str(e.value)
    with pytest.raises(ConfigError, match="unit"):
        read_qrels(p2, unit="page")


def test_text_csv_is_pandas_to_csv_text():
    """The unjudged export's fast writer gives pandas' exact text, and leaves to pandas what it cannot vouch for."""
    import random

    import numpy as np
    import pandas as pd

    from ablate.tables import text_csv

    rng = random.Random(7)
    alphabet = ["a", "Z", "9", "-", "#", "中", " ", "_", ".", ",", '"', "\n", "\r", ""]
    for trial in range(300):
        n = rng.randint(0, 6)
        cols = {
            "qid": ["".join(rng.choice(alphabet[:9]) for _ in range(rng.randint(1, 4))) for _ in range(n)],
            "unit_id": ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 4))) for _ in range(n)],
            "rank": np.arange(1, n + 1, dtype="int64"),
        }
        df = pd.DataFrame(cols)
        if trial % 7 == 0 and n:
            df["score"] = np.linspace(0, 1, n)  # floats: pandas writes them
        if trial % 11 == 0 and n:
            df.loc[0, "unit_id"] = None  # a missing value: pandas writes it
        assert text_csv(df) == df.to_csv(index=False), df
    one = pd.DataFrame({"x": ["a", "", "b"]})  # a lone empty field is quoted by pandas
    assert text_csv(one) == one.to_csv(index=False) == 'x\na\n""\nb\n'


def test_unjudged_csv_is_pandas_text_for_any_ids():
    """The unjudged export written straight from its rows is pandas' exact text for random ids (commas, quotes, line
    breaks, empty ids: pandas then writes it) and for ids that are not strings."""
    import random

    from ablate.data.types import Hit, Qrels, Run
    from ablate.evaluation import EvalSettings, evaluate

    rng = random.Random(11)
    alphabet = ["a", "Z", "9", "-", "#", "中", " ", "_", ".", ",", '"', "\n", "\r", ""]
    fast = 0
    for trial in range(200):
        plain_ids = trial % 2 == 0
        pool = alphabet[:9] if plain_ids else alphabet

        def ident(pool: list[str] = pool) -> str:
            return "".join(rng.choice(pool) for _ in range(rng.randint(0, 3)))

        results = {}
        for q in range(rng.randint(1, 4)):
            docs = [ident() for _ in range(rng.randint(0, 6))]
            results[f"q{q}"] = [Hit(f"{d}#{j}", d, 10.0 - j) for j, d in enumerate(docs)]
        if trial % 17 == 0 and results["q0"]:
            results["q0"][0] = Hit("c", None, 10.0)  # type: ignore[arg-type] - an id that is not a string
        qrels = Qrels({q: {ident(): 1} for q in results}, unit="doc")
        ev = evaluate(
            Run("r", results),
            qrels,
            list(results),
            EvalSettings(ks=(1, 3), budget=rng.choice(["chunks", "docs"])),
        )
        expected = ev.unjudged.to_csv(index=False)
        ev2 = evaluate(Run("r", results), qrels, list(results), ev.settings)
        got = ev2.unjudged_csv()  # before the frame is built: the fast path when it can vouch
        assert got == expected, (results, got, expected)
        fast += ev2._unjudged is None  # written without building the frame
    assert fast > 30


def test_unjudged_csv_is_the_unjudged_frames_csv():
    """EvalResult.unjudged_csv() is exactly unjudged.to_csv(index=False), fast path or not, either budget."""
    from ablate.data.types import Hit, Qrels, Run
    from ablate.evaluation import EvalSettings, evaluate

    run = Run(
        "r",
        {
            "q1": [
                Hit("d1#0", "d1", 3.0),
                Hit("d2#0", "d2", 2.0),
                Hit("d1#1", "d1", 1.5),
                Hit("d3#0", "d3", 1.0),
            ],
            "q2": [Hit("e,1#0", "e,1", 2.0), Hit('e"2#0', 'e"2', 1.0)],
            "q3": [],
        },
    )
    qrels = Qrels({"q1": {"d2": 1}, "q2": {"x": 1}, "q3": {"d1": 1}}, unit="doc")
    for budget in ("chunks", "docs"):
        for qids in (["q1"], ["q1", "q2", "q3"]):
            ev = evaluate(run, qrels, qids, EvalSettings(ks=(1, 2, 3), budget=budget))
            text = ev.unjudged_csv()
            assert text == ev.unjudged.to_csv(index=False)
            assert text == ev.unjudged_csv()  # again, now from the built frame
    assert "q1,d1,1,d1#0,d1" in text and "q1,d3,3,d3#0,d3" in text and '"e,1"' in text
