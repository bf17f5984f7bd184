"""``python -m ablate.label commit``: placeholder until the command lands (it refuses to run)."""

from __future__ import annotations

import argparse

from ablate.errors import AblateError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("rest", nargs=argparse.REMAINDER)


def run(args: argparse.Namespace) -> int:
    raise AblateError("python -m ablate.label commit is not available yet")
