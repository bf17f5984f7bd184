"""Prediction-powered inference of a mean (ablate.evaluation.stats.ppi_mean) against the authors' package, ppi_py
(``ppi_mean_pointestimate`` / ``ppi_mean_ci`` with their default power tuning), to 1e-6: random inputs of every
shape the report meets (graded metrics, 0/1 outcomes, paired differences in [-1, 1], two checked questions, an
assessor that says the same about everything), the cases ppi_py leaves undefined decided by their limits, bad input
refused in one line, and ppi_py imported only when an interval is computed."""

from __future__ import annotations

import math
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from ablate.errors import AblateError
from ablate.evaluation.stats import PPIResult, StatsConfigError, StatsInputError, ppi_mean
from ablate.evaluation.stats.ppi import _ppi_py
from test_startup import run_modules

TOL = 1e-6


def _reference(y: np.ndarray, yhat: np.ndarray, yhat_u: np.ndarray, alpha: float = 0.05, **kw) -> tuple:
    ppi = _ppi_py()
    est = float(np.asarray(ppi.ppi_mean_pointestimate(y, yhat, yhat_u, **kw)).reshape(-1)[0])
    lo, hi = (
        float(np.asarray(v).reshape(-1)[0]) for v in ppi.ppi_mean_ci(y, yhat, yhat_u, alpha=alpha, **kw)
    )
    return est, lo, hi


def _close(got: PPIResult, want: tuple[float, float, float]) -> None:
    assert got.estimate == pytest.approx(want[0], abs=TOL)
    assert got.low == pytest.approx(want[1], abs=TOL)
    assert got.high == pytest.approx(want[2], abs=TOL)


def _case(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Checked values under human grades, the same under the assessor's, the unchecked under the assessor's: a
    graded metric (nDCG-like), a 0/1 outcome or a paired difference, with an assessor from good to useless to
    misleading, n from 2 to 200 checked and 1 to 800 unchecked questions."""
    rng = np.random.default_rng(seed)
    n = int(rng.choice([2, 3, 5, 12, 40, 200]))
    n_u = int(rng.choice([1, 4, 30, 300, 800]))
    kind = seed % 3
    noise = float(rng.choice([0.02, 0.2, 0.6]))
    sign = -1.0 if seed % 7 == 0 else 1.0  # sometimes anti-correlated: power tuning clips lambda to 0
    truth = rng.random(n + n_u)
    if kind == 1:  # 0/1 outcome
        truth = (truth < 0.6).astype(float)
        flips = rng.random(n + n_u) < noise / 2
        pred = np.where(flips, 1 - truth, truth) if sign > 0 else 1 - truth
    elif kind == 2:  # a paired difference of two runs' metrics
        truth = rng.random(n + n_u) - rng.random(n + n_u)
        pred = np.clip(sign * truth + rng.normal(0, noise, n + n_u), -1, 1)
    else:
        pred = np.clip(sign * truth + rng.normal(0.1, noise, n + n_u), 0, 1)
    alpha = float(rng.choice([0.05, 0.1, 0.01]))
    return truth[:n], pred[:n], pred[n:], alpha


@pytest.mark.parametrize("seed", range(60))
def test_equals_ppi_py_on_random_inputs(seed):
    y, yhat, yhat_u, alpha = _case(seed)
    got = ppi_mean(y, yhat, yhat_u, alpha=alpha)
    _close(got, _reference(y, yhat, yhat_u, alpha))
    assert (got.n_checked, got.n_unchecked) == (len(y), len(yhat_u))
    assert got.low <= got.estimate <= got.high


def test_default_is_a_95_percent_interval_and_lists_and_series_are_accepted():
    y, yhat, yhat_u, _ = _case(3)
    got = ppi_mean(list(y), tuple(yhat), yhat_u.tolist())
    _close(got, _reference(y, yhat, yhat_u, 0.05))
    assert got.as_dict() == {
        "estimate": got.estimate,
        "low": got.low,
        "high": got.high,
        "n_checked": len(y),
        "n_unchecked": len(yhat_u),
    }


def test_two_checked_questions():
    y, yhat, yhat_u = np.array([0.2, 0.9]), np.array([0.3, 0.7]), np.array([0.5, 0.1, 0.8, 0.4])
    _close(ppi_mean(y, yhat, yhat_u), _reference(y, yhat, yhat_u))


def test_an_assessor_that_says_the_same_about_every_question_gives_the_human_only_interval():
    """Ŷ and Ŷu one constant: every lambda gives mean(Y) with the normal interval on Y alone (ppi_py at lam=0, its
    classical interval, and its tuned answer, whose lambda is then a ratio of rounding errors)."""
    rng = np.random.default_rng(1)
    y = rng.random(25)
    for c in (0.0, 0.5, 1.0):
        yhat, yhat_u = np.full(25, c), np.full(90, c)
        got = ppi_mean(y, yhat, yhat_u)
        _close(got, _reference(y, yhat, yhat_u))
        _close(got, _reference(y, yhat, yhat_u, lam=0))
        _close(got, _reference(y, yhat, yhat_u, lam=1))
        _close(got, (float(y.mean()), *(float(v) for v in _ppi_py().classical_mean_ci(y, alpha=0.05))))


def test_nothing_varies_the_plain_mean_with_a_zero_width_interval():
    """All of Y, Ŷ and Ŷu constant: ppi_py's lambda is 0/0 and every figure NaN; the plain mean of Y, zero width."""
    for value, said in ((0.0, 0.0), (1.0, 1.0), (0.25, 0.25), (1.0, 0.0)):  # last: the assessor always wrong
        y, yhat, yhat_u = np.full(4, value), np.full(4, said), np.full(10, said)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            assert all(math.isnan(v) for v in _reference(y, yhat, yhat_u))
        got = ppi_mean(y, yhat, yhat_u)
        assert (got.estimate, got.low, got.high) == pytest.approx((value, value, value), abs=1e-12)
        _close(got, _reference(y, yhat, yhat_u, lam=0))


def test_constant_assessor_on_the_checked_questions_only_is_ppi_py():
    rng = np.random.default_rng(2)
    y, yhat, yhat_u = rng.random(8), np.full(8, 0.5), rng.random(40)
    _close(ppi_mean(y, yhat, yhat_u), _reference(y, yhat, yhat_u))


def test_constant_human_values_are_ppi_py():
    rng = np.random.default_rng(3)
    y, yhat, yhat_u = np.ones(10), rng.random(10), rng.random(40)
    got = ppi_mean(y, yhat, yhat_u)
    _close(got, _reference(y, yhat, yhat_u))


def test_every_question_checked_gives_the_classical_interval():
    y = np.array([0.1, 0.5, 0.9, 0.4, 0.7])
    got = ppi_mean(y, y * 0.5, [])
    lo, hi = (float(v) for v in _ppi_py().classical_mean_ci(y, alpha=0.05))
    _close(got, (float(y.mean()), lo, hi))
    assert (got.n_checked, got.n_unchecked) == (5, 0)


@pytest.mark.parametrize(
    ("args", "kwargs", "words"),
    [
        (([], [], [0.5]), {}, "0 checked question(s)"),
        (([0.5], [0.5], [0.5, 0.1]), {}, "1 checked question(s)"),
        (([0.5, 0.2], [0.5], [0.1]), {}, "2 checked values under human grades but 1"),
        (([0.5, math.nan], [0.5, 0.1], [0.1]), {}, "ppi_mean(y): 1 undefined (NaN) value(s)"),
        (([0.5, 0.2], [0.5, 0.1], [0.1, math.nan]), {}, "ppi_mean(yhat_unlabelled): 1 undefined"),
        (([0.5, 0.2], [0.5, math.inf], [0.1]), {}, "infinite"),
        (([[0.5, 0.2]], [0.5, 0.1], [0.1]), {}, "shape"),
        ((["a", "b"], [0.5, 0.1], [0.1]), {}, "not numeric"),
    ],
)
def test_bad_input_is_one_line_naming_it_and_the_fix(args, kwargs, words):
    with pytest.raises(StatsInputError) as e:
        ppi_mean(*args, **kwargs)
    msg = str(e.value)
    assert words in msg and "Fix:" in msg and "\n" not in msg
    assert isinstance(e.value, AblateError) and isinstance(e.value, ValueError)


@pytest.mark.parametrize("alpha", [0, 1, 1.5, -0.1, "0.05", True, math.nan])
def test_bad_alpha_is_refused(alpha):
    with pytest.raises(
        StatsConfigError, match="alpha=.* is not valid; use an error level strictly between 0 and 1"
    ):
        ppi_mean([0.1, 0.2], [0.1, 0.3], [0.4], alpha=alpha)


def test_inputs_are_not_modified_and_warnings_are_left_as_they_were():
    y, yhat, yhat_u, _ = _case(5)
    copies = (y.copy(), yhat.copy(), yhat_u.copy())
    before = list(warnings.filters)
    ppi_mean(y, yhat, yhat_u)
    assert list(warnings.filters) == before  # ppi_py silences every warning when imported; not here
    for a, b in zip((y, yhat, yhat_u), copies, strict=True):
        assert np.array_equal(a, b)


def test_the_report_imports_ppi_py_only_to_compute_an_interval(tmp_path):
    """``--help`` and a refused report answer without ppi_py (scikit-learn, numba), as does importing the stats."""
    code, _, _, packages = run_modules("ablate.report")
    assert code == 0 and not packages & {"ppi_py", "sklearn", "numba"}
    code, _, err, packages = run_modules(
        "ablate.report", "--tracking-uri", f"sqlite:///{tmp_path}/none.db", "--test", "nope"
    )
    assert code == 2 and err.startswith("error:") and not packages & {"ppi_py", "sklearn", "numba"}


def test_the_coverage_experiment_runs_and_writes_its_page(tmp_path):
    """experiments/ppi_coverage.py end to end on a small population (the page's figures: 1000 draws)."""
    script = Path(__file__).resolve().parents[1] / "experiments" / "ppi_coverage.py"
    out = tmp_path / "page.md"
    p = subprocess.run(
        [
            sys.executable,
            str(script),
            "--draws",
            "30",
            "--population",
            "600",
            "--checked",
            "40",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    page = out.read_text(encoding="utf-8")
    assert "| 40 of 200 | B - A |" in page and "--draws 30 --questions 200 --checked 40" in page
    assert "below the 1000" in p.stdout
