"""The factorial analysis of a grid (ablate.study.factorial): its F and p equal statsmodels' Type II anova_lm on the
same long table and an independent numpy computation of the Type II F (nested models' residual sums of squares); it
recovers planted main effects and a planted interaction and reports no effect for a null factor; an incomplete grid
or one factor gets a note, not a model."""

from __future__ import annotations

import itertools
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from statsmodels.formula.api import ols
from statsmodels.stats.anova import anova_lm

from ablate import record as R
from ablate.record import RecordedRun
from ablate.study import factorial as F
from ablate.study.plots import interaction_plots
from ablate.tracking import Tracker
from demo_cli import run_module


def grid_runs(levels: dict[str, list[str]], skip: int | None = None) -> list[RecordedRun]:
    """One run per combination of ``levels`` (params keyed by the factor; ``skip``: leave that cell out)."""
    runs = []
    for i, combo in enumerate(itertools.product(*levels.values())):
        if i == skip:
            continue
        params = {"variant": "C", **dict(zip(levels, combo, strict=True))}
        runs.append(RecordedRun(run_id=f"run{i}", name=f"C {i}", params=params))
    return runs


def planted(
    runs: list[RecordedRun], n: int, effect, seed: int = 0, noise: float = 0.05
) -> dict[str, pd.Series]:
    """Per-question metric of each run: a question effect + ``effect(params)`` + noise."""
    rng = np.random.default_rng(seed)
    qids = [f"q{i:03d}" for i in range(n)]
    question = rng.normal(0.5, 0.2, n)
    return {
        r.run_id: pd.Series(question + effect(r.params) + rng.normal(0, noise, n), index=qids) for r in runs
    }


def numpy_type2(long: pd.DataFrame, a: str, b: str) -> dict[str, tuple[float, float]]:
    """Type II F and p for a balanced two-factor grid with a question block, from nested models' residual sums of
    squares (least squares with dummy coding): SS(A) = RSS(B + Q) - RSS(A + B + Q), SS(AB) = RSS(A + B + Q) -
    RSS(A * B + Q), each over the full model's residual mean square."""

    def dummies(col: pd.Series) -> np.ndarray:
        return pd.get_dummies(col.astype(str), drop_first=True).to_numpy(dtype=float)

    one = np.ones((len(long), 1))
    da, db, dq = dummies(long[a]), dummies(long[b]), dummies(long["question"])
    dab = np.hstack([da[:, [i]] * db[:, [j]] for i in range(da.shape[1]) for j in range(db.shape[1])])
    y = long["metric"].to_numpy(dtype=float)

    def rss(*blocks: np.ndarray) -> tuple[float, int]:
        x = np.hstack([one, *blocks])
        beta, *_ = np.linalg.lstsq(x, y, rcond=None)
        r = y - x @ beta
        return float(r @ r), x.shape[1]

    full, k_full = rss(da, db, dq, dab)
    df_res = len(y) - k_full
    mse = full / df_res
    out = {}
    for name, small, big, df in (
        (a, rss(db, dq)[0], rss(da, db, dq)[0], da.shape[1]),
        (b, rss(da, dq)[0], rss(da, db, dq)[0], db.shape[1]),
        (f"{a}:{b}", rss(da, db, dq)[0], full, dab.shape[1]),
    ):
        f = (small - big) / df / mse
        out[name] = (f, float(sps.f.sf(f, df, df_res)))
    return out


def test_f_and_p_equal_statsmodels_and_numpy():
    runs = grid_runs({"rrf.k": ["1", "10", "60"], "pipeline.reranker": ["none", "cross_encoder"]})
    values = planted(
        runs, 40, lambda p: 0.02 * (p["rrf.k"] == "60") + 0.03 * (p["pipeline.reranker"] != "none")
    )
    got = F.analyse(runs, ["rrf.k", "pipeline.reranker"], values, "ndcg@10")
    assert got.modelled and got.n_questions == 40
    long = got.long.rename(columns={"rrf.k": "a", "pipeline.reranker": "b"})
    assert len(long) == 6 * 40
    ref = anova_lm(ols("metric ~ C(a) * C(b) + C(question)", data=long).fit(), typ=2)
    mine = numpy_type2(long, "a", "b")
    names = {"rrf.k": "C(a)", "pipeline.reranker": "C(b)", "rrf.k:pipeline.reranker": "C(a):C(b)"}
    short = {"rrf.k": "a", "pipeline.reranker": "b", "rrf.k:pipeline.reranker": "a:b"}
    assert list(got.table["term"]) == list(names)
    for row in got.table.itertuples(index=False):
        assert row.F == pytest.approx(ref.loc[names[row.term], "F"], abs=1e-6)
        assert row.p == pytest.approx(ref.loc[names[row.term], "PR(>F)"], abs=1e-6)
        assert row.df == ref.loc[names[row.term], "df"]
        f, p = mine[short[row.term]]
        assert row.F == pytest.approx(f, rel=1e-6)
        assert row.p == pytest.approx(p, abs=1e-6)
    # rrf.k has 3 levels: its largest pairwise difference gets Scheffé's interval over the term's 2 df
    fit = ols("metric ~ C(a) * C(b) + C(question)", data=long).fit()
    k = got.table.set_index("term").loc["rrf.k"]
    half = np.sqrt(2 * sps.f.ppf(0.95, 2, fit.df_resid)) * np.sqrt(fit.mse_resid * 2 / (len(long) / 3))
    assert k["ci_high"] - k["effect"] == pytest.approx(half, rel=1e-9)
    assert got.formula == "ndcg@10 ~ C(rrf.k) * C(pipeline.reranker) + C(question)"
    assert list(got.table.columns) == ["term", "df", "F", "p", "effect", "ci_low", "ci_high"]


def test_recovers_planted_effects_and_a_null_factor():
    """reranker: +0.10, and +0.10 more at k=60 (an interaction); rrf.k: +0.05 at 60; retrieval.window: nothing."""
    levels = {"rrf.k": ["1", "60"], "pipeline.reranker": ["none", "ce"], "rrf.window": ["20", "50"]}
    runs = grid_runs(levels)

    def effect(p):
        rr = p["pipeline.reranker"] == "ce"
        k60 = p["rrf.k"] == "60"
        return 0.10 * rr + 0.05 * k60 + 0.10 * (rr and k60)

    got = F.analyse(runs, list(levels), planted(runs, 60, effect, seed=0), "ndcg@10")
    assert got.modelled and got.two_way_only
    assert "**2" in got.formula
    t = got.table.set_index("term")
    assert list(t.index) == [
        "rrf.k",
        "pipeline.reranker",
        "rrf.window",
        "rrf.k:pipeline.reranker",
        "rrf.k:rrf.window",
        "pipeline.reranker:rrf.window",
    ]
    # main effects, marginal over the other factors: reranker 0.10 + 0.10/2, rrf.k 0.05 + 0.10/2
    for term, true in (("pipeline.reranker", 0.15), ("rrf.k", 0.10), ("rrf.k:pipeline.reranker", 0.10)):
        assert t.loc[term, "p"] < 1e-6
        assert t.loc[term, "ci_low"] < true < t.loc[term, "ci_high"]
        assert abs(t.loc[term, "effect"] - true) < 0.02
    assert t.loc["rrf.window", "p"] > 0.05
    # every factor has two levels: each term is one contrast, its interval the F test's (F = t^2 on df_resid)
    df_res = 60 * 8 - 1 - 6 - 59
    for term in t.index:
        se = (t.loc[term, "ci_high"] - t.loc[term, "effect"]) / sps.t.ppf(0.975, df_res)
        assert (t.loc[term, "effect"] / se) ** 2 == pytest.approx(t.loc[term, "F"], rel=1e-6)
    assert t.loc["rrf.window", "ci_low"] < 0 < t.loc["rrf.window", "ci_high"]
    said = dict(zip(got.table["term"], got.sentences, strict=True))
    assert said["rrf.window"].startswith("rrf.window: no detectable effect on ndcg@10 across 20 and 50")
    assert said["pipeline.reranker"].startswith("pipeline.reranker matters: pipeline.reranker=ce beats")
    inter = said["rrf.k:pipeline.reranker"]
    assert "depends on pipeline.reranker" in inter or "depends on rrf.k" in inter
    assert got.significant == [("rrf.k", "pipeline.reranker")]
    pngs = interaction_plots(got.significant, lambda a, b: F.cell_means(got.long, a, b), "ndcg@10")
    assert list(pngs) == ["interaction_rrf.k_pipeline.reranker.png"]
    assert pngs["interaction_rrf.k_pipeline.reranker.png"].startswith(b"\x89PNG")
    means = F.cell_means(got.long, "rrf.k", "pipeline.reranker")  # level of b -> (level of a, mean, lo, hi)
    gain = {lb: pts[1][1] - pts[0][1] for lb, pts in means.items()}  # rrf.k 60 over 1, per reranker
    assert gain["ce"] - gain["none"] == pytest.approx(0.10, abs=0.02)
    # the simple effects: the reranker (or k) helps by ~0.20 in one cell, ~0.10 in the other
    _, residual = F.anova(got.long, list(levels))
    eff = F.interaction_effect(got.long, "rrf.k", "pipeline.reranker", residual)
    simple = sorted(e for _, e, _, _ in eff.at)
    assert simple[0] == pytest.approx(0.05, abs=0.03) and simple[1] == pytest.approx(0.15, abs=0.03)


def test_a_significant_term_the_questions_disagree_on_is_said():
    """rrf.k's effect varies a lot from question to question (mean +0.05, sd 0.15), the rest is near noiseless: the
    pooled residual makes the F test call it (p 0.003) while the paired per-question interval includes 0."""
    runs = grid_runs({"rrf.k": ["1", "60"], "rrf.window": ["20", "50"]})
    rng = np.random.default_rng(1)
    qids = [f"q{i:03d}" for i in range(30)]
    base, u = rng.normal(0.5, 0.2, 30), rng.normal(0.05, 0.15, 30)
    values = {
        r.run_id: pd.Series(base + (r.params["rrf.k"] == "60") * u + rng.normal(0, 0.01, 30), index=qids)
        for r in runs
    }
    got = F.analyse(runs, ["rrf.k", "rrf.window"], values, "ndcg@10")
    assert got.table.loc[0, "p"] < 0.05 and got.table.loc[0, "ci_low"] > 0
    assert got.sentences[0].startswith("rrf.k matters")
    assert "but the questions disagree (paired per-question interval" in got.sentences[0]
    assert "disagree" not in got.sentences[1]


def test_a_factor_flat_at_one_level_has_the_interactions_f_and_says_why():
    """The window changes no question's score at k=1 (the same rankings) and adds a question-dependent gain at
    k=60: in a 2x2 grid its main effect and the interaction are then one contrast, so their F are equal. That is
    the data, not a fault of the analysis: statsmodels' anova_lm fitted on the raw columns (the factors under their
    own names, quoted) gives the same equal F, and the window's sentence says why."""
    runs = grid_runs({"rrf.k": ["1", "60"], "rrf.window": ["20", "50"]})
    rng = np.random.default_rng(3)
    qids = [f"q{i:03d}" for i in range(25)]
    at_k1, at_k60, gain = rng.normal(0.5, 0.2, 25), rng.normal(0.55, 0.2, 25), rng.normal(0.08, 0.1, 25)
    values = {}
    for r in runs:
        k60, w50 = r.params["rrf.k"] == "60", r.params["rrf.window"] == "50"
        values[r.run_id] = pd.Series(at_k60 + w50 * gain if k60 else at_k1, index=qids)
    names = {"rrf.window": "retrieval.window"}  # as the sweep typed it: retrieval.window=20,50
    got = F.analyse(runs, ["rrf.k", "rrf.window"], values, "ndcg@10", names)
    table = got.table.set_index("term")
    assert list(table.index) == ["rrf.k", "retrieval.window", "rrf.k:retrieval.window"]
    assert table.loc["retrieval.window", "F"] == pytest.approx(
        table.loc["rrf.k:retrieval.window", "F"], rel=1e-9
    )

    raw = pd.DataFrame(
        [{"question": q, "k": r.params["rrf.k"], "window": r.params["rrf.window"], "y": values[r.run_id][q]}
         for r in runs for q in qids]
    )  # fmt: skip
    raw = raw.rename(columns={"k": "rrf.k", "window": "retrieval.window"})
    ref = anova_lm(ols('y ~ C(Q("rrf.k")) * C(Q("retrieval.window")) + C(question)', data=raw).fit(), typ=2)
    ref_names = ['C(Q("rrf.k"))', 'C(Q("retrieval.window"))', 'C(Q("rrf.k")):C(Q("retrieval.window"))']
    for term, name in zip(table.index, ref_names, strict=True):
        assert table.loc[term, "F"] == pytest.approx(ref.loc[name, "F"], rel=1e-9)
        assert table.loc[term, "p"] == pytest.approx(ref.loc[name, "PR(>F)"], abs=1e-12)
    assert ref.loc[ref_names[1], "F"] == pytest.approx(ref.loc[ref_names[2], "F"], rel=1e-9)

    window = next(x for x in got.sentences if x.startswith("retrieval.window"))
    assert "changes no question's score at rrf.k=1" in window
    assert "its F equals that of rrf.k × retrieval.window (one contrast" in window
    assert "changes no question's score" not in got.sentences[0]  # rrf.k changes scores at every window
    # the design in one line: levels, cells, blocks and every term's df
    assert got.design == (
        "design: rrf.k (1, 60) x retrieval.window (20, 50): 4 cells, each once; blocks: the 25 questions every "
        "cell scores; df: rrf.k 1, retrieval.window 1, rrf.k:retrieval.window 1, question 24, residual 72"
    )
    assert got.formula == "ndcg@10 ~ C(rrf.k) * C(retrieval.window) + C(question)"


def test_a_significant_factor_says_why_a_pair_may_not_be():
    from ablate.study.report.render import factorial_console, factorial_markdown

    runs = grid_runs({"rrf.k": ["1", "60"], "rrf.window": ["20", "50"]})
    values = planted(runs, 30, lambda p: 0.1 * (p["rrf.k"] == "60"))
    got = F.analyse(runs, ["rrf.k", "rrf.window"], values, "ndcg@10")
    assert got.table.loc[0, "p"] < F.ALPHA
    console = factorial_console(got).splitlines()
    assert console[0] == f"  factorial: {got.design}" and console[-1] == f"  factorial: {F.WHY_POOLED}"
    assert f"- {F.WHY_POOLED}" in factorial_markdown(got) and f"- {got.design}" in factorial_markdown(got)
    null = F.analyse(runs, ["rrf.k", "rrf.window"], planted(runs, 30, lambda p: 0.0), "ndcg@10")
    if not (null.table["p"] < F.ALPHA).any():
        assert F.WHY_POOLED not in factorial_console(null)


def test_questions_not_scored_by_every_cell_are_dropped_and_said():
    runs = grid_runs({"rrf.k": ["1", "60"], "rrf.window": ["20", "50"]})
    values = planted(runs, 30, lambda p: 0.0)
    values["run2"] = values["run2"].drop(["q000", "q001"])
    got = F.analyse(runs, ["rrf.k", "rrf.window"], values, "ndcg@10")
    assert got.n_questions == 28 and len(got.long) == 4 * 28
    assert "2 question(s) dropped" in got.dropped
    assert "q000" not in set(got.long["question"])


@pytest.mark.parametrize(
    ("levels", "skip", "swept", "said"),
    [
        ({"rrf.k": ["1", "60"]}, None, ["rrf.k"], "vary 1 swept factor(s) (rrf.k)"),
        ({"rrf.k": ["1", "60"], "rrf.window": ["20"]}, None, ["rrf.k", "rrf.window"], "vary 1 swept factor"),
        (
            {"rrf.k": ["1", "60"], "rrf.window": ["20", "50"]},
            3,
            ["rrf.k", "rrf.window"],
            "missing rrf.k=60 rrf.window=50",
        ),
    ],
)
def test_no_grid_gets_a_note_and_no_model(levels, skip, swept, said):
    runs = grid_runs(levels, skip=skip)
    got = F.analyse(runs, swept, planted(runs, 10, lambda p: 0.0), "ndcg@10")
    assert not got.modelled and said in (got.note or "")
    assert got.table.empty and got.long.empty


def test_cells_that_differ_by_constants_only_are_not_tested():
    """Every cell scores every question alike (or shifted by a constant): a residual of rounding only, no F test."""
    runs = grid_runs({"rrf.k": ["1", "60"], "rrf.window": ["20", "50"]})
    qids = [f"q{i}" for i in range(5)]
    for shift in (0.0, 0.1):
        values = {
            r.run_id: pd.Series(np.arange(5.0) / 10 + shift * (r.params["rrf.k"] == "60"), index=qids)
            for r in runs
        }
        got = F.analyse(runs, ["rrf.k", "rrf.window"], values, "ndcg@10")
        assert not got.modelled and "the model fits exactly" in (got.note or "")


def test_a_repeated_cell_is_no_grid():
    runs = grid_runs({"rrf.k": ["1", "60"], "rrf.window": ["20", "50"]})
    runs.append(RecordedRun(run_id="again", name="C again", params=dict(runs[0].params)))
    got = F.analyse(runs, ["rrf.k", "rrf.window"], planted(runs, 10, lambda p: 0.0), "ndcg@10")
    assert got.note is not None and "2 runs of rrf.k=1 rrf.window=20" in got.note


# --------------------------------------------------------------------------------------------------------------
# in the report


def test_report_section_only_on_a_grid_unless_asked():
    """The ablation A-D is one factor (the variant): no section by default, the note when asked for."""
    from ablate.study.options import ReportOptions
    from ablate.study.report import build_report
    from test_report import ablation_runs

    plain = build_report(ablation_runs(), ReportOptions(plots=False))
    assert "Factorial analysis" not in plain.markdown and "factorial.csv" not in plain.files()
    asked = build_report(ablation_runs(), ReportOptions(plots=False, factorial=True))
    section = asked.markdown.split("## Factorial analysis", 1)[1]
    assert "no factorial analysis: the runs vary 1 swept factor(s) (variant)" in section
    assert "factorial.csv" not in asked.files()


REPO = Path(__file__).resolve().parents[1]


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_module(args, cwd)


def test_demo_grid_sweep_reports_its_factorial_analysis(tmp_path):
    """A real 2x2 sweep of the demo (rrf.k x retrieval.window on variant C): its end report has the section and
    factorial.csv, whose F and p equal statsmodels on the long table rebuilt from the runs' per_query.csv; the
    report entry point with --factorial writes the same table."""
    (tmp_path / "corpora").symlink_to(REPO / "corpora", target_is_directory=True)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    p = _run(
        ["ablate", f"tracking.uri={uri}", "progress=false", "stats.bootstrap=100", "-m", "variant=C",
         "rrf.k=1,60", "retrieval.window=20,50"], tmp_path,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "factorial: rrf.k" in p.stdout
    (report,) = tmp_path.glob("multirun/*/*/report")
    md = (report / "ablation.md").read_text()
    assert "## Factorial analysis" in md
    assert "OLS `ndcg@10 ~ C(rrf.k) * C(retrieval.window) + C(question)`" in md
    assert "Type II ANOVA F test" in md and "question as a blocking effect" in md
    got = pd.read_csv(report / "factorial.csv")
    assert list(got.columns) == ["term", "df", "F", "p", "effect", "ci_low", "ci_high"]
    # named as the sweep typed them (retrieval.window feeds the param rrf.window)
    assert list(got["term"]) == ["rrf.k", "retrieval.window", "rrf.k:retrieval.window"]

    t = Tracker(uri)
    (parent,) = t.find_runs(None, f"tags.`{R.T_ROLE}` = '{R.ROLE_SWEEP_PARENT}'")
    rows = []
    for run in t.children(parent.run_id):
        path = t.download_artifact(run.run_id, R.A_PER_QUERY, tmp_path / "pq" / run.run_id)
        assert path is not None
        pq = pd.read_csv(path, dtype={"qid": str})
        pq = pq[(pq["category"] == "answerable") & pq["ndcg@10"].notna()]
        for q, v in zip(pq["qid"], pq["ndcg@10"], strict=True):
            rows.append({"question": q, "a": run.params["rrf.k"], "b": run.params["rrf.window"], "metric": v})
    long = pd.DataFrame(rows)
    counts = long.groupby("question").size()
    long = long[long["question"].isin(counts[counts == 4].index)]
    ref = anova_lm(ols("metric ~ C(a) * C(b) + C(question)", data=long).fit(), typ=2)
    for term, name in zip(got["term"], ["C(a)", "C(b)", "C(a):C(b)"], strict=True):
        row = got.set_index("term").loc[term]
        assert row["F"] == pytest.approx(ref.loc[name, "F"], abs=1e-6)
        assert row["p"] == pytest.approx(ref.loc[name, "PR(>F)"], abs=1e-6)

    out = tmp_path / "again"
    p = _run(["ablate.report", "--tracking-uri", uri, "--parent", parent.run_id, "--factorial", "--no-log",
              "--out", str(out)], tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr
    again = pd.read_csv(out / "factorial.csv")
    pd.testing.assert_frame_equal(again, got)
