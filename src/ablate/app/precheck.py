"""Check a whole command line before anything runs: every cell of a sweep is composed, validated and its inputs
checked, so a typo leaves no MLflow run, no experiment and no output folder behind.

What is refused here, with one line naming the key, value or file and the fix:

* an unknown config-group option (``variant=E``) and an unknown key (``eval.kss=1``, with the closest valid key);
* a bad value of any setting or stage parameter (each stage's constructor checks its own);
* a ``variant.name`` that would turn Hydra's output folder into a path outside ``outputs/`` or ``multirun/``;
* a ``hydra.callbacks`` entry that is not one of ablate's own callback classes, resolved before Hydra builds it, and
  a ``_target_`` nested in Hydra's launcher or sweeper config (command-line overrides are trusted input: they may
  name classes to build, so what Hydra builds is kept to ours: :mod:`ablate.app.targets`);
* what Hydra builds from its own node once the command has started: the launcher and the sweeper are chosen as
  options (``hydra/launcher=joblib``, never ``hydra.launcher._target_=...``), and its logging configs and
  ``hydra.verbose`` hold values it can use (:mod:`ablate.app.hydra_checks`);
* a sweep whose cells differ only in a chunker setting their chunker does not read (``corpus.chunker.size`` under
  ``kind=clause``): :func:`ablate.data.chunking.check_chunker_sweep`;
* a sweep (``-m``, more than one cell) with cells on the held-out split (``corpus.split=test``) unless it is
  confirmed as the one final run of settings chosen on dev (``--confirm-test``, which the CLI turns into
  ``heldout.confirm_test=true``): :func:`ablate.runner.heldout.check_test_sweep`;
* the corpus (files, split, identity, usable labels), the cache folder and the tracking store, once per distinct
  value across the sweep; then each cell's generator against its corpus (a llama.cpp model's worst-case prompt must
  fit its ``n_ctx``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ablate.app.compose import known_keys, unknown_key_error
from ablate.app.paths import (
    CONF_DIR,
    group_options,
    register_resolvers,
    stage_blocks,
)
from ablate.app.plan import Plan, is_multirun
from ablate.errors import ConfigError

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}")


def check_group_options(argv: list[str]) -> None:
    """Reject an unknown config-group option (``variant=X``) before Hydra prints a wall of text."""
    groups = group_options()
    for arg in argv:
        if "=" not in arg or arg.startswith(("-", "+", "~")):
            continue
        key, _, value = arg.partition("=")
        key = key.removeprefix("override ")
        if key in groups and value:
            plain = not value.startswith(("range(", "choice(", "glob("))
            for v in value.replace("[", "").replace("]", "").split(",") if plain else []:
                v = v.strip()
                if v and not groups[key]:  # conf/prompts/: template files a setting names
                    raise ConfigError(
                        key,
                        v,
                        f"conf/{key}/ holds files, not options to choose; name a template file with a setting, "
                        f"e.g. generator.prompt=NAME (a shipped answer template) or PATH, rerank.prompt=PATH "
                        "(see python -m ablate --help)",
                    )
                if v and v not in groups[key]:
                    raise ConfigError(key, v, f"valid options: {', '.join(groups[key])} (from conf/{key}/)")


def check_callback_overrides(argv: list[str]) -> None:
    """Only ``ablate.`` classes may be named as Hydra callbacks from the command line."""
    for arg in argv:
        key, eq, value = arg.lstrip("+~").partition("=")
        if key.startswith("hydra.callbacks") and (not eq or not value.strip("'\"").startswith("ablate.")):
            raise ConfigError(
                key,
                value,
                "command-line overrides are trusted input, but callbacks may only be ablate. classes; drop the override",
            )


def check_callbacks(cfg: Any) -> None:
    """Every Hydra callback of the composed config is one of ablate's own classes, resolved before Hydra builds it
    (:func:`ablate.app.targets.check_callback`), however the command line put it there; nothing nested in the
    launcher's or sweeper's config is built (:func:`ablate.app.targets.check_plugin_config`)."""
    from omegaconf import OmegaConf

    from ablate.app.targets import check_callback, check_plugin_config

    callbacks = cfg.hydra.get("callbacks")
    plain = OmegaConf.to_container(callbacks, resolve=True) if callbacks is not None else {}
    for name, node in (plain if isinstance(plain, dict) else {}).items():
        check_callback("hydra.callbacks." + str(name), node)
    for part in ("launcher", "sweeper"):
        node = cfg.hydra.get(part)
        if node is not None:
            check_plugin_config(f"hydra.{part}", OmegaConf.to_container(node, resolve=False))


@contextmanager
def hydra_config_dir() -> Iterator[None]:
    """Hydra's compose API on ``conf/`` (the command line's own config directory)."""
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        yield


def compose_cell(overrides: list[str]) -> Any:
    """The composed config of one cell (Hydra's own composition), Hydra's errors as one-line ConfigErrors; call
    inside :func:`hydra_config_dir`."""
    from ablate.app.compose import compose_whole

    return compose_whole(overrides)


def check_variant_name(cfg: Any) -> None:
    name = str(cfg.variant.get("name", ""))
    if not NAME_RE.fullmatch(name):
        raise ConfigError(
            "variant.name",
            name,
            "it names the output folder: use letters, digits and . _ + - (no slashes, not starting with a dot)",
        )


#: launchers whose library is optional: their ``_target_`` prefix, the module they need and how to install it
OPTIONAL_LAUNCHERS = {
    "hydra_plugins.ablate_ray_launcher.": ("ray", "ray", "pip install 'ablate[cluster]' (docs/cluster.md)"),
    "hydra_plugins.hydra_submitit_launcher.": (
        "submitit_slurm",
        "submitit",
        "pip install hydra-submitit-launcher",
    ),
}


def check_launcher(cfg: Any) -> None:
    """Refuse, before any work, a launcher whose library is not installed (``hydra/launcher=ray`` without Ray)."""
    import importlib.util

    target = str(cfg.hydra.launcher.get("_target_") or "")
    for prefix, (option, module, fix) in OPTIONAL_LAUNCHERS.items():
        if target.startswith(prefix) and importlib.util.find_spec(module) is None:
            raise ConfigError("hydra/launcher", option, f"it needs {module}, which is not installed: {fix}")


def check_command_line(argv: list[str], launch_dir: str) -> Plan:
    """Validate everything ``argv`` would run; returns the plan: every cell with its job
    (:class:`~ablate.runner.job.JobSpec`, stages built and bound). Raises the first
    :class:`~ablate.errors.AblateError`."""
    plan = check_settings(argv, launch_dir)
    check_inputs_of(plan)
    return plan


def check_settings(argv: list[str], launch_dir: str) -> Plan:
    """Every cell of ``argv`` composed and its settings checked, its job built (stages constructed, not bound):
    nothing is read but ``conf/``, and no model library, index library or tracking client is imported, so a mistaken
    override is refused at once (``tests/test_startup.py``). Raises the first :class:`~ablate.errors.AblateError`."""
    check_group_options(argv)
    check_callback_overrides(argv)
    for arg in argv:
        key, eq, value = arg.partition("=")
        if eq and not arg.startswith(("-", "+", "~", "hydra")) and "/" not in key and "." in key:
            if key.split(".", 1)[0] not in stage_blocks() and key not in known_keys():
                raise unknown_key_error(key, value)

    # after the checks of the command line as text, which import nothing
    from ablate.app.compose import Composer
    from ablate.app.config import job_from_config
    from ablate.app.hydra_checks import check_hydra_config, check_hydra_overrides
    from ablate.app.plan import Cell, split_cells
    from ablate.data.chunking import check_chunker_sweep
    from ablate.runner.heldout import check_test_sweep

    register_resolvers()
    plan = Plan(multirun=is_multirun(argv))
    composer = Composer()
    with hydra_config_dir():
        for overrides in split_cells([a for a in argv if not a.startswith("-")], plan.multirun):
            check_hydra_overrides(overrides)
            cfg = composer.compose(overrides)
            check_launcher(cfg)
            check_hydra_config(cfg)
            check_callbacks(cfg)
            check_variant_name(cfg)
            notes: list[str] = []
            job = job_from_config(cfg, launch_dir, notes=notes)
            plan.cells.append(Cell(tuple(overrides), job, tuple(dict.fromkeys(notes))))
    jobs = [c.job for c in plan.cells]
    check_chunker_sweep([(c.overrides, c.job.corpus.chunker) for c in plan.cells])
    check_test_sweep(
        [j.corpus.split for j in jobs],
        [j.test_confirmed for j in jobs],
        multirun=plan.multirun,
        exploratory=[j.corpus.exploratory for j in jobs],
    )
    return plan


def check_inputs_of(plan: Plan) -> None:
    """The inputs of every planned cell: the corpus, the cache folder and the tracking store once per distinct value
    across the sweep (each cell's stages bound to what the corpus decides), then each cell's generator against its
    corpus (once per distinct setting)."""
    from ablate.runner.inputs import check_generator, check_inputs

    jobs = [c.job for c in plan.cells]
    checked: dict[tuple[Any, ...], Any] = {}
    for job in jobs:
        seen = (job.corpus, job.output.tracking_uri, job.output.cache_dir, job.output.cache_enabled)
        if seen not in checked:
            checked[seen] = check_inputs(
                job.corpus, job.output, job.pipeline, job.settings.eval.relevance_level
            )
        else:  # every cell's stages resolve what the corpus decides (a model by its language) before anything runs
            job.pipeline.bind(checked[seen], job.corpus.split)
    for job in jobs:
        check_generator(job.corpus, job.output, job.pipeline)
