"""The shape of a small entry point (``python -m ablate.split``, ``.init``, ``.ingest``): parse the arguments, run,
and turn an :class:`~ablate.errors.AblateError` into its one line on stderr and exit 2 (no traceback)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from ablate.errors import AblateError
from ablate.secrets import redact


def say_unexpected(e: Exception) -> None:
    """An unexpected failure as one line on stderr; with ``ABLATE_DEBUG=1`` it is raised again (the traceback)."""
    if os.environ.get("ABLATE_DEBUG"):
        raise e
    print(
        redact(f"error: unexpected {type(e).__name__}: {e} (set ABLATE_DEBUG=1 for the traceback)"),
        file=sys.stderr,
    )


def run_command(
    parser: argparse.ArgumentParser,
    run: Callable[[argparse.Namespace], int],
    argv: Sequence[str] | None,
    unexpected: int = 1,
) -> int:
    """``run(parser.parse_args(argv))``; a refused input is ``error: ...`` on stderr and exit code 2, an unexpected
    failure one line too (:func:`say_unexpected`) and exit code ``unexpected`` (1; a command whose 1 means something,
    as the gate's regression, passes another)."""
    args = parser.parse_args(argv)
    try:
        return run(args)
    except AblateError as e:
        print(redact(f"error: {e}"), file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - one line, like the CLI
        say_unexpected(e)
        return unexpected
