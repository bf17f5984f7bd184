"""Differential tests: ablate.evaluation against pytrec_eval (linear-gain nDCG, recall, RR), ranx (ndcg_burges,
2^rel - 1 gains) and a deliberately naive reference implementation of the declared rules (budgets, dedup,
condensed lists, judged statistics) on randomized rankings and graded qrels.

Scores are distinct so that no evaluator's tie rule is involved (pytrec_eval breaks ties by docid descending, ranx by
its own rule); our runs are in score-descending order, which is what the other evaluators sort them into.
"""

from __future__ import annotations

import math
import random
import warnings

import numpy as np
import pytest
import pytrec_eval
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ablate.data.types import Hit, Qrels, Run
from ablate.evaluation import EvalSettings, evaluate

KS = (1, 2, 3, 5, 10, 20)
TOL = 1e-9


# ----------------------------------------------------------------------------------------------------------------
# Generators


def random_case(rng: random.Random, nq: int, pool: int = 40, max_len: int = 25):
    """Rankings of distinct documents with distinct, descending scores and graded qrels (0-3) that include
    retrieved and unretrieved judged documents. Every query has at least one grade >= 1."""
    run: dict[str, list[Hit]] = {}
    judgements: dict[str, dict[str, int]] = {}
    for i in range(nq):
        q = f"q{i}"
        n = rng.randint(0, max_len)
        ids = rng.sample([f"d{j}" for j in range(pool)], n)
        scores = sorted(rng.sample(range(1, 10_000), n), reverse=True)
        run[q] = [Hit(d, d, s / 7.0) for d, s in zip(ids, scores, strict=True)]
        judged = rng.sample([f"d{j}" for j in range(pool)], rng.randint(1, min(15, pool)))
        j = {d: rng.randint(0, 3) for d in judged}
        j[judged[0]] = max(1, j[judged[0]])
        judgements[q] = j
    return run, judgements


@st.composite
def cases(draw):
    """Hypothesis: up to 6 queries, rankings of distinct docs, graded qrels with at least one relevant."""
    nq = draw(st.integers(1, 6))
    pool = [f"d{j}" for j in range(12)]
    run: dict[str, list[Hit]] = {}
    judgements: dict[str, dict[str, int]] = {}
    for i in range(nq):
        ids = draw(st.lists(st.sampled_from(pool), unique=True, max_size=12))
        scores = sorted(
            draw(st.lists(st.integers(1, 10**6), unique=True, min_size=len(ids), max_size=len(ids))),
            reverse=True,
        )
        run[f"q{i}"] = [Hit(d, d, float(s)) for d, s in zip(ids, scores, strict=True)]
        j = draw(st.dictionaries(st.sampled_from(pool), st.integers(0, 3), min_size=1, max_size=10))
        first = next(iter(j))
        j[first] = max(1, j[first])
        judgements[f"q{i}"] = j
    return run, judgements


def to_trec(run: dict[str, list[Hit]], k: int | None = None) -> dict[str, dict[str, float]]:
    return {q: {h.doc_id: h.score for h in (hits[:k] if k else hits)} for q, hits in run.items()}


def compare_with_pytrec_eval(run, judgements):
    qids = list(run)
    ours = evaluate(
        Run("r", run), Qrels(judgements, unit="doc"), qids, EvalSettings(ks=KS, gain="linear")
    ).per_query
    kstr = ",".join(map(str, KS))
    ref = pytrec_eval.RelevanceEvaluator(judgements, {f"ndcg_cut.{kstr}", f"recall.{kstr}"}).evaluate(
        to_trec(run)
    )
    for q in qids:
        for k in KS:
            # pytrec_eval omits queries with an empty ranking: their values are 0
            assert ours.loc[q, f"ndcg@{k}"] == pytest.approx(
                ref.get(q, {}).get(f"ndcg_cut_{k}", 0.0), abs=TOL
            )
            assert ours.loc[q, f"recall@{k}"] == pytest.approx(
                ref.get(q, {}).get(f"recall_{k}", 0.0), abs=TOL
            )
    rr_eval = pytrec_eval.RelevanceEvaluator(judgements, {"recip_rank"})
    for k in KS:  # trec_eval's recip_rank has no cutoff: truncate the run to K first
        ref_k = rr_eval.evaluate(to_trec(run, k))
        for q in qids:
            assert ours.loc[q, f"rr@{k}"] == pytest.approx(ref_k.get(q, {}).get("recip_rank", 0.0), abs=TOL)


def ranx_ndcg_burges(run, judgements, ks):
    from ranx import Qrels as RQrels
    from ranx import Run as RRun
    from ranx import evaluate as revaluate

    nonempty = {q: {h.doc_id: h.score for h in hits} for q, hits in run.items() if hits}
    if not nonempty:  # ranx cannot hold an all-empty run
        return {k: {} for k in ks}
    rrun = RRun(nonempty)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        revaluate(
            RQrels({q: judgements[q] for q in nonempty}),
            rrun,
            [f"ndcg_burges@{k}" for k in ks],
            return_mean=False,
        )
    return {k: {q: float(v) for q, v in rrun.scores[f"ndcg_burges@{k}"].items()} for k in ks}


def compare_with_ranx(run, judgements):
    qids = list(run)
    ours = evaluate(Run("r", run), Qrels(judgements, unit="doc"), qids, EvalSettings(ks=KS)).per_query
    ref = ranx_ndcg_burges(run, judgements, KS)
    for q in qids:
        for k in KS:
            expected = ref[k].get(q, 0.0)  # empty ranking: 0
            assert ours.loc[q, f"ndcg@{k}"] == pytest.approx(expected, abs=TOL), (q, k)


# ----------------------------------------------------------------------------------------------------------------
# pytrec_eval and ranx


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_pytrec_eval_seeded(seed):
    run, judgements = random_case(random.Random(seed), nq=150)
    compare_with_pytrec_eval(run, judgements)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_matches_pytrec_eval_hypothesis(case):
    compare_with_pytrec_eval(*case)


@pytest.mark.parametrize("seed", [0, 1])
def test_matches_ranx_ndcg_burges_seeded(seed):
    # ranx is checked on seeded cases in bulk (each ranx call builds numba structures, too slow per example)
    run, judgements = random_case(random.Random(100 + seed), nq=300)
    compare_with_ranx(run, judgements)


def test_matches_ranx_ndcg_burges_edge_shapes():
    # one call over short, single-result and empty rankings, all grades and unretrieved judged documents
    run, judgements = random_case(random.Random(5), nq=200, pool=8, max_len=4)
    compare_with_ranx(run, judgements)


def test_pytrec_eval_relevance_level_2_for_recall_and_rr():
    run, judgements = random_case(random.Random(7), nq=150)
    qids = list(run)
    ours = evaluate(Run("r", run), Qrels(judgements), qids, EvalSettings(ks=KS, relevance_level=2)).per_query
    ref = pytrec_eval.RelevanceEvaluator(judgements, {"recall.20"}, relevance_level=2).evaluate(to_trec(run))
    rr = pytrec_eval.RelevanceEvaluator(judgements, {"recip_rank"}, relevance_level=2).evaluate(
        to_trec(run, 20)
    )
    checked = 0
    for q in qids:
        if (
            ours.loc[q, "category"] != "answerable"
        ):  # no grade >= 2: idcg_zero, scored apart (pytrec_eval gives 0)
            assert not any(g >= 2 for g in judgements[q].values())
            continue
        checked += 1
        assert ours.loc[q, "recall@20"] == pytest.approx(ref.get(q, {}).get("recall_20", 0.0), abs=TOL)
        assert ours.loc[q, "rr@20"] == pytest.approx(rr.get(q, {}).get("recip_rank", 0.0), abs=TOL)
    assert checked > 50


def test_pytrec_eval_negative_grades_give_no_gain():
    run = {"q": [Hit("a", "a", 3.0), Hit("n", "n", 2.0), Hit("b", "b", 1.0)]}
    judgements = {"q": {"a": 1, "b": 2, "c": 0, "n": -1}}
    ours = evaluate(Run("r", run), Qrels(judgements), ["q"], EvalSettings(ks=(3,), gain="linear")).per_query
    ref = pytrec_eval.RelevanceEvaluator(judgements, {"ndcg_cut.3"}).evaluate(to_trec(run))
    assert ours.loc["q", "ndcg@3"] == pytest.approx(ref["q"]["ndcg_cut_3"], abs=TOL)
    assert ours.loc["q", "unjudged@3"] == 0  # -1 is a judgement


# ----------------------------------------------------------------------------------------------------------------
# The naive reference implementation of the declared rules


def dedup(ids):
    return list(dict.fromkeys(ids))


def reference(hits, judged, k, budget, unjudged, level, gain):
    """Straight from the rules in ablate.evaluation.rules, one query, one K, unit doc."""
    full = [h.doc_id for h in hits]
    ids = [u for u in full if u in judged] if unjudged == "condensed" else full

    def top(lst):
        return dedup(lst[:k]) if budget == "chunks" else dedup(lst)[:k]

    t = top(ids)
    rel = {u for u, g in judged.items() if g >= level}

    def gain_of(g):
        if g < level:
            return 0.0
        return 2.0**g - 1 if gain == "exponential" else float(g)

    out = {}
    found = len(set(t) & rel)
    if rel:
        out["hit"] = float(found > 0)
        out["recall"] = found / len(rel)
        out["rr"] = next((1.0 / (i + 1) for i, u in enumerate(t) if u in rel), 0.0)
        dcg = sum(gain_of(judged.get(u, 0)) / math.log2(i + 2) for i, u in enumerate(t))
        ideal = sorted((g for g in judged.values() if g >= level), reverse=True)[:k]
        out["ndcg"] = dcg / sum(gain_of(g) / math.log2(i + 2) for i, g in enumerate(ideal))
        out["complete"] = float(rel <= set(t))
    else:
        for m in ("hit", "recall", "rr", "ndcg", "complete"):
            out[m] = float("nan")
    t0 = top(full)
    unj = sum(u not in judged for u in t0)
    out["unjudged"] = float(unj)
    out["judged"] = 1.0 - unj / len(t0) if t0 else 1.0
    return out


@st.composite
def chunk_cases(draw):
    """Chunk-level rankings with several chunks per document (duplicates at unit doc), possibly unjudged or
    unlabelled queries, possibly empty rankings."""
    nq = draw(st.integers(1, 6))
    docs_pool = list("ABCDEFGH")
    run, judgements = {}, {}
    for i in range(nq):
        picks = draw(st.lists(st.tuples(st.sampled_from(docs_pool), st.integers(0, 3)), max_size=14))
        chunk_ids = dedup([f"{d}#{c}" for d, c in picks])
        run[f"q{i}"] = [Hit(c, c.split("#")[0], float(100 - n)) for n, c in enumerate(chunk_ids)]
        judgements[f"q{i}"] = draw(
            st.dictionaries(st.sampled_from(docs_pool), st.integers(-1, 3), max_size=6)
        )
    return run, judgements


def check_against_reference(run, judgements, budget, unjudged, level, gain, ks=(1, 2, 3, 5, 8)):
    qids = list(run)
    res = evaluate(
        Run("r", run),
        Qrels(judgements, unit="doc"),
        qids,
        EvalSettings(ks=ks, budget=budget, unjudged=unjudged, relevance_level=level, gain=gain),
    )
    pq = res.per_query
    for q in qids:
        for k in ks:
            exp = reference(run[q], judgements.get(q, {}), k, budget, unjudged, level, gain)
            for m, v in exp.items():
                got = pq.loc[q, f"{m}@{k}"]
                if math.isnan(v):
                    assert math.isnan(got), (q, k, m)
                else:
                    assert got == pytest.approx(v, abs=TOL), (q, k, m, budget, unjudged)
    return res


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    chunk_cases(),
    st.sampled_from(["chunks", "docs"]),
    st.sampled_from(["nonrelevant", "condensed"]),
    st.sampled_from([1, 2]),
    st.sampled_from(["exponential", "linear"]),
)
def test_matches_reference_rules(case, budget, unjudged, level, gain):
    check_against_reference(*case, budget, unjudged, level, gain)


def test_matches_reference_rules_seeded_bulk():
    rng = random.Random(11)
    run, judgements = {}, {}
    for i in range(300):
        n = rng.randint(0, 40)
        chunk_ids = dedup([f"D{rng.randint(0, 25)}#{rng.randint(0, 4)}" for _ in range(n)])
        run[f"q{i}"] = [Hit(c, c.split("#")[0], float(1000 - j)) for j, c in enumerate(chunk_ids)]
        judgements[f"q{i}"] = {f"D{rng.randint(0, 25)}": rng.randint(0, 3) for _ in range(rng.randint(0, 8))}
    for budget in ("chunks", "docs"):
        for unjudged in ("nonrelevant", "condensed"):
            res = check_against_reference(
                run, judgements, budget, unjudged, 1, "exponential", ks=(1, 3, 10, 20, 30)
            )
            # unjudged export: exactly the unjudged units inside max K, ranked in the deduplicated list
            exported = res.unjudged.groupby("qid").size().reindex(list(run), fill_value=0)
            assert np.array_equal(exported.to_numpy(), res.per_query["unjudged@30"].to_numpy())
