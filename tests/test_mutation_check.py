"""experiments/mutation_check.py stays usable: every mutant names text that occurs exactly once in the source it
mutates (code that moves must take its mutant along, or the hour-long check stops at that mutant), and each
mutation changes the text."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "ablate_mutation_check", ROOT / "experiments" / "mutation_check.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


TOOL = _tool()


@pytest.mark.parametrize("mutant", TOOL.MUTANTS, ids=lambda m: m.name)
def test_every_mutant_text_occurs_once_in_the_source(mutant: Any) -> None:
    text = (ROOT / "src" / "ablate" / mutant.path).read_text(encoding="utf-8")
    assert text.count(mutant.old) == 1, f"{mutant.name}: point it at the current text of {mutant.path}"
    assert mutant.new != mutant.old


def test_mutant_names_are_unique() -> None:
    names = [m.name for m in TOOL.MUTANTS]
    assert len(names) == len(set(names))
