"""Multi-condition questions (seed 003): sub-question coverage under the run's unit, budget and dedup rules, the
loader's validation of ``subquestions`` / ``answer_parts``, and answer-part scoring. Every expected value is worked
out by hand in the comments."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from ablate import record as R
from ablate.cache import Cache
from ablate.data.corpus import load_corpus
from ablate.data.types import Hit, Qrels, Query, Run, SubQuestion
from ablate.errors import ConfigError, InputError
from ablate.evaluation import EvalSettings, evaluate
from ablate.evaluation.answer_scores import AnswerCosts, answer_metrics, answer_slices
from ablate.evaluation.generation import answer_contains, score_parts
from ablate.evaluation.scoring import ScoringContext, score_run
from ablate.evaluation.slices import slice_means
from ablate.evaluation.subquestions import RULE, add_subquestion_coverage, subquestion_coverage
from ablate.runner.answers import answer_questions
from ablate.runner.emit import headline_cis
from ablate.runner.session import Session
from conftest import TINY_DOCS, TINY_MANIFEST, TINY_QRELS, TINY_QUERIES, write_corpus

NAN = float("nan")


def docs(*ids: str) -> list[Hit]:
    """One chunk per document (chunk id == doc id), scores descending."""
    return [Hit(d, d, float(len(ids) - i)) for i, d in enumerate(ids)]


def chunks(*ids: str) -> list[Hit]:
    """Chunk hits ``DOC#n`` of document ``DOC``."""
    return [Hit(c, c.split("#")[0], float(len(ids) - i)) for i, c in enumerate(ids)]


def sq(sid: str, *evidence: str) -> SubQuestion:
    return SubQuestion(sid, f"part {sid}", tuple(evidence))


def row(df: pd.DataFrame, qid: str, metric: str, ks) -> list[float]:
    return [float(df.loc[qid, f"{metric}@{k}"]) for k in ks]


def test_a_sub_question_covered_twice_counts_once():
    # s1 is answered by A or B, s2 only by C; the run returns A, B, X.
    # @1: {A} covers s1 -> 1/2.  @3: {A, B, X}: s1 covered (by A and by B: still ONE sub-question), s2 not -> 1/2.
    # (Counting covering units instead would give 2/2 at @3.)
    run = Run("r", {"q": docs("A", "B", "X")})
    subq = {"q": [sq("s1", "A", "B"), sq("s2", "C")]}
    df = subquestion_coverage(run, subq, ["q"], EvalSettings(ks=(1, 3)), "doc", "doc")
    assert row(df, "q", "subq_coverage", (1, 3)) == [0.5, 0.5]
    assert row(df, "q", "subq_all", (1, 3)) == [0.0, 0.0]
    assert df.loc["q", "n_subq"] == 2


def test_all_sub_questions_covered_by_one_document():
    # Doc labels: D answers s1, s2 and (with E) s3; the run's first result is D -> 3/3 at @1, all covered.
    run = Run("r", {"q": docs("D", "Y")})
    subq = {"q": [sq("s1", "D"), sq("s2", "D"), sq("s3", "D", "E")]}
    df = subquestion_coverage(run, subq, ["q"], EvalSettings(ks=(1, 2)), "doc", "doc")
    assert row(df, "q", "subq_coverage", (1, 2)) == [1.0, 1.0]
    assert row(df, "q", "subq_all", (1, 2)) == [1.0, 1.0]


def test_chunk_evidence_is_lifted_to_its_document_at_unit_doc():
    # Chunk labels: s1 needs D#1, s2 needs D#2; the run returns D#3 then Y#1.
    # At unit doc both lift to D, which is rank 1 -> 2/2 at @1. At unit chunk neither D#1 nor D#2 is retrieved -> 0.
    run = Run("r", {"q": chunks("D#3", "Y#1")})
    subq = {"q": [sq("s1", "D#1"), sq("s2", "D#2")]}
    c2d = {"D#1": "D", "D#2": "D", "D#3": "D", "Y#1": "Y"}
    s = EvalSettings(ks=(1, 2))
    at_doc = subquestion_coverage(run, subq, ["q"], s, "doc", "chunk", c2d)
    assert row(at_doc, "q", "subq_coverage", (1, 2)) == [1.0, 1.0]
    assert row(at_doc, "q", "subq_all", (1, 2)) == [1.0, 1.0]
    at_chunk = subquestion_coverage(run, subq, ["q"], s, "chunk", "chunk", c2d)
    assert row(at_chunk, "q", "subq_coverage", (1, 2)) == [0.0, 0.0]


def test_lifting_errors_are_clear():
    run = Run("r", {"q": chunks("D#1")})
    subq = {"q": [sq("s1", "D")]}
    with pytest.raises(ConfigError, match="cannot be mapped down"):
        subquestion_coverage(run, subq, ["q"], EvalSettings(ks=(1,)), "chunk", "doc")
    with pytest.raises(ConfigError, match="chunk_to_doc"):
        subquestion_coverage(run, {"q": [sq("s1", "D#1")]}, ["q"], EvalSettings(ks=(1,)), "doc", "chunk")
    with pytest.raises(InputError, match="'D#9' is not a chunk"):
        subquestion_coverage(
            run, {"q": [sq("s1", "D#9")]}, ["q"], EvalSettings(ks=(1,)), "doc", "chunk", {"D#1": "D"}
        )


def test_chunks_and_docs_budgets_differ_at_small_k():
    # Seed 003's list: chunks A1, A2, A3, B1, C1; the three sub-questions need A, B and C (one each).
    # budget=chunks (first K chunks, then dedup): @1 {A} 1/3; @3 {A} 1/3; @5 {A, B, C} 3/3.
    # budget=docs (dedup, then first K documents): @1 {A} 1/3; @3 {A, B, C} 3/3 (reads 5 chunks); @5 3/3.
    run = Run("r", {"q": chunks("A#1", "A#2", "A#3", "B#1", "C#1")})
    subq = {"q": [sq("s1", "A"), sq("s2", "B"), sq("s3", "C")]}
    ks = (1, 3, 5)
    by_chunks = subquestion_coverage(run, subq, ["q"], EvalSettings(ks=ks, budget="chunks"), "doc", "doc")
    by_docs = subquestion_coverage(run, subq, ["q"], EvalSettings(ks=ks, budget="docs"), "doc", "doc")
    assert row(by_chunks, "q", "subq_coverage", ks) == pytest.approx([1 / 3, 1 / 3, 1.0])
    assert row(by_chunks, "q", "subq_all", ks) == [0.0, 0.0, 1.0]
    assert row(by_docs, "q", "subq_coverage", ks) == pytest.approx([1 / 3, 1.0, 1.0])
    assert row(by_docs, "q", "subq_all", ks) == [0.0, 1.0, 1.0]


def test_k_beyond_the_list_and_missing_or_empty_rankings():
    # Run E, F (2 results) with K up to 10: s1 (F) covered from @2 on, s2 (Z) never -> @1 0, @2 1/2, @10 1/2.
    # q_missing is not in the run: eval.missing=zero reads it as an empty list (0), exclude gives NaN.
    # q_empty returned nothing: 0 under either rule.
    run = Run("r", {"q": docs("E", "F"), "q_empty": []})
    subq = {"q": [sq("s1", "F"), sq("s2", "Z")], "q_missing": [sq("s1", "F")], "q_empty": [sq("s1", "F")]}
    ks = (1, 2, 10)
    qids = ["q", "q_missing", "q_empty"]
    zero = subquestion_coverage(run, subq, qids, EvalSettings(ks=ks), "doc", "doc")
    assert row(zero, "q", "subq_coverage", ks) == [0.0, 0.5, 0.5]
    assert row(zero, "q", "subq_all", ks) == [0.0, 0.0, 0.0]
    assert row(zero, "q_missing", "subq_coverage", ks) == [0.0, 0.0, 0.0]
    assert row(zero, "q_empty", "subq_coverage", ks) == [0.0, 0.0, 0.0]
    excl = subquestion_coverage(run, subq, qids, EvalSettings(ks=ks, missing="exclude"), "doc", "doc")
    assert all(math.isnan(v) for v in row(excl, "q_missing", "subq_coverage", ks))
    assert excl.loc["q_missing", "n_subq"] == 1
    assert row(excl, "q_empty", "subq_coverage", ks) == [0.0, 0.0, 0.0]


def test_coverage_reads_the_full_ranking_under_condensed():
    # Qrels judge only B; the run is X, Y, B; s1 needs X (unjudged by the qrels), s2 needs B.
    # unjudged=condensed scores hit@1 on the condensed list [B] -> 1; coverage stays on the full list X, Y, B:
    # @1 {X} 1/2, @3 {X, Y, B} 2/2 (a condensed list would drop X and give 1/2 at @3: the rule forbids that).
    run = Run("r", {"q": docs("X", "Y", "B")})
    qrels = Qrels({"q": {"B": 1}}, unit="doc")
    ks = (1, 3)
    for mode in ("nonrelevant", "condensed"):
        s = EvalSettings(ks=ks, unjudged=mode)  # type: ignore[arg-type]
        res = evaluate(run, qrels, ["q"], s)
        add_subquestion_coverage(
            res, run, {"q": query("q", [sq("s1", "X"), sq("s2", "B")])}, ["q"], None, "doc"
        )
        assert row(res.per_query, "q", "subq_coverage", ks) == [0.5, 1.0]
        assert res.means["subq_all@3"] == 1.0
    assert res.per_query.loc["q", "hit@1"] == 1.0  # condensed: B is first among the judged


def query(qid: str, subs=(), tags=(), parts=()) -> Query:
    return Query(
        qid,
        f"question {qid}",
        tags=tuple(tags),
        subquestions=tuple(subs),
        answer_parts=tuple((p,) if isinstance(p, str) else tuple(p) for p in parts),
    )


def _scored_result():
    """Four questions at doc unit, ks 1 and 10:
    qa: answerable, sub-questions s1 (A) and s2 (C); run A, B, C -> @1 1/2, @10 2/2.
    qb: answerable, sub-questions s1 (D), s2 (E), s3 (F); run D, X -> @1 1/3, @10 1/3.
    qc: answerable, no sub-questions (counted apart, NaN).
    qn: no qrels (no-answer) but sub-questions s1 (A); run A -> its own row says 1, never averaged.
    Means over qa, qb: coverage@1 (1/2 + 1/3)/2 = 5/12, coverage@10 (1 + 1/3)/2 = 2/3, all@1 0, all@10 1/2."""
    run = Run("r", {"qa": docs("A", "B", "C"), "qb": docs("D", "X"), "qc": docs("A"), "qn": docs("A")})
    qrels = Qrels({"qa": {"A": 1}, "qb": {"D": 2}, "qc": {"A": 1}}, unit="doc")
    queries = {
        "qa": query("qa", [sq("s1", "A"), sq("s2", "C")], tags=["multi-hop"]),
        "qb": query("qb", [sq("s1", "D"), sq("s2", "E"), sq("s3", "F")], tags=["multi-hop", "table"]),
        "qc": query("qc", tags=["table"]),
        "qn": query("qn", [sq("s1", "A")], tags=["no-answer"]),
    }
    qids = ["qa", "qb", "qc", "qn"]
    res = evaluate(run, qrels, qids, EvalSettings(ks=(1, 10)))
    add_subquestion_coverage(res, run, queries, qids, None, "doc")
    return res, queries


def test_add_coverage_means_accounting_and_rule():
    res, _ = _scored_result()
    pq = res.per_query
    assert res.means["subq_coverage@1"] == pytest.approx(5 / 12)
    assert res.means["subq_coverage@10"] == pytest.approx(2 / 3)
    assert res.means["subq_all@1"] == 0.0 and res.means["subq_all@10"] == 0.5
    assert math.isnan(pq.loc["qc", "subq_coverage@10"]) and pq.loc["qc", "n_subq"] == 0
    assert pq.loc["qn", "subq_coverage@1"] == 1.0 and pq.loc["qn", "category"] == "no_answer"
    acc = res.accounting
    assert acc["with_subquestions"] == 3 and acc["without_subquestions"] == 1
    assert acc["subquestions"] == 6 and acc["subquestions_scored"] == 2
    assert acc["subquestions_not_answerable"] == 1
    assert acc["rules"]["subquestions"] == RULE.format(budget="budget=chunks, first K results then dedup")
    # the retrieval means are untouched: qa, qb, qc are hits at @1 -> hit@1 = 1
    assert res.means["hit@1"] == 1.0 and "subq_coverage@1" not in res.accounting


def test_no_sub_questions_adds_nothing():
    run = Run("r", {"q": docs("A")})
    res = evaluate(run, Qrels({"q": {"A": 1}}, unit="doc"), ["q"], EvalSettings(ks=(1,)))
    cols, means = list(res.per_query.columns), dict(res.means)
    add_subquestion_coverage(res, run, {"q": query("q")}, ["q"], None, "doc")
    assert (
        list(res.per_query.columns) == cols
        and res.means == means
        and "with_subquestions" not in res.accounting
    )


def test_intervals_slices_and_logged_names():
    res, queries = _scored_result()
    cis = headline_cis(res, bootstrap=200, seed=0)
    for key in ("subq_coverage@1", "subq_coverage@10", "subq_all@10"):
        mean, lo, hi = cis[key]
        assert (
            mean == pytest.approx(res.means[key]) and lo <= mean <= hi
        )  # NaN rows (qc) omitted, qn not answerable
    assert R.metric_key("subq_coverage@10") == "subq_coverage_at_10"
    assert R.metric_key(R.slice_metric("multi-hop", "subq_all@10")) == "slice_multi-hop/subq_all_at_10"
    sl = slice_means(res, queries)
    # multi-hop = qa, qb -> the run's means; table = qb (1/3) and qc (no sub-questions, left out) -> 1/3
    assert sl["multi-hop"]["subq_coverage@10"] == pytest.approx(2 / 3)
    assert sl["table"]["subq_coverage@10"] == pytest.approx(1 / 3) and sl["table"]["n_with_subquestions"] == 1
    assert math.isnan(sl["no-answer"]["subq_coverage@10"])  # qn is not answerable


# ----------------------------------------------------------------------------------------------------------------
# the loader

SUBQ_QUERY = {
    "_id": "q2",
    "text": "taxi fare over the limit, what now",
    "split": "dev",
    "subquestions": [
        {"id": "s1", "text": "what is the limit", "evidence": ["POL-1#4.2-a"]},
        {"id": "s2", "text": "who approves the excess", "evidence": ["POL-1#4.2-b", "POL-1#4.2-b"]},
    ],
    "answer_parts": ["80 yuan", "supervisor"],
}


def _corpus_with(tmp_path, q2: dict, manifest: str = TINY_MANIFEST, qrels=TINY_QRELS):
    queries = [q2 if q["_id"] == "q2" else q for q in TINY_QUERIES]
    return write_corpus(tmp_path / "c", TINY_DOCS, queries, qrels, manifest)


def test_loader_reads_sub_questions_and_answer_parts(tmp_path):
    snap = load_corpus(_corpus_with(tmp_path, SUBQ_QUERY))
    q = snap.queries["q2"]
    assert q.subquestions == (
        SubQuestion("s1", "what is the limit", ("POL-1#4.2-a",)),
        SubQuestion("s2", "who approves the excess", ("POL-1#4.2-b",)),  # a repeated id is kept once
    )
    assert q.answer_parts == (("80 yuan",), ("supervisor",))
    assert snap.queries["q1"].subquestions == () and snap.queries["q1"].answer_parts == ()


@pytest.mark.parametrize(
    "change, needle",
    [
        ({"subquestions": {"id": "s1"}}, "'subquestions' is not a list"),
        ({"subquestions": ["s1"]}, "a sub-question is not an object"),
        ({"subquestions": [{"text": "x", "evidence": ["POL-1#4.2-a"]}]}, "missing or empty 'id'"),
        ({"subquestions": [{"id": "s1", "text": "x"}]}, "no 'evidence'"),
        ({"subquestions": [{"id": "s1", "evidence": []}]}, "empty 'evidence'"),
        (
            {
                "subquestions": [
                    {"id": "s1", "evidence": ["POL-1#4.2-a"]},
                    {"id": "s1", "evidence": ["FIN-1#p0"]},
                ]
            },
            "duplicate sub-question id 's1'",
        ),
        ({"answer_parts": ["80 yuan"]}, "1 answer_parts for 2 subquestions"),
        ({"answer_parts": "80 yuan"}, "'answer_parts' must be a list of parts"),
        ({"answer_parts": ["80 yuan", []]}, "'answer_parts' must be a list of parts"),
    ],
)
def test_loader_refuses_malformed_sub_questions_naming_the_line(tmp_path, change, needle):
    bad = {**SUBQ_QUERY, **change}
    if "subquestions" in change and "answer_parts" not in change:
        bad.pop("answer_parts")
    with pytest.raises(InputError) as e:
        load_corpus(_corpus_with(tmp_path, bad))
    msg = str(e.value)
    assert "queries.jsonl:2" in msg and needle in msg and "fix" in msg.lower()


def test_loader_refuses_evidence_that_is_not_a_unit_of_the_labels(tmp_path):
    bad = {**SUBQ_QUERY, "subquestions": [{"id": "s1", "evidence": ["POL-1"]}], "answer_parts": ["80 yuan"]}
    with pytest.raises(InputError) as e:  # qrels_unit chunk: a document id is not a chunk id
        load_corpus(_corpus_with(tmp_path, bad))
    msg = str(e.value)
    assert "queries.jsonl:2" in msg and "'POL-1'" in msg and "not a chunk id" in msg
    doc_manifest = TINY_MANIFEST.replace("qrels_unit: chunk", "qrels_unit: doc")
    doc_qrels = {"dev": [("q1", "INV-102", 2), ("q2", "POL-1", 2)]}
    snap = load_corpus(
        _corpus_with(tmp_path / "d", bad, doc_manifest, doc_qrels)
    )  # doc ids at unit doc: fine
    assert snap.queries["q2"].subquestions[0].evidence == ("POL-1",)


def test_corpus_coverage_end_to_end(tmp_path):
    # Tiny corpus (chunk labels), q2's parts need 4.2-a and 4.2-b. Run: 4.2-b, INV-102 -> at unit chunk @1 1/2;
    # at unit doc both lift to POL-1 -> 1.
    snap = load_corpus(_corpus_with(tmp_path, SUBQ_QUERY))
    run = Run("r", {"q2": chunks("POL-1#4.2-b", "INV-102#p0")})
    for unit, want in (("chunk", 0.5), ("doc", 1.0)):
        s = EvalSettings(ks=(1,), unit=unit)  # type: ignore[arg-type]
        res = evaluate(run, snap.split_qrels("dev"), ["q2"], s, chunk_to_doc=snap.chunk_to_doc)
        add_subquestion_coverage(res, run, snap.queries, ["q2"], snap.chunk_to_doc, snap.qrels_unit)
        assert res.means["subq_coverage@1"] == want


# ----------------------------------------------------------------------------------------------------------------
# answer parts


def test_answer_parts_use_the_correct_rule():
    parts = ["1,500 yuan", "department head and HR"]
    # both parts, the number written differently (1500 元) -> 2/2
    assert score_parts(
        "Answer: The cap is 1500 元 a night; the department head and HR approve it [1].", parts
    ) == (
        1.0,
        1.0,
    )
    # only the cap -> 1/2, not all
    assert score_parts("Answer: The cap is ¥1,500 per night.", parts) == (0.5, 0.0)
    # a wrong number does not match (1,400 is not 1,500) -> 1/2 by the approver part
    assert score_parts("Answer: 1,400 yuan; department head and HR.", parts) == (0.5, 0.0)
    assert score_parts("I don't know.", parts) == (0.0, 0.0)  # a refusal covers nothing
    assert all(math.isnan(v) for v in score_parts("anything", []))
    # RGB's format: each part a list of aliases, any one of which covers it; parts need no sub-questions
    rgb = [["东盟"], ["中国", "中华人民共和国"], ["日本"]]
    assert score_parts("答案：成员包括东盟、中华人民共和国和日本。", rgb) == (1.0, 1.0)
    assert score_parts("答案：成员包括东盟和日本。", rgb) == (2 / 3, 0.0)
    assert answer_contains("Within 30 days", "30 calendar days") and not answer_contains("x", " ")


class FakeGenerator:
    """Hand-written answers per question (no model): just enough of the Generator protocol for answer_questions."""

    name = "fake"
    context_k = 2
    repeats = 1
    template = SimpleNamespace(render=lambda question, texts: question, text="{question}")

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.stats: dict[str, float] = {}

    def fingerprint(self):
        return SimpleNamespace(key="fake")

    def prepare(self, context) -> None:
        pass

    def generate(self, prompts, cache, show_progress=False):
        by_text = {f"question {q}": a for q, a in self.answers.items()}
        return [
            [SimpleNamespace(text=by_text.get(p, p), latency_s=0.1, tokens_in=1, tokens_out=1, cached=False)]
            for p in prompts
        ]

    def cost(self, tokens_in, tokens_out):
        return None


def test_answer_parts_in_answer_questions_metrics_and_slices(tmp_path):
    # dev questions q1..q4 of the tiny corpus; q1 and q2 get answer_parts (q1: "1,250 yuan", "Acme"; q2: "80 yuan",
    # "supervisor"). Answers: q1 has both parts (1/1 all), q2 only the limit (1/2, not all).
    # Means over the answerable questions with parts: covered (1 + 0.5)/2 = 0.75, all (1 + 0)/2 = 0.5.
    q1 = {
        **TINY_QUERIES[0],
        "answers": ["1,250 yuan"],
        "answer_parts": ["1,250 yuan", "Acme"],
        "subquestions": [
            {"id": "amount", "evidence": ["INV-102#p0"]},
            {"id": "vendor", "evidence": ["INV-102#p0"]},
        ],
    }
    q2 = {**SUBQ_QUERY, "answers": ["80 yuan"], "tags": ["paraphrase"]}
    queries = [{**q, "text": f"question {q['_id']}"} for q in (q1, q2, *TINY_QUERIES[2:])]
    snap = load_corpus(write_corpus(tmp_path / "c", TINY_DOCS, queries, TINY_QRELS, TINY_MANIFEST))
    run = Run("r", {q: chunks("INV-102#p0", "POL-1#4.2-a") for q in ("q1", "q2", "q3", "q4")})
    qrels = snap.split_qrels("dev")
    res = evaluate(
        run, qrels, snap.split_qids("dev"), EvalSettings(ks=(1, 2)), chunk_to_doc=snap.chunk_to_doc
    )
    gen = FakeGenerator(
        {
            "q1": "Answer: INV-102 is 1,250 yuan from Acme Ltd [1].",
            "q2": "Answer: Up to 80 yuan per trip [2].",
            "q3": "NO_ANSWER",
        }
    )
    answered = answer_questions(snap, "dev", gen, run, Cache(tmp_path / "cache"), Session())
    context = ScoringContext(
        snap.chunk_to_doc, snap.qrels_unit, snap.queries, snap.chunk_text, answers=answered
    )
    answers = score_run(run, qrels, snap.split_qids("dev"), EvalSettings(ks=(1, 2)), context).answers
    assert answers is not None
    assert answers.loc["q1", "parts_covered"] == 1.0 and answers.loc["q1", "parts_all"] == 1.0
    assert answers.loc["q2", "parts_covered"] == 0.5 and answers.loc["q2", "parts_all"] == 0.0
    assert np.isnan(answers.loc["q3", "parts_covered"]) and np.isnan(answers.loc["q4", "parts_all"])
    m = answer_metrics(answers, AnswerCosts(), bootstrap=200, seed=0)
    assert (
        m["answer_parts_covered"] == 0.75
        and m["answer_parts_all"] == 0.5
        and m["answer_parts_questions"] == 2
    )
    assert m["answer_parts_covered_ci_low"] <= 0.75 <= m["answer_parts_covered_ci_high"]
    sl = answer_slices(answers, {"exact-id": ["q1"], "paraphrase": ["q2"], "no-answer": ["q3"]})
    assert sl["exact-id"]["answer_parts_covered"] == 1.0 and sl["paraphrase"]["answer_parts_all"] == 0.0
    assert math.isnan(sl["no-answer"]["answer_parts_covered"])
    # the retrieval side of the same questions: q1's two parts share INV-102#p0 (rank 1) -> 1 at @1;
    # q2's parts need 4.2-a (rank 2) and 4.2-b (absent) -> 0 at @1, 1/2 at @2. Means over q1, q2.
    add_subquestion_coverage(
        res, run, snap.queries, snap.split_qids("dev"), snap.chunk_to_doc, snap.qrels_unit
    )
    assert res.means["subq_coverage@1"] == 0.5 and res.means["subq_coverage@2"] == 0.75
    assert res.means["subq_all@2"] == 0.5


def test_evaluate_cli_adds_coverage_when_scoring_from_a_corpus(tmp_path, capsys):
    # python -m ablate.evaluate RUN --corpus DIR --split dev: q2's parts need 4.2-a and 4.2-b, the run has 4.2-b
    # first and INV-102 second -> at unit chunk (the labels' unit) @1 1/2, @2 1/2; the other dev questions have none.
    import json

    from ablate.app.evaluate import main

    root = _corpus_with(tmp_path, SUBQ_QUERY)
    run = tmp_path / "run.trec"
    run.write_text("q2 Q0 POL-1#4.2-b 1 2.0 r\nq2 Q0 INV-102#p0 2 1.0 r\n", encoding="utf-8")
    assert main([str(run), "--corpus", str(root), "--split", "dev", "--ks", "1,2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["subq_coverage@1"] == 0.5 and out["subq_all@2"] == 0.0
    assert out["accounting"]["with_subquestions"] == 1 and out["accounting"]["without_subquestions"] == 3
    assert main([str(run), "--corpus", str(root), "--split", "dev", "--ks", "1,2"]) == 0
    text = capsys.readouterr().out
    assert "with_subquestions=1" in text and any(
        line.startswith("subq_coverage") for line in text.splitlines()
    )


def test_rgb_answer_parts_load_without_sub_questions(tmp_path):
    """The shared RGB-zh set writes answer_parts as alias lists and has no sub-questions: it loads as such."""
    from conftest import TINY_DOCS, TINY_MANIFEST, TINY_QRELS, TINY_QUERIES, write_corpus

    queries = [dict(q) for q in TINY_QUERIES]
    queries[0]["answer_parts"] = [["1,250 yuan", "1250 元"], ["Acme"]]
    root = write_corpus(tmp_path / "c", TINY_DOCS, queries, TINY_QRELS, TINY_MANIFEST)
    q = load_corpus(root).queries["q1"]
    assert q.subquestions == () and q.answer_parts == (("1,250 yuan", "1250 元"), ("Acme",))
