"""The plan of one command: every cell it runs, composed once, its job built once, its reuse decided once.

``python -m ablate [-m] overrides...`` is planned before Hydra starts anything (:mod:`ablate.app.precheck` fills
the plan, :mod:`ablate.app.reuse_plan` looks each cell up), then run by Hydra: the command's task function
(:class:`ablate.app.cli.Command`) carries the plan, so the sweeper (``hydra_plugins.ablate_sweeper``, given the task
function by Hydra's plugin interface) records the reused cells and launches the others, and a job run in this
process takes its :class:`~ablate.runner.job.JobSpec` from the plan instead of building its stages again. Nothing of
the plan is kept in module state: a second command in the same process (a test, a notebook) has its own.

Only Hydra's public API is used: the compose API, the override parser and the plugin interfaces.

* :func:`split_cells` is the cartesian product of a sweep, cell by cell in the order and with the spelling of
  Hydra's basic sweeper (``key=value`` per key, the last value given for a key kept at the key's first place).
* :class:`Composer` composes each distinct set of config-group choices (``variant=C``, ``corpus=scifact``,
  ``hydra/launcher=joblib``) once with :func:`hydra.compose`, then applies each cell's value overrides (``rrf.k=60``,
  ``+x=1``, ``++bm25.k1=1.2``, ``~progress``) to a copy, with the semantics of Hydra's command line (struct mode: a
  key that does not exist is refused unless added with ``+``/``++``). The cells of a sweep over values share one
  composition. ``tests/test_plan.py`` compares the result with Hydra's own composition of the whole cell.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ablate.errors import ConfigError

if TYPE_CHECKING:
    from ablate.runner.job import JobSpec
    from ablate.runner.reuse import Lookup


MULTIRUN_FLAGS = ("-m", "--multirun")


def is_multirun(argv: Sequence[str]) -> bool:
    return any(a in MULTIRUN_FLAGS for a in argv)


def parse(overrides: Sequence[str]) -> list[Any]:
    """Hydra's parse of command-line overrides (its public parser); a syntax error is one ConfigError."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        return list(OverridesParser.create().parse_overrides(list(overrides)))
    except HydraException as e:
        raise ConfigError("overrides", " ".join(overrides), str(e).strip().splitlines()[0]) from None


def split_cells(overrides: Sequence[str], sweep: bool = True) -> list[list[str]]:
    """The overrides of every job: one cell (``overrides`` as given) for a single run; for a sweep the cartesian
    product of its swept values, ``key=value`` per key, in the order Hydra's basic sweeper launches them."""
    if not sweep:
        return [list(overrides)]
    per_key: dict[str, list[str]] = {}
    for o in parse(overrides):
        key = o.get_key_element()
        if o.is_sweep_override():
            if not o.is_discrete_sweep():
                raise ConfigError(
                    key,
                    o.input_line,
                    "only lists of values can be swept: list them (a,b,c or choice(a,b,c))",
                )
            per_key[key] = [f"{key}={v}" for v in o.sweep_string_iterator()]
        else:
            per_key[key] = [f"{key}={o.get_value_element_as_str()}"]
    return [list(cell) for cell in itertools.product(*per_key.values())]


def batches(cells: Sequence[Sequence[str]], size: int | None) -> list[list[list[str]]]:
    """``cells`` in launch batches of ``size`` (None or -1: one batch)."""
    items = [list(c) for c in cells]
    if size is None or size == -1:
        return [items] if items else []
    if size < 1:
        raise ConfigError("hydra.sweeper.max_batch_size", size, "give a positive number or null")
    return [items[i : i + size] for i in range(0, len(items), size)]


def task_cell(cell: Sequence[str]) -> tuple[str, ...]:
    """A cell as its job sees it (Hydra's task overrides): without the ``hydra.*`` / ``hydra/*`` overrides."""
    return tuple(o for o in cell if not o.partition("=")[0].lstrip("+~").startswith(("hydra.", "hydra/")))


@dataclass
class Cell:
    """One job of the command: its overrides, the job the check built from its composed config (stages built and
    bound), the notes its composition raised, and what reuse decided (:mod:`ablate.app.reuse_plan`): ``looked_up``
    when the plan searched the store for it, ``reuse`` the checked finished run that stands for it."""

    overrides: tuple[str, ...]
    job: JobSpec
    notes: tuple[str, ...] = ()
    looked_up: bool = False
    reuse: Lookup | None = None


@dataclass
class Plan:
    """Every cell of one command, in launch order."""

    cells: list[Cell] = field(default_factory=list)
    multirun: bool = False

    def __len__(self) -> int:
        return len(self.cells)

    def cell(self, overrides: Sequence[str]) -> Cell | None:
        """The planned cell whose task overrides are ``overrides`` (a job's, as Hydra recorded them), or None."""
        key = task_cell(overrides)
        return next((c for c in self.cells if task_cell(c.overrides) == key), None)

    def reused(self) -> int:
        return sum(1 for c in self.cells if c.reuse is not None)


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
        if any(o.key_or_group.startswith("hydra.searchpath") for o in parsed):
            return compose_whole(list(overrides))  # it changes where configs come from: no shared template
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
        for (
            o
        ) in values:  # recorded as Hydra records them (after the choices: the order within each kind holds)
            (cfg.hydra.overrides.hydra if o.is_hydra_override() else cfg.hydra.overrides.task).append(
                o.input_line
            )
        return cfg


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
                from ablate.app.precheck import unknown_key_error

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
        from ablate.app.precheck import hydra_error

        raise hydra_error(str(e), overrides) from None
