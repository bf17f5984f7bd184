"""The plan's composer (ablate.app.compose) against Hydra's own composition, on generated command lines.

The composer composes each distinct set of config-group choices once and applies each cell's value overrides to a
copy. This checks that shortcut: a seeded generator writes command lines of every override form (``key=value``,
``+key=``, ``++key=``, ``~key``, ``~key=value``, group choices, a list choice, interpolations, Hydra's own keys,
sweeps over values and choices, a sweep without ``-m``), splits each into the cells Hydra's basic sweeper launches,
and composes every cell both ways: one composer for the whole run (its templates are shared across the cells and the
command lines, so a cell that changed a template would show) and :func:`hydra.compose`. A cell Hydra refuses is
refused; any other comes out the same: the config unresolved, node for node (the ``hydra`` node included), what a
job reads resolved (or the same resolution error), and the struct flag.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from ablate.app.compose import Composer
from ablate.app.hydra_checks import group_options as hydra_group_options
from ablate.app.paths import CONF_DIR, group_options, register_resolvers
from ablate.app.plan import split_cells
from ablate.errors import ConfigError
from ablate.record import flatten

#: Generated command lines in the default run, and in the ``slow`` tier (every seed a different command line).
QUICK, MORE = 40, 200
#: Values an override may take: numbers, booleans, null, strings, lists, mappings and interpolations (to a setting,
#: to a list, to a key that does not exist, through a resolver).
VALUES = (
    "1",
    "0",
    "-3",
    "2.5",
    "true",
    "false",
    "null",
    "word",
    "'two words'",
    "[1,2]",
    "[]",
    "{a:1,b:x}",
    "${retrieval.window}",
    "${eval.ks}",
    "${nope.missing}",
    "${oc.env:HOME}",
)
#: Keys no config has, to be added (``+``/``++``) or refused.
NEW_KEYS = ("extra", "extra.deep", "eval.new_key", "rrf.new_key", "bm25.new_key")
#: Keys of Hydra's own node: ones the composer applies to its copy, and ones Hydra's loader writes after the
#: overrides (the composer composes such a cell whole).
HYDRA_KEYS = (
    "hydra.job.chdir",
    "hydra.verbose",
    "hydra.sweep.subdir",
    "hydra.launcher.n_jobs",
    "hydra.job.name",
    "hydra.runtime.cwd",
    "hydra.job.config.override_dirname.item_sep",
)


class Generator:
    """Seeded command lines over the real ``conf/``: its groups and options, and the keys a default cell has."""

    def __init__(self) -> None:
        self.groups = {g: opts for g, opts in group_options().items() if opts and g != "generator"}
        self.groups["hydra/launcher"] = [o for o in hydra_group_options("hydra/launcher") if o != "ray"]
        self.lists = ("[bm25]", "[bm25,dense]", "[dense]", "[oracle]")
        cfg = compose(config_name="config", overrides=[])
        self.keys = sorted(k for k in flatten(OmegaConf.to_container(cfg)) if not k.startswith("defaults"))
        self.keys += [
            "bm25.k1",
            "dense.model",
            "rerank.depth",
            "progress",
            "eval",
            "rrf",
        ]  # absent ones, blocks

    def override(self, rng: random.Random) -> str:
        form = rng.choice(
            ("set", "set", "set", "choice", "choice", "add", "force", "delete", "hydra", "list")
        )
        value = rng.choice(VALUES)
        if form == "choice":
            group = rng.choice(sorted(self.groups))
            prefix = rng.choice(("", "", "", "~", "+"))
            return f"~{group}" if prefix == "~" else f"{prefix}{group}={rng.choice(self.groups[group])}"
        if form == "list":
            return f"retrievers={rng.choice(self.lists)}"
        if form == "hydra":
            return (
                f"{rng.choice(('', '', '++', '~'))}{rng.choice(HYDRA_KEYS)}={rng.choice(('false', '2', 'x'))}"
            )
        key = rng.choice(self.keys + list(NEW_KEYS))
        if form == "delete":
            return f"~{key}" if rng.random() < 0.6 else f"~{key}={value}"
        return f"{dict(set='', add='+', force='++')[form]}{key}={value}"

    def command(self, seed: int) -> tuple[list[str], bool]:
        """``(overrides, multirun)``: one to five overrides; a sweep gives one or two of them several values."""
        rng = random.Random(seed)
        overrides = [self.override(rng) for _ in range(rng.randint(1, 5))]
        sweep = rng.random() < 0.35
        if sweep or rng.random() < 0.1:  # a sweep, or (one time in ten) commas without -m: refused
            for i in rng.sample(range(len(overrides)), k=min(len(overrides), rng.randint(1, 2))):
                key, eq, _ = overrides[i].partition("=")
                if eq and not key.startswith("~"):
                    group = self.groups.get(key.lstrip("+"))
                    options = (
                        rng.sample(group, k=min(2, len(group))) if group else rng.sample(VALUES[:8], k=2)
                    )
                    overrides[i] = f"{key}={','.join(options)}"
        return overrides, sweep


def outcome(make: Any, cell: list[str], refusal: type[Exception]) -> tuple[Any, ...]:
    """What comes of composing ``cell`` with ``make``: refused (``refusal`` raised), or the config (unresolved,
    whole), what a job reads resolved (or the resolution error's type) and the struct flag."""
    try:
        cfg = make(cell)
    except refusal:
        return ("refused",)
    whole = OmegaConf.to_container(cfg, resolve=False)
    try:
        job = OmegaConf.masked_copy(cfg, [str(k) for k in cfg if k != "hydra"])
        resolved: Any = OmegaConf.to_container(job, resolve=True)
    except Exception as e:  # noqa: BLE001 - the same resolution error both ways
        resolved = type(e).__name__
    return ("composed", whole, resolved, OmegaConf.is_struct(cfg))


@pytest.fixture(scope="module")
def generated():
    register_resolvers()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        yield Generator(), Composer()


def hydras(cell: list[str]) -> Any:
    return compose(config_name="config", overrides=cell, return_hydra_config=True)


def check_seeds(generated: tuple[Generator, Composer], seeds: range) -> dict[str, int]:
    """Every cell of every seed's command line composed both ways; returns how many cells came out which way."""
    generator, composer = generated
    seen = {"composed": 0, "refused": 0}
    for seed in seeds:
        overrides, multirun = generator.command(seed)
        try:
            cells = split_cells(overrides, multirun)
        except ConfigError:
            continue  # not a sweep Hydra's basic sweeper splits (its own test: test_plan.py)
        for cell in cells:
            mine = outcome(composer.compose, cell, ConfigError)  # the composer refuses in one line
            own = outcome(hydras, cell, Exception)  # Hydra's refusals come in several exception types
            assert mine[0] == own[0], (seed, cell)
            assert mine == own, (seed, cell)
            seen[mine[0]] += 1
    return seen


def test_generated_cells_compose_as_hydra_composes_them(generated):
    seen = check_seeds(generated, range(QUICK))
    assert seen["composed"] >= QUICK // 4 and seen["refused"] >= QUICK // 8, seen  # both sides exercised
    assert generated[1].composed < seen["composed"]  # and templates were shared


@pytest.mark.slow
def test_many_more_generated_cells_compose_as_hydra_composes_them(generated):
    check_seeds(generated, range(QUICK, QUICK + MORE))
