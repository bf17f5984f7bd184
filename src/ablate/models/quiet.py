"""Loading a transformers model quietly: its per-load weight reports and progress bars are noise in a run's log."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def quiet_transformers(quiet: bool = True) -> Iterator[None]:
    """Silence transformers' per-load weight reports and progress bars while loading a model (restoring the
    caller's settings afterwards); ``quiet=False`` changes nothing."""
    if not quiet:
        yield
        return
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
