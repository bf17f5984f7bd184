"""What the whole-pipeline tests on the demo share: a folder laid out as a clone is (``corpora/`` beside the store)
and ``python -m <module>`` run in it as a user types it, offline, with no MLflow store from the environment."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def demo_folder(root: Path) -> Path:
    """``root`` with ``corpora/`` linked to the repository's, so ``corpus=demo`` resolves as in a fresh clone."""
    (root / "corpora").symlink_to(REPO / "corpora", target_is_directory=True)
    return root


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return env


def run_module(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m args[0] args[1:]`` in ``cwd``, run in this process (tests/inprocess.py: what a new interpreter
    would see, without the seconds it takes to import MLflow, Hydra and pandas again)."""
    from inprocess import run_module as in_process

    return in_process(args[0], args[1:], cwd=cwd, env=_env())
