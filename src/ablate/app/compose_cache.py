"""Hydra's composition, done once per distinct set of config-group choices in this process.

A sweep composes every cell three times: ablate's check of the whole command line (:mod:`ablate.app.precheck`),
Hydra's sweeper check (``validate_batch_is_legal``) and the launcher. Each composition builds the defaults tree,
reads and parses every YAML file it names and merges them (0.2 s here); only then are the plain value overrides
(``rrf.k=60``, ``retrieval.window=50``) applied. The cells of a sweep over values share the same defaults tree.

:func:`install` wraps ``ConfigLoaderImpl._load_configuration_impl`` so the first part (defaults tree + merged
config, *before* any value override) is kept per key: the config name, the config sources, and the overrides that
Hydra treats as defaults-list overrides (config-group choices such as ``variant=C``, ``+group=x``, ``~group``), in
order. Every call then deep-copies that template and does the rest exactly as Hydra's own code does: the value
overrides applied in order in struct mode, the recorded override lists, ``hydra.runtime.*``, ``hydra.job.*``. The
result equals Hydra's own composition (``tests/test_compose_cache.py`` compares them, YAML and flags, over variants,
corpora, launchers, ``++``/``+``/``~`` overrides and the errors).

What is never served from a template: a multirun master config (sweep overrides inside), a ``hydra.searchpath``
override (it changes where configs come from), and anything on a Hydra other than the 1.3 line this wraps. The
templates live for this process only; config files do not change under a running command.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from typing import Any

#: the Hydra line whose private composition steps this reuses (pyproject pins hydra-core to it)
HYDRA_LINE = "1.3."


@dataclass
class _Template:
    cfg: Any  # the merged config in struct mode, hydra node writable, before value overrides
    known_choices: dict[str, Any]
    config_sources: list[Any]


_TEMPLATES: dict[tuple[Any, ...], _Template] = {}
_REPOS: dict[tuple[int, str | None], tuple[Any, Any]] = {}
STATS = {"composed": 0, "reused": 0}


def clear() -> None:
    _TEMPLATES.clear()
    _REPOS.clear()
    STATS.update(composed=0, reused=0)


def _is_value_override(override: Any, repo: Any) -> bool:
    """Hydra's own split (``defaults_list.Overrides``): a dict value or a key that is not a config group is applied
    to the composed config; everything else changes the defaults list."""
    if override.is_sweep_override():
        return False
    return isinstance(override.value(), dict) or not repo.group_exists(override.key_or_group)


def install() -> bool:
    """Wrap Hydra's composition (idempotent). Returns whether the wrapper is active."""
    import hydra
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    if getattr(ConfigLoaderImpl, "_ablate_templates", False):
        return True
    if not hydra.__version__.startswith(HYDRA_LINE):
        return False
    original = ConfigLoaderImpl._load_configuration_impl

    def _load_configuration_impl(
        self: Any,
        config_name: str | None,
        overrides: list[str],
        run_mode: Any,
        from_shell: bool = True,
        validate_sweep_overrides: bool = True,
    ) -> Any:
        from hydra.types import RunMode

        if run_mode != RunMode.RUN or any(o.lstrip("+~").startswith("hydra.searchpath") for o in overrides):
            return original(self, config_name, overrides, run_mode, from_shell, validate_sweep_overrides)
        return _compose(self, config_name, overrides, run_mode, from_shell, validate_sweep_overrides)

    ConfigLoaderImpl._load_configuration_impl = _load_configuration_impl  # type: ignore[method-assign]
    ConfigLoaderImpl._ablate_templates = True  # type: ignore[attr-defined]
    ConfigLoaderImpl._ablate_original = original  # type: ignore[attr-defined]
    return True


def _repo(loader: Any, config_name: str | None, parsed: list[Any]) -> Any:
    """The loader's caching repository with the primary config's search path applied, made once per loader and
    config name (Hydra reads and parses the primary config for this on every composition)."""
    from hydra._internal.config_repository import CachingConfigRepository

    key = (id(loader), config_name)
    held = _REPOS.get(key)
    if held is None or held[0] is not loader:
        loader.ensure_main_config_source_available()
        repo = CachingConfigRepository(loader.repository)
        loader._process_config_searchpath(config_name, parsed, repo)
        held = _REPOS[key] = (loader, repo)
    return held[1]


def _compose(
    loader: Any,
    config_name: str | None,
    overrides: list[str],
    run_mode: Any,
    from_shell: bool,
    validate_sweep_overrides: bool,
) -> Any:
    """``ConfigLoaderImpl._load_configuration_impl`` (hydra-core 1.3) with the defaults tree and merge reused."""
    from hydra import __version__, version
    from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
    from hydra._internal.defaults_list import create_defaults_list
    from hydra.conf import ConfigSourceInfo
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.utils import JobRuntime
    from omegaconf import OmegaConf, open_dict

    parsed = OverridesParser.create().parse_overrides(overrides=overrides)
    repo = _repo(loader, config_name, parsed)
    if validate_sweep_overrides:
        loader.validate_sweep_overrides_legal(overrides=parsed, run_mode=run_mode, from_shell=from_shell)
    sources = tuple((s.provider, s.path) for s in repo.get_sources())
    is_value = [_is_value_override(o, repo) for o in parsed]
    values = [o for o, v in zip(parsed, is_value, strict=True) if v]
    groups = tuple(o.input_line for o, v in zip(parsed, is_value, strict=True) if not v)
    key = (config_name, sources, groups)
    template = _TEMPLATES.get(key)
    if template is None:
        defaults_list = create_defaults_list(
            repo=repo, config_name=config_name, overrides_list=parsed, prepend_hydra=True, skip_missing=False
        )
        merged = loader._compose_config_from_defaults_list(defaults=defaults_list.defaults, repo=repo)
        OmegaConf.set_struct(merged, True)
        OmegaConf.set_readonly(merged.hydra, False)
        template = _Template(
            cfg=merged,
            known_choices=dict(defaults_list.overrides.known_choices),
            config_sources=[
                ConfigSourceInfo(path=x.path, schema=x.scheme(), provider=x.provider)
                for x in repo.get_sources()
            ],
        )
        _TEMPLATES[key] = template
        STATS["composed"] += 1
    else:
        STATS["reused"] += 1
    cfg = copy.deepcopy(template.cfg)
    ConfigLoaderImpl._apply_overrides_to_config(values, cfg)
    app_overrides = []
    for override in parsed:
        if override.is_hydra_override():
            cfg.hydra.overrides.hydra.append(override.input_line)
        else:
            cfg.hydra.overrides.task.append(override.input_line)
            app_overrides.append(override)
    with open_dict(cfg.hydra):
        cfg.hydra.runtime.choices.update(template.known_choices)
        for key_ in cfg.hydra.job.env_copy:
            cfg.hydra.job.env_set[key_] = os.environ[key_]
    cfg.hydra.runtime.version = __version__
    cfg.hydra.runtime.version_base = version.getbase()
    cfg.hydra.runtime.cwd = os.getcwd()
    cfg.hydra.runtime.config_sources = list(template.config_sources)
    if "name" not in cfg.hydra.job:
        cfg.hydra.job.name = JobRuntime().get("name")
    cfg.hydra.job.override_dirname = get_overrides_dirname(
        overrides=app_overrides,
        kv_sep=cfg.hydra.job.config.override_dirname.kv_sep,
        item_sep=cfg.hydra.job.config.override_dirname.item_sep,
        exclude_keys=cfg.hydra.job.config.override_dirname.exclude_keys,
    )
    cfg.hydra.job.config_name = config_name
    return cfg
