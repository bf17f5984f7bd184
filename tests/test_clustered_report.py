"""Acceptance: on a corpus whose questions come in declared groups that share their gold document, two real runs
(BM25 and the oracle) in a real MLflow store; ``python -m ablate.report`` and ``python -m ablate.plan`` with the
default ``--cluster evidence`` against ``--cluster none`` differ as the design effect says.

* Each run's ``per_query.csv`` records every question's evidence cluster and declared group.
* The report states G beside n; its intervals widen by sqrt(1 + (m − 1)·ICC) within 15% (a percentile bootstrap of
  1,000 or 20,000 resamples over 14 clusters: Monte-Carlo error, and the cluster bootstrap's variance is
  (G − 1)/G of the cluster-robust one), and by statsmodels' cluster-robust over its ordinary standard error within
  the same; its cluster randomisation p is scipy's exact permutation test on the clusters' sums.
* The plan's MDE grows by exactly sqrt(deff) at every n, deff from an ICC computed here independently.
* A run logged before clusters were recorded gets them again from its recorded corpus.

The questions: 14 groups of 4; in half of them BM25 finds the gold document first, in the other half a distractor
sharing its words ranks above it, so how well BM25 does is mostly the group's doing."""

from __future__ import annotations

import json
import math

import mlflow
import numpy as np
import pandas as pd
import pytest
import scipy.stats as st
import statsmodels.api as sm

from ablate import record as R
from demo_cli import run_module

GROUPS, PER_GROUP = 14, 4


def write_grouped_corpus(root, seed: int = 0):
    """Per group g: a gold document T{g} and a distractor D{g} sharing half its words; 4 questions declaring group
    G{g}, labelled T{g}. Even groups ask with T{g}'s own words (BM25 ranks it first), odd ones mostly with D{g}'s."""
    rng = np.random.default_rng(seed)
    docs, queries, qrels = [], [], []
    for g in range(GROUPS):
        shared, own, other = ([f"{p}{g}w{i}" for i in range(4)] for p in ("s", "t", "d"))
        docs += [
            {"_id": f"T{g}", "title": f"topic {g}", "text": " ".join(shared + own)},
            {"_id": f"D{g}", "title": f"notes {g}", "text": " ".join(shared + other + other)},
        ]
        for k in range(PER_GROUP):
            words = list(rng.choice(shared, 2, replace=False))
            words += list(rng.choice(other if g % 2 else own, 2, replace=False))
            if rng.random() < 0.3:  # some questions of a group read otherwise
                words += [str(rng.choice(own))] if g % 2 else list(rng.choice(other, 2, replace=False))
            queries.append({"_id": f"g{g:02d}q{k}", "text": " ".join(words), "group": f"G{g}"})
            qrels.append(f"g{g:02d}q{k}\tT{g}\t2\n")
    root.mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(qrels), encoding="utf-8"
    )
    (root / "corpus.yaml").write_text("name: grouped\nlanguage: en\nqrels_unit: doc\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("clustered")
    corpus = write_grouped_corpus(d / "grouped")
    p = run_module(
        ["ablate", "-m", "corpus=beir", f"corpus.path={corpus}", "variant=A,oracle", "progress=false"], d
    )
    assert p.returncode == 0, p.stderr
    mlflow.set_tracking_uri(f"sqlite:///{d / 'mlflow.db'}")
    runs = {
        r.info.run_name: r.info.run_id
        for r in mlflow.search_runs(output_format="list", search_all_experiments=True)
    }
    tables = {}
    for name in ("A", "oracle"):
        path = mlflow.artifacts.download_artifacts(
            run_id=runs[name], artifact_path=R.A_PER_QUERY, dst_path=str(d / name)
        )
        tables[name] = pd.read_csv(path, dtype={"qid": str, "cluster": str, "group": str}).set_index("qid")
    return d, runs, tables, p.stdout


def _anova_icc(d: np.ndarray, labels: pd.Series) -> float:
    """One-way ANOVA ICC of balanced clusters, written here (not ablate's)."""
    df = pd.DataFrame({"d": d, "g": labels.to_numpy()})
    k, n, m = df["g"].nunique(), len(df), len(df) / df["g"].nunique()
    msb = (df.groupby("g")["d"].mean().sub(df["d"].mean()) ** 2).sum() * m / (k - 1)
    msw = ((df["d"] - df.groupby("g")["d"].transform("mean")) ** 2).sum() / (n - k)
    return max(0.0, (msb - msw) / (msb + (m - 1) * msw))


def _differences(tables) -> tuple[np.ndarray, pd.Series]:
    a, o = tables["A"], tables["oracle"]
    return (o["ndcg@10"] - a["ndcg@10"]).to_numpy(float), a["cluster"]


def test_each_run_records_its_questions_clusters(store):
    _, _, tables, sweep_out = store
    for pq in tables.values():
        assert pq["group"].tolist() == [f"G{int(q[1:3])}" for q in pq.index]
        assert pq["cluster"].tolist() == [
            f"g{q[1:3]}q0" for q in pq.index
        ]  # the group's smallest question id
    assert "| n  | G  |" in sweep_out and "56 questions in 14 clusters" in sweep_out


def test_the_reports_intervals_widen_by_the_design_effect(store):
    d, _, tables, _ = store
    outs = {}
    for how in ("evidence", "none"):
        p = run_module(
            ["ablate.report", "--no-log", "--out", f"r-{how}", "--cluster", how, "--resamples", "20000"], d
        )
        assert p.returncode == 0, p.stderr
        outs[how] = (pd.read_csv(d / f"r-{how}" / "ablation.csv").set_index("run"), p.stdout)
    (clustered, text), (naive, naive_text) = outs["evidence"], outs["none"]
    assert list(clustered["n"]) == [56, 56] and list(clustered["clusters"]) == [14, 14]
    assert "clusters" not in naive.columns and "| G " not in naive_text
    assert "clusters: 56 questions in 14 clusters (--cluster evidence" in text and "| n  | G  |" in text

    diffs, labels = _differences(tables)
    deff = 1 + (PER_GROUP - 1) * _anova_icc(diffs, labels)
    codes = pd.factorize(labels)[0]
    fit = sm.OLS(diffs, np.ones(diffs.size))
    se_ratio = fit.fit(cov_type="cluster", cov_kwds={"groups": codes}).bse[0] / fit.fit().bse[0]
    assert deff > 2  # the groups matter: the check below is not one of 1 against 1
    for low, high, row in (
        ("ndcg@10_ci_low", "ndcg@10_ci_high", "A"),
        ("ndcg@10_delta_ci_low", "ndcg@10_delta_ci_high", "oracle"),
    ):
        ratio = (clustered.loc[row, high] - clustered.loc[row, low]) / (
            naive.loc[row, high] - naive.loc[row, low]
        )
        assert ratio == pytest.approx(math.sqrt(deff), rel=0.15), (row, ratio, deff)
        assert ratio == pytest.approx(se_ratio, rel=0.15), (row, ratio, se_ratio)

    # 2^14 sign patterns <= 20,000 resamples: the exact cluster randomisation, as scipy's on the clusters' sums
    a, o = tables["A"]["ndcg@10"].to_numpy(float), tables["oracle"]["ndcg@10"].to_numpy(float)
    sums_o, sums_a = (np.bincount(codes, weights=x) for x in (o, a))
    ref = st.permutation_test(
        (sums_o, sums_a), lambda x, y, axis: np.mean(x - y, axis=axis), permutation_type="samples",
        n_resamples=math.inf, vectorized=True,
    ).pvalue  # fmt: skip
    assert clustered.loc["oracle", "ndcg@10_p"] == pytest.approx(ref, abs=1e-12)
    assert clustered.loc["oracle", "ndcg@10_p"] > naive.loc["oracle", "ndcg@10_p"]
    assert clustered.loc["oracle", "ndcg@10_mde"] == pytest.approx(
        naive.loc["oracle", "ndcg@10_mde"] * math.sqrt(deff), rel=1e-9
    )


def test_the_plans_mde_grows_by_exactly_the_square_root_of_the_design_effect(store):
    d, _, tables, _ = store
    rows = {}
    for how in ("evidence", "none"):
        p = run_module(["ablate.plan", "--with-ceiling", "--cluster", how, "--sims", "200", "--json"], d)
        assert p.returncode == 0, p.stderr
        (rows[how],) = map(json.loads, p.stdout.splitlines())
    diffs, labels = _differences(tables)
    icc = _anova_icc(diffs, labels)
    got, naive = rows["evidence"], rows["none"]
    assert (got["n"], got["clusters"], got["cluster_size"]) == (56, 14, 4.0)
    assert got["icc"] == pytest.approx(icc, abs=1e-12) and got["deff"] == pytest.approx(
        1 + 3 * icc, abs=1e-12
    )
    assert (naive["clusters"], naive["deff"]) == (56, 1.0)
    for n, mde in got["mde_at"].items():
        assert mde == pytest.approx(naive["mde_at"][n] * math.sqrt(1 + 3 * icc), rel=1e-12)
    table = run_module(["ablate.plan", "--with-ceiling", "--sims", "200"], d).stdout
    assert "| n  | G  | m   | ICC  | deff |" in table and "56 questions in 14 clusters of m = 4.0" in table


def test_a_run_logged_before_clusters_were_recorded_gets_them_from_its_corpus(store, monkeypatch):
    from ablate.app.recorded_clusters import recompute
    from ablate.study.clusters import clustering, with_clusters
    from ablate.study.fetch import fetch_runs
    from ablate.tracking import Tracker

    d, _, tables, _ = store
    monkeypatch.chdir(d)
    tracker = Tracker(f"sqlite:///{d / 'mlflow.db'}")
    runs, _ = fetch_runs(tracker)
    older = [
        type(r)(**{**r.__dict__, "per_query": r.per_query.drop(columns=["cluster", "group"])}) for r in runs
    ]
    assert clustering(older, "evidence").warnings  # said independent without them
    again = with_clusters(older, recompute(tracker))
    for r in again:
        pd.testing.assert_series_equal(r.per_query["cluster"], tables[r.name]["cluster"], check_names=False)
        assert r.per_query["group"].tolist() == tables[r.name]["group"].tolist()
    assert clustering(again, "evidence").count(list(tables["A"].index)) == GROUPS


@pytest.mark.parametrize("tool", ["ablate.report", "ablate.plan"])
def test_a_bad_cluster_choice_is_one_line_and_exit_2(store, tool):
    p = run_module([tool, "--cluster", "docs"], store[0])
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr == "error: --cluster='docs' is not valid; valid options: evidence, group, none\n"
