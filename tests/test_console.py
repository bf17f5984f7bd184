"""The console of ``python -m ablate``, through the real entry point (a subprocess, real Hydra, a real MLflow sqlite
store): a sweep prints one line per cell, an overall line and the summary, in the order the sweep was declared; the
runs are named as the console names them; the query counters go to the run's artifacts and to the console only with
``-v`` (a counter that flags a problem still warns); third-party progress bars and INFO lines stay off it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ablate import record as R
from ablate.tracking import Tracker
from conftest import TINY_DOCS, TINY_MANIFEST, TINY_QRELS, TINY_QUERIES, write_corpus

#: Lines that a quiet console never shows (third-party bars and INFO lines, Hydra's own launch lines, the counters)
NOISE = (
    "Loading weights",
    "INFO mlflow",
    "Creating initial MLflow",
    "[HYDRA]",
    "Building index",
    "queries (",
)
CELL = re.compile(
    r"^\[(\d+)/(\d+)\] (.+?)  (ndcg@10 \d\.\d{3}  recall@10 \d\.\d{3})  (\d+\.\d s|\(reused\))$"
)


def ablate(args: list[str], cwd: Path, cache: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m ablate *args`` on the session's cache (tests/conftest.py), or on ``cache``: a cold one where the
    work whose console output is checked must happen (an index built, passages encoded)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    if cache is not None:
        env["ABLATE_CACHE_DIR"] = str(cache)
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [sys.executable, "-m", "ablate", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def _base(corpus: Path, uri: str, experiment: str) -> list[str]:
    return [
        "corpus=beir",
        f"corpus.path={corpus}",
        "corpus.split=dev",
        "corpus.identity=employee",
        f"tracking.uri={uri}",
        f"tracking.experiment={experiment}",
        "stats.bootstrap=100",
    ]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """A 2x2 BM25 sweep declared out of numeric order, on a store the sweep creates (MLflow's first-use lines) and a
    cache of its own: each cell builds its index, whose third-party progress must stay off the console (NOISE)."""
    d = tmp_path_factory.mktemp("console")
    corpus = write_corpus(d / "tiny", TINY_DOCS, TINY_QUERIES, TINY_QRELS, TINY_MANIFEST)
    uri = f"sqlite:///{d}/fresh/mlflow.db"
    (d / "fresh").mkdir()
    args = ["-m", *_base(corpus, uri, "console"), "variant=A", "bm25.k1=1.2,0.4", "bm25.b=0.75,0.2"]
    p = ablate(args, d, d / "cache")
    return p, uri, args, d


DECLARED = ["A k1=1.2 b=0.75", "A k1=1.2 b=0.2", "A k1=0.4 b=0.75", "A k1=0.4 b=0.2"]


def test_a_sweep_prints_one_line_per_cell_an_overall_line_and_the_summary(sweep):
    p, _, _, _ = sweep
    assert p.returncode == 0, p.stderr
    out, err = p.stdout.splitlines(), p.stderr.splitlines()
    cells = [CELL.match(line) for line in out if line.startswith("[")]
    assert all(cells) and [m.group(1, 2, 3) for m in cells if m] == [
        (str(i), "4", label) for i, label in enumerate(DECLARED, 1)
    ], p.stdout
    # stderr: the overall line when the first job starts and when the sweep ends (off a terminal), nothing else
    assert len(err) == 2 and err[0] == "[sweep] running 4 of 4 cells", p.stderr
    assert re.fullmatch(r"\[sweep\] 4 cells in \d+s: 4 run \(mean \d+\.\d s\)", err[1]), p.stderr
    for noise in NOISE:
        assert noise not in p.stdout + p.stderr, noise
    # every other stdout line belongs to the summary or the report: 4 cells + 1 blank + header + 2 x (2 + 4) table
    # lines + where the report and the UI are
    rest = [line for line in out if not line.startswith("[")]
    assert len(out) == 4 + len(rest) and len(rest) == 1 + 1 + 12 + 2, p.stdout
    assert all(
        line == "" or line.startswith(("|", "4 runs on split", "full report", "compare in")) for line in rest
    ), p.stdout


def _table_rows(stdout: str) -> list[list[str]]:
    """The run column of each table printed (a table starts at its ``| run`` header; header and rule left out)."""
    tables: list[list[str]] = []
    for line in stdout.splitlines():
        if line.startswith("| run "):
            tables.append([])
        elif line.startswith("|") and tables and not line.startswith("|-"):
            tables[-1].append(line.split("|")[1].strip())
    return tables


def test_the_summary_and_the_report_list_cells_as_declared_and_runs_carry_the_labels(sweep):
    p, uri, _, _ = sweep
    assert p.returncode == 0, p.stderr
    summary, report = _table_rows(p.stdout)
    assert summary == DECLARED, p.stdout
    # the report's table: same order; its baseline (the smallest swept values) is marked where it stands
    assert [r.removesuffix(" (baseline)") for r in report] == DECLARED, p.stdout
    assert report[3] == "A k1=0.4 b=0.2 (baseline)", p.stdout
    t = Tracker(uri)
    parent = t.find_runs(None, f"tags.`{R.T_ROLE}` = '{R.ROLE_SWEEP_PARENT}'", newest_first=True)[0]
    kids = sorted(t.children(parent.run_id), key=lambda r: int(r.tags[R.T_SWEEP_INDEX]))
    assert [r.name for r in kids] == DECLARED
    assert [r.sweep_index for r in kids] == [0, 1, 2, 3]


def test_the_counters_go_to_the_artifacts_and_with_v_to_the_console_and_a_second_sweep_says_reused(
    sweep, tmp_path
):
    first, uri, args, d = sweep
    assert "queries (" not in first.stdout + first.stderr  # without -v: only in the run's record
    t = Tracker(uri)
    parent = t.find_runs(None, f"tags.`{R.T_ROLE}` = '{R.ROLE_SWEEP_PARENT}'", newest_first=True)[0]
    kid = t.children(parent.run_id)[0]
    got = t.download_artifact(kid.run_id, R.A_ACCOUNTING, tmp_path)
    assert got is not None
    accounting = json.loads(Path(got).read_text())["accounting"]
    assert accounting["total"] == 4 and accounting["missing_from_run"] == 0
    assert kid.metrics["queries_total"] == 4.0 and "queries_unjudged_results" in kid.metrics
    p = ablate([*args, "-v"], d)  # the same cells again: reused, and -v prints their counters
    assert p.returncode == 0, p.stderr
    counters = [line for line in p.stdout.splitlines() if line.startswith("queries (dev): total=4,")]
    assert len(counters) == 4, p.stdout
    cells = [CELL.match(line) for line in p.stdout.splitlines() if line.startswith("[")]
    assert all(cells) and [m.group(3, 5) for m in cells if m] == [(label, "(reused)") for label in DECLARED]
    assert "4 of 4 cells reused finished runs" in p.stderr and "4 cells in" in p.stderr, p.stderr


def test_an_ablation_is_listed_as_declared_not_by_variant_order(tmp_path, tiny_corpus, mlflow_uri):
    p = ablate(["-m", *_base(tiny_corpus, mlflow_uri, "console-order"), "variant=oracle,A"], tmp_path)
    assert p.returncode == 0, p.stderr
    cells = [CELL.match(line) for line in p.stdout.splitlines() if line.startswith("[")]
    assert all(cells) and [m.group(3) for m in cells if m] == ["oracle", "A"], p.stdout
    summary, report = _table_rows(p.stdout)
    assert summary == ["oracle", "A"] and report == ["oracle", "A (baseline)"], p.stdout


def test_a_single_run_keeps_its_table_without_counters_and_warns_of_a_query_not_scored(tmp_path):
    """A question no document shares a word with gets an empty BM25 result: one warning line, no counter line; a
    dense model loads without its weights bar."""
    queries = [*TINY_QUERIES, {"_id": "q6", "text": "zebra xylophone", "split": "dev"}]
    qrels = {**TINY_QRELS, "dev": [*TINY_QRELS["dev"], ("q6", "INV-120#p0", 1)]}
    corpus = write_corpus(tmp_path / "tiny", TINY_DOCS, queries, qrels, TINY_MANIFEST)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    p = ablate([*_base(corpus, uri, "console-single"), "variant=A"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert "| A " in p.stdout and "queries (" not in p.stdout, p.stdout
    warnings = [line for line in p.stderr.splitlines() if line.startswith("warning:")]
    assert (
        len(warnings) == 1
        and "empty_result=1 (answerable" in warnings[0]
        and "accounting.json" in warnings[0]
    ), p.stderr
    assert Tracker(uri).find_runs(None)[0].name == "A"
    # a cold cache of its own: the passages must be encoded here for their progress line to show
    dense = ablate([*_base(corpus, uri, "console-single"), "variant=B"], tmp_path, tmp_path / "cache")
    assert dense.returncode == 0, dense.stderr
    assert "[encode passages]" in dense.stderr  # ablate's own progress stays
    for noise in NOISE:
        assert noise not in dense.stdout + dense.stderr, noise
