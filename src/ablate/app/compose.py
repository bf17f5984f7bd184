"""Composing the cells of a command with Hydra's compose API, each distinct set of config-group choices once.

:class:`Composer` composes each distinct set of config-group choices (``variant=C``, ``corpus=scifact``,
``hydra/launcher=joblib``) once with :func:`hydra.compose`, then applies each cell's value overrides (``rrf.k=60``,
``+x=1``, ``++bm25.k1=1.2``, ``~progress``) to a copy with the rules of Hydra's loader (struct mode: a key that does
not exist is refused unless added with ``+``/``++``), and records the overrides and ``hydra.job.override_dirname`` as
the loader does. The cells of a sweep over values share one composition (a composition costs several times the copy,
and a sweep pays it per cell otherwise). A cell that changes where configs come from or a part of the ``hydra`` node
the loader writes after the overrides (:data:`LOADER_FIELDS`), or holds a sweep (which Hydra refuses in one cell), is
composed whole. ``tests/test_compose.py`` checks, for generated command lines of every override form, that a cell
comes out exactly as :func:`hydra.compose` makes it, or is refused when Hydra refuses it. Hydra's refusals become
one-line :class:`~ablate.errors.ConfigError`\ s; an unknown key names the closest valid one.
"""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Sequence
from typing import Any

from ablate.app.paths import CONF_DIR, STAGE_GROUPS, read_yaml
from ablate.app.plan import parse
from ablate.errors import ConfigError

_NOT_IN_STRUCT = re.compile(r"Could not override '([^']+)'")
_SWEEP_IN_ONE_CELL = re.compile(r"Ambiguous value for argument '([^'=]+)=([^']*)'")
#: The parts of the ``hydra`` node Hydra's loader writes after it applies the overrides (where configs come from, the
#: runtime facts, the job's name, environment and override_dirname): a cell that sets or removes one of them is
#: composed whole, so they come out as Hydra's.
LOADER_FIELDS = (
    "hydra.searchpath",
    "hydra.runtime",
    "hydra.job.name",
    "hydra.job.env_set",
    "hydra.job.env_copy",
    "hydra.job.override_dirname",
    "hydra.job.config_name",
    "hydra.job.config",
)


def known_keys() -> list[str]:
    """Every key a user can set: the settings in ``conf/config.yaml`` and every stage's parameters."""

    from ablate.record import flatten

    keys: set[str] = set()
    data = read_yaml(CONF_DIR / "config.yaml") or {}
    keys.update(k for k in flatten({k: v for k, v in data.items() if k not in ("defaults", "hydra")}))
    for group in (*STAGE_GROUPS, "corpus"):
        for f in (CONF_DIR / group).glob("*.yaml"):
            d = read_yaml(f) or {}
            if group == "corpus":
                d = {"corpus": d.get("corpus", d)}
            keys.update(k for k in flatten(d) if "_target_" not in k and not k.startswith("defaults"))
    keys.update({"variant.name", "variant.description", "variant.order"})
    return sorted(keys)


def unknown_key_error(key: str, value: str) -> ConfigError:
    known = known_keys()
    parent = key.rpartition(".")[0]
    if (
        key in known and parent
    ):  # a setting of another config of the group: the chosen one leaves its block out
        return ConfigError(
            key,
            value,
            f"the chosen config has no {parent} block to set it in (null or absent there); "
            f"write ++{key}={value} to add it, or set the block whole ({parent}={{...}})",
        )
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}?" if close else "see python -m ablate --help for the settings"
    return ConfigError(key, value, f"there is no such setting; {hint}")


def hydra_error(message: str, overrides: list[str]) -> ConfigError:
    """Hydra's composition error as one line: an unknown key names the closest valid one."""
    m = _NOT_IN_STRUCT.search(message)
    if m:
        key = m.group(1)
        value = next((o.partition("=")[2] for o in overrides if o.lstrip("+~").startswith(key + "=")), "")
        return unknown_key_error(key, value)
    m = _SWEEP_IN_ONE_CELL.search(message)
    if m:
        return ConfigError(
            m.group(1).lstrip("+~"),
            m.group(2),
            "several values are a sweep: add -m; or write a list (KEY=[a,b]) or a quoted string (KEY='a,b')",
        )
    return ConfigError("overrides", " ".join(overrides), message.strip().splitlines()[0])


class Composer:
    """Compose cells with Hydra's compose API inside an initialised config directory, each distinct set of
    config-group choices once (see the module docstring). One per command: the compositions live as long as it."""

    def __init__(self) -> None:
        self._templates: dict[tuple[str, ...], Any] = {}
        self._groups: set[str] | None = None
        self.composed = 0

    def groups(self) -> set[str]:
        """Every config group (``corpus``, ``hydra/launcher``, ...), from Hydra's config loader."""
        if self._groups is None:
            from hydra.core.global_hydra import GlobalHydra

            loader = GlobalHydra.instance().config_loader()
            found: set[str] = set()
            todo = [""]
            while todo:
                parent = todo.pop()
                for name in loader.list_groups(parent):
                    group = f"{parent}/{name}" if parent else name
                    found.add(group)
                    todo.append(group)
            self._groups = found
        return self._groups

    def compose(self, overrides: Sequence[str]) -> Any:
        """The composed config of one cell (``hydra`` node included), Hydra's errors as one-line ConfigErrors."""
        parsed = parse(overrides)
        if any(o.is_sweep_override() or _loader_field(str(o.key_or_group)) for o in parsed):
            return compose_whole(list(overrides))  # Hydra's own refusal of a sweep in one cell; LOADER_FIELDS
        groups = self.groups()
        is_value = [isinstance(o.value(), dict) or o.key_or_group not in groups for o in parsed]
        values = [o for o, v in zip(parsed, is_value, strict=True) if v]
        choices = tuple(o.input_line for o, v in zip(parsed, is_value, strict=True) if not v)
        template = self._templates.get(choices)
        if template is None:
            template = self._templates[choices] = compose_whole(list(choices))
            self.composed += 1
        cfg = copy.deepcopy(template)
        for o in values:
            _apply(cfg, o, list(overrides))
        _record(cfg, parsed)
        return cfg


def _loader_field(key: str) -> bool:
    """``key`` is, holds or lies under one of :data:`LOADER_FIELDS`."""
    return key == "hydra" or any(
        key == f or key.startswith(f + ".") or f.startswith(key + ".") for f in LOADER_FIELDS
    )


def _record(cfg: Any, parsed: Sequence[Any]) -> None:
    """The cell's overrides as Hydra's loader records them: Hydra's own in ``hydra.overrides.hydra``, the others in
    ``hydra.overrides.task``, each in the order given, and the task's in ``hydra.job.override_dirname`` (sorted,
    ``exclude_keys`` left out, joined by ``item_sep``, ``=`` written as ``kv_sep``)."""
    task = [o for o in parsed if not o.is_hydra_override()]
    cfg.hydra.overrides.hydra = [o.input_line for o in parsed if o.is_hydra_override()]
    cfg.hydra.overrides.task = [o.input_line for o in task]
    conf = cfg.hydra.job.config.override_dirname
    lines = sorted(o.input_line for o in task if o.key_or_group not in conf.exclude_keys)
    cfg.hydra.job.override_dirname = conf.item_sep.join(lines).replace("=", conf.kv_sep)


def _apply(cfg: Any, o: Any, overrides: list[str]) -> None:
    """One value override on the composed config, as Hydra's command line applies it (struct mode)."""
    from omegaconf import OmegaConf, open_dict
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

    key, value = o.key_or_group, o.value()
    try:
        if o.package is not None:
            raise ConfigError(
                o.input_line, "", f"there is no config group {key!r}; see python -m ablate --help"
            )
        if o.is_delete():
            held = OmegaConf.select(cfg, key, throw_on_missing=False)
            if held is None:
                raise ConfigError(key, o.input_line, "there is nothing to delete there")
            if value is not None and value != held:
                raise ConfigError(key, o.input_line, f"it holds {held!r}, not {value!r}")
            parent, _, leaf = key.rpartition(".")
            with open_dict(cfg):
                del (OmegaConf.select(cfg, parent) if parent else cfg)[leaf]
        elif o.is_add():
            if OmegaConf.select(cfg, key, throw_on_missing=False) is not None and not isinstance(
                value, (dict, list)
            ):
                raise ConfigError(key, o.input_line, f"it is set already: drop the + ({o.input_line[1:]})")
            OmegaConf.update(cfg, key, value, merge=True, force_add=True)
        elif o.is_force_add():
            OmegaConf.update(cfg, key, value, merge=True, force_add=True)
        else:
            try:
                OmegaConf.update(cfg, key, value, merge=True)
            except (ConfigAttributeError, ConfigKeyError):
                raise unknown_key_error(key, o.get_value_element_as_str()) from None
    except OmegaConfBaseException as e:
        raise ConfigError(o.input_line, " ".join(overrides), str(e).strip().splitlines()[0]) from None


def compose_whole(overrides: list[str]) -> Any:
    """Hydra's own composition of ``overrides`` (hydra node included), errors as one-line ConfigErrors."""
    from hydra import compose
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        return compose(config_name="config", overrides=overrides, return_hydra_config=True)
    except (HydraException, OmegaConfBaseException) as e:
        raise hydra_error(str(e), overrides) from None
