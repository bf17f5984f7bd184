"""Grading answers end to end with real runs: a sweep where the shipped Qwen answers (variant A and the Oracle on the
tiny corpus), ``pool --kind answers`` (equal to an independent reading of the runs' answers.csv), grades in the journal,
and ``validate --kind answers generator=llama_cpp``: the rule and the Qwen answer judge, whose kappas equal sklearn's on
the report's own pairs.csv."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from ablate import record as R
from ablate.evaluation.generation import normalize_answer
from ablate.labels import journal, poolfile
from ablate.labels.kind import ANSWER_LEVEL
from ablate.tracking import Tracker
from conftest import TINY_DOCS, TINY_MANIFEST, TINY_QRELS, TINY_QUERIES, write_corpus

pytest.importorskip("llama_cpp")
GOLDS = {"q1": ["1,250 yuan"], "q2": ["supervisor approval"], "q4": ["3"]}


def _corpus(root: Path) -> Path:
    queries = [dict(q) for q in TINY_QUERIES]
    for q in queries:
        q["answers"] = GOLDS.get(q["_id"], [])
    return write_corpus(root, TINY_DOCS, queries, TINY_QRELS, TINY_MANIFEST)


def _cli(module: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=1200
    )


@pytest.mark.slow  # the shipped Qwen answers 4 questions twice and judges the distinct answers (~2-4 min)
def test_pool_answers_from_real_runs_then_validate_the_rule_and_the_qwen_judge(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "tiny")
    uri = f"sqlite:///{tmp_path}/m.db"
    common = ["corpus=beir", f"corpus.path={corpus}", "corpus.split=dev", "corpus.identity=employee",
              f"tracking.uri={uri}", "progress=false", "stats.bootstrap=100"]  # fmt: skip
    gen = ["generator=llama_cpp", "generator.max_tokens=48", "generator.n_ctx=2048", "generator.context_k=3"]
    p = _cli("ablate", ["-m", "variant=A,oracle", *gen, *common, "tracking.experiment=answers"], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    t = Tracker(uri)
    (parent,) = [r for r in t.find_runs([t.experiment_id("answers", create=False)]) if r.tags.get(R.T_ROLE)]
    runs = {r.name: r.run_id for r in t.children(parent.run_id)}
    assert sorted(runs) == ["A", "oracle"]

    # runs without a generator wrote no answers: refused in one line, nothing written
    p = _cli("ablate", ["variant=A", *common, "tracking.experiment=no-answers"], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    labels = tmp_path / "labels"
    p = _cli("ablate.label", ["pool", "--kind", "answers", "--experiment", "no-answers", "--tracking-uri", uri,
                              "--labels-dir", str(labels)], tmp_path)  # fmt: skip
    assert p.returncode == 2 and "none of the 1 run(s) wrote answers.csv" in p.stderr, p.stderr
    assert not labels.exists()

    p = _cli("ablate.label", ["pool", "--kind", "answers", "--parent", parent.run_id, "--tracking-uri", uri,
                              "--labels-dir", str(labels)], tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr
    pool_path = labels / "tiny" / "answer_pools" / "A-oracle-answers.jsonl"
    assert f"-> {pool_path}" in p.stdout or "A-oracle-answers.jsonl" in p.stdout
    pool = poolfile.read_answers(pool_path)
    # independent: each run's answers.csv read with pandas; distinct (qid, text) of the questions with golds
    expected: dict[tuple[str, str], list[str]] = {}
    for name in ("A", "oracle"):
        got = t.download_artifact(runs[name], "answers.csv", tmp_path / name)
        assert got is not None
        df = pd.read_csv(got, dtype={"qid": str}, keep_default_na=False)
        assert len(df) == 4  # every dev question was asked
        for qid, text in zip(df["qid"], df["answer"], strict=True):
            if qid in GOLDS:
                expected.setdefault((qid, text), []).append(name)
    assert {(e.qid, e.answer): list(e.runs) for e in pool.entries} == expected
    assert all(e.golds == tuple(GOLDS[e.qid]) for e in pool.entries)
    assert pool.meta.runs == runs and pool.meta.corpus == "tiny"
    assert "left out: 1 question(s) without gold answers (q3)" in p.stdout

    # a person's grades, by hand: correct when the gold is in the answer, else wrong; the first one partly
    grades = []
    for i, e in enumerate(pool.entries):
        right = any(normalize_answer(g) in normalize_answer(e.answer) for g in e.golds)
        grades.append(journal.grade(e.qid, e.answer, "partly" if i == 0 else "correct" if right else "wrong",
                                          "human:lead"))  # fmt: skip
    journal.append(labels / "tiny" / "answer_journal.jsonl", grades)

    p = _cli("ablate.label", ["validate", "--kind", "answers", "--pool", str(pool_path), "--labels-dir", str(labels),
                              "generator=llama_cpp"], tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    folder = pool_path.with_suffix(".validation")
    report = json.loads((folder / "validation_answers.json").read_text(encoding="utf-8"))
    assert report["judge"].startswith("llm:qwen2.5-coder-1.5b-instruct@") and report["n"] == len(pool.entries)
    rows = list(csv.DictReader((folder / "pairs.csv").open(encoding="utf-8")))
    assert [(r["qid"], r["answer_sha256"], r["human"]) for r in rows] == [
        (g.qid, g.answer_sha256, g.grade) for g in grades]  # fmt: skip
    assert {r["judge"] for r in rows} <= {"correct", "partly", "wrong", ""}
    hb = [int(r["human"] == "correct") for r in rows]
    rule = report["rule_agreement"]
    assert rule["binary"]["kappa"] == pytest.approx(
        cohen_kappa_score(hb, [int(r["rule"] == "correct") for r in rows]), abs=1e-12, nan_ok=True
    )
    judged = [r for r in rows if r["judge"]]
    assert report["judge_ungraded"] == len(rows) - len(judged)
    if judged:
        judge = report["judge_agreement"]
        level = ANSWER_LEVEL
        h3, j3 = [level[r["human"]] for r in judged], [level[r["judge"]] for r in judged]
        want = cohen_kappa_score(h3, j3, labels=[0, 1, 2])
        assert judge["graded"]["kappa"] == pytest.approx(want, abs=1e-12, nan_ok=True)
        fp = sum(r["judge"] == "correct" for r in judged if r["human"] != "correct")
        assert judge["false_positive"]["errors"] == fp
        assert judge["false_positive"]["n"] == sum(r["human"] != "correct" for r in judged)
    md = (folder / "validation_answers.md").read_text(encoding="utf-8")
    assert "## Rule (binary)" in md and "## LLM judge" in md and report["judge"] in md
