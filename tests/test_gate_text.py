"""What the gate says (ablate.study.gate_text): the broken questions' stages by the report's rules on hand-made
per-question funnels, the fixed ones, the console's first line and the Markdown summary's table."""

from __future__ import annotations

import math

import pandas as pd

from ablate.study.gate import decide_metrics
from ablate.study.gate_text import Gate, Verdict, changes, console, json_rows, markdown


def _funnel(rows: list[tuple[str, int, str, int, float]]) -> pd.DataFrame:
    """(qid, position, stage, found, first_rank) rows of a funnel_per_query.csv (depth 100, cutoff 10)."""
    return pd.DataFrame(
        [
            {"qid": q, "position": p, "stage": s, "depth": 100, "relevant": 2, "found": f, "recall": f / 2,
             "first_rank": r, "topk": 10, "topk_found": f, "topk_recall": f / 2}
            for q, p, s, f, r in rows
        ]
    )  # fmt: skip


def _table(hit: dict[str, int], ndcg: dict[str, float]) -> pd.DataFrame:
    t = pd.DataFrame({"category": "answerable", "hit@10": hit, "ndcg@10": ndcg})
    t.index.name = "qid"
    return t


def test_broken_questions_carry_the_stage_by_the_reports_rules():
    base = {"lost": 0.9, "fewer": 0.8, "lower": 0.7, "same": 0.6, "up": 0.1}
    cand = {"lost": 0.0, "fewer": 0.5, "lower": 0.6, "same": 0.55, "up": 0.4}
    before = _funnel(
        [
            *(("lost", 1, "bm25", 1, 1.0), ("lost", 2, "rrf", 1, 1.0), ("lost", 3, "final", 1, 1.0)),
            *(("fewer", 1, "bm25", 2, 1.0), ("fewer", 2, "final", 2, 1.0)),
            *(("lower", 1, "bm25", 1, 2.0), ("lower", 2, "final", 1, 1.0)),
            *(("same", 1, "bm25", 1, 1.0), ("same", 2, "final", 1, 1.0)),
        ]
    )
    now = _funnel(
        [
            # held in the candidates' first 10, gone from fusion on: lost at the stage after the last list holding it
            *(("lost", 1, "bm25", 1, 3.0), ("lost", 2, "rrf", 1, 40.0), ("lost", 3, "final", 1, 40.0)),
            *(("fewer", 1, "bm25", 1, 1.0), ("fewer", 2, "final", 1, 1.0)),
            *(("lower", 1, "bm25", 1, 2.0), ("lower", 2, "final", 1, 3.0)),
            *(("same", 1, "bm25", 1, 1.0), ("same", 2, "final", 1, 1.0)),
        ]
    )
    hits_before = {q: 1 for q in base} | {"up": 0}
    hits_now = {"lost": 0, "fewer": 1, "lower": 1, "same": 1, "up": 1}
    broke, fixed = changes(
        "ndcg@10", base, cand, _table(hits_before, base), _table(hits_now, cand), (before, now), ["bm25"]
    )
    got = {c.qid: c.where for c in broke}
    assert [c.qid for c in broke] == ["lost", "fewer", "lower", "same"]  # largest drop first
    assert got == {
        "lost": "lost at rrf",
        "fewer": "fewer relevant from bm25: 2->1 found",
        "lower": "ranked lower from final: first relevant 1->3",
        "same": "evidence still in the first 10",
    }
    assert [(c.qid, round(c.delta, 9)) for c in fixed] == [("up", 0.3)] and fixed[0].where is None
    assert broke[0].text() == "lost -0.900 [lost at rrf]"
    # no candidate funnel (a run file): no stage; an answer metric: the chain up to the context
    assert all(c.where is None for c in changes("ndcg@10", base, cand, _table(hits_before, base),
                                                 _table(hits_now, cand))[0])  # fmt: skip
    ctx = _funnel([("lost", 1, "bm25", 1, 1.0), ("lost", 2, "final", 1, 1.0), ("lost", 3, "context", 1, 1.0)])
    ctx["topk"] = 3
    (answer,), _ = changes(
        "answer_f1", {"lost": 1.0}, {"lost": 0.0}, _table({}, {}), _table({}, {}), (ctx, ctx)
    )
    assert answer.where == "in context (generation)"


def _gate(n_metrics: int) -> Gate:
    qids = [f"q{i}" for i in range(12)]
    pairs = {
        f"m{j}@10": (
            {q: 0.5 for q in qids},
            {q: 0.5 + 0.01 * ((i % 3) - 1) + 0.05 * j for i, q in enumerate(qids)},
        )
        for j in range(n_metrics)
    }
    verdicts = [Verdict(d) for d in decide_metrics(pairs, margin=0.02)]
    return Gate(verdicts, "abc", "file|x.trec", "run A", "file x.trec", "not known", "v1")


def test_the_console_and_the_summary_say_the_verdict_first_and_the_summary_is_a_table():
    one, two = _gate(1), _gate(2)
    first = console(one).splitlines()[0]
    d = one.verdicts[0].decision
    assert (
        first == f"PASS m0@10 Δ +0.000 [{d.low:+.3f}, {d.high:+.3f}] margin 0.02, 12 questions in 12 clusters"
    )
    lines = console(two).splitlines()
    assert lines[0] == "PASS over 2 metrics (Holm at family alpha 0.05): m0@10 pass, m1@10 pass"
    assert lines[1] == "  file x.trec against run A: not known"
    # Holm: m1@10 (the larger gain) is tested first at 0.025, m0@10 then at 0.05; neither regression claim stands at
    # 0.025, so both are held there
    assert lines[2].endswith("; levels 0.05 (non-inferior), 0.025 (regression)"), lines[2]
    md = markdown(two).splitlines()
    assert md[0] == "### Regression gate: PASS" and md[2].startswith("**PASS** over 2 metrics")
    header = md.index(
        "| metric | outcome | Δ | interval | margin | n | G | level (non-inferior / regression) |"
    )
    rows = [r for r in md[header + 2 :] if r.startswith("| ")]
    assert [r.split(" | ")[0] for r in rows] == ["| m0@10", "| m1@10"]
    assert "`file\\|x.trec`" in md[4]  # a pipe in a value does not break the table
    row = json_rows(two)[1]
    assert row["metric"] == "m1@10" and row["candidate"] == "file|x.trec" and row["label_version"] == "v1"
    assert math.isclose(row["delta"], 0.05, abs_tol=1e-12) and row["level_noninferior"] in (0.025, 0.05)
