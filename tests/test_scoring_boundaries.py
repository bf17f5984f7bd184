"""Two rules the scoring tests did not state on their own: the means of every metric, judged statistics included,
are over the scored answerable questions only (docs/metrics.md, rule "means"); BCa counts a resample equal to the
estimate as half below it, which only a metric with ties (0/1 hits) can show (the mutation check,
experiments/mutation_check.py, found no test that failed without it)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats as st

from ablate.data.types import Hit, Qrels, Run
from ablate.evaluation import EvalSettings, evaluate
from ablate.evaluation import stats as S


def _docs(*ids: str) -> list[Hit]:
    return [Hit(d, d, 100.0 - i) for i, d in enumerate(ids)]


def test_every_mean_judged_and_unjudged_included_is_over_the_scored_answerable_questions():
    """An answerable question with one judged result of two, a question without labels (no answer) and one with
    only grade-0 labels (IDCG = 0): each reports judged@2 and unjudged@2, but only the answerable one is averaged."""
    run = Run("r", {"a": _docs("A", "X"), "none": _docs("Y", "Z"), "zero": _docs("B", "W")})
    qrels = Qrels({"a": {"A": 1}, "zero": {"B": 0}}, unit="doc")
    r = evaluate(run, qrels, ["a", "none", "zero"], EvalSettings(ks=(2,)))
    pq = r.per_query
    assert list(pq.loc[["a", "none", "zero"], "category"]) == ["answerable", "no_answer", "idcg_zero"]
    assert list(pq.loc[["a", "none", "zero"], "judged@2"]) == [0.5, 0.0, 0.5]
    scored = pq[(pq["category"] == "answerable") & pq["hit@2"].notna()]
    for key in ("judged@2", "unjudged@2", "hit@2", "ndcg@2"):
        assert r.means[key] == pytest.approx(float(scored[key].mean()))
    assert (r.means["judged@2"], r.means["unjudged@2"]) == (0.5, 1.0)
    assert r.means["judged@2"] != pytest.approx(
        float(pq["judged@2"].mean())
    )  # the all-questions mean differs


def test_bca_counts_resamples_equal_to_the_estimate_half_below_it_on_a_0_1_metric():
    """Efron & Tibshirani (1993) eqs. 14.10-14.15 with z0 = Phi^-1((#{theta* < theta} + #{theta* = theta} / 2) / B),
    computed by hand on the documented draw of a hit@K column, where many resamples' means equal the estimate."""
    x = np.array([1, 0, 1, 1, 0, 1, 0, 1, 1, 0], dtype=float)
    n, b, seed = x.size, 4000, 5
    boot = x[np.random.default_rng(seed).integers(0, n, (b, n))].mean(axis=1)
    theta = x.mean()
    ties = int(np.sum(boot == theta))
    assert ties > b // 10  # the case exercises ties
    jack = np.array([np.delete(x, i).mean() for i in range(n)])
    dev = jack.mean() - jack
    accel = np.sum(dev**3) / (6 * np.sum(dev**2) ** 1.5)

    def bca(z0: float) -> tuple[float, float]:
        levels = [st.norm.cdf(z0 + (z0 + z) / (1 - accel * (z0 + z))) for z in st.norm.ppf([0.025, 0.975])]
        low, high = np.quantile(boot, levels)
        return float(low), float(high)

    expected = bca(float(st.norm.ppf((np.sum(boot < theta) + 0.5 * ties) / b)))
    got = S.bootstrap_ci(x, n_resamples=b, seed=seed, method="bca")
    assert got[0] == theta and got[1:] == pytest.approx(expected, rel=1e-9)
    assert bca(float(st.norm.ppf(np.sum(boot < theta) / b))) != pytest.approx(
        expected
    )  # ties left out differ
