"""``python -m ablate.gate`` on real runs of the demo in a real MLflow sqlite store: its interval is the decision's on
the per-question values each run logged (read here independently from the runs' per_query.csv), its exit codes follow
the outcome, a run against itself passes, and bad input is one line with exit 2."""

from __future__ import annotations

import json
import math
import sqlite3

import mlflow
import pandas as pd
import pytest
from scipy import stats

from demo_cli import demo_folder, run_module


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Two runs of C: the default and rrf.k=1 with a 5-result fusion window."""
    root = demo_folder(tmp_path_factory.mktemp("gate"))
    for extra in ([], ["rrf.k=1", "retrieval.window=5"]):
        p = run_module(["ablate", "variant=C", "tracking.experiment=gate", *extra], root)
        assert p.returncode == 0, p.stderr
    con = sqlite3.connect(root / "mlflow.db")
    (base,), (cand,) = con.execute("select run_uuid from runs order by start_time").fetchall()
    return root, base, cand


def _answerable(root, run_id: str, metric: str) -> pd.Series:
    mlflow.set_tracking_uri(f"sqlite:///{root / 'mlflow.db'}")
    path = mlflow.artifacts.download_artifacts(
        run_id=run_id, artifact_path="per_query.csv", dst_path=str(root / run_id)
    )
    pq = pd.read_csv(path, dtype={"qid": str}).set_index("qid")
    return pq.loc[pq["category"] == "answerable", metric].dropna()


def test_the_verdict_is_the_paired_interval_of_the_runs_logged_values(store):
    root, base, cand = store
    p = run_module(
        ["ablate.gate", "--baseline", base, "--candidate", cand, "--metric", "ndcg@10", "--margin", "0.02",
         "--cluster", "none", "--json", "--summary", "summary.md"],
        root,
    )  # fmt: skip
    got = json.loads(p.stdout)
    b, c = _answerable(root, base, "ndcg@10"), _answerable(root, cand, "ndcg@10")
    assert sorted(b.index) == sorted(c.index) and got["n_questions"] == len(b) == got["n_clusters"]
    ci = stats.ttest_rel(c.sort_index(), b.sort_index()).confidence_interval(0.90)
    assert math.isclose(got["low"], ci.low, abs_tol=1e-9) and math.isclose(got["high"], ci.high, abs_tol=1e-9)
    want = "pass" if got["low"] > -0.02 else ("regression" if got["high"] < 0 else "inconclusive")
    assert got["outcome"] == want and p.returncode == {"pass": 0, "regression": 1, "inconclusive": 3}[want]
    assert (got["baseline"], got["candidate"], got["metric"]) == (base, cand, "ndcg@10")
    summary = (root / "summary.md").read_text(encoding="utf-8")
    assert summary.splitlines()[1].startswith(want.upper())


def test_evidence_clusters_are_the_split_tools_and_a_run_against_itself_passes(store):
    root, base, cand = store
    p = run_module(["ablate.gate", "--baseline", base, "--candidate", cand, "--metric", "ndcg@10", "--margin", "0.02",
                    "--json"], root)  # fmt: skip
    got = json.loads(p.stdout)
    assert got["n_clusters"] < got["n_questions"] and len(set(got["groups"].values())) == got["n_clusters"]
    same = run_module(["ablate.gate", "--baseline", base, "--candidate", base, "--metric", "ndcg@10",
                       "--margin", "0.02"], root)  # fmt: skip
    assert same.returncode == 0, same.stderr
    first = same.stdout.splitlines()[0]
    assert first.startswith("PASS ndcg@10 Δ +0.000 [+0.000, +0.000] margin 0.02, 17 questions in "), first


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--baseline", "nope", "--candidate", "{base}"], "--baseline 'nope': no run with this id or name"),
        (
            ["--baseline", "{base}", "--candidate", "{base}", "--metric", "ndcg@7"],
            "--metric 'ndcg@7': run C has no",
        ),
        (["--baseline", "{base}", "--candidate", "{base}", "--margin", "-1"], "--margin -1.0 is not valid"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(store, args, needle):
    root, base, _ = store
    full = [a.replace("{base}", base) for a in args]
    if "--metric" not in full:
        full += ["--metric", "ndcg@10"]
    if "--margin" not in full:
        full += ["--margin", "0.02"]
    p = run_module(["ablate.gate", *full], root)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and needle in p.stderr, p.stderr
