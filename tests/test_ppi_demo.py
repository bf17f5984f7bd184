"""experiments/ppi_demo.py: the page's prediction-powered figures recomputed with ppi_py itself from the script's saved
per-question values (``experiments/results/ppi_demo.csv``), to 1e-6, and the script run end to end with the real
generator on a tiny setting (slow).

The check reads only the CSV, the JSON and the page the script wrote: for each estimand (a run's metric or its
difference from the baseline) the questions are those the version's headline scores (both runs for a difference),
Y the checked ones under the headline, Ŷ the same under the assessor view and Ŷu the unchecked under it (a question
a view does not score: 0), and the estimate and interval are ``ppi_py.ppi_mean_pointestimate`` and
``ppi_py.ppi_mean_ci`` (``alpha=0.05``, default ``lam=None``) on them."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "experiments" / "results" / "ppi_demo.md"
TOL = 1e-6


def _ppi_py(y: np.ndarray, yhat: np.ndarray, yhat_u: np.ndarray) -> tuple[float, float, float]:
    with warnings.catch_warnings():  # ppi_py silences every warning when imported
        import ppi_py
    # an assessor that says the same about every question: ppi_py's tuned lambda is 0/0, and every lambda gives the
    # same estimate; lambda 0 (the checked questions alone) is the figure
    lam = 0.0 if np.ptp(np.concatenate([yhat, yhat_u])) == 0 else None
    est = float(np.asarray(ppi_py.ppi_mean_pointestimate(y, yhat, yhat_u, lam=lam)).reshape(-1)[0])
    lo, hi = (
        float(np.asarray(v).reshape(-1)[0]) for v in ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=0.05, lam=lam)
    )
    return est, lo, hi


def _num(x: str) -> float:
    return float(x) if x != "" else 0.0


def _estimand(
    rows: list[dict[str, str]], metric: str, name: str, fixed: bool = False
) -> dict[str, np.ndarray]:
    """The values of one estimand over the questions the headline scores, or (``fixed``) every question that is not
    a no-answer one."""
    run, _, base = (p.strip() for p in name.partition(" - "))
    mine = {r["qid"]: r for r in rows if r["run"] == run and r["metric"] == metric}
    other = {r["qid"]: r for r in rows if r["run"] == base and r["metric"] == metric} if base else None

    def member(r: dict[str, str]) -> bool:
        return r["category"] != "no_answer" if fixed else r["scored"] == "1"

    qids = [q for q, r in mine.items() if member(r) and (other is None or member(other[q]))]

    def col(c: str) -> np.ndarray:
        v = np.array([_num(mine[q][c]) for q in qids])
        return v - np.array([_num(other[q][c]) for q in qids]) if other is not None else v

    checked = np.array([mine[q]["checked"] == "1" for q in qids])
    return {
        "truth": col("truth"),
        "headline": col("headline"),
        "assessor": col("assessor"),
        "checked": checked,
    }


def check_page(page: Path) -> int:
    """Every figure of the page at ``page`` (and its JSON) against ppi_py on its CSV; returns how many."""
    with page.with_suffix(".csv").open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    data = json.loads(page.with_suffix(".json").read_text(encoding="utf-8"))
    text = page.read_text(encoding="utf-8")
    drawn = set(data["drawn"])
    assert {r["qid"] for r in rows if r["checked"] == "1"} <= drawn  # checked: drawn by label sample
    assert data["validation"]["n"] >= 1 and data["figures"]
    for f in data["figures"]:
        v = _estimand(rows, f["metric"], f["estimand"])
        c = v["checked"]
        y, yhat, yhat_u = v["headline"][c], v["assessor"][c], v["assessor"][~c]
        # the demo's labels stand in for the person: on a checked question the headline is the truth
        np.testing.assert_allclose(y, v["truth"][c], atol=1e-12)
        est, lo, hi = _ppi_py(y, yhat, yhat_u)
        got = f["ppi"]
        assert (got["estimate"], got["low"], got["high"]) == pytest.approx((est, lo, hi), abs=TOL), f
        if f["report_ppi"] is not None:  # the report's own PPI figure, where it prints one
            rp = f["report_ppi"]
            assert (rp["estimate"], rp["low"], rp["high"]) == pytest.approx((est, lo, hi), abs=TOL), f
            assert (rp["n_checked"], rp["n_unchecked"]) == (int(c.sum()), int((~c).sum()))
        assert (f["n_checked"], f["n_unchecked"]) == (int(c.sum()), int((~c).sum()))
        truth = float(v["truth"].mean())
        assert f["truth"] == pytest.approx(truth, abs=1e-12)
        assert f["human_only"]["estimate"] == pytest.approx(float(y.mean()), abs=1e-12)
        for k in ("naive", "human_only", "ppi"):
            iv = f[k]
            assert iv["covers"] == (iv["low"] <= truth <= iv["high"])
        section = text.split(f"\n## {f['metric']}\n", 1)[1].split("\n## ", 1)[0]
        row = next(line for line in section.splitlines() if line.startswith(f"| {f['estimand']} | "))
        assert f"| {f['n_checked']} / {f['n_unchecked']} | {truth:.3f} |" in row
        assert f"{est:.3f} [{lo:.3f}, {hi:.3f}]" in row
    for f in data["fixed_population"]:
        v = _estimand(rows, f["metric"], f["estimand"], fixed=True)
        c = v["checked"]
        est, lo, hi = _ppi_py(v["headline"][c], v["assessor"][c], v["assessor"][~c])
        assert (f["ppi"]["estimate"], f["ppi"]["low"], f["ppi"]["high"]) == pytest.approx(
            (est, lo, hi), abs=TOL
        )
        assert f["truth"] == pytest.approx(float(v["truth"].mean()), abs=1e-12)
        row = (
            f"| {f['estimand']} | {f['metric']} | {f['n_checked']} / {f['n_unchecked']} | {f['truth']:.3f} | "
        )
        assert row + f"{est:.3f} [{lo:.3f}, {hi:.3f}]" in text
    return len(data["figures"])


def test_the_pages_ppi_figures_are_ppi_py_on_its_per_question_values():
    """The committed page: 2 metrics x (3 runs + 2 differences), each PPI figure ppi_py's on the saved values."""
    assert check_page(PAGE) == 10


@pytest.mark.slow
def test_the_script_runs_end_to_end_with_the_real_generator(tmp_path):
    """The whole script on a tiny setting (5% of the dev labels judged, 20 redraws): the product's commands with the
    shipped generator, then its page checked as the committed one is."""
    out = tmp_path / "page" / "ppi_demo.md"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    p = subprocess.run(
        [
            sys.executable,
            str(REPO / "experiments" / "ppi_demo.py"),
            "--holes",
            "0.05",
            "--redraws",
            "20",
            "--work",
            str(tmp_path / "work"),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=3600,
        env=env,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert check_page(out) == 10
    assert "[ppi-demo] 6/6" in p.stderr and "eta" in p.stderr
