"""``ablate.evaluation.stats.agreement`` against the references: kappa against scikit-learn's ``cohen_kappa_score``,
tau against ``scipy.stats.kendalltau``, confusion counts against ``pandas.crosstab``, the interval against a bootstrap
written here one resample at a time from the documented stream (``default_rng(seed).integers(0, G, (B, G))`` over
the G questions). scikit-learn is installed with sentence-transformers, which requires it."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from sklearn.metrics import cohen_kappa_score

from ablate.evaluation import stats as S
from ablate.evaluation.stats import resampling


def _sk(a, b, labels=None, weights=None) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn warns where kappa is undefined (and returns NaN)
        return float(cohen_kappa_score(a, b, labels=labels, weights=weights))


def _kappa(a, b, labels=None, weights=None) -> float:
    """The point estimate :func:`kappa_interval` reports (one resample: the interval is not looked at here)."""
    return S.kappa_interval(a, b, labels=labels, weights=weights, n_resamples=1)[0]


def _same(x: float, y: float) -> bool:
    return (math.isnan(x) and math.isnan(y)) or abs(x - y) <= 1e-12


# ------------------------------------------------------------------------------------------------------------ kappa
@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_kappa_equals_sklearn_on_random_grades(weights):
    rng = np.random.default_rng(26)
    for _ in range(50):
        n, k = int(rng.integers(1, 60)), int(rng.integers(1, 5))
        a = rng.integers(0, k, n)
        agree = rng.random(n) < rng.random()
        b = np.where(agree, a, rng.integers(0, k, n))
        got, want = _kappa(a, b, weights=weights), _sk(a, b, weights=weights)
        assert _same(got, want), (a.tolist(), b.tolist(), got, want)
        legend = list(range(-1, k + 1))  # a legend with grades neither rater used
        got, want = _kappa(a, b, legend, weights), _sk(a, b, legend, weights)
        assert _same(got, want), (a.tolist(), b.tolist(), got, want)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([2, 2, 2], [2, 2, 2], math.nan),  # one shared category: p_e = 1, undefined (as scikit-learn)
        ([0, 0], [1, 1], 0.0),  # each rater one category, different ones
        ([0, 1, 2, 2], [0, 1, 2, 2], 1.0),
        ([0, 1, 0, 1], [1, 0, 1, 0], -1.0),
        ([0, 1, 1, 0, 1], [0, 1, 0, 0, 1], None),
        ([3], [1], 0.0),
    ],
)
def test_kappa_edges_match_sklearn(a, b, expected):
    for weights in (None, "linear", "quadratic"):
        got = _kappa(a, b, weights=weights)
        assert _same(got, _sk(a, b, weights=weights))
        if expected is not None:
            assert _same(got, expected)


def test_kappa_by_hand_and_weights_measure_distance_in_labels():
    # p_o = 3/5, p_e = (2*2 + 3*3) / 25 = 13/25 -> kappa = (15/25 - 13/25) / (12/25) = 1/6
    assert _kappa([0, 1, 1, 0, 1], [0, 1, 0, 1, 1]) == pytest.approx(1 / 6, abs=1e-15)
    a, b = [0, 2, 2, 0], [2, 2, 0, 0]
    # without the legend 0 and 2 are adjacent positions; with it a 0-2 disagreement weighs 2 (linear)
    assert _kappa(a, b, weights="linear") == pytest.approx(_sk(a, b, weights="linear"))
    assert _kappa(a, b, [0, 1, 2], "linear") == pytest.approx(_sk(a, b, [0, 1, 2], "linear"))
    assert math.isnan(_kappa([], []))  # no pair: NaN


def test_kappa_refuses_bad_input():
    with pytest.raises(S.StatsInputError, match="grade 5 is not in labels"):
        S.kappa_interval([0, 1], [0, 5], labels=[0, 1, 2])  # scikit-learn would drop the pair silently
    with pytest.raises(S.StatsInputError, match="not an integer"):
        S.kappa_interval([0, 1.5], [0, 1])
    with pytest.raises(S.StatsInputError, match="not an integer"):
        S.kappa_interval([0, None], [0, 1])
    with pytest.raises(S.StatsInputError, match="2 grades and b has 3"):
        S.kappa_interval([0, 1], [0, 1, 1])
    with pytest.raises(S.StatsInputError, match="repeats a grade"):
        S.kappa_interval([0, 1], [0, 1], labels=[0, 1, 1])
    with pytest.raises(S.StatsConfigError, match="weights='cubic'"):
        S.kappa_interval([0, 1], [0, 1], weights="cubic")
    assert _kappa(np.array([0.0, 1.0, 2.0]), [0, 1, 1]) == _kappa([0, 1, 2], [0, 1, 1])


# ---------------------------------------------------------------------------------------------------- the interval
def _data(n_questions: int, per_question: int, seed: int):
    rng = np.random.default_rng(seed)
    qids = [f"q{i}" for i in range(n_questions) for _ in range(per_question)]
    a = rng.integers(0, 3, len(qids))
    b = np.where(rng.random(len(qids)) < 0.6, a, rng.integers(0, 3, len(qids)))
    return qids, a, b


def _ref_interval(a, b, qids, n_resamples, seed, confidence=0.95, labels=None, weights=None):
    """Percentile bootstrap over questions, one resample at a time: draw G question ids, keep all their pairs."""
    order = list(dict.fromkeys(qids))
    rows = {q: [i for i, x in enumerate(qids) if x == q] for q in order}
    draws = np.random.default_rng(seed).integers(0, len(order), size=(n_resamples, len(order)))
    kappas = []
    for draw in draws:
        idx = [i for g in draw for i in rows[order[g]]]
        kappas.append(_sk(np.asarray(a)[idx], np.asarray(b)[idx], labels, weights))
    kappas = np.array(kappas)
    kappas = kappas[~np.isnan(kappas)]
    alpha = 1 - confidence
    low, high = np.quantile(kappas, [alpha / 2, 1 - alpha / 2])
    return _sk(a, b, labels, weights), float(low), float(high)


@pytest.mark.parametrize("weights", [None, "quadratic"])
def test_interval_equals_a_bootstrap_over_questions_one_resample_at_a_time(weights):
    qids, a, b = _data(12, 3, seed=1)
    got = S.kappa_interval(a, b, groups=qids, weights=weights, n_resamples=120, seed=7)
    want = _ref_interval(a, b, qids, 120, 7, weights=weights)
    assert got == pytest.approx(want, abs=1e-12)


def test_interval_moves_the_pairs_of_a_question_together():
    """Every question holds the same pair 4 times: resampling questions must give exactly the interval of one pair
    per question (kappa does not change when every count is multiplied by 4), while resampling pairs would pretend
    4x as many independent observations and give a narrower interval."""
    _, a1, b1 = _data(25, 1, seed=3)
    qids = [f"q{i}" for i in range(25) for _ in range(4)]
    a4, b4 = np.repeat(a1, 4), np.repeat(b1, 4)
    one_per_question = S.kappa_interval(a1, b1, n_resamples=500, seed=0)
    by_question = S.kappa_interval(a4, b4, groups=qids, n_resamples=500, seed=0)
    assert by_question == pytest.approx(one_per_question, abs=1e-12)
    by_pair = S.kappa_interval(a4, b4, n_resamples=500, seed=0)
    assert by_pair[0] == pytest.approx(by_question[0])
    assert by_pair[2] - by_pair[1] < 0.75 * (by_question[2] - by_question[1])


def test_interval_is_seeded_and_independent_of_chunking(monkeypatch):
    qids, a, b = _data(15, 4, seed=5)
    first = S.kappa_interval(a, b, groups=qids, n_resamples=400, seed=11)
    assert S.kappa_interval(a, b, groups=qids, n_resamples=400, seed=11) == first
    assert S.kappa_interval(a, b, groups=qids, n_resamples=400, seed=12) != first
    monkeypatch.setattr(resampling, "_CHUNK_ELEMENTS", 40)  # a few resamples per chunk
    assert S.kappa_interval(a, b, groups=qids, n_resamples=400, seed=11) == first


def test_interval_edges_and_settings():
    assert all(math.isnan(v) for v in S.kappa_interval([1, 1, 1], [1, 1, 1], groups=["q", "q", "r"]))
    assert S.kappa_interval([0, 1, 0, 1], [0, 1, 0, 1], groups=list("aabb")) == (1.0, 1.0, 1.0)
    with pytest.raises(S.StatsInputError, match="3 group ids for 2 pairs"):
        S.kappa_interval([0, 1], [0, 1], groups=["a", "b", "c"])
    with pytest.raises(S.StatsConfigError, match="n_resamples"):
        S.kappa_interval([0, 1], [0, 1], n_resamples=0)
    with pytest.raises(S.StatsConfigError, match="confidence"):
        S.kappa_interval([0, 1], [0, 1], confidence=95)


# ------------------------------------------------------------------------------------------------------- confusion
def test_confusion_equals_crosstab():
    rng = np.random.default_rng(9)
    a, b = rng.integers(0, 4, 200), rng.integers(0, 4, 200)
    legend = [0, 1, 2, 3, 4]
    got = S.confusion(a, b, labels=legend)
    want = (
        pd.crosstab(pd.Series(a, name="human"), pd.Series(b, name="assessor"))
        .reindex(index=legend, columns=legend, fill_value=0)
        .to_numpy()
    )
    assert got.labels == tuple(legend)
    assert np.array_equal(np.array(got.counts), want)


# ------------------------------------------------------------------------------------------------------------- tau
def test_tau_equals_scipy_with_and_without_ties():
    rng = np.random.default_rng(4)
    for _ in range(100):
        n = int(rng.integers(2, 12))
        x = rng.integers(0, 4, n).astype(float) / 4  # ties on both sides
        y = rng.integers(0, 4, n).astype(float) / 4
        runs = [f"run{i}" for i in range(n)]
        got = S.kendall_tau(dict(zip(runs, x, strict=True)), dict(zip(runs, y, strict=True)))
        want = float(sps.kendalltau(x, y).statistic)
        assert _same(got, want), (x, y, got, want)
    order = {"A": 5.0, "B": 4.0, "C": 3.0, "D": 2.0, "E": 1.0}
    shuffled = {"B": 5.0, "A": 4.0, "C": 3.0, "E": 2.0, "D": 1.0}
    assert S.kendall_tau(order, shuffled) == pytest.approx((8 - 2) / 10)  # 8 concordant, 2 discordant


def test_tau_edges():
    assert math.isnan(S.kendall_tau({"A": 0.5}, {"A": 0.2}))
    assert math.isnan(S.kendall_tau({"A": 0.5, "B": 0.5}, {"A": 0.2, "B": 0.3}))  # one side ties all
    with pytest.raises(S.StatsInputError, match="only in a: \\['C'\\]"):
        S.kendall_tau({"A": 1.0, "C": 2.0}, {"A": 1.0})
    with pytest.raises(S.StatsInputError, match="NaN or infinite"):
        S.kendall_tau({"A": 1.0, "B": math.nan}, {"A": 1.0, "B": 2.0})


def test_json_finite_turns_undefined_figures_into_null():
    data = {"kappa": math.nan, "rows": [(1.0, math.nan)], "n": 3}
    assert S.json_finite(data) == {"kappa": None, "rows": [[1.0, None]], "n": 3}
