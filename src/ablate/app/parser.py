"""The argument parser of the ``python -m ablate.<tool>`` entry points: a usage error is one line and exit 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, like every ablate entry point
        print(f"error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def command_parser(tool: str, description: str) -> OneLineParser:
    """The parser of ``python -m ablate.<tool>``, described by ``description`` in its ``--help``."""
    return OneLineParser(prog=f"python -m ablate.{tool}", description=description)


def add_choice(parser: argparse.ArgumentParser, flag: str, choices: Sequence[str], help: str) -> None:
    """An option that takes one of ``choices``, the first being its default (``help`` says what each means)."""
    parser.add_argument(flag, choices=tuple(choices), default=choices[0], help=help)


def add_encoder(parser: argparse.ArgumentParser, flag: str, what: str, same_as: str) -> None:
    """An encoder option whose default follows the corpus language by the rule every stage uses
    (:mod:`ablate.stages.text.defaults`), as the setting ``same_as`` does in a run."""
    from ablate.stages.text.defaults import BY_LANGUAGE, ENGLISH_ENCODER

    by_language = ", ".join(f"{model} for language {code}" for code, model in BY_LANGUAGE.items())
    parser.add_argument(
        flag,
        default=None,
        help=f"{what} (default: by the corpus language, as {same_as}: {by_language}, else {ENGLISH_ENCODER})",
    )
