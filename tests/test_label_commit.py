"""python -m ablate.label commit: a journal of real unjudged pairs (from a demo run's unjudged.csv) becomes a new label
version beside the old labels: exactly the old qrels plus the journal's standing judgements, with version.json and
CHANGELOG.md saying what changed and who judged it; never overwritten; LLM judgements only with a validation report;
a run on the version records where its labels came from, and its report says how many are LLM-made."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from ablate.tracking import Tracker
from labels_loop import REPO, SWEEP, cli, demo_sweep, read_beir, refused, unjudged_pairs, write_journal

DEMO = REPO / "corpora" / "demo"


@pytest.fixture(scope="module")
def loop(tmp_path_factory):
    """A demo sweep, a journal written as judges would (new pairs, a regrade, a re-judgement, undos) and the commit
    of it as version v3 through the CLI."""
    cwd = tmp_path_factory.mktemp("commit")
    uri, parent, runs = demo_sweep(cwd, "commit")
    pairs = unjudged_pairs(uri, runs["C"], cwd / "dl")
    assert len(pairs) > 40
    old_first = next(iter(read_beir(DEMO / "qrels" / "dev.tsv")))  # an existing dev label, regraded below
    lines = [(q, u, i % 3, "human:alice") for i, (q, u) in enumerate(pairs[:24])]
    lines += [
        (*old_first, 0, "human:bob"),  # changes an existing label
        (*pairs[24], 2, "human:alice"),  # re-judged: bob's grade stands
        (*pairs[24], 1, "human:bob"),
        (*pairs[25], 2, "human:alice"),  # judged and taken back: not in the version
        (*pairs[25], None, "human:alice"),
        (*pairs[26], 1, "human:bob"),  # alice's judgement taken back: bob's stands
        (*pairs[26], 2, "human:alice"),
        (*pairs[26], None, "human:alice"),
    ]
    journal_path = cwd / "labels" / "demo" / "journal.jsonl"
    write_journal(journal_path, lines)
    standing = {(q, u): g for q, u, g, _ in lines[:24]}
    standing.update({old_first: 0, pairs[24]: 1, pairs[26]: 1})
    p = cli("ablate.label", ["commit", "--version", "v3"], cwd)
    assert p.returncode == 0, p.stderr
    return {
        "cwd": cwd,
        "uri": uri,
        "pairs": pairs,
        "standing": standing,
        "old_first": old_first,
        "journal": journal_path,
        "out": p.stdout,
        "folder": cwd / "labels" / "demo" / "versions" / "v3",
    }


def test_the_new_qrels_are_the_old_ones_plus_the_journal(loop):
    folder: Path = loop["folder"]
    assert sorted(p.name for p in folder.iterdir()) == [
        "CHANGELOG.md",
        "dev.tsv",
        "judged.csv",  # who judged each pair of the journal (no LLM judged: no assessor view)
        "test.tsv",
        "train.tsv",
        "version.json",
    ]
    # independently: the old dev labels with the journal's standing grades over them
    expected = read_beir(DEMO / "qrels" / "dev.tsv")
    assert loop["old_first"] in expected and expected[loop["old_first"]] == 2
    expected.update(loop["standing"])
    got = read_beir(folder / "dev.tsv")
    assert got == expected
    assert loop["pairs"][25] not in got  # taken back
    # every question of the journal is a dev question (the run was on dev): test and train are the old files
    for split in ("test", "train"):
        assert (folder / f"{split}.tsv").read_bytes() == (DEMO / "qrels" / f"{split}.tsv").read_bytes()
    # the old lines keep their order, the added pairs follow in (qid, unit) order
    old = pd.read_csv(DEMO / "qrels" / "dev.tsv", sep="\t", dtype=str)
    new = pd.read_csv(folder / "dev.tsv", sep="\t", dtype=str)
    n = len(old)
    assert list(zip(new["query-id"][:n], new["corpus-id"][:n], strict=True)) == list(
        zip(old["query-id"], old["corpus-id"], strict=True)
    )
    tail = list(zip(new["query-id"][n:], new["corpus-id"][n:], strict=True))
    assert tail == sorted(tail) and len(tail) == 26
    # the corpus's own labels are never touched
    assert "v3" not in {p.name for p in (DEMO / "qrels").iterdir()}


def test_version_json_and_changelog_count_what_changed(loop):
    folder: Path = loop["folder"]
    v = json.loads((folder / "version.json").read_text(encoding="utf-8"))
    assert v["name"] == "v3" and v["corpus"] == "demo" and v["parent"] == "demo-labels-v2"
    assert v["parent_qrels"] == {
        f"{s}.tsv": hashlib.sha256((DEMO / "qrels" / f"{s}.tsv").read_bytes()).hexdigest()
        for s in ("dev", "test", "train")
    }
    assert v["added"] == 26 and v["changed"] == 1 and v["llm_made"] == 0
    assert v["assessors"] == {"human:alice": 24, "human:bob": 3}
    assert v["labels"] == sum(len(read_beir(folder / f"{s}.tsv")) for s in ("dev", "test", "train"))
    raw = loop["journal"].read_bytes()
    assert v["journal"]["sha256"] == hashlib.sha256(raw).hexdigest() and v["journal"]["lines"] == 32
    assert v["files"]["dev.tsv"] == hashlib.sha256((folder / "dev.tsv").read_bytes()).hexdigest()
    log = (folder / "CHANGELOG.md").read_text(encoding="utf-8")
    n_dev = len(read_beir(DEMO / "qrels" / "dev.tsv"))
    assert f"| dev | {n_dev} | 26 | 1 | {n_dev + 26} |" in log
    assert "| test | 71 | 0 | 0 | 71 |" in log
    q, u = loop["old_first"]
    assert f"| dev | {q} | {u} | 2 -> 0 | human:bob |" in log
    assert "| human:alice | 24 | 0 | 24 |" in log and "| human:bob | 2 | 1 | 3 |" in log
    grades = pd.Series(list(loop["standing"].values())[:24] + [1, 1])  # the added pairs' grades
    for g, text in ((2, "answers directly"), (1, "helps"), (0, "not relevant")):
        assert f"| {g} | {text} | {int((grades == g).sum())} |" in log
    # what to do next, with the version's name
    assert "python -m ablate variant=C corpus.labels=v3" in loop["out"]
    assert "python -m ablate.report --parent SWEEP_RUN_ID --labels v3" in loop["out"]


def test_the_same_journal_gives_the_same_files(loop):
    cwd = loop["cwd"]
    p = cli("ablate.label", ["commit", "--version", "v3-again"], cwd)
    assert p.returncode == 0, p.stderr
    again = cwd / "labels" / "demo" / "versions" / "v3-again"
    for s in ("dev", "test", "train"):
        assert (again / f"{s}.tsv").read_bytes() == (loop["folder"] / f"{s}.tsv").read_bytes()


def test_a_version_is_never_overwritten_and_nothing_new_is_refused(loop):
    cwd, folder = loop["cwd"], loop["folder"]
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    p = refused("ablate.label", ["commit", "--version", "v3"], cwd)
    assert p.returncode == 2 and p.stderr.count("error:") == 1 and "Traceback" not in p.stderr
    assert "--version='v3' is not valid" in p.stderr and "never overwritten" in p.stderr
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    # made from v3, the same journal adds nothing
    p = refused("ablate.label", ["commit", "--version", "v4", "corpus.labels=v3"], cwd)
    assert p.returncode == 2 and "adds nothing to v3" in p.stderr, p.stderr
    assert not (folder.parent / "v4").exists()


def test_llm_labels_need_a_validation_report_then_runs_and_reports_say_so(loop):
    """LLM judgements on top of v3 (corpus.labels=v3): refused without a validation report for that assessor and
    corpus, committed with one; a run on the new version logs its parent and LLM count, its report says so."""
    cwd, pairs = loop["cwd"], loop["pairs"]
    assessor = "llm:qwen-test@0123abcd"
    ldir = cwd / "llm-labels"
    new = pairs[30:33]
    write_journal(ldir / "demo" / "journal.jsonl", [(q, u, 1, assessor) for q, u in new])
    args = ["commit", "--version", "v4-llm", "--labels-dir", str(ldir), "corpus.labels=v3"]
    p = refused("ablate.label", args, cwd)
    assert p.returncode == 2 and p.stderr.count("error:") == 1
    assert f"3 standing judgement(s) by {assessor} have no validation report for demo" in p.stderr
    assert not (ldir / "demo" / "versions").exists()
    report = ldir / "demo" / "validation" / "llm-qwen-test@0123abcd" / "validation.json"
    report.parent.mkdir(parents=True)
    report.write_text(json.dumps({"assessor": "llm:another", "corpus": "demo"}), encoding="utf-8")
    assert refused("ablate.label", args, cwd).returncode == 2  # a report for another assessor lets nothing in
    report.write_text(json.dumps({"assessor": assessor, "corpus": "demo", "kappa": 0.5}), encoding="utf-8")
    p = cli("ablate.label", args, cwd)
    assert p.returncode == 0, p.stderr
    folder = ldir / "demo" / "versions" / "v4-llm"
    v = json.loads((folder / "version.json").read_text(encoding="utf-8"))
    assert v["parent"] == "v3" and v["llm_made"] == 3 and v["assessors"] == {assessor: 3}
    assert v["validation"] == {assessor: str(report)}
    expected = read_beir(loop["folder"] / "dev.tsv")
    expected.update(dict.fromkeys(new, 1))
    assert read_beir(folder / "dev.tsv") == expected
    # the command it printed works, with the folder (another labels dir than ./labels)
    assert f"corpus.labels={folder}" in p.stdout
    exp = "on-llm-labels"
    uri = loop["uri"]
    run = cli(
        "ablate",
        ["variant=A", *SWEEP, f"corpus.labels={folder}", f"tracking.uri={uri}", f"tracking.experiment={exp}"],
        cwd,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    t = Tracker(uri)
    (r,) = t.find_runs([t.experiment_id(exp, create=False)])
    assert r.tags["ablate.label_version"] == "v4-llm"
    assert r.params["labels.parent"] == "v3" and r.params["labels.llm_made"] == "3"
    manifest = json.loads(Path(t.download_artifact(r.run_id, "corpus_manifest.json", cwd / "m")).read_text())
    assert manifest["labels_llm_made"] == 3 and manifest["label_assessors"] == {assessor: 3}
    rep = cli("ablate.report", ["--experiment", exp, "--tracking-uri", uri, "--out", str(cwd / "rep")], cwd)
    assert rep.returncode == 0, rep.stderr
    md = (cwd / "rep" / "ablation.md").read_text(encoding="utf-8")
    header = md.split("\n\n|")[0]
    assert "- labels: 3 of the labels of version v4-llm are LLM-made" in header


def test_a_run_on_the_corpus_labels_logs_no_label_provenance(loop):
    t = Tracker(loop["uri"])
    (parent,) = [
        r for r in t.find_runs([t.experiment_id("commit", create=False)]) if r.tags.get("ablate.role")
    ]
    for r in t.children(parent.run_id):
        assert "labels.parent" not in r.params and "labels.llm_made" not in r.params
        assert r.tags["ablate.label_version"] == "demo-labels-v2"
