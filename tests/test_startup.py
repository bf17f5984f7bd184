"""``--help`` of every entry point answers without importing the heavy libraries (torch, MLflow, FAISS, ...), and a
mistaken override of ``python -m ablate`` is refused before any of them is imported.

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
HEAVY = (
    "torch",
    "mlflow",
    "faiss",
    "sentence_transformers",
    "transformers",
    "matplotlib",
    "scipy",
    "pandas",
    "ppi_py",
    "sklearn",
    "numba",
)
#: The main CLI also answers before Hydra/OmegaConf are imported (its help reads conf/ as text).
HEAVY_MAIN = (*HEAVY, "hydra", "omegaconf")

WRAPPER = """
import contextlib, io, json, runpy, sys
module, *args = sys.argv[1:]
sys.argv = [module, *(args or ["--help"])]
out, err = io.StringIO(), io.StringIO()
code = 0
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        code = e.code or 0
print(json.dumps({"code": code, "help": out.getvalue(), "err": err.getvalue(), "modules": sorted(sys.modules)}))
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
    "ablate.gate": ("usage: python -m ablate.gate", HEAVY),
}


def run_modules(module: str, *args: str) -> tuple[int, str, str, set[str]]:
    """(exit code, stdout, stderr, imported top-level package names) of ``python -m MODULE ARGS`` in a fresh
    interpreter (``--help`` when no ARGS)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", WRAPPER, module, *args], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return data["code"], data["help"], data["err"], {m.split(".")[0] for m in data["modules"]}


def help_modules(module: str) -> tuple[int, str, set[str]]:
    """(exit code, help text, imported top-level package names) of ``python -m MODULE --help``."""
    code, out, _, packages = run_modules(module)
    return code, out, packages


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


def fresh(code: str) -> str:
    """What ``python -c code`` prints in a fresh interpreter (its exit code 0, else its stderr fails the test)."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_a_run_still_imports_what_it_needs():
    """The other side of lazy imports: the evaluation package still exposes its names (PEP 562 loading)."""
    code = (
        "import sys, ablate.evaluation.io as io; assert 'pandas' not in sys.modules; "
        "from ablate.evaluation import evaluate, EvalSettings, TIE_RULES; "
        "assert 'pandas' in sys.modules and TIE_RULES is io.TIE_RULES; print(evaluate.__module__)"
    )
    assert fresh(code).strip() == "ablate.evaluation.retrieval"


#: What a command imports on its way to work it does not do: the power and gate statistics (scipy.stats, statsmodels:
#: about a second) load when a plan, a report or a gate computes them, not when a run or a label command starts.
WORK_MODULES = (
    "ablate.runner.job",
    "ablate.evaluation.stats",
    "ablate.study.clusters",
    "ablate.app.recorded_clusters",
    "ablate.app.label_validate",
    "ablate.app.label_pool",
)


def test_a_run_or_a_label_command_does_not_import_the_statistics_it_does_not_compute():
    code = (
        "import importlib, json, sys; "
        f"[importlib.import_module(m) for m in {list(WORK_MODULES)!r}]; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('scipy.stats', 'statsmodels')))))"
    )
    assert json.loads(fresh(code).strip().splitlines()[-1]) == []
    # and they are there when asked for: the power of a plan, the verdict of a gate
    code = (
        "import sys; from ablate.evaluation.stats import t_power; from ablate.study.gate import decide; "
        "t_power([0.1, -0.2, 0.3, 0.0], 0.2, 30); decide({'a': 0.1, 'b': 0.2, 'c': 0.0}, {'a': 0.2, 'b': 0.2, 'c': 0.1}, margin=0.02); "
        "assert 'scipy.stats' in sys.modules and 'statsmodels.stats.power' in sys.modules"
    )
    fresh(code)


#: What a refused setting must not import: the model, index and tracking libraries load only once every setting of
#: every cell is accepted (each costs seconds on a loaded machine).
HEAVY_AFTER_CHECKS = ("torch", "faiss", "mlflow", "sentence_transformers", "transformers")
#: A mistake the command line shows as text (an option a group does not have, a key no config has) is refused before
#: Hydra, OmegaConf or numpy is imported: what is left is Python's own start-up.
BEFORE_COMPOSING = (*HEAVY_AFTER_CHECKS, "hydra", "omegaconf", "numpy", "pandas")
#: a stage parameter's value is checked as the stage is built, before the runner (and pandas with it) is imported
BEFORE_THE_RUNNER = (*HEAVY_AFTER_CHECKS, "pandas", "ablate.runner.job")


@pytest.mark.parametrize(
    ("args", "said", "heavy"),
    [
        (["variant=Z"], "variant='Z' is not valid; valid options: A, B, C, D, oracle", BEFORE_COMPOSING),
        (["eval.kss=1"], "there is no such setting; did you mean eval.ks?", BEFORE_COMPOSING),
        (["-m", "variant=A,E"], "variant='E' is not valid", BEFORE_COMPOSING),
        (["rrf.k=-1"], "rrf.k=-1 is not valid; it must be a finite number >= 0", BEFORE_THE_RUNNER),
        (["-m", "variant=A,B,C", "++dense.batch_size=0"], "dense.batch_size", HEAVY_AFTER_CHECKS),
        (
            ["hydra.verbose=1,2"],
            "hydra.verbose='1,2' is not valid; several values are a sweep: add -m",
            HEAVY_AFTER_CHECKS,
        ),
    ],
    ids=[
        "unknown-option",
        "unknown-key",
        "unknown-option-in-a-sweep",
        "bad-value",
        "bad-value-in-a-sweep",
        "values-without-m",
    ],
)
def test_a_mistaken_override_is_refused_before_the_heavy_libraries_load(args, said, heavy):
    """The refusal is one line and exit 2, and the process never imported torch, FAISS, MLflow or
    sentence-transformers: the settings are checked before the corpus, the store or a model is touched."""
    code, out, err, packages = run_modules("ablate", *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and said in err, err
    assert sorted(packages.intersection(heavy)) == []
