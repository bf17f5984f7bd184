"""python -m ablate.label pool: a real sweep of the demo (variant=A,B,C) pooled through the real command, checked
against an independent computation from the runs' run.trec files and the demo's label file; the refusals that need
tracked runs; the report's warning for runs whose top K is mostly unjudged."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from ablate import record as R
from ablate.evaluation.judged import MIN_JUDGED_SHARE
from ablate.labels.pool import pool
from ablate.study.fetch import RunRecord
from ablate.study.report.judged import labels_note
from ablate.tracking import Tracker
from conftest import TINY_DOCS, TINY_MANIFEST, TINY_QRELS, TINY_QUERIES, write_corpus
from inprocess import run_module

REPO = Path(__file__).resolve().parents[1]
DEMO_DEV = REPO / "corpora" / "demo" / "qrels" / "dev.tsv"
DEPTH = 10


def _cli(module: str, args: list[str], cwd: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_WAIT_POLICY": "PASSIVE",
        "ABLATE_CACHE_DIR": os.environ.get("ABLATE_CACHE_DIR") or str(cache),
    }
    env.pop("MLFLOW_TRACKING_URI", None)
    cwd.mkdir(parents=True, exist_ok=True)
    return run_module(module, args, cwd=cwd, env=env)  # in this process: tests/inprocess.py


class Swept:
    def __init__(self, root: Path, uri: str, parent: str, children: dict[str, str]) -> None:
        self.root, self.uri, self.parent, self.children = root, uri, parent, children
        self.tracker = Tracker(uri)

    def run(self, module: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        extra = ["--tracking-uri", self.uri] if module != "ablate" else [f"tracking.uri={self.uri}"]
        return _cli(module, [*args, *extra], cwd or self.root, self.root / "cache")

    def artifact(self, run_id: str, name: str) -> Path:
        root = self.tracker.local_artifact_root(run_id)
        assert root is not None
        return root / name


@pytest.fixture(scope="module")
def swept(tmp_path_factory, mlflow_uri) -> Swept:
    root = tmp_path_factory.mktemp("pool")
    p = _cli(
        "ablate",
        [
            "-m",
            "corpus=demo",
            "variant=A,B,C",
            "stats.bootstrap=200",
            "progress=false",
            f"tracking.uri={mlflow_uri}",
            "tracking.experiment=label-pool",
        ],
        root,
        root / "cache",
    )
    assert p.returncode == 0, p.stderr[-3000:]
    t = Tracker(mlflow_uri)
    exp = t.experiment_id("label-pool", create=False)
    assert exp is not None
    (parent,) = t.find_runs([exp], f"tags.`{R.T_ROLE}` = '{R.ROLE_SWEEP_PARENT}'")
    children = {r.name: r.run_id for r in t.children(parent.run_id)}
    assert sorted(children) == ["A", "B", "C"]
    return Swept(root, mlflow_uri, parent.run_id, children)


def _independent(swept: Swept) -> tuple[pd.DataFrame, dict[str, float], dict[str, int]]:
    """The pool and each run's judged share from the runs' run.trec files and the label file, with pandas: per
    question the first DEPTH lines by the file's rank column (chunk ids: one line per unit), minus the pairs the label
    file lists with any grade."""
    qrels = pd.read_csv(DEMO_DEV, sep="\t", dtype=str)
    judged = set(zip(qrels["query-id"], qrels["corpus-id"], strict=True))
    tops = []
    for name, rid in swept.children.items():
        trec = pd.read_csv(
            swept.artifact(rid, "run.trec"),
            sep=r"\s+",
            header=None,
            names=["qid", "q0", "unit", "rank", "score", "tag"],
            dtype={"qid": str, "unit": str},
        )
        top = trec.sort_values(["qid", "rank"]).groupby("qid").head(DEPTH).assign(run=name)
        tops.append(top[["qid", "unit", "rank", "run"]])
    top = pd.concat(tops)
    top["judged"] = [(q, u) in judged for q, u in zip(top["qid"], top["unit"], strict=True)]
    shares = top.groupby("run")["judged"].mean().to_dict()
    unjudged = top[~top["judged"]]
    counts = unjudged.groupby("run").size().to_dict()
    expected = (
        unjudged.groupby(["qid", "unit"])
        .agg(runs=("run", lambda s: ",".join(sorted(s))), best_rank=("rank", "min"))
        .reset_index()
    )
    return expected, shares, counts


def test_the_pool_equals_an_independent_computation_from_run_trec_and_the_labels(swept):
    p = swept.run("ablate.label", "pool", "--parent", swept.parent, "--depth", str(DEPTH))
    assert p.returncode == 0, p.stderr
    path = swept.root / "labels" / "demo" / "pools" / f"A-B-C-top{DEPTH}.tsv"
    got = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    assert list(got.columns) == ["qid", "unit", "runs", "best_rank"]
    expected, shares, counts = _independent(swept)
    got["runs"] = [",".join(sorted(r.split(","))) for r in got["runs"]]
    got["best_rank"] = got["best_rank"].astype(int)
    key = ["qid", "unit"]
    pd.testing.assert_frame_equal(
        got.sort_values(key).reset_index(drop=True), expected.sort_values(key).reset_index(drop=True)
    )
    # every run's unjudged top 10 is what it logged itself in unjudged.csv (C: 150 over 20 questions)
    for name, rid in swept.children.items():
        logged = pd.read_csv(swept.artifact(rid, "unjudged.csv"), dtype=str)
        assert (logged["rank"].astype(int) <= DEPTH).sum() == counts[name]
    assert counts["C"] == 150
    meta = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    assert meta["runs"] == swept.children and meta["depth"] == DEPTH and meta["split"] == "dev"
    assert meta["unit"] == "chunk" and meta["label_version"] == "demo-labels-v2" and meta["corpus"] == "demo"
    for name, share in shares.items():
        assert math.isclose(meta["judged_share"][name], share, abs_tol=1e-12)
        assert math.isclose(share, 1 - counts[name] / (20 * DEPTH), abs_tol=1e-12)
    h = hashlib.sha256(b"chunk")
    qrels = pd.read_csv(DEMO_DEV, sep="\t", dtype=str)
    for q, u, g in sorted(
        zip(qrels["query-id"], qrels["corpus-id"], qrels["score"].astype(int), strict=True)
    ):
        h.update(f"\n{q}\t{u}\t{g}".encode())
    assert meta["qrels_sha256"] == h.hexdigest()
    child = swept.tracker.get_run(swept.children["A"])
    assert child is not None and meta["snapshot"] == child.tags[R.T_SNAPSHOT]
    # what it prints: the size, each run's share, a warning per run under the threshold, the next commands
    out = p.stdout
    assert f"pool: {len(expected)} (question, chunk) pairs over {expected['qid'].nunique()} questions" in out
    for name, share in shares.items():
        assert f"| {name} " in out and f"{share:.3f}" in out
    # one warning line for every run under the threshold, naming them and the worst share
    low = [(name, share) for name, share in shares.items() if share < MIN_JUDGED_SHARE]
    warned = [line for line in out.splitlines() if line.startswith("WARNING: ")]
    if low:
        worst, share = min(low, key=lambda x: x[1])
        names = ", ".join(name for name, _ in low)
        assert warned == [
            f"WARNING: {len(low)} of {len(shares)} runs ({names}): under {MIN_JUDGED_SHARE:.0%} of the top {DEPTH} "
            f"judged by these labels (worst: {worst}, {share:.0%}): neither a gain nor a loss measured on them can "
            "be trusted; judge this pool, then re-score on the new labels"
        ]
    else:
        assert warned == []
    assert f"python -m ablate.label serve --pool labels/demo/pools/A-B-C-top{DEPTH}.tsv" in out
    assert f"python -m ablate.report --parent {swept.parent} --labels NAME" in out
    # a pool is never overwritten: the same name is refused, the default name takes the next free one
    before = path.read_bytes()
    again = swept.run("ablate.label", "pool", "--parent", swept.parent, "--name", f"A-B-C-top{DEPTH}")
    assert again.returncode == 2 and again.stderr.startswith("error: --name A-B-C-top10: the pool")
    assert "Traceback" not in again.stderr and path.read_bytes() == before
    second = swept.run("ablate.label", "pool", "--runs", f"{swept.children['C']},{swept.children['A']}")
    assert second.returncode == 0, second.stderr
    other = path.with_name("C-A-top10.tsv")
    assert other.is_file()
    mine = pd.read_csv(other, sep="\t", dtype=str)
    assert set(mine["runs"].str.split(",").sum()) == {"A", "C"}


@pytest.fixture(scope="module")
def others(swept) -> dict[str, str]:
    """Runs that cannot be pooled with the sweep: a run of another corpus (its run.trec then deleted) and a run on
    another chunker (the labels projected onto its chunks)."""
    tiny = write_corpus(swept.root / "tiny", TINY_DOCS, TINY_QUERIES, TINY_QRELS, TINY_MANIFEST)
    made = {}
    for name, settings in {
        "tiny": ["corpus=beir", f"corpus.path={tiny}", "corpus.split=dev", "corpus.identity=employee"],
        "tokens": ["corpus=demo", "corpus.chunker.kind=tokens", "corpus.chunker.size=100"],
    }.items():
        p = swept.run("ablate", *settings, "variant=A", "progress=false", f"tracking.experiment=pool-{name}")
        assert p.returncode == 0, p.stderr[-3000:]
        exp = swept.tracker.experiment_id(f"pool-{name}", create=False)
        (r,) = swept.tracker.find_runs([exp])
        made[name] = r.run_id
    swept.artifact(made["tiny"], "run.trec").unlink()  # the corpora are checked before any run.trec is read
    return made


@pytest.mark.parametrize(
    ("case", "needle"),
    [
        ("no-children", "has no child runs. Fix: pass a sweep's parent run id"),
        ("other-corpus", "the runs are of different corpora (A ["),
        ("other-chunker", "ranks tokens-100 chunks, not the corpus's own chunking"),
        ("no-trec", "its artifact run.trec is missing; the record it was sealed with lists it"),
    ],
)
def test_runs_that_cannot_be_pooled_are_refused_in_one_line(swept, others, case, needle, tmp_path):
    a = swept.children["A"]
    args = {
        "no-children": ["--parent", a],
        "other-corpus": ["--runs", f"{a},{others['tiny']}"],
        "other-chunker": ["--runs", f"{a},{others['tokens']}"],
        "no-trec": ["--runs", others["tiny"]],
    }[case]
    p = swept.run("ablate.label", "pool", *args, cwd=tmp_path)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], p.stderr
    assert "Fix:" in lines[0]
    assert not (tmp_path / "labels").exists()


def test_the_report_warns_for_runs_whose_top_k_is_mostly_unjudged(swept, tmp_path):
    p = swept.run("ablate.report", "--parent", swept.parent, "--no-log", "--out", str(tmp_path / "r"))
    assert p.returncode == 0, p.stderr
    md = (tmp_path / "r" / "ablation.md").read_text(encoding="utf-8")
    assert "Labels: judged@10, the share of each run's top 10 the labels judge" in md
    low = []
    for name, rid in swept.children.items():
        pq = pd.read_csv(swept.artifact(rid, "per_query.csv"))
        share = pq["judged@10"].mean()
        assert f"| {name} " in md and f"{share:.3f}" in md
        low += [(name, share)] if share < MIN_JUDGED_SHARE else []
    # one line for the sweep, however many runs are under the threshold: which, the worst, what to do
    said = [x for x in p.stdout.splitlines() if "of the top 10 judged by these labels" in x]
    assert len(said) == (1 if low else 0) and md.count("- WARNING: ") == len(said)
    if low:
        worst, share = min(low, key=lambda x: x[1])
        assert (
            f"{len(low)} of {len(swept.children)} runs (" in said[0]
            and f"(worst: {worst}, {share:.0%})" in said[0]
        )
    assert f"python -m ablate.label pool --parent {swept.parent} --depth 10" in p.stdout


def _record(run_id: str, judged: list[float]) -> RunRecord:
    pq = pd.DataFrame({"qid": [f"q{i}" for i in range(len(judged))], "judged@10": judged}).set_index("qid")
    return RunRecord(run_id=run_id, name=run_id, per_query=pq, tags={R.T_PARENT: "p1"})


def test_only_runs_under_the_threshold_are_warned():
    runs = [_record("good", [0.8, 0.6]), _record("edge", [0.5, 0.5]), _record("bad", [0.3, 0.5])]
    note = labels_note(runs, {r.run_id: r.run_id for r in runs}, ["ndcg@10"])
    assert note.k == 10 and note.shares == {"good": 0.7, "edge": 0.5, "bad": 0.4}
    assert [w.split(":")[0] for w in note.warnings] == ["1 of 3 runs (bad)"]
    assert "python -m ablate.label pool --parent p1 --depth 10" in note.warnings[0]


def test_pooling_keeps_each_units_first_rank_and_counts_every_grade_as_judged():
    rankings = {
        "A": {"q1": ["d1", "d2", "d1", "d3", "d4"], "q2": ["x", "y"]},
        "B": {"q1": ["d3", "d9", "d2"], "q2": ["z"]},
    }
    judged = {"q1": {"d2", "d4"}, "q2": {"y", "z"}}  # any grade: d4 might be a 0 or a -1, still judged
    got = pool(rankings, judged, depth=3)
    as_rows = [(e.qid, e.unit, e.runs, e.best_rank) for e in got.entries]
    # A's top 3 units of q1 are d1, d2, d3 (the repeated d1 keeps rank 1); d4 is below the depth
    assert as_rows == [
        ("q1", "d1", ("A",), 1),
        ("q1", "d3", ("A", "B"), 1),
        ("q1", "d9", ("B",), 2),
        ("q2", "x", ("A",), 1),
    ]
    assert {k: (s.units, s.judged) for k, s in got.shares.items()} == {"A": (5, 2), "B": (4, 2)}
    assert got.questions == 2
