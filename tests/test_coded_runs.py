"""Integer-coded runs (issue 13): a run that carries codes over the snapshot's chunk table scores exactly like the
same run read from its Hit lists (per-query table, means, accounting, unjudged export), under both budgets and gains,
with repeated documents, empty and missing queries, judged ids the table does not have and unjudged results; the
codes stay consistent through truncation; the retrievers and the candidate cache hand runs over with codes that
describe their Hits."""

from __future__ import annotations

import random

import numpy as np
import pytest

import ablate.evaluation.placement as placement
import ablate.evaluation.retrieval as retrieval
from ablate.cache import Cache
from ablate.data.corpus import load_corpus
from ablate.data.types import Chunk, Hit, IdTable, Qrels, Query, Run, RunCodes
from ablate.evaluation import EvalSettings, evaluate
from ablate.evaluation.coded import judged_lookup, unit_lookup
from ablate.runner.candidates import CandidateSource, _from_json, _to_json
from ablate.runner.session import Session
from ablate.stages.retrievers.bm25 import BM25Index, BM25Retriever
from test_evaluation_vectorised import assert_same

DOCS = ["d1", "doc-0000000017", "政策-旅行-2026", "x", "p" * 30, "d10", "d01", "a", "é" * 3, ""]
SEP = "q\x1fsep"  # holds the separator the byte reader joins ids with: the lookups fall back to a dict


def table_of(docs: list[str], per_doc: int = 3) -> IdTable:
    chunks = [Chunk(f"{d}#{j}", d, "", version=str(j)) for d in docs for j in range(per_doc)]
    return IdTable.of(chunks)


def random_coded(
    rng: random.Random, table: IdTable, nq: int, docs: list[str]
) -> tuple[Run, dict[str, dict[str, int]], list[str]]:
    """A coded run (queries empty, missing, or with up to 25 distinct chunks of few documents, so documents repeat)
    and doc judgements (some for ids the table does not have, one holding the byte reader's separator, some queries
    unjudged); query set in another order."""
    qids = [f"q{i}" for i in range(nq)]
    codes, scores, present = [], [], []
    judgements: dict[str, dict[str, int]] = {}
    for q in qids:
        kind = rng.random()
        if kind >= 0.06:
            n = 0 if kind < 0.12 else rng.randint(1, 25)
            picked = rng.sample(range(len(table)), n)
            present.append(q)
            codes.append(picked)
            scores.append([float(100 - j) for j in range(n)])
        if rng.random() < 0.85:
            pool = docs + ["not-in-table", "zz" * 9, "d100", SEP]
            judgements[q] = {rng.choice(pool): rng.randint(-1, 3) for _ in range(rng.randint(0, 6))}
    run = Run.from_codes("coded", RunCodes.from_lists(table, present, codes, scores), {"tie_rule": "test"})
    declared = qids[:]
    rng.shuffle(declared)
    return run, judgements, declared


def plain(run: Run) -> Run:
    """The same run without codes: evaluation then reads the Hit lists."""
    return Run(run.name, run.results, dict(run.meta))


SETTINGS = [
    EvalSettings(ks=(1, 3, 5, 10), unit=unit, budget=budget, unjudged=unjudged, gain=gain, missing=missing)
    for unit in ("doc", "chunk")
    for budget in ("chunks", "docs")
    for unjudged in ("nonrelevant", "condensed")
    for gain, missing in (("exponential", "zero"), ("linear", "exclude"))
]


@pytest.mark.parametrize(
    "settings", SETTINGS, ids=lambda s: f"{s.unit}-{s.budget}-{s.unjudged}-{s.gain}-{s.missing}"
)
def test_coded_run_scores_exactly_like_its_hit_lists(settings, monkeypatch):
    monkeypatch.setattr(retrieval, "_BLOCK_QUERIES", 9)  # many blocks, a short last one
    table = table_of(DOCS)
    run, doc_judgements, qids = random_coded(random.Random(3), table, 80, DOCS)
    if settings.unit == "chunk":
        judgements = {
            q: {f"{u}#{len(u) % 3}" if u in DOCS else u: g for u, g in j.items()}
            for q, j in doc_judgements.items()
        }
        qrels = Qrels(judgements, unit="chunk")
    else:
        qrels = Qrels(doc_judgements, unit="doc")
    calls = {"coded": 0}
    real = placement.block_coded

    def counting(*args, **kwargs):
        out = real(*args, **kwargs)
        calls["coded"] += out is not None
        return out

    monkeypatch.setattr(placement, "block_coded", counting)
    coded = evaluate(run, qrels, qids, settings)
    assert calls["coded"] > 0  # the coded placement really scored blocks
    assert_same(coded, evaluate(plain(run), qrels, qids, settings))
    assert_same(coded, evaluate(run, qrels, qids, settings, vectorised=False))
    counts = coded.per_query["status"].value_counts()
    assert counts.get("missing_from_run", 0) > 0 and counts.get("empty_result", 0) > 0
    assert coded.accounting["unjudged_results"] > 0


def test_chunk_qrels_lifted_to_documents_score_the_same_coded():
    table = table_of(DOCS)
    run, doc_judgements, qids = random_coded(random.Random(8), table, 60, DOCS)
    c2d = dict(zip(table.chunk_ids, table.doc_ids, strict=True))
    chunk_j = {q: {f"{u}#1": g for u, g in j.items() if u in DOCS} for q, j in doc_judgements.items()}
    qrels = Qrels(chunk_j, unit="chunk")
    for budget in ("chunks", "docs"):
        s = EvalSettings(ks=(1, 5, 20), unit="doc", budget=budget)
        assert_same(
            evaluate(run, qrels, qids, s, chunk_to_doc=c2d),
            evaluate(plain(run), qrels, qids, s, chunk_to_doc=c2d),
        )


def test_query_set_in_the_runs_order_and_queries_outside_it():
    table = table_of(DOCS)
    run, judgements, _ = random_coded(random.Random(11), table, 40, DOCS)
    qrels = Qrels(judgements, unit="doc")
    s = EvalSettings(ks=(1, 3, 10), unit="doc")
    in_order = list(run.results)  # aligned with the codes: no reordering
    assert_same(evaluate(run, qrels, in_order, s), evaluate(plain(run), qrels, in_order, s))
    # Some of the run's queries outside the set, one declared query missing from the run.
    part = in_order[::3] + ["never-ran"]
    a, b = evaluate(run, qrels, part, s), evaluate(plain(run), qrels, part, s)
    assert_same(a, b)
    assert a.accounting["not_in_query_set"] > 0 and a.accounting["missing_from_run"] == 1


def test_codes_that_do_not_describe_the_hits_are_not_used(monkeypatch):
    """A run whose Hit lists were changed after it was built (against the rules) is scored from its Hit lists."""
    table = table_of(DOCS)
    run, judgements, qids = random_coded(random.Random(4), table, 30, DOCS)
    q = next(q for q, hits in run.results.items() if len(hits) > 2)
    broken = Run(run.name, {**run.results, q: run.results[q][:-1]}, dict(run.meta), run.codes)
    monkeypatch.setattr(placement, "block_coded", lambda *a, **k: pytest.fail("codes used"))
    s = EvalSettings(ks=(1, 5), unit="doc")
    assert_same(
        evaluate(broken, Qrels(judgements), qids, s), evaluate(plain(broken), Qrels(judgements), qids, s)
    )


@pytest.mark.parametrize("extra", [[], [SEP]], ids=["bytes", "dict"])
def test_unit_lookup_is_exact_including_ids_the_table_does_not_have(extra):
    table = table_of(DOCS + [f"n{i}" for i in range(500)] + extra, per_doc=2)
    units = table.unit_codes("doc")[1]
    expect = {u: i for i, u in enumerate(units)}
    for asked in (
        [*units[::-1], "missing", "d1 ", "D1", "n1000", "é" * 2, "p" * 31],
        [*units[:50], SEP, "d1"],
    ):
        assert unit_lookup(table, "doc", asked).tolist() == [expect.get(u, -1) for u in asked]
    chunks = table.unit_codes("chunk")[1]
    assert unit_lookup(table, "chunk", chunks).tolist() == list(range(len(chunks)))
    jdicts = [{u: 1 for u in units[:7]}, {}, {"missing": 0, units[-1]: 2}, {SEP: 1, "d1": 0}]
    for part in (jdicts[:3], jdicts):
        want = [expect.get(u, -1) for j in part for u in j]
        assert judged_lookup(table, "doc", part, sum(map(len, part))).tolist() == want
    assert judged_lookup(table, "doc", [{}, {}], 0).tolist() == []


def test_unit_codes_number_documents_in_order_of_first_appearance():
    table = IdTable(["a#0", "b#0", "a#1", "c#0"], ["a", "b", "a", "c"], [None] * 4)
    codes, ids = table.unit_codes("doc")
    assert codes.tolist() == [0, 1, 0, 2] and ids == ["a", "b", "c"]
    assert table.unit_codes("chunk")[0].tolist() == [0, 1, 2, 3]
    assert table.index == {"a#0": 0, "b#0": 1, "a#1": 2, "c#0": 3}


def codes_describe_hits(run: Run) -> None:
    assert run.codes is not None
    assert run.codes.qids == list(run.results)
    assert run.codes.results() == run.results
    t = run.codes.table
    for q, a, b in zip(run.codes.qids, run.codes.offsets[:-1], run.codes.offsets[1:], strict=True):
        hits = run.results[q]
        assert [t.chunk_ids[c] for c in run.codes.codes[a:b]] == [h.chunk_id for h in hits]
        assert run.codes.scores[a:b].tolist() == [h.score for h in hits]


def test_truncated_keeps_the_codes_consistent():
    table = table_of(DOCS)
    run, _, _ = random_coded(random.Random(2), table, 30, DOCS)
    for depth in (1, 4, 25, 100):
        short = run.truncated(depth)
        codes_describe_hits(short)
        assert all(len(h) <= depth for h in short.results.values())
    assert Run("plain", {"q": [Hit("a", "a", 1.0)]}).truncated(1).codes is None


def test_runcodes_refuse_inconsistent_arrays():
    table = table_of(["a"])
    with pytest.raises(ValueError):
        RunCodes(table, ["q"], np.array([0, 2]), np.array([0]), np.array([1.0]))
    with pytest.raises(ValueError):
        RunCodes(table, ["q"], np.array([0, 1]), np.array([len(table)]), np.array([1.0]))


CORPUS = [
    "the travel policy covers flights and hotels for staff",
    "hotels must be booked through the travel portal",
    "invoice INV-102 covers the hotel stay in Berlin",
    "expense claims need receipts and a manager approval",
    "the manager approves travel above the limit",
]


def test_bm25_returns_codes_equal_to_its_hits():
    from ablate.stages.text.tokenize import Tokenizer

    chunks = [Chunk(f"c{i}", f"D{i // 2}", t, version="1") for i, t in enumerate(CORPUS)]
    index = BM25Index(chunks, Tokenizer("en"))
    queries = [Query("q1", "travel hotels"), Query("q2", "nothing matches zzz"), Query("q1", "travel hotels")]
    run = index.search(queries, 3)
    codes_describe_hits(run)
    assert list(run.results) == ["q1", "q2"] and run.results["q2"] == []


def test_dense_returns_codes_equal_to_its_hits():
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from ablate.stages.retrievers.dense import DenseIndex
    from ablate.stages.text.encoders import SentenceTransformerEncoder

    chunks = [Chunk(f"c{i}", f"D{i // 2}", t, version="1") for i, t in enumerate(CORPUS)]
    index = DenseIndex(chunks, SentenceTransformerEncoder())
    run = index.search([Query("q1", "travel hotels"), Query("q2", "receipts")], 3)
    codes_describe_hits(run)
    mask = np.array([True, False, True, False, True])
    codes_describe_hits(index.search([Query("q1", "travel hotels")], 2, mask))


def test_candidate_cache_hands_over_coded_runs(tiny_corpus, tmp_path):
    snap = load_corpus(tiny_corpus)
    stage = BM25Retriever().bind(snap, "dev")
    queries = [snap.queries[q] for q in snap.split_qids("dev")]
    cache = Cache(tmp_path)
    cold = CandidateSource(snap, cache, Session()).candidates(stage, queries, 3, None, cache_depth=10)
    codes_describe_hits(cold)
    assert cold.codes is not None and cold.codes.table is snap.id_table
    warm = CandidateSource(snap, cache, Session()).candidates(stage, queries, 2, None, cache_depth=10)
    codes_describe_hits(warm)  # read back from the disk cache, as a prefix
    assert warm.results == cold.truncated(2).results
    stored = _from_json("bm25", _to_json(cold), snap)
    codes_describe_hits(stored)
    assert stored.results == cold.results
    s = EvalSettings(ks=(1, 3))
    qrels = snap.split_qrels("dev")
    qids = snap.split_qids("dev")
    assert_same(evaluate(cold, qrels, qids, s), evaluate(plain(cold), qrels, qids, s))


@pytest.mark.parametrize("budget", ["chunks", "docs"])
def test_fixed_depth_runs_score_the_same_on_every_path(budget):
    """Every query with the same number of distinct results (what a retriever at fixed depth returns): the
    shortcuts for equal-length lists give the reference placement's table."""
    rng = random.Random(6)
    docs = [f"doc{i}" for i in range(300)]
    table = table_of(docs, per_doc=1)
    qids = [f"q{i}" for i in range(40)]
    codes = [rng.sample(range(len(table)), 12) for _ in qids]
    run = Run.from_codes(
        "fixed", RunCodes.from_lists(table, qids, codes, [[float(-j) for j in range(12)]] * 40)
    )
    judgements = {q: {rng.choice(docs): rng.randint(0, 3) for _ in range(8)} for q in qids}
    qrels = Qrels(judgements, unit="doc")
    for ks in ((1, 5, 12), (3, 20)):
        s = EvalSettings(ks=ks, budget=budget)
        coded = evaluate(run, qrels, qids, s)
        assert_same(coded, evaluate(plain(run), qrels, qids, s))
        assert_same(coded, evaluate(run, qrels, qids, s, vectorised=False))


def test_a_table_that_repeats_a_chunk_id_still_scores_like_the_hit_lists():
    """Snapshots refuse repeated chunk ids; a table built by hand may have them. At unit chunk the two positions are
    one unit (as in the Hit lists), so the coded path agrees with the string path."""
    table = IdTable(["a", "b", "a", "c"], ["A", "B", "A2", "C"], [None] * 4)
    assert table.unit_codes("chunk")[0].tolist() == [0, 1, 0, 2]
    run = Run.from_codes("dup", RunCodes.from_lists(table, ["q"], [[2, 1, 0, 3]], [[4.0, 3.0, 2.0, 1.0]]))
    qrels = Qrels({"q": {"a": 2, "c": 1}}, unit="chunk")
    for budget in ("chunks", "docs"):
        s = EvalSettings(ks=(1, 2, 3), budget=budget)
        assert_same(evaluate(run, qrels, ["q"], s), evaluate(plain(run), qrels, ["q"], s))
