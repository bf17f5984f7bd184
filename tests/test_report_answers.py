"""The report's answer section: correctness with intervals and a paired test, the diagnosis split with Wilson
intervals, refusals, the Oracle reading, the funnel plots and the sweep summary's answer columns."""

from __future__ import annotations

import dataclasses

import numpy as np

from ablate.evaluation import stats
from ablate.record import funnel_metric, parse_funnel, parse_funnel_head
from ablate.study import report
from ablate.study.sweep_summary import summary_table
from test_report import ablation_runs, record


def with_answers(rec: report.RunRecord, seed: int, oracle: bool = False) -> report.RunRecord:
    """The run with hand-made answer columns: correctness, refusals and a diagnosis per question."""
    pq = rec.per_query.copy()
    rng = np.random.default_rng(seed)
    answerable = pq["category"] == "answerable"
    correct = rng.random(len(pq)) < (0.8 if oracle else 0.5)
    in_context = np.ones(len(pq), bool) if oracle else rng.random(len(pq)) < 0.6
    pq["answer_correct"] = np.where(answerable, correct.astype(float), np.nan)
    pq["answer_refused"] = np.where(answerable, False, rng.random(len(pq)) < 0.5)
    pq["answer_citations_support"] = np.where(answerable, in_context.astype(float), np.nan)
    pq["answer_diagnosis"] = np.where(
        ~answerable,
        "no_answer",
        np.where(correct, "correct", np.where(in_context, "generation_failure", "retrieval_failure")),
    )
    metrics = {
        **rec.metrics,
        "answer_correct": float(pq.loc[answerable, "answer_correct"].mean()),
        funnel_metric(1, "bm25", "recall"): 0.9,
        funnel_metric(1, "bm25", "depth"): 100.0,
        funnel_metric(2, "final", "recall"): 0.7,
        funnel_metric(2, "final", "depth"): 10.0,
        funnel_metric(3, "context", "recall"): 0.5,
        funnel_metric(3, "context", "depth"): 5.0,
        funnel_metric(1, "bm25", "topkrecall"): 0.6,
        funnel_metric(1, "bm25", "topk"): 5.0,
    }
    return dataclasses.replace(rec, per_query=pq, metrics=metrics)


def test_answer_section_numbers():
    runs = [with_answers(r, i) for i, r in enumerate(ablation_runs())]
    rep = report.build_report(runs, report.ReportOptions(plots=True))
    assert rep.answers is not None
    t = rep.answers.table.set_index("variant")
    by = {r.variant: r for r in runs}
    a = by["A"].per_query
    sc_a = a[a["category"] == "answerable"]
    assert t.loc["A", "n"] == len(sc_a)
    assert t.loc["A", "correct"] == sc_a["answer_correct"].mean()
    mean, lo, hi = stats.bootstrap_ci(sc_a["answer_correct"].to_numpy(float), n_resamples=1000, seed=0)
    assert (t.loc["A", "correct_ci_low"], t.loc["A", "correct_ci_high"]) == (lo, hi)
    gen = int((sc_a["answer_diagnosis"] == "generation_failure").sum())
    assert t.loc["A", "generation_failures"] == gen
    assert t.loc["A", "generation_failure_low"] == stats.wilson_interval(gen, len(sc_a))[1]
    na = a[a["category"] != "answerable"]
    assert t.loc["A", "correct_refusals"] == int(na["answer_refused"].sum())
    assert t.loc["A", "no_answer_questions"] == len(na)
    ps = []
    for v in ("B", "C", "D"):
        sc_v = by[v].per_query
        sc_v = sc_v[sc_v["category"] == "answerable"]
        common = sc_a.index.intersection(sc_v.index)
        direct = stats.paired_randomization_test(
            sc_v.loc[common, "answer_correct"].to_numpy(float),
            sc_a.loc[common, "answer_correct"].to_numpy(float),
            n_resamples=10000,
            seed=0,
        )
        assert t.loc[v, "correct_delta"] == direct.delta and t.loc[v, "correct_p"] == direct.p_value
        ps.append(direct.p_value)
    assert list(t.loc[["B", "C", "D"], "correct_p_holm"]) == list(stats.holm(ps))
    assert "## Answers" in rep.markdown and "answers:" in rep.console
    assert "answers.csv" in rep.files()
    assert {f"funnel_{v}.png" for v in "ABCD"} <= set(rep.plots)
    assert rep.plots["funnel_A.png"].startswith(b"\x89PNG")


def test_oracle_note_names_generator_failures():
    runs = ablation_runs()
    oracle = with_answers(record("oracle", 9), 9, oracle=True)
    runs = [with_answers(r, i) for i, r in enumerate(runs)] + [oracle]
    rep = report.build_report(runs, report.ReportOptions(plots=False, force=True))
    assert rep.answers is not None
    o = rep.answers.table.set_index("variant").loc["oracle"]
    assert o["retrieval_failures"] == 0  # the gold evidence was always in the context
    assert rep.answers.notes[0].startswith("Oracle: with the gold evidence")
    assert f"its {int(o['generation_failures'])} wrong answers" in rep.answers.notes[0]
    assert any(n.startswith("C") and "the Oracle is" in n for n in rep.answers.notes)


def test_no_answer_section_without_generator():
    rep = report.build_report(ablation_runs(), report.ReportOptions(plots=True))
    assert rep.answers is None and "## Answers" not in rep.markdown
    assert not any(name.startswith("funnel_") for name in rep.plots)


def test_parse_funnel_keeps_stage_order():
    metrics = {
        funnel_metric(10, "context", "recall"): 0.4,
        funnel_metric(2, "dense_b", "recall"): 0.8,
        funnel_metric(2, "dense_b", "depth"): 50.0,
        funnel_metric(1, "bm25_x", "recall"): 0.9,
        "ndcg_at_10": 0.5,
    }
    got = parse_funnel(metrics)
    assert [s for s, _, _ in got] == ["bm25_x", "dense_b", "context"]
    assert got[1][1:] == (0.8, 50.0) and np.isnan(got[0][2])
    metrics[funnel_metric(2, "dense_b", "topkrecall")] = 0.25
    metrics[funnel_metric(2, "dense_b", "topk")] = 5.0
    metrics[funnel_metric(1, "bm25_x", "topk")] = 5.0
    assert [s for s, _, _ in parse_funnel(metrics)] == [
        "bm25_x",
        "dense_b",
        "context",
    ]  # head keys are no stages
    head = parse_funnel_head(metrics)
    assert [s for s, _, _ in head] == ["bm25_x", "dense_b", "context"]
    assert head[1][1:] == (0.25, 5.0) and np.isnan(head[0][1]) and head[0][2] == 5.0


def test_sweep_summary_answer_columns():
    runs = [with_answers(r, i) for i, r in enumerate(ablation_runs())]
    runs = [
        dataclasses.replace(
            r,
            metrics={
                **r.metrics,
                "answer_correct_ci_low": 0.1,
                "answer_correct_ci_high": 0.9,
                "diagnosis_generation_failure_count": 3.0,
                "diagnosis_retrieval_failure_count": 4.0,
                "answer_no_answer_questions": 4.0,
                "answer_correct_refusal_rate": 0.5,
            },
        )
        for r in runs
    ]
    table = summary_table(list(runs))
    row = table.splitlines()[2]
    assert "wrong: gen/retr" in table and " 3/4 " in row and " 2/4 " in row and "[0.10, 0.90]" in row
    plain = summary_table(ablation_runs())
    assert "correct" not in plain


def test_sweep_summary_shows_the_enterprise_columns_a_run_logged():
    """Superseded first@10 and all parts@10 appear once some run logged them; citations support with the answers."""
    runs = ablation_runs()
    assert "superseded first@10" not in summary_table(runs) and "all parts@10" not in summary_table(runs)
    first = dataclasses.replace(runs[0], metrics={**runs[0].metrics, "superseded_first_at_10": 4 / 9})
    table = summary_table([first, *runs[1:]])
    header, _, row, other = table.splitlines()[:4]
    assert "superseded first@10" in header and "all parts@10" not in header
    assert " 0.444 " in row and " - " in other
    answered = [
        dataclasses.replace(
            with_answers(r, i), metrics={**r.metrics, "answer_correct": 0.5, "answer_citations_support": 0.35}
        )
        for i, r in enumerate(runs)
    ]
    table = summary_table(answered)
    assert "citations support" in table.splitlines()[0] and " 0.350 " in table.splitlines()[2]


def test_answer_slices_are_means_over_each_tags_answerable_questions():
    import pandas as pd

    from ablate.evaluation.answer_scores import answer_slices

    answers = pd.DataFrame(
        {
            "answerable": [True, True, True, False],
            "correct": [1.0, 0.0, 0.0, 0.0],
            "f1": [1.0, 0.5, 0.0, 0.0],
            "citations_support": [1.0, 1.0, 0.0, 0.0],
            "diagnosis": ["correct", "generation_failure", "retrieval_failure", "correct_refusal"],
        },
        index=["q1", "q2", "q3", "q4"],
    )
    got = answer_slices(answers, {"numeric": ["q1", "q2", "q4"], "table": ["q3"], "none": ["q9"]})
    assert got["numeric"]["answer_n"] == 2 and got["numeric"]["answer_correct"] == 0.5  # q4 is not answerable
    assert got["numeric"]["answer_f1"] == 0.75 and got["numeric"]["answer_citations_support"] == 1.0
    assert (
        got["numeric"]["answer_generation_failures"] == 1 and got["numeric"]["answer_retrieval_failures"] == 0
    )
    assert got["table"]["answer_retrieval_failures"] == 1 and got["table"]["answer_correct"] == 0.0
    assert got["none"]["answer_n"] == 0 and np.isnan(got["none"]["answer_correct"])


def test_the_answer_table_says_when_latency_is_that_of_cached_answers():
    runs = [with_answers(r, i) for i, r in enumerate(ablation_runs())]
    n = len(runs[0].per_query)
    runs[0] = dataclasses.replace(
        runs[0],
        metrics={
            **runs[0].metrics,
            "answer_latency_p50_s": 0.41,
            "answer_latency_p95_s": 0.52,
            "answer_questions": float(n),
            "answer_generations_cached": float(n),
        },
    )
    rep = report.build_report(runs, report.ReportOptions(plots=False))
    assert f"0.41/0.52 ({n}/{n} cached, as generated)" in rep.markdown
    assert rep.markdown.count("cached, as generated") == 1
