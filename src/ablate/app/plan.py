"""The plan of one command: every cell it runs, composed once, its job built once, its reuse decided once.

``python -m ablate [-m] overrides...`` is planned before Hydra starts anything (:mod:`ablate.app.precheck` fills
the plan, :mod:`ablate.app.reuse_plan` looks each cell up), then run by Hydra: the command's task function
(:class:`ablate.app.command.Command`) carries the plan, so the sweeper (``hydra_plugins.ablate_sweeper``, given the task
function by Hydra's plugin interface) records the reused cells and launches the others, and a job run in this
process takes its :class:`~ablate.runner.job.JobSpec` from the plan instead of building its stages again. Nothing of
the plan is kept in module state: a second command in the same process (a test, a notebook) has its own.

Only Hydra's public API is used: the compose API, the override parser and the plugin interfaces.

* :func:`split_cells` is the cartesian product of a sweep, cell by cell in the order and with the spelling of
  Hydra's basic sweeper (``key=value`` per key, the last value given for a key kept at the key's first place).
* :class:`ablate.app.compose.Composer` composes each distinct set of config-group choices (``variant=C``, ``corpus=scifact``,
  ``hydra/launcher=joblib``) once with :func:`hydra.compose`, then applies each cell's value overrides (``rrf.k=60``,
  ``+x=1``, ``++bm25.k1=1.2``, ``~progress``) to a copy, with the semantics of Hydra's command line (struct mode: a
  key that does not exist is refused unless added with ``+``/``++``). The cells of a sweep over values share one
  composition. ``tests/test_plan.py`` compares the result with Hydra's own composition of the whole cell.
"""

from __future__ import annotations

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
                    o.input_line.partition("=")[2],
                    "only lists of values can be swept: give the values, e.g. 1,10,60 or range(1,100,10)",
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


#: A run name longer than this is cut (MLflow shows names in one table cell).
MAX_LABEL = 200


def cell_labels(cells: Sequence[Sequence[str]], names: Sequence[str]) -> list[str]:
    """Each cell's label, as the console prints it and MLflow names its run: the cell's ``name`` (its variant), plus
    the values of the overrides that tell cells of that name apart, keys cut to their last part unless two share it
    (``C k=1 window=20`` for ``variant=C ++rrf.k=1 retrieval.window=20``). A cell alone under its name is the name."""
    parsed = [
        {o.partition("=")[0].lstrip("+~"): o.partition("=")[2] for o in task_cell(cell)} for cell in cells
    ]
    by_name: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        by_name.setdefault(name, []).append(i)
    labels = list(names)
    for name, group in by_name.items():
        keys = [
            k
            for k in dict.fromkeys(k for i in group for k in parsed[i])
            if k != "variant" and len({parsed[i].get(k) for i in group}) > 1
        ]
        last = [k.rsplit(".", 1)[-1] for k in keys]
        short = {k: (t if last.count(t) == 1 else k) for k, t in zip(keys, last, strict=True)}
        for i in group:
            parts = [f"{short[k]}={parsed[i][k]}" for k in keys if k in parsed[i]]
            label = " ".join([name, *parts])
            labels[i] = label if len(label) <= MAX_LABEL else label[: MAX_LABEL - 1] + "…"
    return labels
