"""The argument parser of the ``python -m ablate.<tool>`` entry points: a usage error is one line and exit 2."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, like every ablate entry point
        print(f"error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)
