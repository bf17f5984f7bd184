"""Chunk labels that follow another chunker (ablate.data.projection): hand-made spans, then the demo end to end."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.data.chunking import ChunkerSpec, chunk_document
from ablate.data.corpus import load_corpus
from ablate.data.projection import (
    Counts,
    Span,
    SpanIndex,
    check_min_overlap,
    project_evidence,
    project_judgements,
    takes,
)
from ablate.data.types import Document, Section
from ablate.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]


def S(uid: str, start: int, end: int, doc: str = "D") -> Span:
    return Span(uid, doc, start, end)


def project(judged: dict[str, int], old: list[Span], new: list[Span], share: float = 0.5):
    return project_judgements({"q": judged}, {s.unit_id: s for s in old}, SpanIndex(new), share)


def test_a_clause_split_in_two_gives_both_halves_its_grade():
    p = project({"D#4.2": 2}, [S("D#4.2", 0, 100)], [S("D#t0", 0, 50), S("D#t1", 50, 100)])
    assert p.judgements == {"q": {"D#t0": 2, "D#t1": 2}}
    assert (p.counts.projected, p.counts.split, p.counts.lost, p.counts.merged) == (1, 1, 0, 0)


def test_two_clauses_merged_take_the_best_grade_and_grade_zero_projects():
    old = [S("D#a", 0, 40), S("D#b", 40, 100), S("D#c", 100, 200)]
    p = project({"D#a": 1, "D#b": 2, "D#c": 0}, old, [S("D#t0", 0, 100), S("D#t1", 100, 200)])
    # t0 covers a and b whole: the best grade; t1 covers the judged-non-relevant c: judged 0, not unjudged
    assert p.judgements == {"q": {"D#t0": 2, "D#t1": 0}}
    assert (p.counts.labels, p.counts.projected, p.counts.merged, p.counts.judged) == (3, 3, 1, 2)


def test_unlabelled_text_stays_unjudged():
    p = project({"D#a": 2}, [S("D#a", 0, 10)], [S("D#t0", 0, 10), S("D#t1", 10, 90)])
    assert p.judgements == {"q": {"D#t0": 2}}  # t1 overlaps only unlabelled text


def test_a_label_no_chunk_covers_enough_is_lost():
    # a 100-character clause touched by 10 characters of each of two 100-character windows: 10% either way
    p = project({"D#a": 2}, [S("D#a", 100, 200)], [S("D#t0", 10, 110), S("D#t1", 190, 290)])
    assert p.judgements == {"q": {}}
    assert (p.counts.lost, p.counts.projected) == (1, 0)
    # an unlocated label (no span) and a label in another document are lost too
    p = project_judgements(
        {"q": {"D#x": 1, "E#y": 1}},
        {"D#x": None, "E#y": S("E#y", 0, 10, "E")},
        SpanIndex([S("D#t0", 0, 10)]),
        0.5,
    )
    assert p.counts.lost == 2


def test_overlap_exactly_at_the_threshold_counts_from_either_side():
    label = S("D#a", 0, 100)
    assert takes(S("D#t", 50, 400), label, 0.5)  # covers exactly 50% of the label
    assert not takes(S("D#t", 51, 400), label, 0.5)
    small = S("D#b", 0, 30)
    assert takes(S("D#t", 15, 45), small, 0.5)  # 15 of 30: half the label, and half the chunk
    assert takes(S("D#t", 10, 30), S("D#big", 20, 1000), 0.5)  # the label fills exactly half of a small chunk
    assert not takes(S("D#t", 10, 30), S("D#big", 21, 1000), 0.5)
    with pytest.raises(ConfigError, match="eval.projection.min_overlap"):
        check_min_overlap(0)
    with pytest.raises(ConfigError):
        check_min_overlap(1.5)


def test_subquestion_evidence_follows():
    counts = Counts()
    old = {"D#a": S("D#a", 0, 50), "D#b": S("D#b", 500, 600)}
    new = SpanIndex([S("D#t0", 0, 100), S("D#t1", 100, 200)])
    assert project_evidence(("D#a", "D#b"), old, new, 0.5, counts) == ("D#t0",)
    assert (counts.evidence, counts.evidence_lost, counts.subquestions_without_evidence) == (2, 1, 0)
    assert project_evidence(("D#b",), old, new, 0.5, counts) == ()
    assert counts.subquestions_without_evidence == 1


def test_chinese_sections_and_character_windows_share_one_coordinate_system():
    secs = (Section("4.2-a", "上海市内交通每次80元。"), Section("4.2-b", "超出部分须主管审批。"))
    text = "\n\n".join(f"{s.sid} {s.text}" for s in secs)
    doc = Document("POL", "差旅费管理办法", text, sections=secs)
    clauses = chunk_document(doc, ChunkerSpec("clause"))
    assert [text[slice(*c.span)] for c in clauses] == [
        "4.2-a 上海市内交通每次80元。",
        "4.2-b 超出部分须主管审批。",
    ]
    windows = chunk_document(doc, ChunkerSpec("tokens", size=8, overlap=0))
    assert all(w.span is not None for w in windows)
    # every window's text is its span's characters (windows join Chinese characters without spaces)
    assert all(
        "".join(text[slice(*w.span)].split()) == w.text.removeprefix("差旅费管理办法 ") for w in windows
    )
    old = {c.chunk_id: Span(c.chunk_id, "POL", *c.span) for c in clauses}  # type: ignore[misc]
    new = SpanIndex(Span(w.chunk_id, "POL", *w.span) for w in windows)  # type: ignore[misc]
    p = project_judgements({"q": {"POL#4.2-a": 2, "POL#4.2-b": 1}}, old, new, 0.5)
    assert p.counts.lost == 0 and p.judgements["q"]
    assert max(p.judgements["q"].values()) == 2


def test_the_corpus_own_chunker_leaves_labels_untouched_and_another_projects_them():
    own = load_corpus(REPO / "corpora" / "demo")
    assert own.projection is None
    explicit = load_corpus(REPO / "corpora" / "demo", ChunkerSpec("clause"))
    assert explicit.projection is None and explicit.qrels["dev"].judgements == own.qrels["dev"].judgements
    tok = load_corpus(REPO / "corpora" / "demo", ChunkerSpec("tokens", size=100, overlap=20))
    assert tok.projection is not None
    assert set(tok.chunk_to_doc) >= {c for j in tok.qrels["dev"].judgements.values() for c in j}
    # document labels come from the original labels: the same as lifting the corpus's own chunk labels
    view, lifted = tok.doc_view(), own.qrels["dev"].judgements
    for qid, judged in lifted.items():
        expect: dict[str, int] = {}
        for cid, g in judged.items():
            d = own.chunk_to_doc[cid]
            expect[d] = max(expect.get(d, g), g)
        assert view.qrels["dev"].judgements[qid] == expect


def test_compare_projected_runs_at_the_document_level_as_one_factor():
    from ablate.record import RecordedRun
    from ablate.study.compare import check_comparison

    def run(name: str, chunker: str, qrels: str, onto: str | None) -> RecordedRun:
        tags = {"ablate.index_snapshot": "s" * 64, "ablate.snapshot": name * 64, "ablate.qrels_hash": qrels}
        tags |= {"ablate.split": "dev", "ablate.fp.snapshot": name * 64, "ablate.fp.bm25": "b" * 64}
        if onto:
            tags |= {"ablate.qrels_source_hash": "q" * 64, "ablate.labels_projected_onto": onto}
        params = {"variant": "A", "pipeline.retrievers": '["bm25"]', "corpus.chunker": chunker}
        return RecordedRun(run_id=name.ljust(32, "0"), name="A", params=params, tags=tags)

    clause = run("c", '{"kind": "clause"}', "q" * 64, None)
    t100 = run("t", '{"kind": "tokens", "size": 100}', "x" * 64, "tokens-100")
    chk = check_comparison(clause, t100, ["corpus.chunker.kind", "corpus.chunker.size"])
    assert not chk.refused and chk.factors == ["chunker"]
    assert chk.flags == [
        "labels projected (A (t0000000) onto tokens-100 chunks): the unit changed; compare at the document level"
    ]
    # the same chunks, labels projected by another share: flagged, compared at the document level, not refused
    t100b = run("u", '{"kind": "tokens", "size": 100}', "y" * 64, "tokens-100")
    chk = check_comparison(t100, t100b, "labels.projection.min_overlap")
    assert not chk.refused and "by another share" in chk.reason
    # other labels as written (another qrels file): still refused
    other = run("o", '{"kind": "tokens", "size": 100}', "x" * 64, "tokens-100")
    other = RecordedRun(
        other.run_id, "A", params=other.params, tags={**other.tags, "ablate.qrels_source_hash": "z" * 64}
    )
    with pytest.raises(Exception, match="labels differ"):
        check_comparison(clause, other, "chunker")


def _ablate(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    env.setdefault("ABLATE_CACHE_DIR", str(cwd / "cache"))
    return subprocess.run(
        [sys.executable, "-m", "ablate", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def _metrics(db: Path) -> dict[str, dict[str, float]]:
    """run id -> metrics, for the finished child runs, read back from MLflow's sqlite store."""
    con = sqlite3.connect(db)
    rows = con.execute(
        "select r.run_uuid, m.key, m.value from runs r join latest_metrics m on m.run_uuid = r.run_uuid "
        "where r.status = 'FINISHED'"
    ).fetchall()
    out: dict[str, dict[str, float]] = {}
    for rid, k, v in rows:
        out.setdefault(rid, {})[k] = v
    return out


def _params(db: Path, rid: str) -> dict[str, str]:
    con = sqlite3.connect(db)
    return dict(con.execute("select key, value from params where run_uuid = ?", (rid,)).fetchall())


def test_a_chunking_sweep_on_the_demo(tmp_path):
    """clause, tokens 100 and 200 with BM25: every run FINISHED, the projection counted and logged, the report's
    unit-change warning, and the clause run's document-level nDCG equal to the eval.unit=doc run's."""
    doc = _ablate(["variant=A", "eval.unit=doc", "tracking.experiment=doc"], tmp_path)
    assert doc.returncode == 0, doc.stderr
    (doc_ndcg,) = [m["ndcg_at_10"] for m in _metrics(tmp_path / "mlflow.db").values() if "ndcg_at_10" in m]

    # size counts only for kind=tokens: a sweep of clause,tokens x 100,200 would make clause twice and is refused
    # (test_catalogue's chunker-window-sweep), so the window sweeps under tokens and clause runs once
    clause_run = _ablate(["variant=A", "corpus.chunker.kind=clause"], tmp_path)
    assert clause_run.returncode == 0, clause_run.stderr
    sweep = _ablate(
        ["-m", "variant=A", "corpus.chunker.kind=tokens", "corpus.chunker.size=100,200"], tmp_path
    )
    assert sweep.returncode == 0, sweep.stderr
    out = sweep.stdout
    assert "labels projected onto tokens-100 chunks (from clause, min_overlap 0.5" in out
    assert "labels projected onto tokens-100 chunks: the unit changed; compare at the document level" in out
    assert "factors changed" not in out and "changed outside the studied factor" not in out
    con = sqlite3.connect(tmp_path / "mlflow.db")
    exp = con.execute("select experiment_id from experiments where name = 'demo'").fetchone()[0]
    runs = con.execute(
        "select run_uuid, status from runs where experiment_id = ? and run_uuid not in "
        "(select run_uuid from tags where key = 'ablate.role')",
        (exp,),
    ).fetchall()
    assert len(runs) == 3 and {s for _, s in runs} == {"FINISHED"}
    metrics = _metrics(tmp_path / "mlflow.db")
    by_chunker: dict[str, dict[str, float]] = {}
    for rid, _ in runs:
        chunker = _params(tmp_path / "mlflow.db", rid)["corpus.chunker"]
        by_chunker[chunker] = metrics[rid]
    clause = next(m for c, m in by_chunker.items() if '"clause"' in c)
    tokens = [m for c, m in by_chunker.items() if '"tokens"' in c]
    assert clause["doc_ndcg_at_10"] == doc_ndcg  # exact: the same document labels, the same ranking
    assert "labels_projected" not in clause
    for m in tokens:
        assert m["labels_labels"] == 62 and m["labels_projected"] + m["labels_lost"] == 62
        assert m["labels_split"] >= 0 and "doc_ndcg_at_10" in m
