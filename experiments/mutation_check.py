"""Mutation check of the scoring and statistics: does the default test suite still see a wrong number?

Each mutant is one small, plausible mistake in the code that turns rankings and labels into figures (a discount
off by one, a strict ``>`` for ``>=``, a missing ``+1`` in a Monte-Carlo p-value, ...). For each, the check puts the
source of a git revision in a temporary folder, applies that one change, runs the scoring and statistics tests of
the default suite (slow tests excluded, the first failure stops the run) and records whether a test failed (the
mutant is *killed*, and by which test) or all passed (it *survived*: no test guards that rule).

    python experiments/mutation_check.py                        # HEAD, every mutant, a table on stdout
    python experiments/mutation_check.py --rev 7363289 --json base.json
    python experiments/mutation_check.py --only rrf-rank-from-0,ndcg-natural-log
    python experiments/mutation_check.py --compare base.json new.json   # mutants killed in A but not in B

A speed-up of the suite must not shrink the kill list: ``--compare`` prints each mutant the first file kills and
the second does not, and exits 1 when there is one. Each mutant runs with a fresh cache (a cached result must not
hide a change), offline, on the source of the revision alone (``PYTHONPATH`` puts it before the installed ablate).

Only mutants that can change a figure are listed: dividing the jackknife means by n instead of n - 1 scales every
deviation alike and BCa's acceleration is scale-free; a NaN-to-zero in the means meets no NaN among the scored
answerable questions, and the non-answerable ones have no hit@K to pass the means' filter; a unit one past the
chunks budget enters no window. Such equivalent mutants were dropped.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NoReturn

REPO = Path(__file__).resolve().parents[1]

#: The test files that check scoring and statistics (glob patterns under tests/; those present at the revision).
TESTS = (
    "test_evaluation*.py",
    "test_scoring*.py",
    "test_stats*.py",
    "test_fusion*.py",
    "test_power.py",
    "test_agreement.py",
    "test_generation_scoring.py",
    "test_subquestions.py",
    "test_compute.py",
    "test_gate.py",
    "test_ppi.py",
)
#: A mutant whose tests run longer than this is counted killed (by the time limit), as a hang is seen.
TIMEOUT_S = 900


def _refuse(message: str) -> NoReturn:
    """One line on stderr and exit 2 (bad input; exit 1 means a kill was lost)."""
    print(message, file=sys.stderr)
    raise SystemExit(2)


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # under src/ablate/
    old: str  # must occur exactly once in the file
    new: str
    what: str


E, S = "evaluation/", "evaluation/stats/"
MUTANTS: tuple[Mutant, ...] = (
    # ranking metrics (evaluation/metrics.py)
    Mutant(
        "ndcg-natural-log",
        E + "metrics.py",
        "disc = 1.0 / np.log2(np.arange(2, width + 2,",
        "disc = 1.0 / np.log(np.arange(2, width + 2,",
        "nDCG discount ln(i+1) instead of log2(i+1)",
    ),
    Mutant(
        "ndcg-discount-from-1",
        E + "metrics.py",
        "disc = 1.0 / np.log2(np.arange(2, width + 2,",
        "disc = 1.0 / np.log2(np.arange(3, width + 3,",
        "nDCG discount shifted by one position",
    ),
    Mutant(
        "gain-no-minus-one",
        E + "metrics.py",
        "np.exp2(g) - 1.0 if gain",
        "np.exp2(g) if gain",
        "exponential gain 2^rel instead of 2^rel - 1",
    ),
    Mutant(
        "gain-linear-always",
        E + "metrics.py",
        'np.exp2(g) - 1.0 if gain == "exponential" else g',
        "g",
        "gain always linear",
    ),
    Mutant(
        "gain-level-strict",
        E + "metrics.py",
        "    rel = grades >= level\n",
        "    rel = grades > level\n",
        "a grade equal to the relevance level gains nothing",
    ),
    Mutant(
        "relevant-level-strict",
        E + "metrics.py",
        "    rel = g >= level\n",
        "    rel = g > level\n",
        "a grade equal to the relevance level is not relevant",
    ),
    Mutant(
        "rr-off-by-one",
        E + "metrics.py",
        "inv_first = 1.0 / (first_rel + 1.0)",
        "inv_first = 1.0 / (first_rel + 2.0)",
        "reciprocal rank counted from 2",
    ),
    Mutant(
        "rr-window-inclusive",
        E + "metrics.py",
        '"rr": np.where(first_rel[:, None] < win,',
        '"rr": np.where(first_rel[:, None] <= win,',
        "RR counts the first result just past K",
    ),
    Mutant(
        "hit-needs-two",
        E + "metrics.py",
        '"hit": (hits_k > 0)',
        '"hit": (hits_k > 1)',
        "a hit needs two relevant results",
    ),
    Mutant(
        "complete-strict",
        E + "metrics.py",
        '"complete": (hits_k >= n_rel_f)',
        '"complete": (hits_k > n_rel_f)',
        "complete never reached",
    ),
    Mutant(
        "recall-over-k",
        E + "metrics.py",
        "recall = hits_k / n_rel_f",
        "recall = hits_k / np.maximum(win, 1)",
        "recall divided by the window instead of the relevant count",
    ),
    Mutant(
        "idcg-at-full-depth",
        E + "metrics.py",
        "idcg = cum_idcg[:, np.minimum(np.asarray(ks), iwidth) - 1]",
        "idcg = np.repeat(cum_idcg[:, -1:], len(ks), axis=1)",
        "IDCG of the whole ideal list, not cut at K",
    ),
    Mutant(
        "judged-empty-zero",
        E + "metrics.py",
        "1.0 - unj / win_full, 1.0)",
        "1.0 - unj / win_full, 0.0)",
        "an empty ranking counts as wholly unjudged",
    ),
    Mutant(
        "unanswerable-scored",
        E + "metrics.py",
        "answerable = (category == 0)[:, None]",
        "answerable = (category != 1)[:, None]",
        "questions with no relevant label get quality metrics",
    ),
    Mutant(
        "means-count-excluded-missing",
        E + "metrics.py",
        'per_query[(per_query["category"] == "answerable") & per_query[f"hit@{ks[0]}"].notna()]',
        'per_query[(per_query["category"] == "answerable")]',
        "the means take in questions excluded as missing from the run (eval.missing=exclude)",
    ),
    Mutant(
        "unjudged-counts-judged",
        E + "metrics.py",
        "unj = (win_full - _take(cum_judged, win_full))",
        "unj = _take(cum_judged, win_full)",
        "unjudged@K counts the judged results",
    ),
    # ideal lists and categories (evaluation/ideal.py)
    Mutant(
        "ideal-level-strict",
        E + "ideal.py",
        "keep = grades >= level",
        "keep = grades > level",
        "the ideal list drops grades equal to the level",
    ),
    Mutant(
        "categories-swapped",
        E + "ideal.py",
        "np.where(n_labels == 0, 1, np.where(n_rel == 0, 2, 0))",
        "np.where(n_labels == 0, 2, np.where(n_rel == 0, 1, 0))",
        "no-label and no-relevant questions swapped",
    ),
    Mutant(
        "ideal-one-too-long",
        E + "ideal.py",
        "np.where(pos < n_rel[:, None], top - below, UNJUDGED)",
        "np.where(pos <= n_rel[:, None], top - below, UNJUDGED)",
        "the ideal list one grade too long",
    ),
    # dedup and budgets (evaluation/placement.py)
    Mutant(
        "no-dedup-docs-budget",
        E + "placement.py",
        "        units = list(dict.fromkeys(ids))\n        if len(units) > depth:",
        "        units = list(ids)\n        if len(units) > depth:",
        "the docs budget counts duplicates",
    ),
    Mutant(
        "chunks-budget-after-dedup",
        E + "placement.py",
        "        window = ids[:depth]\n",
        "        window = list(dict.fromkeys(ids))[:depth]\n",
        "the chunks budget cut after dedup (budgets mixed)",
    ),
    Mutant(
        "chunks-window-inclusive",
        E + "placement.py",
        "np.count_nonzero(at < k, axis=1)",
        "np.count_nonzero(at <= k, axis=1)",
        "the chunks budget's window at K keeps the unit first seen at position K + 1",
    ),
    # RRF (stages/fusion/rrf.py)
    Mutant(
        "rrf-rank-from-0",
        "stages/fusion/rrf.py",
        "inv = [1.0 / (kf + rank) for rank in range(1, window + 1)]",
        "inv = [1.0 / (kf + rank) for rank in range(0, window)]",
        "RRF ranks counted from 0",
    ),
    Mutant(
        "rrf-scores-rank-from-2",
        "stages/fusion/rrf.py",
        "[1.0 / (k + rank) for rank in range(1, longest + 1)]",
        "[1.0 / (k + rank + 1) for rank in range(1, longest + 1)]",
        "rrf_scores ranks counted from 2",
    ),
    # bootstrap and BCa (evaluation/stats/bootstrap.py, resampling.py)
    Mutant(
        "percentile-one-sided-alpha",
        S + "bootstrap.py",
        "[alpha / 2.0, 1.0 - alpha / 2.0])",
        "[alpha, 1.0 - alpha])",
        "percentile interval at alpha, not alpha/2",
    ),
    Mutant(
        "bca-no-ties",
        S + "resampling.py",
        "np.count_nonzero(boot < theta) + 0.5 * np.count_nonzero(boot == theta)",
        "np.count_nonzero(boot < theta)",
        "BCa bias correction ignores ties",
    ),
    Mutant(
        "bca-acceleration-sign",
        S + "resampling.py",
        "dev = jack.mean() - jack",
        "dev = jack - jack.mean()",
        "BCa's acceleration with the wrong sign",
    ),
    Mutant(
        "bootstrap-nan-as-zero",
        S + "bootstrap.py",
        "sums / (n if complete[j] else weights[j][idx].sum(axis=1))",
        "sums / n",
        "a resample's undefined cells counted as 0",
    ),
    # paired tests (evaluation/stats/paired.py, resampling.py)
    Mutant(
        "bootstrap-p-no-plus-one",
        S + "paired.py",
        "mean_a, mean_b, deltas[j], low, high, (counts[j] + 1) / (n_resamples + 1), n",
        "mean_a, mean_b, deltas[j], low, high, counts[j] / n_resamples, n",
        "bootstrap p without the +1 form",
    ),
    Mutant(
        "t-ddof-0",
        S + "paired.py",
        "t_obs.append(delta / (d.std(ddof=1) / math.sqrt(n)))",
        "t_obs.append(delta / (d.std(ddof=0) / math.sqrt(n)))",
        "studentised with the population sd",
    ),
    Mutant(
        "ties-strict",
        S + "resampling.py",
        "np.abs(stat) >= obs - TIE_RTOL * obs",
        "np.abs(stat) > obs",
        "a tie with the observed statistic is not counted",
    ),
    Mutant(
        "never-exact",
        S + "resampling.py",
        "exact = g < EXACT_MAX_PAIRS and (1 << g) <= n_resamples",
        "exact = False",
        "the randomization test never enumerates",
    ),
    Mutant(
        "randomization-p-no-plus-one",
        S + "resampling.py",
        "else float(counts[j] / (1 << g) if exact else (counts[j] + 1) / (n_resamples + 1))",
        "else float(counts[j] / (1 << g) if exact else counts[j] / n_resamples)",
        "sampled randomization p without +1",
    ),
    Mutant(
        "all-zero-diff-p0",
        S + "paired.py",
        "p = 1.0 if c == 0.0 else (1.0 / (n_resamples + 1)",
        "p = 0.0 if c == 0.0 else (1.0 / (n_resamples + 1)",
        "no difference at all is 'significant'",
    ),
    # multiple comparisons (holm.py, correction.py)
    Mutant(
        "holm-no-monotone",
        S + "holm.py",
        "np.maximum.accumulate((m - np.arange(m)) * ordered)",
        "(m - np.arange(m)) * ordered",
        "Holm without the running maximum",
    ),
    Mutant(
        "holm-is-bonferroni",
        S + "holm.py",
        "np.maximum.accumulate((m - np.arange(m)) * ordered)",
        "m * ordered",
        "Holm replaced by Bonferroni",
    ),
    Mutant(
        "bh-no-monotone",
        S + "correction.py",
        "np.minimum.accumulate((ordered * m / np.arange(1, m + 1))[::-1])[::-1]",
        "ordered * m / np.arange(1, m + 1)",
        "Benjamini-Hochberg without the running minimum",
    ),
    Mutant(
        "pvalue-cap-missing",
        S + "holm.py",
        "adjusted[order] = np.minimum(step(vals[order], m), 1.0)",
        "adjusted[order] = step(vals[order], m)",
        "adjusted p-values above 1",
    ),
    # Wilson interval (wilson.py)
    Mutant(
        "wilson-no-z2-term",
        S + "wilson.py",
        "math.sqrt(p * (1.0 - p) / n_f + z2 / (4.0 * n_f * n_f))",
        "math.sqrt(p * (1.0 - p) / n_f)",
        "Wilson half-width without its z^2/4n^2 term",
    ),
    Mutant(
        "wilson-one-sided-z",
        S + "wilson.py",
        "special.ndtri(1.0 - (1.0 - confidence) / 2.0)",
        "special.ndtri(confidence)",
        "Wilson with a one-sided z",
    ),
    # power (power.py)
    Mutant(
        "mde-ddof-0",
        S + "power.py",
        "return float(np.asarray(es).item()) * float(np.std(d, ddof=1))",
        "return float(np.asarray(es).item()) * float(np.std(d, ddof=0))",
        "MDE with the population sd",
    ),
    Mutant(
        "n-needed-floor",
        S + "power.py",
        "math.ceil(float(np.asarray(n).item()) * deff - _CEIL_SLACK)",
        "math.floor(float(np.asarray(n).item()) * deff)",
        "questions needed rounded down",
    ),
    # the regression gate (study/gate.py)
    Mutant(
        "gate-se-ignores-clusters",
        "study/gate.py",
        'se = cluster_se(values, cluster_codes(g, values.size, "the gate"))',
        "se = cluster_se(values, np.arange(values.size))",
        "the gate's standard error as if every question were its own cluster",
    ),
    Mutant(
        "cluster-se-no-small-sample-factor",
        S + "cluster.py",
        "return math.sqrt(g / (g - 1) * float((dev**2).sum())) / n",
        "return math.sqrt(float((dev**2).sum())) / n",
        "cluster-robust standard error without statsmodels' G/(G-1) factor",
    ),
    Mutant(
        "gate-tests-naive-df",
        "study/gate.py",
        "return len(set(self.g)) - 1",
        "return len(self.g) - 1",
        "the one-sided tests with n - 1 df",
    ),
    Mutant(
        "gate-noninferior-no-margin",
        "study/gate.py",
        "t.sf((self.delta + margin) / self.se, self.df)",
        "t.sf(self.delta / self.se, self.df)",
        "non-inferiority tested against 0, not -margin",
    ),
    Mutant(
        "gate-regression-wrong-tail",
        "study/gate.py",
        "t.cdf(self.delta / self.se, self.df)",
        "t.sf(self.delta / self.se, self.df)",
        "the regression test's p from the wrong tail",
    ),
    Mutant(
        "gate-bound-two-sided",
        "study/gate.py",
        "self.delta + side * float(_scipy_stats().t.ppf(1 - level, self.df)) * self.se",
        "self.delta + side * float(_scipy_stats().t.ppf(1 - level / 2, self.df)) * self.se",
        "a one-sided bound at the two-sided level",
    ),
    Mutant(
        "gate-holm-no-stop",
        "study/gate.py",
        "levels[i] = alpha / (m - k) if stopped is None else stopped",
        "levels[i] = alpha / (m - k)",
        "Holm's later hypotheses not held to the level it stopped at",
    ),
    Mutant(
        "gate-holm-is-bonferroni",
        "study/gate.py",
        "levels[i] = alpha / (m - k) if stopped is None else stopped",
        "levels[i] = alpha / m if stopped is None else stopped",
        "the gate's Holm replaced by Bonferroni",
    ),
    Mutant(
        "gate-icc-denominator",
        "study/gate.py",
        "denom = msb + (n0 - 1) * msw",
        "denom = msb + n0 * msw",
        "ICC's ANOVA estimator with the wrong denominator",
    ),
    # prediction-powered inference (evaluation/stats/ppi.py)
    Mutant(
        "ppi-untuned-lambda",
        S + "ppi.py",
        "lam = 0.0 if np.ptp(np.concatenate([yhat_, yhat_u])) == 0 else None",
        "lam = 0.0 if np.ptp(np.concatenate([yhat_, yhat_u])) == 0 else 1.0",
        "plain PPI (lambda 1) where PPI++ tunes lambda",
    ),
    Mutant(
        "ppi-constant-assessor-untuned",
        S + "ppi.py",
        "lam = 0.0 if np.ptp(np.concatenate([yhat_, yhat_u])) == 0 else None",
        "lam = None",
        "a constant assessor left to ppi_py's 0/0 lambda",
    ),
    Mutant(
        "ppi-all-checked-alpha",
        S + "ppi.py",
        "ppi.classical_mean_ci(y_, alpha=alpha)",
        "ppi.classical_mean_ci(y_, alpha=2 * alpha)",
        "every question checked: the interval at the wrong level",
    ),
)


def _source(rev: str, into: Path) -> None:
    """The files of ``rev`` (as committed) in ``into``."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", rev], cwd=REPO, capture_output=True, check=True
    )
    into.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")


def _tests(root: Path, extra: list[str]) -> list[str]:
    found = sorted({str(p.relative_to(root)) for g in TESTS for p in (root / "tests").glob(g)})
    return found + extra


def _run(root: Path, tests: list[str], cache: Path) -> tuple[bool, str, float]:
    """Run ``tests`` in ``root``: (all passed, the first failing test or '', seconds)."""
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "ABLATE_CACHE_DIR": str(cache)}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    env.pop("MLFLOW_TRACKING_URI", None)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-x",
        "-q",
        "-p",
        "no:cacheprovider",
        "-m",
        "not slow",
        "-rf",
        *tests,
    ]
    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return False, f"(no answer within {TIMEOUT_S} s)", time.perf_counter() - t0
    seconds = time.perf_counter() - t0
    if out.returncode == 0:
        return True, "", seconds
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", out.stdout, flags=re.M)
    return False, failed[0] if failed else f"(pytest exit {out.returncode}) " + out.stdout[-300:], seconds


@dataclass
class Outcome:
    name: str
    what: str
    killed: bool
    by: str
    seconds: float


def check(rev: str, names: list[str] | None, extra: list[str]) -> dict[str, object]:
    chosen = [m for m in MUTANTS if not names or m.name in names]
    unknown = sorted(set(names or ()) - {m.name for m in MUTANTS})
    if unknown:
        _refuse(f"error: unknown mutant(s) {', '.join(unknown)}; see MUTANTS in {__file__}")
    found = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    if found.returncode != 0:
        _refuse(f"error: --rev {rev!r} is no commit of {REPO}; pass a commit, e.g. --rev HEAD")
    sha = found.stdout
    with tempfile.TemporaryDirectory(prefix="ablate-mutants-") as tmp:
        root = Path(tmp) / "src-tree"
        _source(rev, root)
        tests = _tests(root, extra)
        # every mutant's text is checked before an hour of tests runs, not when its turn comes
        for m in chosen:
            count = (root / "src" / "ablate" / m.path).read_text(encoding="utf-8").count(m.old)
            if count != 1:
                _refuse(
                    f"error: mutant {m.name}: its text occurs {count} times in {m.path} at {rev}; "
                    f"point it at the code's current text in MUTANTS ({__file__})"
                )
        print(f"rev {sha.strip()[:12]}: {len(chosen)} mutants, tests: {' '.join(tests)}", flush=True)
        ok, by, seconds = _run(root, tests, Path(tmp) / "cache-clean")
        if not ok:
            _refuse(f"error: the unmutated tests fail at {rev} ({by}); fix them first")
        print(f"unmutated: all pass in {seconds:.0f} s", flush=True)
        outcomes = []
        for i, m in enumerate(chosen, 1):
            path = root / "src" / "ablate" / m.path
            text = path.read_text(encoding="utf-8")
            path.write_text(text.replace(m.old, m.new), encoding="utf-8")
            try:
                passed, by, seconds = _run(root, tests, Path(tmp) / f"cache-{m.name}")
            finally:
                path.write_text(text, encoding="utf-8")
                shutil.rmtree(Path(tmp) / f"cache-{m.name}", ignore_errors=True)
            outcomes.append(Outcome(m.name, m.what, not passed, by, round(seconds, 1)))
            state = f"killed by {by}" if not passed else "SURVIVED"
            print(f"[{i}/{len(chosen)}] {m.name}: {state} ({seconds:.0f} s)", flush=True)
    return {"rev": sha.strip(), "tests": tests, "mutants": [asdict(o) for o in outcomes]}


def table(result: dict[str, object]) -> str:
    rows = result["mutants"]
    assert isinstance(rows, list)
    killed = sum(1 for r in rows if r["killed"])
    lines = [
        f"Revision {str(result['rev'])[:12]}: {killed} of {len(rows)} mutants killed.",
        "",
        "| mutant | the mistake | killed by |",
        "|---|---|---|",
    ]
    lines += [f"| {r['name']} | {r['what']} | {r['by'] if r['killed'] else '**survived**'} |" for r in rows]
    return "\n".join(lines)


def compare(a: Path, b: Path) -> int:
    """Print the mutants ``a`` kills and ``b`` does not; 1 if there is one."""
    for path in (a, b):
        try:
            json.loads(path.read_text())["mutants"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            _refuse(
                f"error: --compare {path}: not a result of this script ({type(e).__name__}); write one with --json"
            )
    ka = {r["name"] for r in json.loads(a.read_text())["mutants"] if r["killed"]}
    kb = {r["name"] for r in json.loads(b.read_text())["mutants"] if r["killed"]}
    lost = sorted(ka - kb)
    print(
        f"{a.name}: {len(ka)} killed; {b.name}: {len(kb)} killed; killed in {a.name} only: {', '.join(lost) or 'none'}"
    )
    return 1 if lost else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default="HEAD", help="the git revision whose committed source is checked")
    parser.add_argument("--only", default="", help="comma-separated mutant names (default: all)")
    parser.add_argument("--tests", nargs="*", default=[], help="test files to run besides the scoring ones")
    parser.add_argument("--json", type=Path, help="write the outcomes here")
    parser.add_argument("--md", type=Path, help="write the table here")
    parser.add_argument(
        "--compare", nargs=2, type=Path, metavar=("A", "B"), help="mutants killed in A, not in B"
    )
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    result = check(args.rev, [n for n in args.only.split(",") if n] or None, args.tests)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    md = table(result)
    if args.md:
        args.md.write_text(md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
