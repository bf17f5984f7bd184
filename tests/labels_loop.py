"""What the label-loop tests share: the CLI run in the test's process, a demo sweep (variant=A,B,C) in a folder of its own, and
a journal of real unjudged pairs from a run's unjudged.csv."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pandas as pd

from ablate.labels import journal
from ablate.tracking import Tracker

REPO = Path(__file__).resolve().parents[1]
#: The sweep's settings: no per-question identity or date (the labels as written are the labels scored) and linear
#: gain, so pytrec_eval on run.trec and the qrels files gives the same numbers.
SWEEP = [
    "corpus=demo",
    "corpus.identity=null",
    "corpus.as_of=null",
    "eval.gain=linear",
    "stats.bootstrap=200",
    "progress=false",
]


def _env(cwd: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_WAIT_POLICY": "PASSIVE",
    }
    env.setdefault("ABLATE_CACHE_DIR", str(cwd / "cache"))
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def cli(module: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``python -m module args`` in ``cwd``, run in this process (tests/inprocess.py): what a new interpreter would
    see, without the seconds it takes to import MLflow, Hydra and pandas again."""
    from inprocess import run_module

    return run_module(module, args, cwd=cwd, env=_env(cwd))


#: A command refused before any run: the same call, named for what the test expects of it.
refused = cli


def demo_sweep(cwd: Path, experiment: str) -> tuple[str, str, dict[str, str]]:
    """A variant=A,B,C sweep on the demo: (store URI, parent run id, {variant: run id})."""
    uri = f"sqlite:///{cwd}/m.db"
    p = cli(
        "ablate",
        ["-m", "variant=A,B,C", *SWEEP, f"tracking.uri={uri}", f"tracking.experiment={experiment}"],
        cwd,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    t = Tracker(uri)
    (parent,) = [
        r for r in t.find_runs([t.experiment_id(experiment, create=False)]) if r.tags.get("ablate.role")
    ]
    children = {r.name: r.run_id for r in t.children(parent.run_id)}
    assert sorted(children) == ["A", "B", "C"]
    return uri, parent.run_id, children


def unjudged_pairs(uri: str, run_id: str, tmp: Path) -> list[tuple[str, str]]:
    """The (qid, unit) pairs of the run's unjudged.csv, in file order, each once."""
    got = Tracker(uri).download_artifact(run_id, "unjudged.csv", tmp)
    assert got is not None
    df = pd.read_csv(got, dtype=str)
    return list(dict.fromkeys(zip(df["qid"], df["unit_id"], strict=True)))


def write_journal(path: Path, lines: list[tuple[str, str, int | None, str]]) -> None:
    """(qid, unit, grade or None for undo, assessor) lines appended in order."""
    journal.append(path, [journal.judgement(q, u, g, a, pool="test") for q, u, g, a in lines])


def read_beir(path: Path) -> dict[tuple[str, str], int]:
    df = pd.read_csv(path, sep="\t", dtype={"query-id": str, "corpus-id": str})
    assert list(df.columns) == ["query-id", "corpus-id", "score"]
    return {(q, u): int(g) for q, u, g in zip(df["query-id"], df["corpus-id"], df["score"], strict=True)}
