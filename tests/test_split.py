"""Leakage-safe splits (``python -m ablate.split``, :mod:`ablate.data.splitting`): no gold document or clause on both
sides, near-duplicates together, deterministic, the report written, used splits protected, and runs on a split file."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.app.split import main as split_main
from ablate.data.corpus import load_corpus
from ablate.data.grouping import normalise_question
from ablate.data.snapshot import Snapshot
from ablate.data.split_files import USED_MARKER, apply_split_file, mark_used_by_test
from ablate.data.splitting import SplitParams, build_split
from ablate.errors import AblateError, InputError
from conftest import DATASETS, REPO, write_corpus

NO_EMBED = SplitParams(threshold=None)

DOCS = [
    {"_id": "POL-2026", "title": "Travel 2026", "series": "TRAVEL", "sections": [
        {"id": "4.2-a", "text": "City transport is reimbursed up to 80 yuan per trip."},
        {"id": "4.2-b", "text": "Any excess requires supervisor approval."},
    ]},
    {"_id": "POL-2025", "title": "Travel 2025", "series": "TRAVEL", "sections": [
        {"id": "4.2", "text": "City transport is reimbursed up to 60 yuan per trip."},
    ]},
    *({"_id": f"D{i}", "title": f"Doc {i}", "text": f"Document number {i} about topic {i}."} for i in range(1, 9)),
]  # fmt: skip
QUERIES = [
    {"_id": "a1", "text": "Taxi limit per trip in 2026?"},
    {"_id": "a2", "text": "What if the taxi costs more than the limit?"},
    {"_id": "a3", "text": "Taxi limit per trip in 2025?"},
    {"_id": "b1", "text": "What does document one say?"},
    {"_id": "b2", "text": "What does document two say?"},
    {"_id": "c1", "text": "How much is INV-9?", "split": "test"},
    {"_id": "c2", "text": "  how much is inv-9 ?? ", "split": "dev"},
    {"_id": "d1", "text": "Who approves a taxi claim above the limit?", "split": "dev"},
    {"_id": "d2", "text": "Who approves taxi claims above the limit?", "split": "test"},
    {"_id": "g1", "text": "Topic five?", "group": "G"},
    {"_id": "g2", "text": "Topic six?", "group": "G"},
    *({"_id": f"e{i}", "text": f"Question on topic {i}?"} for i in (3, 4, 7, 8)),
]
QRELS = {
    "train": [("a1", "POL-2026#4.2-a", 2), ("b1", "D1#p0", 2), ("e3", "D3#p0", 1)],
    "dev": [("a2", "POL-2026#4.2-b", 1), ("b2", "D1#p0", 0), ("b2", "D2#p0", 2), ("g1", "D5#p0", 2)],
    "test": [("a3", "POL-2025#4.2", 2), ("g2", "D6#p0", 1), ("e4", "D4#p0", 2), ("e7", "D7#p0", 1)],
}
QRELS["test"].append(("e8", "D8#p0", 2))
MANIFEST = "name: splitty\nlanguage: en\nqrels_unit: chunk\nchunker: {kind: clause}\n"


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "splitty", DOCS, QUERIES, QRELS, MANIFEST)


def gold_by_side(snap: Snapshot, side: dict[str, str]) -> dict[str, tuple[set[str], set[str]]]:
    """(gold documents, gold units) per side, recounted from the qrels directly."""
    out: dict[str, tuple[set[str], set[str]]] = {"dev": (set(), set()), "test": (set(), set())}
    for qrels in snap.qrels.values():
        for qid, judged in qrels.judgements.items():
            if qid not in side:
                continue
            for uid, grade in judged.items():
                if grade >= 1:
                    out[side[qid]][1].add(uid)
                    out[side[qid]][0].add(snap.chunk_to_doc.get(uid, uid))
    return out


def assert_no_leak(snap: Snapshot, side: dict[str, str]) -> None:
    g = gold_by_side(snap, side)
    assert not g["dev"][0] & g["test"][0], "a gold document on both sides"
    assert not g["dev"][1] & g["test"][1], "a gold unit on both sides"


def test_normalisation_folds_case_punctuation_width_and_space_also_in_chinese():
    assert normalise_question("  How much is INV-102?? ") == normalise_question("how much is inv 102")
    assert normalise_question("打车超标怎么报？") == normalise_question("打车超标怎么报?")
    assert normalise_question("ＡＢＣ，def") == "abc def"
    assert normalise_question("taxi") != normalise_question("taxis")


def test_groups_by_document_series_and_declared_group_and_merges_same_text(corpus):
    snap = load_corpus(corpus)
    result = build_split(snap, NO_EMBED)
    group = result.group
    assert len(result.side) == len(QUERIES)  # every question, with gold or not, is assigned
    assert group["a1"] == group["a2"] == group["a3"]  # two clauses of one document; versions of one series
    assert group["b1"] != group["b2"]  # a grade-0 label does not merge
    assert group["c1"] == group["c2"]  # same text after normalisation
    assert group["g1"] == group["g2"]  # declared group
    assert group["d1"] != group["d2"]  # no embedding check
    assert_no_leak(snap, result.side)
    rep = result.report
    assert rep["verification"]["ok"] and rep["verification"]["gold_documents_shared"] == 0
    assert rep["parameters"]["cosine_threshold"] is None and rep["parameters"]["encoder"] is None
    assert rep["groups"]["merges"]["same_text"] == 1 and rep["near_duplicate_pairs"]["same_text"] == 1
    assert rep["counts"]["dev"] + rep["counts"]["test"] == len(QUERIES)
    assert rep["closest_cross_pairs"]["measure"] == "bigram_jaccard" and rep["closest_cross_pairs"]["pairs"]


def test_evidence_groups_are_the_splits_groups_without_embeddings(corpus):
    """The clusters the regression gate resamples are the split tool's groups (shared gold document or series,
    declared group, identical text), from one function."""
    from ablate.data.splitting import evidence_groups

    snap = load_corpus(corpus)
    groups = evidence_groups(snap, sorted(q["_id"] for q in QUERIES))
    assert groups == build_split(snap, NO_EMBED).group
    assert groups["a1"] == groups["a3"] and groups["g1"] == groups["g2"] and groups["d1"] != groups["d2"]


def test_from_splits_only_those_questions_and_unknown_split_is_refused(corpus):
    snap = load_corpus(corpus)
    result = build_split(snap, SplitParams(threshold=None, from_splits=("test",)))
    assert set(result.side) == set(snap.splits["test"])
    with pytest.raises(AblateError, match="--from"):
        build_split(snap, SplitParams(threshold=None, from_splits=("nope",)))


def test_same_seed_same_split_other_seeds_differ(corpus):
    snap = load_corpus(corpus)
    first = build_split(snap, NO_EMBED)
    assert build_split(load_corpus(corpus), NO_EMBED).tsv() == first.tsv()
    others = {build_split(snap, SplitParams(threshold=None, seed=s)).tsv() for s in range(1, 6)}
    assert others - {first.tsv()}


def test_cosine_near_duplicates_land_together_with_the_shipped_encoder(corpus):
    from ablate.app.split import make_embedder

    snap = load_corpus(corpus)
    emb = make_embedder(None, None, False)  # the session's cache (tests/conftest.py)
    result = build_split(snap, SplitParams(threshold=0.9), emb)
    assert result.group["d1"] == result.group["d2"]
    rep = result.report
    assert rep["groups"]["merges"]["cosine"] >= 1 and rep["parameters"]["cosine_threshold"] == 0.9
    assert rep["parameters"]["encoder"]["name"] == "all-MiniLM-L6-v2"
    assert len(rep["parameters"]["encoder"]["fingerprint"]) == 64
    assert rep["closest_cross_pairs"]["measure"] == "cosine"
    assert all(p["similarity"] < 0.9 for p in rep["closest_cross_pairs"]["pairs"])
    assert rep["verification"]["cosine_pairs_split"] == 0 and rep["verification"]["ok"]


@pytest.mark.parametrize("from_splits", [(), ("dev", "test")])
def test_demo_split_shares_no_gold_document_or_clause(from_splits):
    snap = load_corpus(REPO / "corpora" / "demo")
    result = build_split(snap, SplitParams(threshold=None, from_splits=from_splits))
    assert_no_leak(snap, result.side)
    declared: dict[str, set[str]] = {}
    for q in snap.queries.values():
        if q.group and q.qid in result.side:
            declared.setdefault(q.group, set()).add(result.side[q.qid])
    assert declared and all(len(sides) == 1 for sides in declared.values())
    assert result.report["verification"]["ok"]


def run_cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = split_main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_writes_split_and_report_deterministically(corpus, tmp_path, capsys):
    out1, out2 = tmp_path / "s1", tmp_path / "s2"
    for out in (out1, out2):
        code, stdout, err = run_cli([str(corpus), "--no-embed", "--out", str(out)], capsys)
        assert code == 0, err
    for name in ("split.tsv", "report.json", "report.md"):
        assert (out1 / name).read_bytes() == (out2 / name).read_bytes(), name
    lines = (out1 / "split.tsv").read_text().splitlines()
    assert lines[0] == "qid\tsplit\tgroup" and len(lines) == len(QUERIES) + 1
    assert [r.split("\t")[0] for r in lines[1:]] == sorted(q["_id"] for q in QUERIES)
    rep = json.loads((out1 / "report.json").read_text())
    for key in ("parameters", "counts", "groups", "closest_cross_pairs", "verification"):
        assert key in rep
    assert rep["groups"]["size_histogram"] and rep["groups"]["largest"]
    assert rep["verification"]["same_text_across_sides"] == 0
    md = (out1 / "report.md").read_text()
    assert "## Verification" in md and "no leakage found" in md and "threshold none" in md
    assert "no leakage found" in stdout and "corpus.split_file=" in stdout


def test_default_out_is_under_the_working_directory(corpus, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(
        [str(corpus), "--no-embed", "--from", "dev,test", "--dev", "0.4", "--seed", "3"], capsys
    )
    assert code == 0, err
    assert (tmp_path / "outputs" / "splits" / "splitty-from-dev+test-dev0.4-seed3" / "split.tsv").is_file()


def test_refuses_to_overwrite_a_split_a_test_run_used_unless_forced(corpus, tmp_path, capsys):
    out = tmp_path / "s"
    assert run_cli([str(corpus), "--no-embed", "--out", str(out)], capsys)[0] == 0
    mark_used_by_test(out / "split.tsv", "run123", "test")
    before = (out / "split.tsv").read_bytes()
    code, _, err = run_cli([str(corpus), "--no-embed", "--seed", "1", "--out", str(out)], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "run123" in err and "--force" in err
    assert (out / "split.tsv").read_bytes() == before
    code, _, err = run_cli([str(corpus), "--no-embed", "--seed", "1", "--out", str(out), "--force"], capsys)
    assert code == 0, err
    assert not (out / USED_MARKER).exists()
    rep = json.loads((out / "report.json").read_text())
    assert rep["overwrote_split_used_by"][0]["run_id"] == "run123"


def test_refuses_to_write_into_a_shared_dataset_folder(tmp_path, capsys, monkeypatch):
    shared = tmp_path / "datasets"
    root = write_corpus(shared / "splitty", DOCS, QUERIES, QRELS, MANIFEST)
    monkeypatch.setenv("ABLATE_DATASETS", str(shared))
    code, _, err = run_cli([str(root), "--no-embed", "--out", str(root / "splits")], capsys)
    assert code == 2 and "--out" in err and "shared dataset" in err and err.count("\n") == 1
    assert not (root / "splits").exists()
    code, _, err = run_cli(["splitty", "--no-embed", "--out", str(tmp_path / "mine")], capsys)
    assert code == 0, err  # a shared dataset named by name is read, and written elsewhere


def test_bad_arguments_are_one_line_errors(corpus, capsys):
    for args in (
        ["--no-embed", "--dev", "1.5"],
        ["--threshold", "abc"],
        ["--threshold", "2"],
        ["--from", "nope"],
    ):
        code, _, err = run_cli([str(corpus), *args], capsys)
        assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, (args, err)


# --------------------------------------------------------------------------------------------------------------------
# Using a split file


def write_split_file(path: Path, rows: list[str]) -> Path:
    path.write_text("qid\tsplit\tgroup\n" + "".join(r + "\n" for r in rows), encoding="utf-8")
    return path


def test_apply_split_file_moves_questions_with_their_labels(corpus, tmp_path):
    snap = load_corpus(corpus)
    f = write_split_file(
        tmp_path / "split.tsv",
        ["a1\tdev\ta1", "a2\tdev\ta1", "a3\tdev\ta1", "e4\tdev\te4", "c1\tdev\tc1", "b2\ttest\tb2"],
    )
    new = apply_split_file(snap, f)
    assert set(new.splits["dev"]) == {"a1", "a2", "a3", "e4", "c1", "c2", "d1", "g1"}
    assert "b2" in new.splits["test"] and "a3" not in new.splits["test"] and "b1" in new.splits["train"]
    assert new.split_qrels("dev").judgements["a1"] == {"POL-2026#4.2-a": 2}  # from train.tsv
    assert new.split_qrels("test").judgements["b2"] == {"D1#p0": 0, "D2#p0": 2}
    assert "a1" not in new.split_qrels("train").judgements
    assert new.queries["c1"].split == "dev"
    assert new.fingerprint != snap.fingerprint and "split_file" in new.manifest_record()["files"]
    assert snap.splits["train"] == ["a1", "b1", "e3"]  # the caller's snapshot is untouched
    same = apply_split_file(load_corpus(corpus), f)
    assert same.fingerprint == new.fingerprint


def test_split_built_by_the_tool_round_trips(corpus, tmp_path, capsys):
    out = tmp_path / "s"
    assert run_cli([str(corpus), "--no-embed", "--out", str(out)], capsys)[0] == 0
    snap = load_corpus(corpus)
    new = apply_split_file(snap, out / "split.tsv")
    assert set(new.splits) == {"dev", "test"}
    side = {q: s for s, qids in new.splits.items() for q in qids}
    assert_no_leak(snap, side)


@pytest.mark.parametrize(
    ("rows", "problem"),
    [
        (["zz\tdev\tzz"], "not in"),
        (["a1\tdev\ta1", "a1\ttest\ta1"], "already assigned"),
        (["a1\tvalidation\ta1"], "is not one of"),
        (["a1 dev"], "expected qid<TAB>split"),
        ([], "assigns no question"),
    ],
)
def test_bad_split_files_name_file_and_line(corpus, tmp_path, rows, problem):
    f = write_split_file(tmp_path / "split.tsv", rows)
    with pytest.raises(InputError, match=problem) as e:
        apply_split_file(load_corpus(corpus), f)
    if rows:
        assert f"{f}:{len(rows) + 1}" in str(e.value) and "Fix:" in str(e.value)


def ablate(args: list[str], cwd: Path, env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **env_extra}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def test_runs_on_a_split_file_use_its_sides_and_a_test_run_marks_it(
    corpus, tmp_path, mlflow_uri, capsys, monkeypatch
):
    from hydra import compose, initialize_config_dir

    from ablate.app.config import job_from_config
    from ablate.app.paths import CONF_DIR
    from ablate.runner.job import run_job
    from ablate.runner.session import Session
    from ablate.tracking import Tracker

    args = [str(corpus), "--no-embed", "--out", str(tmp_path / "mysplit")]
    assert run_cli(args, capsys)[0] == 0
    split = {
        r.split("\t")[0]: r.split("\t")[1]
        for r in (tmp_path / "mysplit" / "split.tsv").read_text().splitlines()[1:]
    }
    overrides = [f"corpus.path={corpus}", "corpus.split_file=mysplit/split.tsv", "variant=A",
                 f"tracking.uri={mlflow_uri}", "tracking.experiment=split-runs", "progress=false",
                 "stats.bootstrap=50"]  # fmt: skip
    p = ablate(
        ["ablate", "corpus=beir", *overrides, "corpus.split=dev"], tmp_path, {}
    )  # the real entry point, on the session's cache (tests/conftest.py) as the run below
    assert p.returncode == 0, p.stderr
    monkeypatch.chdir(
        tmp_path
    )  # in-process for the test split: config -> job -> run, as the entry point does it
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["corpus=beir", *overrides, "corpus.split=test"])
    job = job_from_config(cfg, str(tmp_path))
    assert job.corpus.split_file == str(tmp_path / "mysplit" / "split.tsv")
    done = run_job(job, Tracker(mlflow_uri), Session(), stream=io.StringIO())
    t = Tracker(mlflow_uri)
    runs = {r.tags["ablate.split"]: r for r in t.find_runs([t.experiment_id("split-runs", create=False)])}
    assert runs["test"].run_id == done.run_id
    for side in ("dev", "test"):
        assert runs[side].metrics["queries_total"] == sum(s == side for s in split.values())
        trec = Path(t.download_artifact(runs[side].run_id, "run.trec", tmp_path / side)).read_text()
        assert {line.split()[0] for line in trec.splitlines()} <= {q for q, s in split.items() if s == side}
    marker = json.loads((tmp_path / "mysplit" / USED_MARKER).read_text())
    assert [u["run_id"] for u in marker["uses"]] == [runs["test"].run_id]
    code, _, err = run_cli(args, capsys)  # a split a test run used is not redrawn silently
    assert code == 2 and runs["test"].run_id in err


@pytest.mark.slow
@pytest.mark.skipif(not (DATASETS / "scifact").is_dir(), reason="shared SciFact not present")
def test_scifact_test_split_with_the_encoder(tmp_path, capsys):
    out = tmp_path / "scifact"
    args = ["--from", "test", "--quiet", "--out", str(out), "--cache-dir", str(tmp_path / "cache")]
    code, _, err = run_cli([str(DATASETS / "scifact"), *args], capsys)
    assert code == 0, err
    rep = json.loads((out / "report.json").read_text())
    assert rep["counts"]["questions"] == 300 and rep["verification"]["ok"]
    snap = load_corpus(DATASETS / "scifact")
    side = {r.split("\t")[0]: r.split("\t")[1] for r in (out / "split.tsv").read_text().splitlines()[1:]}
    assert_no_leak(snap, side)


def test_the_encoder_default_is_the_one_a_run_on_the_corpus_uses(tmp_path):
    """Near-duplicates of Chinese questions are judged by the encoder a run on a Chinese corpus uses (the language's
    default, whatever the corpus is called), not the English one; a model given wins."""
    from ablate.app.split import make_embedder

    cache = str(tmp_path / "cache")
    assert make_embedder(None, cache, False, "zh").name == "multilingual-e5-small"
    assert make_embedder(None, cache, False, "en").name == "all-MiniLM-L6-v2"
    assert make_embedder("all-MiniLM-L6-v2", cache, False, "zh").name == "all-MiniLM-L6-v2"
