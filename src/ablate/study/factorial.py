"""Which factors matter in a grid: the factorial analysis of a sweep whose runs are a full grid over two or more
swept factors (every combination of their levels present exactly once, each factor with two levels or more).

The long table has one row per question x cell: the question, each swept factor's level and the per-question metric,
on the questions every cell scores (the others are counted and said, never dropped silently). It is modelled by OLS
``metric ~ C(a) * C(b) + C(question)`` (three factors or more: main effects and two-way interactions only,
``(C(a) + C(b) + C(c))**2 + C(question)``) with the question as a blocking effect, and each term is tested by a
Type II ANOVA F test (statsmodels' ``anova_lm(..., typ=2)``).

Effect sizes are read on the metric's own scale, each with a 95% interval from the model's residual mean square
(the F test's denominator; Scheffé's for a term with more than one degree of freedom, since its largest difference
is picked after seeing the data: interval and test agree): a main effect is the largest difference between two levels'
means (marginal over the other factors and the questions); an interaction is the difference of differences of the
2x2 sub-table with the largest contrast. The pooled residual assumes the questions respond alike to every factor;
when the per-question paired differences' t interval includes 0 for a term the F test calls significant, its
sentence says so, and the section says once why a significant factor can come with a pair of runs that is not
(:data:`WHY_POOLED`).

Factors are named as the sweep's overrides typed them (``retrieval.window``, not the param ``rrf.window`` it feeds).
A factor that changes no score at one level of another (the window at rrf.k=1) has, in a 2x2 grid, the same F as
their interaction: the two are then one contrast. Its sentence says so (:func:`flat_levels`).

Numbers only (:class:`Factorial`); :mod:`ablate.study.report.render` writes the section and the figures.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats as sps

from ablate import record as R
from ablate.record import RecordedRun
from ablate.study.compare import norm_value

#: The columns of ``factorial.csv``, in order.
COLUMNS = ("term", "df", "F", "p", "effect", "ci_low", "ci_high")
#: A term is called significant (a sentence saying it matters, an interaction plot) below this p (uncorrected).
ALPHA = 0.05
#: A residual mean square at or below this is an exact fit (rounding only): nothing to test against.
EXACT = 1e-20
#: Per-question values that differ by no more than this are the same score (a simple effect of exactly 0).
FLAT = 1e-12
#: Why a factor the F test calls significant can come with a row of the ablation table (one pair of runs) that is
#: not: said once under the section, so the two are not read as a contradiction.
WHY_POOLED = (
    "a factor can be significant while one pair of its runs is not: the F test compares the factor's level means "
    "over every cell and question against the model's residual (what the questions and the other factors leave "
    "unexplained), while a row of the ablation table compares two runs alone, on their own per-question "
    "differences, corrected over the table's family"
)
#: What the section says about the test.
TEST_NAME = "Type II ANOVA F test (OLS, statsmodels anova_lm typ=2), question as a blocking effect"


@dataclass(frozen=True)
class Grid:
    """The swept factors (their keys, in the sweep's order), each one's levels (sorted: numbers by value) and each
    run's cell (one level per factor)."""

    factors: list[str]
    levels: dict[str, list[str]]
    cells: dict[str, tuple[str, ...]]  # run id -> levels, in the order of ``factors``


@dataclass(frozen=True)
class Effect:
    """One term's readable effect: its size and 95% interval (the model's: the residual mean square the F test
    divides by, so a term the F test calls significant has an interval without 0 when it has two levels), what it
    compares, and (an interaction) the simple effects of the first factor at the two levels of the second:
    ``(level, effect, ci_low, ci_high)``."""

    effect: float
    ci_low: float
    ci_high: float
    compares: tuple[str, str]  # main: (high level, low level); interaction: (a2, a1) of the first factor
    at: tuple[tuple[str, float, float, float], ...] = ()
    #: the 95% t interval of the per-question paired differences (no pooling over the other terms' variation)
    paired: tuple[float, float] = (math.nan, math.nan)
    #: a main effect: the levels of other factors, ``(factor, level)``, at which this factor changes no question's
    #: score (its simple effect there is exactly 0, so its effect and its interaction with that factor are one
    #: contrast: in a 2x2 grid their F are equal)
    flat_at: tuple[tuple[str, str], ...] = ()


@dataclass
class Factorial:
    """The analysis, or why there is none (``note``; then no model was fitted). ``long``: the long table (columns
    ``question``, the factors by their keys, ``metric``); ``table``: one row per term (:data:`COLUMNS`);
    ``sentences``: one a reader can act on per term; ``significant``: the interactions with p < :data:`ALPHA`."""

    metric: str
    note: str | None = None
    grid: Grid | None = None
    formula: str = ""
    long: pd.DataFrame = field(default_factory=pd.DataFrame)
    table: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(COLUMNS)))
    sentences: list[str] = field(default_factory=list)
    n_questions: int = 0
    dropped: str = ""
    two_way_only: bool = False
    significant: list[tuple[str, str]] = field(default_factory=list)
    residual: Residual | None = None

    @property
    def modelled(self) -> bool:
        return self.note is None

    @property
    def design(self) -> str:
        """The design in one line: each factor's levels, the cells, the blocks and every term's degrees of
        freedom (the residual's is what the F tests divide by)."""
        if self.grid is None or self.residual is None:
            return ""
        g = self.grid
        levels = " x ".join(f"{k} ({', '.join(g.levels[k])})" for k in g.factors)
        df = ", ".join(f"{t.term} {t.df:g}" for t in self.table.itertuples(index=False))
        return (
            f"design: {levels}: {len(g.cells)} cells, each once; blocks: the {self.n_questions} questions every cell "
            f"scores; df: {df}, question {self.n_questions - 1}, residual {self.residual.df:g}"
        )


def level_of(run: RecordedRun, key: str) -> str:
    """A run's level of a swept factor as a reader reads it: ``bm25,dense`` for a retriever list, ``60`` for
    ``60.0``, the variant's letter for ``variant``."""
    if key == "variant":
        return run.variant
    v = run.params.get(key)
    if key == R.P_RETRIEVERS:
        return ",".join(R.json_list(v))
    n = norm_value(v)
    if isinstance(n, float):
        return str(int(n)) if n.is_integer() else f"{n:g}"
    return "none" if n is None else str(v)


def _sorted_levels(values: Sequence[str]) -> list[str]:
    def key(v: str) -> tuple[int, float, str]:
        try:
            return (0, float(v), "")
        except ValueError:
            return (1, 0.0, v)

    return sorted(set(values), key=key)


def find_grid(runs: Sequence[RecordedRun], swept: Sequence[str]) -> Grid | str:
    """The full grid the runs form over the swept factors with two levels or more, or a one-line note saying why
    they do not (one factor; a combination missing or repeated)."""
    keys = [k for k in dict.fromkeys(swept)]
    levels = {k: _sorted_levels([level_of(r, k) for r in runs]) for k in keys}
    factors = [k for k in keys if len(levels[k]) >= 2]
    if len(factors) < 2:
        named = ", ".join(factors) or "none"
        return (
            f"no factorial analysis: the runs vary {len(factors)} swept factor(s) ({named}); it needs a full grid "
            "over two or more (e.g. -m rrf.k=1,60 retrieval.window=20,50)"
        )
    cells = {r.run_id: tuple(level_of(r, k) for k in factors) for r in runs}
    counts: dict[tuple[str, ...], int] = {}
    for c in cells.values():
        counts[c] = counts.get(c, 0) + 1
    combos = list(itertools.product(*(levels[k] for k in factors)))
    missing = [c for c in combos if c not in counts]
    repeated = [c for c, n in counts.items() if n > 1]
    if missing or repeated:
        show = "; ".join(
            [f"missing {_cell(factors, c)}" for c in missing[:3]]
            + [f"{counts[c]} runs of {_cell(factors, c)}" for c in repeated[:3]]
        )
        return (
            f"no factorial analysis: the {len(runs)} runs are not a full grid over {' x '.join(factors)} "
            f"({len(combos)} combinations, each exactly once): {show}"
        )
    return Grid(factors, {k: levels[k] for k in factors}, cells)


def _cell(factors: Sequence[str], cell: Sequence[str]) -> str:
    return " ".join(f"{k}={v}" for k, v in zip(factors, cell, strict=True))


def long_table(grid: Grid, values: Mapping[str, pd.Series]) -> tuple[pd.DataFrame, int, str]:
    """One row per question x cell on the questions every cell scores (``values``: run id -> the metric per scored
    question), the number of those questions, and a line saying how many were dropped and why."""
    ids = list(grid.cells)
    values = {rid: pd.Series(values[rid].to_numpy(), index=values[rid].index.astype(str)) for rid in ids}
    common = values[ids[0]].index
    union = values[ids[0]].index
    for rid in ids[1:]:
        common = common.intersection(values[rid].index, sort=False)
        union = union.union(values[rid].index, sort=False)
    questions = sorted(str(q) for q in common)
    dropped = len(union) - len(common)
    why = (
        "none dropped: every cell scores the same questions"
        if dropped == 0
        else f"{dropped} question(s) dropped: scored (answerable, metric defined) by some cells but not all"
    )
    rows = []
    for rid in ids:
        s = values[rid]
        for q in questions:
            rows.append(
                {"question": q, **dict(zip(grid.factors, grid.cells[rid], strict=True)), "metric": s[q]}
            )
    long = pd.DataFrame(rows, columns=["question", *grid.factors, "metric"])
    long["metric"] = long["metric"].astype(float)
    return long, len(questions), why


def formula(factors: Sequence[str], names: Sequence[str] | None = None, response: str = "metric") -> str:
    """``metric ~ C(a) * C(b) + C(question)``; three factors or more: ``(C(a) + C(b) + C(c))**2 + C(question)``
    (main effects and two-way interactions only). ``names``: the factors as written (the keys), default ``factors``."""
    shown = [f"C({n})" for n in (names or factors)]
    rhs = " * ".join(shown) if len(shown) == 2 else f"({' + '.join(shown)})**2"
    return f"{response} ~ {rhs} + C(question)"


@dataclass(frozen=True)
class Residual:
    """The fitted model's residual mean square, its degrees of freedom and the long table's rows: what the F tests
    divide by, and what the effects' intervals are read from."""

    mse: float
    df: float
    rows: int

    def interval(self, effect: float, weight: float, df_term: float = 1.0) -> tuple[float, float, float]:
        """``effect`` with its 95% interval, the effect a contrast of level means with standard error
        ``sqrt(mse * weight / rows)``. ``df_term`` > 1: Scheffé's interval for a contrast of a term with that many
        degrees of freedom (the largest difference is picked after seeing the data; the interval excludes 0 for
        some contrast exactly when the term's F test rejects); 1: the t interval."""
        if not self.df > 0 or math.isnan(self.mse):
            return effect, math.nan, math.nan
        crit = math.sqrt(df_term * float(sps.f.ppf(0.95, df_term, self.df)))
        half = crit * math.sqrt(self.mse * weight / self.rows)
        return effect, effect - half, effect + half


def anova(long: pd.DataFrame, factors: Sequence[str]) -> tuple[pd.DataFrame, Residual]:
    """Type II ANOVA of the long table: one row per term (``a``, ``b``, ``a:b``) with ``df``, ``F``, ``p``, and
    the model's residual; the factors' columns are renamed to plain names for the formula (keys like ``rrf.k`` are
    not Python names)."""
    from statsmodels.formula.api import ols
    from statsmodels.stats.anova import anova_lm

    alias = {k: f"f{i}" for i, k in enumerate(factors)}
    data = long.rename(columns=alias)
    for a in alias.values():
        data[a] = data[a].astype(str)
    fit = ols(formula(list(alias.values())), data=data).fit()
    table = anova_lm(fit, typ=2)
    back = {f"C({a})": k for k, a in alias.items()}
    rows = []
    for name, row in table.iterrows():
        parts = str(name).split(":")
        if all(p in back for p in parts):
            rows.append(
                {
                    "term": ":".join(back[p] for p in parts),
                    "df": float(row["df"]),
                    "F": float(row["F"]),
                    "p": float(row["PR(>F)"]),
                }
            )
    residual = Residual(float(fit.mse_resid), float(fit.df_resid), len(data))
    return pd.DataFrame(rows, columns=["term", "df", "F", "p"]), residual


def _t_interval(d: np.ndarray) -> tuple[float, float, float]:
    """Mean of ``d`` with its 95% t interval over its entries (NaN bounds with fewer than two)."""
    m = float(np.mean(d)) if len(d) else math.nan
    if len(d) < 2:
        return m, math.nan, math.nan
    half = float(sps.t.ppf(0.975, len(d) - 1) * np.std(d, ddof=1) / math.sqrt(len(d)))
    return m, m - half, m + half


def _by_question(long: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Mean metric per question (rows) and level combination of ``keys`` (columns), over the other factors."""
    return long.pivot_table(index="question", columns=list(keys), values="metric", aggfunc="mean")


def main_effect(long: pd.DataFrame, key: str, residual: Residual, others: Sequence[str] = ()) -> Effect:
    """The largest difference between two levels' means (the level with the higher mean minus the lower). Its
    interval is the model's (residual mean square, like the F test: each level mean is over ``rows / L`` rows); the
    per-question paired differences' t interval is kept beside it (``paired``), and the levels of the ``others``
    at which ``key`` changes no score (``flat_at``)."""
    table = _by_question(long, [key])
    means = table.mean(axis=0)
    hi, lo = str(means.idxmax()), str(means.idxmin())
    if hi == lo:  # every level's mean equal: the first two levels, a difference of 0
        hi, lo = (str(x) for x in means.index[:2])
    m, p_low, p_high = _t_interval((table[hi] - table[lo]).to_numpy(dtype=float))
    _, low, high = residual.interval(m, 2.0 * len(means), len(means) - 1.0)
    return Effect(m, low, high, (hi, lo), paired=(p_low, p_high), flat_at=flat_levels(long, key, others))


def flat_levels(long: pd.DataFrame, key: str, others: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The ``(factor, level)`` of the ``others`` at which every question scores the same at every level of ``key``
    (over the remaining factors): there ``key`` changes nothing."""
    out = []
    for o in others:
        table = _by_question(long, [o, key])
        for lv in _sorted_levels(list(long[o])):
            sub = table[lv].to_numpy(dtype=float)
            if float(np.nanmax(sub.max(axis=1) - sub.min(axis=1))) <= FLAT:
                out.append((o, lv))
    return tuple(out)


def _flat(key: str, eff: Effect, f_of: Mapping[str, float]) -> str:
    """What a main effect's sentence adds when the factor changes nothing at a level of another factor: its
    effect comes from the other levels alone, and (in a 2x2 grid) its F equals the interaction's by construction,
    not by a fault of the analysis."""
    if not eff.flat_at:
        return ""
    o, lv = eff.flat_at[0]
    term = next((t for t in (f"{key}:{o}", f"{o}:{key}") if t in f_of), "")
    same = bool(term) and math.isclose(f_of[term], f_of[key], rel_tol=1e-9)
    said = term.replace(":", " × ")
    return (
        f"; {key} changes no question's score at {o}={lv}, so its effect comes from the other level(s) of {o} "
        "alone" + (f" and its F equals that of {said} (one contrast, not two findings)" if same else "")
    )


def interaction_effect(long: pd.DataFrame, a: str, b: str, residual: Residual) -> Effect:
    """The 2x2 sub-table of ``a`` x ``b`` with the largest difference of differences (oriented positive): the
    effect of ``a2`` over ``a1`` at ``b2`` minus that at ``b1``, and both simple effects, with the model's intervals
    (each cell mean over ``rows / (La * Lb)`` rows), and the per-question paired t interval beside (``paired``)."""
    table = _by_question(long, [a, b])
    best: tuple[float, str, str, str, str] | None = None
    for a1, a2 in itertools.combinations(sorted(set(long[a])), 2):
        for b1, b2 in itertools.combinations(sorted(set(long[b])), 2):
            dd = float(((table[(a2, b2)] - table[(a1, b2)]) - (table[(a2, b1)] - table[(a1, b1)])).mean())
            if dd < 0:
                dd, b1_, b2_ = -dd, b2, b1
            else:
                b1_, b2_ = b1, b2
            if best is None or dd > best[0]:
                best = (dd, a1, a2, b1_, b2_)
    assert best is not None
    _, a1, a2, b1, b2 = best
    cells = float(long[a].nunique() * long[b].nunique())
    e2 = (table[(a2, b2)] - table[(a1, b2)]).to_numpy(dtype=float)
    e1 = (table[(a2, b1)] - table[(a1, b1)]).to_numpy(dtype=float)
    m, p_low, p_high = _t_interval(e2 - e1)
    df_term = (long[a].nunique() - 1.0) * (long[b].nunique() - 1.0)
    _, low, high = residual.interval(m, 4.0 * cells, df_term)
    at = tuple((lv, *residual.interval(float(np.mean(e)), 2.0 * cells)) for lv, e in ((b2, e2), (b1, e1)))
    return Effect(m, low, high, (a2, a1), at, paired=(p_low, p_high))


def cell_means(long: pd.DataFrame, a: str, b: str) -> dict[str, list[tuple[str, float, float, float]]]:
    """For the interaction plot: per level of ``b``, each level of ``a`` with the mean metric over the questions
    (and the other factors) and its 95% t interval."""
    table = _by_question(long, [a, b])
    out: dict[str, list[tuple[str, float, float, float]]] = {}
    for lb in _sorted_levels(list(long[b])):
        out[lb] = [
            (la, *_t_interval(table[(la, lb)].to_numpy(dtype=float))) for la in _sorted_levels(list(long[a]))
        ]
    return out


def named(grid: Grid, names: Mapping[str, str]) -> Grid:
    """``grid`` with its factors named as the user typed them (``names``: param -> the sweep's override key, e.g.
    ``rrf.window`` -> ``retrieval.window``); a factor without a name keeps its param."""
    show = {k: names.get(k, k) for k in grid.factors}
    return Grid([show[k] for k in grid.factors], {show[k]: v for k, v in grid.levels.items()}, grid.cells)


def analyse(
    runs: Sequence[RecordedRun],
    swept: Sequence[str],
    values: Mapping[str, pd.Series],
    metric: str,
    names: Mapping[str, str] | None = None,
) -> Factorial:
    """The factorial analysis of ``runs`` over their ``swept`` factors on ``metric`` (``values``: run id -> the
    metric per question the run scores), or a :class:`Factorial` with only a ``note`` when they are no full grid.
    ``names``: each swept param as the sweep's overrides typed it (:func:`ablate.study.fetch.typed_names`); the
    factors are shown, and ``factorial.csv`` written, under those names."""
    grid = find_grid(runs, swept)
    if isinstance(grid, str):
        return Factorial(metric, note=grid)
    grid = named(grid, names or {})
    long, n, dropped = long_table(grid, {r.run_id: values[r.run_id] for r in runs})
    if n < 2:
        return Factorial(
            metric, note=f"no factorial analysis: {n} question(s) scored by every cell ({dropped})"
        )
    try:
        terms, residual = anova(long, grid.factors)
    except (np.linalg.LinAlgError, ValueError) as e:  # a report never fails on its analysis: it says why
        return Factorial(metric, note=f"no factorial analysis: the model could not be fitted ({e})")
    if not residual.mse > EXACT:
        return Factorial(
            metric,
            note=f"no factorial analysis: on the {n} questions every cell scores, the cells differ by constants only "
            "(the model fits exactly: no residual variation to test the factors against)",
        )
    rows, sentences, significant = [], [], []
    f_of = {str(t.term): float(t.F) for t in terms.itertuples(index=False)}
    for t in terms.itertuples(index=False):
        parts = str(t.term).split(":")
        eff = (
            main_effect(long, parts[0], residual, [k for k in grid.factors if k != parts[0]])
            if len(parts) == 1
            else interaction_effect(long, parts[0], parts[1], residual)
        )
        rows.append({"term": t.term, "df": t.df, "F": t.F, "p": t.p, "effect": eff.effect,
                     "ci_low": eff.ci_low, "ci_high": eff.ci_high})  # fmt: skip
        said = sentence(parts, grid, eff, float(t.F), float(t.p), metric)
        sentences.append(said + _flat(parts[0], eff, f_of))
        if len(parts) == 2 and t.p < ALPHA:
            significant.append((parts[0], parts[1]))
    return Factorial(
        metric,
        grid=grid,
        formula=formula(grid.factors, response=metric),
        long=long,
        table=pd.DataFrame(rows, columns=list(COLUMNS)),
        sentences=sentences,
        n_questions=n,
        dropped=dropped,
        two_way_only=len(grid.factors) > 2,
        significant=significant,
        residual=residual,
    )


def _num(x: float, sign: bool = True) -> str:
    return "-" if x is None or math.isnan(x) else (f"{x:+.3f}" if sign else f"{x:.3f}")


def _ci(e: float, lo: float, hi: float) -> str:
    return f"{_num(e)} [{_num(lo)}, {_num(hi)}]"


def _span(levels: Sequence[str]) -> str:
    """``1–100`` for numeric levels, else the levels listed (``bm25 | dense``)."""
    try:
        [float(v) for v in levels]
    except ValueError:
        return " | ".join(levels)
    return f"{levels[0]}–{levels[-1]}" if len(levels) > 2 else f"{levels[0]} and {levels[1]}"


def sentence(parts: Sequence[str], grid: Grid, eff: Effect, f: float, p: float, metric: str) -> str:
    """One line a reader can act on: whether the term matters (p < :data:`ALPHA`), by how much, where."""
    test = f"F {f:.2f}, p {p:.3g}" if not math.isnan(p) else "F -, p -"
    if len(parts) == 1:
        key = parts[0]
        if math.isnan(p) or p >= ALPHA:
            return (
                f"{key}: no detectable effect on {metric} across {_span(grid.levels[key])} (largest difference "
                f"{_ci(eff.effect, eff.ci_low, eff.ci_high)}, {test}): choose its level on cost; effects outside the interval are unlikely"
            )
        hi, lo = eff.compares
        return (
            f"{key} matters: {key}={hi} beats {key}={lo} by {_ci(eff.effect, eff.ci_low, eff.ci_high)} {metric} "
            f"({test}){_caveat(eff)}"
        )
    a, b = parts
    a2, a1 = eff.compares
    at = ", ".join(f"at {b}={lv} by {_ci(e, lo, hi)}" for lv, e, lo, hi in eff.at)
    if math.isnan(p) or p >= ALPHA:
        return (
            f"{a} × {b}: no detectable interaction (largest difference of differences "
            f"{_ci(eff.effect, eff.ci_low, eff.ci_high)}, {test}): read their main effects on their own"
        )
    return (
        f"{a} × {b}: the effect of {a}={a2} over {a}={a1} depends on {b}: {at} (difference "
        f"{_ci(eff.effect, eff.ci_low, eff.ci_high)}, {test}): choose {a} per {b}{_caveat(eff)}"
    )


def _caveat(eff: Effect) -> str:
    """What to add when the per-question paired interval includes 0 although the model's does not: the questions
    disagree more on this term than the pooled residual says, so the call is not yet safe."""
    lo, hi = eff.paired
    if math.isnan(lo) or not lo <= 0 <= hi:
        return ""
    return (
        f"; but the questions disagree (paired per-question interval {_ci(eff.effect, lo, hi)} includes 0): "
        "confirm on more questions before relying on it"
    )
