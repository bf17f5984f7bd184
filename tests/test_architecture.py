"""The layering a newcomer reads from the folder names holds: no import cycles, MLflow and Hydra at the edges,
no long functions without a reason.

The rules are by package: every package (or top-level module) of ``src/ablate`` and ``src/hydra_plugins`` has one
row in :data:`LAYERS` naming what it may import; a new package is one new row. Imports are read from the source
(absolute and relative, at the top or inside functions), never by importing it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ROOTS = (SRC / "ablate", SRC / "hydra_plugins")

#: What everything may import: errors, setting checks, the content cache, safe names, safe YAML, tables, progress
#: lines, secret redaction.
BASE = frozenset({"errors", "checks", "cache", "safenames", "safeyaml", "tables", "progress", "secrets"})
#: Entry-point shims (``python -m ablate``, ``python -m ablate.report``, ...): each hands over to app/ at once.
ENTRY = (
    "__main__",
    "encode",
    "evaluate",
    "init",
    "label",
    "plan",
    "report",
    "runs",
    "split",
    "train_reranker",
)
#: package -> the packages it may import besides itself (``app -> runner -> stages, evaluation -> data``; study reads
#: record and tracking; tracking moves the record in and out of MLflow; nothing below app imports app).
LAYERS: dict[str, frozenset[str]] = {
    "": frozenset(),  # the root package: its version only; anything may import it
    **{m: BASE for m in BASE},
    "data": BASE,
    # documents -> corpus records (readers, sections, metadata); its __main__ is an entry shim
    "ingest": BASE | {"data"},
    "evaluation": BASE | {"data"},
    # pools, the journal, the grade legend, label versions' workspace; the LLM assessor asks a generator stage
    "labels": BASE | {"data", "evaluation", "stages"},
    "models": BASE,  # model packaging (e5 conversion, model-file fingerprints): below every stage
    "stages": BASE | {"data", "models"},
    "record": BASE,
    "tracking": BASE | {"record"},
    "record_digest": BASE | {"record", "tracking"},
    "runner": BASE | {"data", "evaluation", "stages", "record", "record_digest", "tracking"},
    "study": BASE | {"evaluation", "record", "record_digest", "tracking"},
    "app": BASE
    | {
        "data",
        "evaluation",
        "stages",
        "record",
        "record_digest",
        "tracking",
        "runner",
        "study",
        "ingest",
        "labels",
    },
    "testing": BASE
    | {"data", "stages", "app"},  # the stage contract builds a stage from its YAML as the CLI does
    **{m: frozenset({"app"}) for m in ENTRY},
    # python -m ablate.gate hands over to app/; the module also offers the decision itself (ablate.gate.decide)
    "gate": frozenset({"app", "study"}),
    "hydra_plugins": frozenset({"app", "errors"}),  # Hydra's sweeper/launcher plugins hand over to app/
}
#: Who may import a library at the edge: MLflow only through tracking; Hydra (and OmegaConf) only where a config is
#: composed or Hydra calls in.
EDGES = {
    "mlflow": {"tracking"},
    "hydra": {"app", "hydra_plugins", "testing"},
    "omegaconf": {"app", "hydra_plugins", "testing"},
}


def _module(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(source: str, module: str, is_package: bool) -> set[str]:
    """Every module ``source`` (the text of ``module``) imports, at the top or inside functions: ``import a.b``,
    ``from a import b`` (``a`` and ``a.b``) and relative imports resolved against the module's package."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{a.name}" for a in node.names)
    return found


def _imports() -> dict[str, set[str]]:
    """module -> every module it imports."""
    out: dict[str, set[str]] = {}
    for root in ROOTS:
        for path in root.rglob("*.py"):
            mod = _module(path)
            out[mod] = imports_of(path.read_text(encoding="utf-8"), mod, path.name == "__init__.py")
    return out


IMPORTS = _imports()
MODULES = set(IMPORTS)


def _internal(mod: str) -> set[str]:
    return {m for m in IMPORTS[mod] if m in MODULES and m != mod}


def layer(mod: str) -> str:
    """``ablate.runner.job`` -> ``runner``; ``ablate.tracking`` -> ``tracking``; ``hydra_plugins.x`` ->
    ``hydra_plugins``."""
    parts = mod.split(".")
    if parts[0] == "hydra_plugins":
        return "hydra_plugins"
    if len(parts) > 2 and parts[-1] == "__main__":  # a package's ``python -m`` shim (ablate.ingest): an ENTRY
        return "__main__"
    return parts[1] if len(parts) > 1 else ""


def layering_violations(imports: dict[str, set[str]]) -> list[str]:
    """Every import (module -> the modules it imports) that crosses the layers against :data:`LAYERS`."""
    bad = []
    for mod, deps in sorted(imports.items()):
        own = layer(mod)
        if own not in LAYERS:
            bad.append(f"{mod}: package {own!r} has no row in LAYERS (say what it may import)")
            continue
        for dep in sorted(deps):
            # the root package (``from ablate import record`` reads it too) holds only the version
            if dep in imports and dep != mod and layer(dep) not in LAYERS[own] | {own, ""}:
                bad.append(f"{mod} imports {dep}")
    return bad


def test_imports_are_read_absolute_and_relative():
    """The reader sees relative imports too, so ``from ...runner import job`` cannot slip past the layers."""
    src = "from ...runner import job\nfrom . import rrf\nfrom .base import Fuser\ndef f():\n    import ablate.app.cli\n"
    found = imports_of(src, "ablate.stages.fusion.combsum", is_package=False)
    assert {
        "ablate.runner",
        "ablate.runner.job",
        "ablate.stages.fusion.rrf",
        "ablate.stages.fusion.base",
    } <= found
    assert "ablate.app.cli" in found
    assert imports_of("from . import x\n", "ablate.stages", is_package=True) == {
        "ablate.stages",
        "ablate.stages.x",
    }
    fake = {
        "ablate.stages.fusion.combsum": found,
        "ablate.runner.job": set(),
        "ablate.app.cli": set(),
        "ablate.stages.fusion.rrf": set(),
    }
    assert layering_violations(fake) == [
        "ablate.stages.fusion.combsum imports ablate.app.cli",
        "ablate.stages.fusion.combsum imports ablate.runner.job",
    ]


def test_both_source_trees_are_read():
    assert "ablate.tracking" in MODULES and "ablate.testing.contracts" in MODULES
    assert any(m.startswith("hydra_plugins.ablate_sweeper") for m in MODULES)


def test_no_import_cycles_between_modules():
    graph = {m: _internal(m) for m in MODULES}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*stack[stack.index(n) :], n]))
            if n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_layers_depend_downwards_only():
    """app -> runner -> stages/evaluation -> data; study reads record and tracking; nothing below app imports app;
    nothing in ablate imports hydra_plugins."""
    bad = layering_violations(IMPORTS)
    assert not bad, bad


def test_mlflow_and_hydra_stay_at_the_edges():
    """Only the tracking layer imports mlflow; only app, Hydra's plugins and the stage contract import Hydra."""
    bad = []
    for lib, allowed in EDGES.items():
        for mod in sorted(MODULES):
            if layer(mod) not in allowed and any(i == lib or i.startswith(lib + ".") for i in IMPORTS[mod]):
                bad.append(f"{mod} imports {lib}")
    assert not bad, bad
    assert any(i.startswith("mlflow") for m in MODULES if layer(m) == "tracking" for i in IMPORTS[m])


def test_hydra_is_used_through_its_public_api_only():
    """No module under src/ (ablate and its hydra_plugins) names Hydra's private package or patches its loader: the
    compose API, the override parser and the plugin interfaces are what Hydra documents and keeps."""
    private = re.compile(r"hydra\._internal|_load_configuration_impl")
    found = [
        f"{path.relative_to(SRC.parent)}:{i}"
        for root in ROOTS
        for path in sorted(root.rglob("*.py"))
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if private.search(line)
    ]
    assert found == []


def test_no_function_over_80_lines_without_a_reason():
    long = []
    for root in ROOTS:
        for path in root.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    n = (node.end_lineno or node.lineno) - node.lineno + 1
                    doc = ast.get_docstring(node) or ""
                    if n > 80 and "Long because" not in doc:
                        long.append(f"{_module(path)}.{node.name} ({n} lines)")
    assert not long, long


#: The most lines a module under src/ may hold: past it a module holds several concepts, each of which reads better
#: on its own (the house style: one concept per module).
MAX_MODULE_LINES = 500


def test_no_module_over_500_lines():
    """One concept per module keeps each one readable in a sitting: a module past :data:`MAX_MODULE_LINES` is split
    by concept (as ``tracking/artifacts.py`` from ``tracking/tracker.py``)."""
    long = [
        f"{path.relative_to(SRC.parent)} ({n} lines)"
        for root in ROOTS
        for path in sorted(root.rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert long == [], long


def test_the_version_is_one_figure():
    """``ablate.__version__``, pyproject's version and the CHANGELOG's latest cut version say the same."""
    import ablate

    root = Path(__file__).resolve().parents[1]
    (project,) = re.findall(
        r'^version = "([^"]+)"', (root / "pyproject.toml").read_text(encoding="utf-8"), re.M
    )
    cut = re.findall(r"^## \[(\d+\.\d+\.\d+)\]", (root / "CHANGELOG.md").read_text(encoding="utf-8"), re.M)
    assert ablate.__version__ == project == cut[0]
