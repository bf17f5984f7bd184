"""The layering a newcomer reads from the folder names holds: no import cycles, MLflow and Hydra at the edges,
no long functions without a reason."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "ablate"


def _module(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports() -> dict[str, set[str]]:
    """module -> every module it imports (top level or inside functions)."""
    out: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        mod = _module(path)
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names)
        out[mod] = found
    return out


IMPORTS = _imports()
MODULES = set(IMPORTS)


def _internal(mod: str) -> set[str]:
    return {m for m in IMPORTS[mod] if m in MODULES and m != mod}


def test_no_import_cycles_between_modules():
    graph = {m: _internal(m) for m in MODULES}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in graph[m]:
            if state.get(n) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*stack[stack.index(n) :], n]))
            if n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def _layer(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_layers_depend_downwards_only():
    """app -> runner -> stages/evaluation -> data; study reads records; nothing below app imports app."""
    below = {
        "data": {"app", "runner", "study", "stages", "evaluation", "testing"},
        "evaluation": {"app", "runner", "study", "stages", "testing"},
        "stages": {"app", "runner", "study", "testing"},
        "runner": {"app", "study", "testing"},
        "study": {"app", "runner", "stages", "testing"},
    }
    bad = []
    for mod in MODULES:
        forbidden = below.get(_layer(mod), set())
        for dep in _internal(mod):
            if _layer(dep) in forbidden:
                bad.append(f"{mod} imports {dep}")
    assert not bad, bad


def test_only_tracking_imports_mlflow_and_only_app_imports_hydra():
    mlflow = sorted(m for m in MODULES if any(i == "mlflow" or i.startswith("mlflow.") for i in IMPORTS[m]))
    assert mlflow == ["ablate.tracking"]
    hydra = sorted(m for m in MODULES if any(i.split(".")[0] in ("hydra", "omegaconf") for i in IMPORTS[m]))
    assert hydra and all(m.startswith("ablate.app.") for m in hydra), hydra


def test_hydra_is_used_through_its_public_api_only():
    """No module under src/ (ablate and its hydra_plugins) names Hydra's private package or patches its loader: the
    compose API, the override parser and the plugin interfaces are what Hydra documents and keeps."""
    private = re.compile(r"hydra\._internal|_load_configuration_impl")
    found = [
        f"{path.relative_to(SRC.parent)}:{i}"
        for path in sorted(SRC.parent.rglob("*.py"))
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if private.search(line)
    ]
    assert found == []


def test_no_function_over_80_lines_without_a_reason():
    long = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                doc = ast.get_docstring(node) or ""
                if n > 80 and "Long because" not in doc:
                    long.append(f"{_module(path)}.{node.name} ({n} lines)")
    assert not long, long
