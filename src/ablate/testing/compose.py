"""A stage's YAML composed and built as the command line does: Hydra's public ``compose`` over ablate's config with
one group option selected, then the command line's own check building the job's stages. The only place the stage
contracts (:mod:`ablate.testing.contracts`) meet Hydra."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def compose_option(option: str, overrides: Sequence[str] = ()) -> Any:
    """ablate's config composed by Hydra (its public ``compose``) with the group option ``option``
    (``"retrievers/bm25"``) selected as on the command line, then ``overrides``."""
    from hydra import compose, initialize_config_dir

    from ablate.app.paths import CONF_DIR, register_resolvers

    group, sep, name = option.partition("/")
    assert sep and group and name and "/" not in name, f"option {option!r}: write it as '<group>/<name>'"
    register_resolvers()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=[f"{group}={name}", *overrides])


def build_from_config(cfg: Any) -> list[Any]:
    """The stages the command line's check builds from a composed config (its job's pipeline)."""
    from ablate.app.config import job_from_config

    return list(job_from_config(cfg).pipeline.stages)


def hydra_value(value: Any) -> str | None:
    """``value`` written as a command-line override's value, or None when it has no plain form."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return None
