"""Which ``_target_`` a config may build: the object a target names is resolved and checked before anything is
constructed.

A target string is first filtered (it must start with ``ablate.`` or be a class an installed package registers under
the entry-point group ``ablate.stages``: nothing else is even imported), then resolved to an object (imported and
looked up, never called), and only then allowed:

* a **stage**: a class defined in an ablate module (the class's own ``__module__``, where its ``__qualname__`` finds
  it again; not the string, so ``ablate.runner.job.subprocess.Popen``, a name an ablate module merely imports, is
  refused) whose ``kind`` is one of the four stage kinds (:data:`ablate.stages.base.KINDS`), or a registered plugin
  class of a stage kind. A function (``ablate.runner.job.git_commit``) is refused too. Nested ``_target_``s inside a
  stage's parameters follow the same rule.
* a **Hydra callback**: one of ablate's own callback classes (a subclass of Hydra's ``Callback`` defined in an ablate
  module), with no nested ``_target_``;
* nothing nested in Hydra's **launcher or sweeper** config (Hydra checks their own ``_target_`` is a registered
  plugin, but would build a nested one first).

Every refusal is one :class:`~ablate.errors.ConfigError` naming ``<key>._target_`` and what the target resolved to.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Mapping
from importlib import metadata
from typing import Any

from ablate.errors import ConfigError
from ablate.stages.base import KINDS

ENTRY_POINT_GROUP = "ablate.stages"
EXAMPLE = "ablate.stages.retrievers.bm25.BM25Retriever"
ALLOWED = (
    f"only classes under ablate. or registered by an installed plugin (entry-point group {ENTRY_POINT_GROUP!r}) "
    "may be built from a config"
)


def plugin_entry_points() -> dict[str, metadata.EntryPoint]:
    """Registered stage classes (entry points ``ablate.stages``: ``name = module:Class``) by their target string
    ``module.Class``."""
    return {
        ep.value.replace(":", "."): ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.attr
    }


def locate(path: str) -> Any:
    """The object ``path`` names (``pkg.module.Name.attr``): the longest importable module prefix, then attributes.
    Only modules named by a prefix of ``path`` are imported; nothing is called. ImportError/AttributeError when
    there is no such object."""
    parts = path.split(".")
    if not all(parts):
        raise ImportError(f"{path!r} is not a dotted path")
    obj: Any = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], start=1):
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        if not inspect.ismodule(obj):
            raise AttributeError(f"{'.'.join(parts[:i])} has no attribute {part!r}")
        obj = importlib.import_module(".".join(parts[: i + 1]))
    return obj


def defined_in_ablate(obj: Any) -> bool:
    """True for a class or function whose own module is ablate's and where its qualified name finds it again."""
    module = getattr(obj, "__module__", None)
    if not isinstance(module, str) or not (module == "ablate" or module.startswith("ablate.")):
        return False
    found: Any = sys.modules.get(module)
    for part in str(getattr(obj, "__qualname__", "")).split("."):
        found = getattr(found, part, None)
    return found is obj


def _described(obj: Any) -> str:
    what = "class" if inspect.isclass(obj) else "function" if callable(obj) else type(obj).__name__
    name = f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', getattr(obj, '__name__', '?'))}"
    return f"{what} {name}"


def _resolve(
    key: str, target: object, example: str, allowed: str = ALLOWED, plugins: bool = True, fix: str = ""
) -> Any:
    """The object ``target`` names; refuses a non-string, a target outside the filter, a missing object and an
    object not defined in ablate (a plugin's object is the one its entry point declares)."""
    where = f"{key}._target_"
    if not isinstance(target, str) or not target:
        raise ConfigError(where, target, f"name a class, e.g. {example}")
    ours = target.startswith("ablate.")
    plugin = plugin_entry_points().get(target) if plugins and not ours else None  # ~35 ms: only when needed
    if plugin is None and not ours:
        how = "use an ablate. class, or install the plugin that registers it" if plugins else fix
        raise ConfigError(where, target, f"{allowed}; {how}")
    try:
        obj = plugin.load() if plugin is not None else locate(target)
    except Exception:  # noqa: BLE001 - ImportError/AttributeError variants for a bad path; nothing was built
        raise ConfigError(where, target, "no such class: check the module path and the class name") from None
    if plugin is None and not defined_in_ablate(obj):
        raise ConfigError(
            where,
            target,
            f"it resolves to {_described(obj)}, which is not defined in ablate (an ablate module only imports it); "
            f"{allowed}; {fix}",
        )
    return obj


def stage_class(key: str, target: object) -> type:
    """The stage class ``target`` names, resolved and checked (see the module docstring), or ConfigError. Nothing
    is constructed."""
    obj = _resolve(key, target, EXAMPLE, fix=f"name a stage class, e.g. {EXAMPLE}")
    if not inspect.isclass(obj):
        raise ConfigError(
            f"{key}._target_",
            target,
            f"it is a {_described(obj)}, not a stage class; name one, e.g. {EXAMPLE}",
        )
    kind = getattr(obj, "kind", None)
    if kind not in KINDS:
        raise ConfigError(
            f"{key}._target_",
            target,
            f"{obj.__qualname__} is not a stage (its class has no kind among {', '.join(KINDS)}); name a stage class",
        )
    return obj


def check_nested_targets(key: str, node: Any) -> None:
    """Every ``_target_`` inside a stage's parameters names a stage class too (Hydra would build it first)."""
    if isinstance(node, Mapping):
        for k, v in node.items():
            if k == "_target_":
                stage_class(key, v)
            else:
                check_nested_targets(f"{key}.{k}", v)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            check_nested_targets(f"{key}[{i}]", v)


def has_target(node: Any) -> bool:
    if isinstance(node, Mapping):
        return "_target_" in node or any(has_target(v) for v in node.values())
    if isinstance(node, list):
        return any(has_target(v) for v in node)
    return False


CALLBACKS_ONLY = "command-line overrides are trusted input, but callbacks may only be ablate. classes"


def check_callback(key: str, node: Any) -> None:
    """A Hydra callback's config: ``_target_`` is one of ablate's own callback classes, and nothing nested is built."""
    from hydra.experimental.callback import Callback

    if not isinstance(node, Mapping) or "_target_" not in node:
        raise ConfigError(key, node, f"{CALLBACKS_ONLY}; give a mapping with _target_, or drop the override")
    target = node["_target_"]
    obj = _resolve(
        key,
        target,
        "ablate.app.callbacks.SweepCallback",
        CALLBACKS_ONLY,
        plugins=False,
        fix="drop the override",
    )
    if not (inspect.isclass(obj) and issubclass(obj, Callback)):
        raise ConfigError(
            f"{key}._target_",
            target,
            f"{CALLBACKS_ONLY}: it names {_described(obj)}, not an ablate Hydra callback; drop the override",
        )
    nested = {k: v for k, v in node.items() if k != "_target_"}
    if has_target(nested):
        raise ConfigError(
            key, dict(node), f"{CALLBACKS_ONLY}: nothing nested in it may be built; drop the override"
        )


def check_plugin_config(key: str, node: Any) -> None:
    """Hydra's launcher or sweeper config (``hydra.launcher``, ``hydra.sweeper``): Hydra checks that its own
    ``_target_`` is a registered plugin, but would build any ``_target_`` nested in it first, so none may be."""
    if not isinstance(node, Mapping):
        return
    for k, v in node.items():
        if has_target(v):
            raise ConfigError(
                f"{key}.{k}",
                v,
                f"Hydra builds its {key.rsplit('.', 1)[-1]} from plain settings; nothing nested in it may be built "
                "(a _target_ there would be constructed before the sweep starts); drop the override",
            )
