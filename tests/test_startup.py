"""``--help`` of every entry point answers without importing the heavy libraries (torch, MLflow, FAISS, ...).

Each entry point runs its help path in a fresh interpreter (the same ``runpy`` path as ``python -m``) through a tiny
wrapper that captures the help text and prints the sorted names in ``sys.modules`` afterwards. No timing here: the
wall times are in ``experiments/bench_startup.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

#: What a ``--help`` must not import: each costs from a few tenths of a second (pandas, MLflow) to several seconds
#: (torch, sentence-transformers) on a loaded machine.
HEAVY = ("torch", "mlflow", "faiss", "sentence_transformers", "transformers", "matplotlib", "scipy", "pandas")
#: The main CLI also answers before Hydra/OmegaConf are imported (its help reads conf/ as text).
HEAVY_MAIN = (*HEAVY, "hydra", "omegaconf")

WRAPPER = """
import contextlib, io, json, runpy, sys
module = sys.argv[1]
sys.argv = [module, "--help"]
out = io.StringIO()
code = 0
with contextlib.redirect_stdout(out):
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        code = e.code or 0
print(json.dumps({"code": code, "help": out.getvalue(), "modules": sorted(sys.modules)}))
"""

ENTRY_POINTS = {
    "ablate": ("ablate: which part of a RAG retrieval stack", HEAVY_MAIN),
    "ablate.evaluate": ("usage: python -m ablate.evaluate", HEAVY),
    "ablate.report": ("usage: python -m ablate.report", HEAVY),
    "ablate.split": ("usage: python -m ablate.split", HEAVY),
    # the document parsers load only when a file of their format is read
    "ablate.ingest": (
        "usage: python -m ablate.ingest",
        (*HEAVY, "bs4", "lxml", "docx", "pypdf", "markdown_it"),
    ),
    "ablate.train_reranker": ("usage: python -m ablate.train_reranker", HEAVY),
    "ablate.runs": ("usage: python -m ablate.runs", HEAVY),
}


def help_modules(module: str) -> tuple[int, str, set[str]]:
    """(exit code, help text, imported top-level package names) of ``python -m MODULE --help``."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", WRAPPER, module], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return data["code"], data["help"], {m.split(".")[0] for m in data["modules"]}


@pytest.mark.parametrize("module", list(ENTRY_POINTS))
def test_help_imports_no_heavy_library(module):
    start, heavy = ENTRY_POINTS[module]
    code, text, packages = help_modules(module)
    assert code == 0
    assert text.startswith(start), text[:200]
    assert "ablate" in packages  # the wrapper did run the entry point
    assert sorted(packages.intersection(heavy)) == []


def test_the_main_help_still_lists_the_config_keys():
    """The lazy path prints the same help as before: choices from conf/ and one line per key."""
    _, text, _ = help_modules("ablate")
    assert "Choices (config groups; conf/<group>/<option>.yaml):" in text
    assert "variant" in text and "rrf.k" in text


def test_a_run_still_imports_what_it_needs():
    """The other side of lazy imports: the evaluation package still exposes its names (PEP 562 loading)."""
    code = (
        "import sys, ablate.evaluation.io as io; assert 'pandas' not in sys.modules; "
        "from ablate.evaluation import evaluate, EvalSettings, TIE_RULES; "
        "assert 'pandas' in sys.modules and TIE_RULES is io.TIE_RULES; print(evaluate.__module__)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ablate.evaluation.retrieval"
