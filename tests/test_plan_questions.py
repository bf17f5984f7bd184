"""``python -m ablate.plan`` end to end on a real demo sweep (A, B, C; retrieval only): its questions needed equal
statsmodels' TTestPower on the per-question differences read from the runs' own ``per_query.csv``, its MDE the
report's, and bad input is one line with exit 2. Also the plan's rows on synthetic runs (no store)."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.power import TTestPower

from ablate import record as R
from ablate.study.power_plan import plan_rows
from ablate.tracking import Tracker
from demo_cli import run_module
from test_report import ablation_runs, col

REPO = Path(__file__).resolve().parents[1]


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_module(args, cwd)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """One demo sweep, variant=A,B,C, retrieval only, its report's correction Benjamini-Hochberg."""
    d = tmp_path_factory.mktemp("plan")
    (d / "corpora").symlink_to(REPO / "corpora", target_is_directory=True)
    uri = f"sqlite:///{d}/mlflow.db"
    args = ["ablate", "-m", "variant=A,B,C", f"tracking.uri={uri}", "progress=false", "stats.bootstrap=100"]
    p = _run([*args, "stats.correction=bh"], d)
    assert p.returncode == 0, p.stderr
    t = Tracker(uri)
    parent = t.find_runs(None, f"tags.`{R.T_ROLE}` = '{R.ROLE_SWEEP_PARENT}'", max_results=1)[0]
    kids = {r.variant: r for r in t.children(parent.run_id)}
    return d, uri, t, parent, kids, p.stdout, args


def _diffs(t: Tracker, a: str, b: str, dst: Path, metric: str = "ndcg@10") -> np.ndarray:
    tables = []
    for rid in (a, b):
        path = t.download_artifact(rid, R.A_PER_QUERY, dst / rid)
        assert path is not None
        pq = pd.read_csv(path, dtype={"qid": str}).set_index("qid")
        tables.append(pq[(pq["category"] == "answerable") & pq[metric].notna()][metric])
    common = tables[0].index.intersection(tables[1].index)
    return (tables[0][common] - tables[1][common]).to_numpy(float)


def test_plan_on_a_demo_sweep_equals_statsmodels(demo, tmp_path):
    d, uri, t, parent, kids, sweep_out, _ = demo
    # the sweep's report: the correction is logged on the parent and named; the MDE beside each delta, logged
    assert parent.params[R.P_CORRECTION] == "bh" and "p (BH)" in sweep_out and "| MDE " in sweep_out
    b_mde = t.get_run(kids["B"].run_id).metrics["mde_ndcg_at_10"]
    diffs_b = _diffs(t, kids["B"].run_id, kids["A"].run_id, tmp_path)
    es = TTestPower().solve_power(effect_size=None, nobs=diffs_b.size, alpha=0.05, power=0.8)
    assert b_mde == pytest.approx(es * np.std(diffs_b, ddof=1), abs=1e-6)

    args = ["--tracking-uri", uri, "--metric", "ndcg_at_10", "--delta", "0.03", "--cluster", "none", "--json"]
    p = _run(
        ["ablate.plan", *args], d
    )  # questions as independent (tests/test_clusters.py: the design effect)
    assert p.returncode == 0, p.stderr
    rows = {r["run"]: r for r in map(json.loads, p.stdout.splitlines())}
    assert set(rows) == {"B", "C"}
    for v in ("B", "C"):
        r = rows[v]
        assert {"baseline", "run", "metric", "n", "sd_diff", "mde", "n_needed", "sim_power"} <= set(r)
        diffs = _diffs(t, kids[v].run_id, kids["A"].run_id, tmp_path)
        sd = np.std(diffs, ddof=1)
        assert r["baseline"] == "A" and r["metric"] == "ndcg@10" and r["n"] == diffs.size
        assert (
            r["sd_diff"] == pytest.approx(sd, abs=1e-9) and r["alpha"] == 0.025
        )  # Holm: planned at 0.05 / 2
        want = TTestPower().solve_power(effect_size=0.03 / sd, nobs=None, alpha=0.025, power=0.8)
        assert r["n_needed"] == math.ceil(want)
        es = TTestPower().solve_power(effect_size=None, nobs=diffs.size, alpha=0.025, power=0.8)
        assert r["mde"] == pytest.approx(es * sd, abs=1e-6)
        assert abs(r["sim_power"] - 0.8) <= 4 * r["sim_se"] + 0.01  # the bootstrap population is the pilot's

    # --runs A,B: the first is the baseline; --correction none: the family's alpha; the table is printed
    ab = f"{kids['A'].run_id},{kids['B'].run_id}"
    p = _run(
        ["ablate.plan", "--tracking-uri", uri, "--runs", ab, "--correction", "none", "--metric", "hit@10"], d
    )
    assert p.returncode == 0, p.stderr
    assert "B vs A" in p.stdout and "MDE n=" in p.stdout and "Wilson width n=" in p.stdout
    assert "no correction: α = 0.05" in p.stdout


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--runs", "0" * 32 + "," + "1" * 32], "no such run"),
        (["--metric", "ndcg@7"], "logged no per-question ndcg@7"),
        (["--delta", "0"], "--delta=0.0 is not valid"),
        (["--power", "1.2"], "--power=1.2 is not valid"),
        (["--cluster", "docs"], "--cluster='docs' is not valid; valid options: evidence, group, none"),
    ],
)
def test_plan_bad_input_is_one_line_exit_2(demo, args, needle):
    d, uri, *_ = demo
    p = _run(["ablate.plan", "--tracking-uri", uri, *args], d)
    assert p.returncode == 2 and p.stderr.startswith("error: ") and p.stderr.count("\n") == 1, p.stderr
    assert needle in p.stderr and "Traceback" not in p.stderr


def test_plan_rows_on_synthetic_runs_follow_the_report_baseline():
    runs = ablation_runs()
    rows = plan_rows(runs, "ndcg@10", delta=0.05, correction="bh", n_sims=500)
    by = {r.variant: r for r in runs}
    assert [r.run for r in rows] == ["B", "C", "D"] and {r.baseline for r in rows} == {"A"}
    for r in rows:
        diffs = (col(by[r.run], "ndcg@10") - col(by["A"], "ndcg@10")).to_numpy()
        sd = np.std(diffs, ddof=1)
        assert r.n == 30 and r.alpha == pytest.approx(0.05 / 3)
        assert r.n_needed == math.ceil(TTestPower().solve_power(0.05 / sd, alpha=0.05 / 3, power=0.8))
    hit = plan_rows(runs, "hit_at_10", n_sims=200)
    assert all(set(r.wilson_width) == {30, 60, 120, 240} for r in hit)
    assert all(r.mde_at[240] < r.mde_at[30] / 2.5 for r in hit)  # about 1 / sqrt(8)


def test_a_reports_mde_leaves_the_runs_record_sealed_and_reusable(demo):
    """The MDEs a report logs on compared runs are not part of their sealed record: the runs still check, and the
    same sweep again reuses every cell; each copy gets its MDE from its own sweep's report, not the source's."""
    from ablate.record_digest import check

    d, uri, t, parent, kids, _, args = demo
    assert "mde_ndcg_at_10" in t.get_run(kids["C"].run_id).metrics
    assert all(check(t, t.get_run(r.run_id)).problem is None for r in kids.values())
    p = _run(args, d)
    assert p.returncode == 0 and "3 of 3 cells reused" in p.stdout + p.stderr, p.stdout + p.stderr
    again = t.find_runs(
        None, f"tags.`{R.T_ROLE}` = '{R.ROLE_SWEEP_PARENT}'", max_results=1, newest_first=True
    )[0]
    copies = {r.variant: t.get_run(r.run_id) for r in t.children(again.run_id)}
    assert copies["C"].tags[R.T_REUSED_FROM] == kids["C"].run_id
    assert (
        copies["C"].tags["ablate.mde_baseline"] == copies["A"].run_id
    )  # this sweep's baseline, not the source's
    assert copies["C"].metrics["mde_ndcg_at_10"] == t.get_run(kids["C"].run_id).metrics["mde_ndcg_at_10"]


def test_the_ceiling_is_left_out_of_a_sweeps_plan_unless_asked():
    """The oracle retrieves the gold evidence: the ceiling, not a candidate. A sweep's plan leaves it out (and with
    it one comparison of the family: alpha/3, not alpha/4); a sweep of oracles alone keeps them all."""
    from ablate.study.power_plan import is_ceiling, without_ceiling
    from test_report import record

    runs = [*ablation_runs(), record("oracle", 5)]
    kept, ceilings = without_ceiling(runs)
    assert [r.variant for r in ceilings] == ["oracle"] and not any(is_ceiling(r) for r in kept)
    rows = plan_rows(kept, "ndcg@10", n_sims=100)
    assert [r.run for r in rows] == ["B", "C", "D"] and rows[0].alpha == pytest.approx(0.05 / 3)
    assert [r.run for r in plan_rows(runs, "ndcg@10", n_sims=100)][-1] == "oracle"  # --with-ceiling
    oracles = [record("oracle", 5), record("oracle", 6, name="oracle strict")]
    assert without_ceiling(oracles) == (oracles, [])


def test_an_mde_beyond_a_unit_metrics_range_is_capped_and_said():
    """Three questions with spread-out differences: the t approximation's MDE exceeds 1 on a 0-1 metric. The table
    shows '> 1' and the row's note says no difference is detectable at that n; a larger n's MDE is shown as is."""
    from ablate.app.plan_questions import table
    from ablate.study.fetch import RunRecord

    def run(name: str, values: list[float]) -> RunRecord:
        pq = pd.DataFrame({"category": ["answerable"] * 3, "ndcg@10": values}, index=["q1", "q2", "q3"])
        return RunRecord(
            run_id=name * 8, name=name, params={"variant": name}, per_query=pq.rename_axis("qid")
        )

    rows = plan_rows(
        [run("A", [0.0, 1.0, 0.2]), run("B", [1.0, 0.0, 0.9])], "ndcg@10", baseline="A", n_sims=50
    )
    (row,) = rows
    assert row.mde > 1 and "MDE > 1: no difference on this 0-1 metric is detectable with n = 3" in row.note
    text = table(rows, None, 0.8, cap=1.0)
    assert "> 1" in text.splitlines()[2] and "no difference on this 0-1 metric" in text
    assert f"{row.mde_at[24]:.3f}" in text and row.mde_at[24] < 1
