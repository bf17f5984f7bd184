"""The ablation report: numbers equal ablate.stats computed directly; flags, baselines, slices, plots; MLflow edge."""

from __future__ import annotations

import math
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

from ablate.app import report as report_cli
from ablate.errors import ConfigError, InputError
from ablate.evaluation import stats
from ablate.study import report
from ablate.study.compare import ComparisonRefused
from ablate.study.fetch import swept_from_overrides, typed_names
from test_compare import fingerprints, params_for

ORDER = {"A": 1, "B": 2, "C": 3, "D": 4, "oracle": 5}

QIDS = [f"q{i:02d}" for i in range(30)]
NO_ANSWER = ["q30", "q31", "q32"]
TAGS = ["exact-id"] * 10 + ["paraphrase"] * 10 + ["multi-hop;paraphrase"] * 5 + [""] * 5 + ["no-answer"] * 3
# per-variant strength on exact-id and paraphrase questions: A lexical, B semantic, C/D both
STRENGTH = {"A": (0.85, 0.35), "B": (0.45, 0.75), "C": (0.75, 0.7), "D": (0.8, 0.8), "oracle": (1.0, 1.0)}


def per_query(variant: str, seed: int, drop: tuple[str, ...] = (), tags: bool = True) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ex, para = STRENGTH[variant]
    base = np.array([ex] * 10 + [para] * 15 + [(ex + para) / 2] * 5)
    ndcg = np.clip(base + rng.normal(0, 0.15, 30), 0, 1)
    recall = np.clip(ndcg + rng.normal(0, 0.1, 30), 0, 1)
    hit = (rng.random(30) < base + 0.1).astype(float)
    rr = np.where(hit > 0, 1.0 / rng.integers(1, 6, 30), 0.0)
    df = pd.DataFrame(
        {
            "category": ["answerable"] * 30 + ["no_answer"] * 3,
            "ndcg@10": [*ndcg, *[math.nan] * 3],
            "recall@10": [*recall, *[math.nan] * 3],
            "hit@10": [*hit, *[math.nan] * 3],
            "rr@10": [*rr, *[math.nan] * 3],
            "judged@10": [1.0] * 33,
        },
        index=pd.Index(QIDS + NO_ANSWER, name="qid"),
    )
    if tags:
        df.insert(0, "tags", TAGS)
    df["cluster"], df["group"] = df.index, ""  # as a run records them: here every question its own cluster
    for q in drop:  # a query excluded from this run (missing=exclude): metrics undefined
        df.loc[q, ["ndcg@10", "recall@10", "hit@10", "rr@10"]] = math.nan
    return df


def record(
    variant: str,
    seed: int,
    name: str | None = None,
    qrels: str = "q" * 64,
    split: str = "dev",
    drop: tuple[str, ...] = (),
    tags: bool = True,
    **over: object,
) -> report.RunRecord:
    params = params_for(variant, corpus__split=split, **over)
    run_id = uuid.uuid5(uuid.NAMESPACE_URL, f"ablate-test/{variant}/{seed}").hex
    rec_tags = {
        "ablate.variant": variant,
        "ablate.variant_order": str(ORDER[variant]),
        "ablate.snapshot": "f" * 64,
        "ablate.index_snapshot": "s" * 64,
        "ablate.qrels_hash": qrels,
        "ablate.split": split,
        "ablate.corpus": "demo",
        **{f"ablate.fp.{k}": v for k, v in fingerprints(params).items()},
    }
    pq = per_query(variant, seed, drop, tags)
    scored = pq[pq["category"] == "answerable"]
    metrics = {"ndcg_at_10": float(scored["ndcg@10"].mean())}
    return report.RunRecord(
        run_id=run_id, name=name or variant, params=params, metrics=metrics, tags=rec_tags, per_query=pq
    )


def ablation_runs(**c_over: object) -> list[report.RunRecord]:
    # deliberately not in table order
    return [record("C", 3, **c_over), record("A", 1), record("D", 4), record("B", 2)]


def col(rec: report.RunRecord, c: str) -> pd.Series:
    return rec.per_query.loc[QIDS, c]


def test_numbers_equal_ablate_stats():
    runs = ablation_runs()
    rep = report.build_report(runs, report.ReportOptions(plots=False))
    by = {r.variant: r for r in runs}
    a = by["A"]
    t = rep.table.set_index("variant")
    assert list(t.index) == ["A", "B", "C", "D"] and rep.baseline == a.run_id and rep.kind == "ablation"
    ps = []
    for v in ("B", "C", "D"):
        assert t.loc[v, "n"] == 30
        for m, c in zip(report.DEFAULT_METRICS, ("ndcg@10", "recall@10", "rr@10", "hit@10"), strict=True):
            direct = stats.paired_randomization_test(col(by[v], c), col(a, c), n_resamples=10000, seed=0)
            assert t.loc[v, f"{m}_delta"] == direct.delta
            assert t.loc[v, f"{m}_p"] == direct.p_value
            assert (t.loc[v, f"{m}_delta_ci_low"], t.loc[v, f"{m}_delta_ci_high"]) == (
                direct.ci_low,
                direct.ci_high,
            )
            ps.append(direct.p_value)
    for v in "ABCD":
        cis = stats.bootstrap_cis(by[v].per_query.loc[QIDS], ["ndcg@10", "rr@10"], n_resamples=1000, seed=0)
        assert (t.loc[v, "ndcg@10"], t.loc[v, "ndcg@10_ci_low"], t.loc[v, "ndcg@10_ci_high"]) == cis[
            "ndcg@10"
        ]
        assert (t.loc[v, "mrr@10"], t.loc[v, "mrr@10_ci_low"], t.loc[v, "mrr@10_ci_high"]) == cis["rr@10"]
    holm = t.loc[["B", "C", "D"], [f"{m}_p_holm" for m in report.DEFAULT_METRICS]].to_numpy().ravel()
    np.testing.assert_allclose(holm, multipletests(ps, method="holm")[1], rtol=0, atol=1e-12)
    assert t.loc["A", "role"] == "baseline" and math.isnan(t.loc["A", "ndcg@10_p"])
    # the markdown is the printed table: words for the changes, no warnings for consistent logged means
    md = rep.markdown
    assert "+dense +rrf(k=60, window=100)" in md and "-bm25 +dense" in md and "A (baseline)" in md
    assert "family of 12 run x metric comparisons" in md
    assert rep.warnings == [] and all(ch.ok for ch in rep.checks.values())


def test_bootstrap_test_option_and_bad_options():
    runs = ablation_runs()[:2]
    rep = report.build_report(
        runs, report.ReportOptions(test="bootstrap", n_resamples=2000, metrics=["ndcg@10"], plots=False)
    )
    direct = stats.paired_bootstrap_test(
        col(runs[0], "ndcg@10"), col(runs[1], "ndcg@10"), n_resamples=2000, seed=0
    )
    row = rep.table.set_index("variant").loc["C"]
    assert row["ndcg@10_p"] == direct.p_value and row["ndcg@10_p_holm"] == direct.p_value
    with pytest.raises(ConfigError, match="options: randomization, bootstrap"):
        report.build_report(runs, report.ReportOptions(test="ttest"))
    with pytest.raises(ConfigError, match="--metrics"):
        report.build_report(runs, report.ReportOptions(metrics=["ndcg"]))
    with pytest.raises(InputError, match="no per-query column"):
        report.build_report(runs, report.ReportOptions(metrics=["ndcg@5"]))
    with pytest.raises(report.ReportError, match="no runs"):
        report.build_report([])


def test_two_factor_run_is_flagged():
    rep = report.build_report(
        ablation_runs(bm25__k1=1.2), report.ReportOptions(n_resamples=1000, plots=False)
    )
    t = rep.table.set_index("variant")
    assert t.loc["C", "flags"] == "two factors changed: retrievers/fusion and bm25.k1"
    assert t.loc["D", "flags"] == "" and t.loc["B", "flags"] == ""
    assert (
        "[1]" in rep.markdown and "1. C: two factors changed: retrievers/fusion and bm25.k1" in rep.markdown
    )


def test_different_labels_refused_then_forced():
    runs = ablation_runs(qrels="e" * 64)
    with pytest.raises(ComparisonRefused) as e:
        report.build_report(runs, report.ReportOptions(n_resamples=1000, plots=False))
    assert "e" * 64 in str(e.value) and "q" * 64 in str(e.value) and "--force" in str(e.value)
    rep = report.build_report(runs, report.ReportOptions(n_resamples=1000, plots=False, force=True))
    flags = rep.table.set_index("variant").loc["C", "flags"]
    assert flags.startswith("FORCED: labels differ") and rep.checks[runs[0].run_id].refused


def test_test_split_mixed_with_dev_is_loud():
    runs = [record("A", 1), record("C", 3, split="test", qrels="t" * 64)]
    rep = report.build_report(runs, report.ReportOptions(n_resamples=1000, plots=False))
    row = rep.table.set_index("variant").loc["C"]
    assert row["flags"].startswith("SPLIT MIX") and row["split"] == "test"
    assert any(w.startswith("SPLIT MIX") for w in rep.warnings) and "SPLIT MIX" in rep.markdown


def test_split_warnings_read_held_out_splits_by_the_rows_rule(monkeypatch):
    """The SPLIT MIX warning and the rows' held-out marking follow one rule (record.HELD_OUT_SPLITS): a study whose
    held-out split is called ``holdout`` is warned about as one called ``test``."""
    from ablate import record as R

    monkeypatch.setattr(R, "HELD_OUT_SPLITS", ("test", "holdout"))
    runs = [record("A", 1), record("C", 3, split="holdout", qrels="t" * 64)]
    rep = report.build_report(runs, report.ReportOptions(n_resamples=100, plots=False))
    assert rep.heldout is not None and rep.heldout.mixed
    assert (
        "SPLIT MIX: the runs mix the held-out holdout split with dev: tune on dev, then run the chosen setting once "
        "on holdout" in rep.warnings
    )
    sweep = [
        record("C", 3, split="holdout", qrels="t" * 64),
        record("C", 4, split="holdout", qrels="t" * 64, rrf__k=10),
    ]
    assert any(
        "sweep on the held-out holdout split is tuning on it" in w
        for w in report.split_warnings(sweep, "sweep")
    )


def test_paired_on_common_queries():
    runs = [record("A", 1), record("C", 3, drop=("q03", "q17"))]
    rep = report.build_report(runs, report.ReportOptions(n_resamples=1000, metrics=["ndcg@10"], plots=False))
    row = rep.table.set_index("variant").loc["C"]
    common = [q for q in QIDS if q not in ("q03", "q17")]
    direct = stats.paired_randomization_test(
        runs[1].per_query.loc[common, "ndcg@10"], runs[0].per_query.loc[common, "ndcg@10"], n_resamples=1000
    )
    assert row["n"] == 28 and row["ndcg@10_delta"] == direct.delta and row["ndcg@10_p"] == direct.p_value
    assert "paired on 28 queries" in row["flags"]


def sweep_runs() -> list[report.RunRecord]:
    cells = [(60, 100), (10, 100), (30, 50), (10, 50), (60, 50), (30, 100)]
    return [record("C", 10 + i, rrf__k=k, rrf__window=w) for i, (k, w) in enumerate(cells)]


def test_baseline_rules():
    runs = ablation_runs()
    assert (
        report.build_report(runs, report.ReportOptions(baseline="C", plots=False, n_resamples=100)).baseline
        == runs[0].run_id
    )
    assert (
        report.build_report(
            runs, report.ReportOptions(baseline=runs[3].run_id[:8], plots=False, n_resamples=100)
        ).baseline
        == runs[3].run_id
    )
    with pytest.raises(ConfigError, match="--baseline"):
        report.build_report(runs, report.ReportOptions(baseline="Z", plots=False))
    no_a = [r for r in runs if r.variant != "A"]
    rep = report.build_report(no_a, report.ReportOptions(plots=False, n_resamples=100))
    assert (
        rep.table["variant"].iloc[0] == "B" and rep.baseline == no_a[2].run_id
    )  # the first in ablation order
    assert rep.warnings == []

    sw = sweep_runs()
    rep = report.build_report(
        sw, report.ReportOptions(plots=False, n_resamples=100), swept=["rrf.k", "rrf.window"]
    )
    base = rep.table.set_index("run_id").loc[rep.baseline]
    assert rep.kind == "sweep" and (base["rrf.k"], base["rrf.window"]) == (
        "10",
        "50",
    )  # numeric, not "100"
    assert list(rep.table["rrf.k"]) == ["10", "10", "30", "30", "60", "60"]
    assert rep.table["flags"].eq("").all()
    # the sweep's first cell follows the declared order of the swept params
    part = [sw[1], sw[2], sw[4]]  # (10,100) (30,50) (60,50)
    rep = report.build_report(
        part, report.ReportOptions(plots=False, n_resamples=100), swept=["rrf.window", "rrf.k"]
    )
    assert rep.baseline == sw[2].run_id
    rep = report.build_report(
        part, report.ReportOptions(plots=False, n_resamples=100), swept=["rrf.k", "rrf.window"]
    )
    assert rep.baseline == sw[1].run_id
    # undeclared: inferred from what differs
    rep = report.build_report(part, report.ReportOptions(plots=False, n_resamples=100))
    assert rep.swept == ["rrf.k", "rrf.window"] and rep.baseline == sw[1].run_id
    assert rep.labels[sw[1].run_id] == "C k=10 window=100"


def test_sweep_flags_unswept_change_and_plots(tmp_path: Path):
    sw = sweep_runs()
    sw[5] = record("C", 15, rrf__k=30, rrf__window=100, bm25__b=0.75)
    rep = report.build_report(
        sw,
        report.ReportOptions(n_resamples=200, metrics=["ndcg@10", "mrr@10"]),
        swept=["rrf.k", "rrf.window"],
    )
    flagged = rep.table[rep.table["flags"] != ""]
    assert list(flagged["run_id"]) == [sw[5].run_id]
    assert flagged["flags"].iloc[0] == "two factors changed: rrf.k/rrf.window and bm25.b"
    written = rep.write(tmp_path)
    names = {p.name for p in written}
    for m in ("ndcg_at_10", "mrr_at_10"):
        assert {f"sweep_{m}_vs_rrf.k.png", f"sweep_{m}_vs_rrf.window.png"} <= names
    assert {"metrics_bars.png", "ablation.md", "ablation.csv", "slices.md", "slices.csv"} <= names
    for name in ("metrics_bars.png", "sweep_ndcg_at_10_vs_rrf.k.png"):
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    csv = pd.read_csv(tmp_path / "ablation.csv")
    assert len(csv) == 6 and "ndcg@10_p_holm" in csv.columns


def test_slices_table():
    runs = ablation_runs()
    rep = report.build_report(runs, report.ReportOptions(n_resamples=100, plots=False))
    s = rep.slices.set_index(["tag", "variant"])
    a = runs[1]
    exact = a.per_query.loc[QIDS[:10]]
    assert s.loc[("exact-id", "A"), "n_scored"] == 10
    assert s.loc[("exact-id", "A"), "ndcg@10"] == pytest.approx(exact["ndcg@10"].mean(), abs=1e-15)
    para = a.per_query.loc[QIDS[10:25]]  # a query with two tags counts in both slices
    assert s.loc[("paraphrase", "A"), "n_queries"] == 15
    assert s.loc[("paraphrase", "A"), "mrr@10"] == pytest.approx(para["rr@10"].mean(), abs=1e-15)
    assert s.loc[("multi-hop", "A"), "n_scored"] == 5
    assert s.loc[("(untagged)", "A"), "n_queries"] == 5
    assert s.loc[("no-answer", "A"), "n_queries"] == 3 and s.loc[("no-answer", "A"), "n_scored"] == 0
    assert math.isnan(s.loc[("no-answer", "A"), "ndcg@10"])
    assert list(dict.fromkeys(rep.slices["tag"])) == [
        "exact-id",
        "multi-hop",
        "no-answer",
        "paraphrase",
        "(untagged)",
    ]
    md = rep.slices_markdown
    assert "## exact-id vs paraphrase" in md and "## ndcg@10" in md
    ex_a, ex_c = s.loc[("exact-id", "A"), "ndcg@10"], s.loc[("exact-id", "C"), "ndcg@10"]
    assert f"C vs A (ndcg@10): exact-id {ex_c:.3f} vs {ex_a:.3f}" in md
    assert ("C vs A (ndcg@10)" in md) and (f"{ex_c:.3f} vs {ex_a:.3f}, paraphrase" in md)
    lower = [r.variant for r in runs if s.loc[("exact-id", r.variant), "ndcg@10"] < ex_a]
    assert md.count("lower on exact-id") == len(lower)
    rep = report.build_report(
        runs, report.ReportOptions(n_resamples=100, plots=False, contrast=("multi-hop", "paraphrase"))
    )
    assert "## multi-hop vs paraphrase" in rep.slices_markdown
    rep = report.build_report(runs, report.ReportOptions(n_resamples=100, plots=False, contrast=None))
    assert " vs " not in rep.slices_markdown.split("## ")[-1].splitlines()[0]

    no_tags = [record("A", 1, tags=False), record("C", 3, tags=False)]
    rep = report.build_report(no_tags, report.ReportOptions(n_resamples=100, plots=False))
    assert rep.slices.empty and "no `tags` column" in rep.slices_markdown


def test_logged_mean_mismatch_is_a_warning():
    runs = ablation_runs()[:2]
    runs[0].metrics["ndcg_at_10"] = 0.123  # type: ignore[index]
    rep = report.build_report(runs, report.ReportOptions(n_resamples=100, plots=False, metrics=["ndcg@10"]))
    assert any("logged ndcg_at_10=0.123000" in w for w in rep.warnings)


def test_swept_from_overrides():
    assert swept_from_overrides("variant=A,B,C,D rrf.k=10,30,60 bm25.k1=1.2") == ["variant", "rrf.k"]
    src = {"retrieval.window": "rrf.window"}
    assert swept_from_overrides("retrievers=bm25,dense retrieval.window=range(50,150,50)", src) == [
        "pipeline.retrievers",
        "rrf.window",
    ]
    assert swept_from_overrides("eval.ks=[1,10] +dense.query_prefix='a,b'") == []
    assert swept_from_overrides("") == []
    # each swept param named as the user typed it: the factorial analysis shows these names
    assert typed_names("variant=C ++rrf.k=1,60 retrieval.window=20,50 retrievers=bm25,dense", src) == {
        "rrf.k": "rrf.k",
        "rrf.window": "retrieval.window",
        "pipeline.retrievers": "retrievers",
    }


# ----------------------------------------------------------------------------------------------------------------
# the MLflow edge (one shared sqlite store per session)


def log_child(t, exp: str, parent: str, rec: report.RunRecord, with_per_query: bool = True) -> str:
    with t.run(exp, rec.name, tags={"ablate.variant": rec.variant}, parent_run_id=parent) as rid:
        t.log_params(rid, rec.params)
        t.set_tags(rid, rec.tags)
        t.log_metrics(rid, {"ndcg@10": rec.metrics["ndcg_at_10"]})
        if with_per_query:
            t.log_files(rid, {"per_query.csv": rec.per_query.to_csv(index=True, index_label="qid")})
    return rid


def test_report_cli_on_mlflow(mlflow_uri, tmp_path, capsys):
    from ablate.tracking import Tracker

    t = Tracker(mlflow_uri)
    exp = f"report-{uuid.uuid4().hex[:8]}"
    parent = t.start(
        exp, "sweep x", tags={"ablate.role": "sweep-parent", "ablate.overrides": "variant=A,B,C"}
    )
    ids = [log_child(t, exp, parent, record(v, s)) for v, s in (("A", 1), ("B", 2), ("C", 3))]
    with pytest.raises(RuntimeError):
        with t.run(exp, "D", parent_run_id=parent):
            raise RuntimeError("reranker exploded")

    out = tmp_path / "out"
    rc = report_cli.main(
        ["--parent", parent, "--tracking-uri", mlflow_uri, "--out", str(out), "--resamples", "1000"]
    )
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    # the console gets the narrow table (label, nDCG@10 with CI, delta, p); the files hold everything
    assert "| run " in captured.out and "p (Holm)" in captured.out and "full report" in captured.out
    assert max(len(line) for line in captured.out.splitlines() if line.startswith("|")) < 100
    assert "left out: D" in captured.out
    for n in ("ablation.md", "ablation.csv", "slices.md", "slices.csv", "metrics_bars.png"):
        assert t.download_artifact(parent, f"report/{n}", tmp_path / "logged") is not None, n
    md = (out / "ablation.md").read_text(encoding="utf-8")
    assert ids[0] in md and "D (" in md and "FAILED: RuntimeError: reranker exploded" in md
    assert t.get_run(parent).tags["ablate.report_baseline"] == ids[0]
    # a re-baseline never overwrites the first report: a new folder beside it, and report-2/ on the parent run
    assert (
        report_cli.main(
            [
                "--parent",
                parent,
                "--tracking-uri",
                mlflow_uri,
                "--out",
                str(out),
                "--baseline",
                "B",
                "--resamples",
                "100",
            ]
        )
        == 0
    )
    assert (tmp_path / "out-2" / "ablation.md").exists() and "report-2/" in capsys.readouterr().out
    assert t.download_artifact(parent, "report-2/ablation.md", tmp_path / "logged2") is not None

    # default: the latest sweep parent in the store
    rc = report_cli.main(
        ["--tracking-uri", mlflow_uri, "--out", str(tmp_path / "o2"), "--no-log", "--resamples", "100"]
    )
    assert rc == 0 and "o2/ablation.md" in capsys.readouterr().out
    assert f"(run {ids[0]})" in (tmp_path / "o2" / "ablation.md").read_text(encoding="utf-8")

    # errors: one line, exit 2
    for argv, needle in (
        (["--parent", "0" * 32], "no run"),
        (["--experiment", "no-such-experiment"], "no experiment"),
        (["--parent", ids[0]], "no child runs"),
    ):
        assert report_cli.main([*argv, "--tracking-uri", mlflow_uri, "--out", str(tmp_path / "o3")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and needle in err and err.count("\n") == 1
    missing = tmp_path / "nowhere" / "mlflow.db"
    assert report_cli.main(["--tracking-uri", f"sqlite:///{missing}"]) == 2
    assert "no MLflow store" in capsys.readouterr().err
    assert not missing.exists()

    parent2 = t.start(exp, "sweep y", tags={"ablate.role": "sweep-parent"})
    log_child(t, exp, parent2, record("A", 1), with_per_query=False)
    assert (
        report_cli.main(["--parent", parent2, "--tracking-uri", mlflow_uri, "--out", str(tmp_path / "o4")])
        == 2
    )
    assert "per_query.csv" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------------------------
# held-out marking: dev-tuned vs test-tuned rows, dev-split rows beside held-out rows


def on_test(variant: str, seed: int, reused: bool = False, name: str | None = None) -> report.RunRecord:
    """A run on the held-out split; ``reused``: tagged ablate.test_reuse=true (its configuration was new to the
    study after test had been run: test-tuned)."""
    from dataclasses import replace

    rec = record(variant, seed, name=name, split="test", qrels="t" * 64)
    held = {"ablate.test_reuse": "true", "ablate.heldout": "reuse"} if reused else {"ablate.heldout": "first"}
    return replace(rec, tags={**rec.tags, **held})


def test_tuning_kinds():
    assert report.tuning_of(record("A", 1)) == "dev-split"
    assert report.tuning_of(on_test("A", 1)) == "dev-tuned"
    assert report.tuning_of(on_test("A", 1, reused=True)) == "test-tuned"


def test_a_table_mixing_dev_tuned_and_test_tuned_rows_is_marked():
    runs = [on_test("A", 1), on_test("B", 2), on_test("C", 3, reused=True)]
    rep = report.build_report(runs, report.ReportOptions(n_resamples=200, plots=False))
    by = {r.variant: r.run_id for r in runs}
    assert rep.heldout is not None and rep.heldout.mixed
    assert rep.heldout.kinds == {by["A"]: "dev-tuned", by["B"]: "dev-tuned", by["C"]: "test-tuned"}
    line = rep.heldout.warning
    assert line.startswith("HELD-OUT MIX: this table mixes dev-tuned and test-tuned settings")
    assert "† test-tuned rows (C)" in line and "ablate.test_reuse=true" in line and "dev-tuned" in line
    md = rep.markdown
    assert md.index(line) < md.index("| run ")  # the line sits above the table
    rows = [r for r in md.splitlines() if r.startswith("| ")]
    assert any(r.startswith("| C † ") for r in rows) and any(r.startswith("| A (baseline) ") for r in rows)
    assert not any(r.startswith(("| A †", "| B †")) for r in rows)
    csv = rep.table.set_index("variant")["heldout"].to_dict()
    assert csv == {"A": "dev-tuned", "B": "dev-tuned", "C": "test-tuned"}
    console = rep.console.splitlines()
    assert console[0] == f"warning: {line}" and any(r.startswith("| C † ") for r in console)
    assert "| C † " in rep.slices_markdown  # every table of the report marks the row


def test_dev_split_rows_beside_held_out_rows_are_marked():
    runs = [record("A", 1), on_test("C", 3)]
    rep = report.build_report(runs, report.ReportOptions(n_resamples=200, plots=False))
    assert rep.heldout is not None and rep.heldout.mixed
    assert "mixes dev-split rows with held-out rows" in rep.heldout.warning
    assert "‡ dev-split rows (A)" in rep.heldout.warning and "dev-tuned held-out rows" in rep.heldout.warning
    rows = [r for r in rep.markdown.splitlines() if r.startswith("| ")]
    assert any(r.startswith("| A ‡ (baseline) ") for r in rows)
    assert any(r.startswith("| C ") for r in rows) and not any(r.startswith(("| C ‡", "| C †")) for r in rows)


def test_runs_of_one_kind_are_not_marked_but_test_tuned_rows_always_are():
    for runs in ([record("A", 1), record("C", 3)], [on_test("A", 1), on_test("C", 3)]):
        rep = report.build_report(runs, report.ReportOptions(n_resamples=200, plots=False))
        assert rep.heldout is not None and rep.heldout.warning == "" and not rep.heldout.marks
        assert "HELD-OUT" not in rep.markdown and "†" not in rep.markdown and "‡" not in rep.markdown
    rep = report.build_report(
        [on_test("A", 1, True), on_test("C", 3, True)], report.ReportOptions(n_resamples=200, plots=False)
    )
    assert rep.heldout is not None and not rep.heldout.mixed
    assert rep.heldout.warning.startswith("TEST-TUNED: † test-tuned rows (A, C)")
    assert "| A † (baseline) " in rep.markdown and "| C † " in rep.markdown


def test_report_cli_marks_test_tuned_rows_on_mlflow(mlflow_uri, tmp_path, capsys):
    """Runs tracked in a real sqlite store: a sweep's dev-tuned test rows and a later test-tuned one."""
    from ablate.study.sweep_summary import summary_table
    from ablate.tracking import Tracker

    t = Tracker(mlflow_uri)
    exp = f"report-heldout-{uuid.uuid4().hex[:8]}"
    parent = t.start(
        exp, "sweep t", tags={"ablate.role": "sweep-parent", "ablate.overrides": "variant=A,B,C"}
    )
    runs = [on_test("A", 11), on_test("B", 12), on_test("C", 13, reused=True)]
    ids = {r.variant: log_child(t, exp, parent, r) for r in runs}
    out = tmp_path / "out"
    assert report_cli.main(["--parent", parent, "--tracking-uri", mlflow_uri, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "warning: HELD-OUT MIX: this table mixes dev-tuned and test-tuned settings" in printed
    assert "| C † " in printed
    md = (out / "ablation.md").read_text(encoding="utf-8")
    assert md.index("HELD-OUT MIX") < md.index("| run ") and "| C † " in md
    logged = t.download_artifact(parent, "report/ablation.md", tmp_path / "logged")
    assert logged is not None and "HELD-OUT MIX" in Path(logged).read_text(encoding="utf-8")
    # the compact table printed at the end of a sweep marks the same row
    children = t.children(parent)
    assert {r.run_id for r in children} == set(ids.values())
    table = summary_table(children)
    assert table.startswith("warning: HELD-OUT MIX") and "| C † " in table


def test_metrics_defined_on_a_subset_of_questions_are_reported_on_their_own():
    """A report scores every metric on the questions defined for all of them; mixing ndcg@10 (every answerable
    question) with superseded_first@10 (conflict questions) would silently cut nDCG to the conflict questions."""
    assert report.check_metrics(["superseded_first@10"]) == ["superseded_first@10"]
    assert report.check_metrics(["subq_coverage@10", "subq_all@10"]) == ["subq_coverage@10", "subq_all@10"]
    for mixed in (
        ["ndcg@10", "superseded_first@10"],
        ["subq_all@10", "recall@10"],
        ["subq_all@5", "superseded_first@5"],
    ):
        with pytest.raises(ConfigError, match="on their own"):
            report.check_metrics(mixed)


def test_report_cache_serves_unchanged_figures_and_tests_and_redraws_a_changed_run(tmp_path: Path):
    """With a cache, a second report over the same runs equals the first byte for byte (figures) and value for
    value (tests) while computing nothing; a run whose values changed gets new figures and tests, the rest are served."""
    from ablate.cache import Cache
    from ablate.study.plots import PLOTS_KIND

    sw = sweep_runs()
    kw = {"swept": ["rrf.k", "rrf.window"]}
    opts = report.ReportOptions(n_resamples=300, metrics=["ndcg@10", "mrr@10"])
    plain = report.build_report(sw, opts, **kw)
    cache = Cache(tmp_path / "cache")
    first = report.build_report(sw, opts, cache=cache, **kw)
    drawn = cache.stats.by_kind[PLOTS_KIND]["misses"]
    assert drawn == len(first.plots) and first.plots == plain.plots  # cached or not: the same PNG bytes
    assert first.table.equals(plain.table) and first.markdown == plain.markdown
    second = report.build_report(sw, opts, cache=cache, **kw)
    assert cache.stats.by_kind[PLOTS_KIND] == {"hits": len(first.plots), "misses": drawn}
    assert cache.stats.by_kind[report.TESTS_KIND] == {"hits": 1, "misses": 1}
    assert cache.stats.by_kind[report.REPORT_CI_KIND] == {"hits": len(sw), "misses": len(sw)}  # one per run
    assert second.plots == first.plots and second.table.equals(first.table)
    assert second.markdown == plain.markdown  # the served intervals are the computed ones, to the last digit
    # one run's per-query scores change: its own figures (the bars and the curves through it) are drawn again
    changed = list(sw)
    changed[5] = record("C", 99, rrf__k=30, rrf__window=100)
    third = report.build_report(changed, opts, cache=cache, **kw)
    assert cache.stats.by_kind[PLOTS_KIND]["misses"] > drawn
    assert (
        cache.stats.by_kind[report.REPORT_CI_KIND]["misses"] == len(sw) + 1
    )  # only the changed run's intervals
    assert third.table.equals(report.build_report(changed, opts, **kw).table)
    assert third.plots["metrics_bars.png"] != first.plots["metrics_bars.png"]


# -- the report on a store: what cannot be read is loud, nothing is left behind ------------------------------------


def test_a_long_sweep_override_is_read_whole_from_its_artifact(mlflow_uri, capsys, monkeypatch):
    """MLflow holds 4,900 characters of a tag: the parent's ablate.overrides is logged cut (one warning) and kept
    whole as an artifact, and the report's swept params come from the whole value."""
    from ablate.study.fetch import fetch_runs
    from ablate.tracking import Tracker, limits

    monkeypatch.setattr(limits, "_SAID", set())  # the warning is once per key and process

    t = Tracker(mlflow_uri)
    exp = f"long-{uuid.uuid4().hex[:8]}"
    overrides = "variant=A,B,C +note=" + "n" * 5000 + " rrf.k=10,60"
    parent = t.start(exp, "sweep long", tags={"ablate.role": "sweep-parent", "ablate.overrides": overrides})
    for v, seed in (("A", 1), ("B", 2), ("C", 3)):
        log_child(t, exp, parent, record(v, seed))
    stored = t.get_run(parent)
    assert stored is not None and len(stored.tags["ablate.overrides"]) <= 4900
    assert swept_from_overrides(stored.tags["ablate.overrides"]) == ["variant"]  # what the cut value says
    assert "ablate.overrides is 5,032 characters" in capsys.readouterr().err
    _, source = fetch_runs(t, parent)
    assert source.swept == ["variant", "rrf.k"]


def test_a_report_leaves_no_temp_folder(mlflow_uri, tmp_path, monkeypatch):
    import tempfile

    from ablate.tracking import Tracker

    t = Tracker(mlflow_uri)
    exp = f"tmp-{uuid.uuid4().hex[:8]}"
    parent = t.start(exp, "sweep", tags={"ablate.role": "sweep-parent", "ablate.overrides": "variant=A,B"})
    for v, seed in (("A", 1), ("B", 2)):
        log_child(t, exp, parent, record(v, seed))
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    options = report.ReportOptions(n_resamples=100, plots=False)
    for _ in range(2):  # the second looks for report/ and finds it: report-2/
        report.attach_report(t, report.ReportRequest(parent, out=tmp_path / "out", options=options))
    assert t.has_artifact(parent, "report-2/ablation.md")
    assert sorted(p.name for p in temp.iterdir()) == []


def test_a_store_that_refuses_to_show_the_parents_reports_is_loud_and_nothing_is_overwritten(
    mlflow_uri, served_artifacts, tmp_path, monkeypatch
):
    """Write-only credentials: the parent's listing is refused (HTTP 403). That is not "no report there": the
    report stops with one clear error instead of writing report/ over the earlier one."""
    from ablate.tracking import StoreError, Tracker
    from conftest import served_experiment

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    root, files, locked = served_artifacts
    t = Tracker(mlflow_uri)
    exp = served_experiment(t, root)
    parent = t.start(exp, "sweep", tags={"ablate.role": "sweep-parent", "ablate.overrides": "variant=A,B"})
    for v, seed in (("A", 1), ("B", 2)):
        log_child(t, exp, parent, record(v, seed))
    options = report.ReportOptions(n_resamples=100, plots=False)
    report.attach_report(t, report.ReportRequest(parent, out=tmp_path / "out", options=options))
    first = {k: v for k, v in files.items() if parent in k}
    assert any(k.endswith("/report/ablation.md") for k in first)
    locked.add(parent)
    with pytest.raises(
        StoreError, match=r"refused the credentials listing the artifacts of run .* \(HTTP 403\)"
    ):
        report.attach_report(t, report.ReportRequest(parent, out=tmp_path / "out", options=options))
    assert {k: v for k, v in files.items() if parent in k} == first
