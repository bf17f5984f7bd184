"""What a command line may change of Hydra's own config (the ``hydra`` node), checked before anything runs.

Hydra builds its launcher, sweeper and logging from that node after the command has started (a sweep's parent run
may exist by then), and a value it cannot use ends in a traceback there. So, per cell, before and after composing:

* ``hydra/<group>=OPTION`` (``hydra/launcher=joblib``, ``hydra/job_logging=disabled``): an option the group has;
  not removed (``~hydra/job_logging``) and not null;
* the launcher and the sweeper are chosen as options only: ``hydra.launcher._target_=...`` (or a mapping with a
  ``_target_``, a null, a removal) is refused, and the composed ``_target_`` must be a launcher or sweeper plugin
  Hydra has (:func:`check_hydra_config`);
* the logging configs (``hydra.job_logging``, ``hydra.hydra_logging``) are chosen as options; of their keys only
  the levels may be set (``hydra.job_logging.root.level=INFO``, ``...loggers.NAME.level=DEBUG``) and must be
  level names Python's logging knows;
* ``hydra.verbose``: true/false, a logger name or a list of them (Hydra asserts on anything else).

Each refusal is one :class:`~ablate.errors.ConfigError` naming the key, the value and what to write instead.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ablate.errors import ConfigError

#: Hydra's plugin nodes, chosen as options of ``hydra/launcher`` and ``hydra/sweeper``.
PLUGIN_NODES = ("launcher", "sweeper")
#: Hydra's logging nodes, chosen as options of ``hydra/job_logging`` and ``hydra/hydra_logging``.
LOGGING_NODES = ("job_logging", "hydra_logging")
#: The one kind of key of a logging node the command line may set: a level.
_LEVEL_KEY = re.compile(r"^hydra\.(job_logging|hydra_logging)\.(root|loggers\.[^.]+|handlers\.[^.]+)\.level$")


def group_options(group: str) -> list[str]:
    """The options of a Hydra config group (``hydra/launcher``: basic, joblib, ray, and any plugin's), from Hydra's
    config loader; call inside an initialised config directory."""
    from hydra.core.global_hydra import GlobalHydra

    return list(GlobalHydra.instance().config_loader().get_group_options(group))


def _choose(group: str) -> str:
    return f"{group}={'|'.join(group_options(group))}"


def _levels() -> str:
    return ", ".join(n for n in logging.getLevelNamesMapping() if n not in ("WARN", "FATAL"))


def _valid_level(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value >= 0
    return isinstance(value, str) and value in logging.getLevelNamesMapping()


def check_hydra_overrides(overrides: Sequence[str]) -> None:
    """One cell's overrides of Hydra's own config: see the module docstring. Other overrides pass untouched."""
    from ablate.app.plan import parse

    if not any("hydra" in o for o in overrides):
        return  # nothing of Hydra's: no second parse of every cell of a sweep
    for o in parse(overrides):
        key = str(o.key_or_group)
        if not key.startswith(("hydra/", "hydra.")) or o.is_sweep_override():
            continue  # a sweep left in one cell: the composition refuses it (not a sweep: use a list, or -m)
        value = None if o.is_delete() else o.value()
        shown = o.input_line if o.is_delete() else o.get_value_element_as_str()
        if key.startswith("hydra/"):
            _check_group(key, o.is_delete(), value, shown)
            continue
        node = key.split(".")[1] if "." in key else ""
        if node in PLUGIN_NODES:
            _check_plugin_override(key, node, o.is_delete(), value, shown)
        elif node in LOGGING_NODES:
            _check_logging_override(key, node, o.is_delete(), value, shown)
        elif key == "hydra.verbose":
            if o.is_delete():
                raise ConfigError(key, shown, "it cannot be removed; set hydra.verbose=false")
            check_verbose(value)


def _check_group(group: str, delete: bool, value: Any, shown: str) -> None:
    options = group_options(group)
    if not options:
        return  # not a group of Hydra's: Hydra's composition says so
    if delete:
        raise ConfigError(
            group, shown, f"Hydra needs this config group; choose one of its options: {_choose(group)}"
        )
    if not isinstance(value, str) or value not in options:
        raise ConfigError(group, shown, f"valid options: {', '.join(options)} (choose one: {_choose(group)})")


def _check_plugin_override(key: str, node: str, delete: bool, value: Any, shown: str) -> None:
    """``hydra.launcher...``/``hydra.sweeper...``: no ``_target_``, no removal, no null; settings of the chosen
    plugin (``hydra.launcher.n_jobs=2``) stay for Hydra's composition to check."""
    group = f"hydra/{node}"
    named = key.split(".")[2:3] == ["_target_"] or (isinstance(value, Mapping) and "_target_" in value)
    if named or delete or (key == f"hydra.{node}" and not isinstance(value, Mapping)):
        raise ConfigError(
            key,
            shown,
            f"Hydra's {node} is chosen as a config group option, not set by its class or removed: "
            f"{_choose(group)} (its settings: hydra.{node}.KEY=VALUE)",
        )


def _check_logging_override(key: str, node: str, delete: bool, value: Any, shown: str) -> None:
    group = f"hydra/{node}"
    if not delete and _LEVEL_KEY.match(key):
        if not _valid_level(value):
            raise ConfigError(key, value, f"it must be a logging level: one of {_levels()}")
        return
    raise ConfigError(
        key,
        shown,
        f"choose a logging config with {_choose(group)}; of its keys only the levels can be set here "
        f"(hydra.{node}.root.level=INFO, hydra.{node}.loggers.NAME.level=DEBUG), or use hydra.verbose=NAME for a "
        "logger's debug lines",
    )


def check_verbose(value: Any) -> None:
    """``hydra.verbose``: true/false, a logger name, or a list of logger names."""
    ok = (
        isinstance(value, bool)
        or (isinstance(value, str) and value != "")
        or (
            isinstance(value, Sequence)
            and not isinstance(value, str)
            and all(isinstance(v, str) and v for v in value)
        )
    )
    if not ok:
        raise ConfigError(
            "hydra.verbose",
            value,
            "give true, false, a logger name (hydra.verbose=ablate) or a list of them (hydra.verbose=[ablate,hydra])",
        )


def _plugin_classes(node: str) -> list[str]:
    from hydra.core.plugins import Plugins
    from hydra.plugins.launcher import Launcher
    from hydra.plugins.sweeper import Sweeper

    kind = Launcher if node == "launcher" else Sweeper
    return [f"{c.__module__}.{c.__name__}" for c in Plugins.instance().discover(kind)]


def check_hydra_config(cfg: Any) -> None:
    """The composed ``hydra`` node, however the command line or a config file set it: the launcher's and the
    sweeper's ``_target_`` are plugins Hydra has, ``hydra.verbose`` is a value Hydra takes, and the logging configs'
    levels are levels."""
    from omegaconf import OmegaConf

    hydra = cfg.hydra
    for node in PLUGIN_NODES:
        target = OmegaConf.select(hydra, f"{node}._target_", default=None)
        if target not in _plugin_classes(node):
            raise ConfigError(
                f"hydra.{node}._target_",
                target,
                f"it is not one of Hydra's {node} plugins; choose one with {_choose('hydra/' + node)}",
            )
    check_verbose(
        OmegaConf.to_container(hydra.verbose) if OmegaConf.is_config(hydra.verbose) else hydra.verbose
    )
    for node in LOGGING_NODES:
        conf = OmegaConf.to_container(hydra[node], resolve=False) if hydra.get(node) is not None else None
        if not isinstance(conf, Mapping) or conf.get("root") is None:
            continue  # Hydra's default logging, or none configured
        if conf.get("version") != 1:
            raise ConfigError(
                f"hydra.{node}.version",
                conf.get("version"),
                f"it must be 1; choose {_choose('hydra/' + node)}",
            )
        parts: list[tuple[str, Any]] = [("root", conf.get("root"))]
        for section in ("loggers", "handlers"):
            items = conf.get(section) or {}
            parts += [(f"{section}.{k}", v) for k, v in (items.items() if isinstance(items, Mapping) else ())]
        for where, part in parts:
            if isinstance(part, Mapping) and "level" in part and not _valid_level(part["level"]):
                raise ConfigError(
                    f"hydra.{node}.{where}.level",
                    part["level"],
                    f"it must be a logging level: one of {_levels()}",
                )
