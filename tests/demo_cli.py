"""What the whole-pipeline tests on the demo share: a folder laid out as a clone is (``corpora/`` beside the store)
and ``python -m <module>`` run in it as a user types it, offline, with no MLflow store from the environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def demo_folder(root: Path) -> Path:
    """``root`` with ``corpora/`` linked to the repository's, so ``corpus=demo`` resolves as in a fresh clone."""
    (root / "corpora").symlink_to(REPO / "corpora", target_is_directory=True)
    return root


def run_module(args: list[str], cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    """``python -m args[0] args[1:]`` in ``cwd`` with this interpreter."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
