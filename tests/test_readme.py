"""The README cannot drift from the config: every key and default the settings table (docs/settings.md, linked from
the README) names is what the config has."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from ablate.app.paths import CONF_DIR, register_resolvers

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
SETTINGS = REPO / "docs" / "settings.md"
register_resolvers()


def _table() -> list[list[str]]:
    text = SETTINGS.read_text(encoding="utf-8")
    section = text.split("## Settings users rely on", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [[c.strip() for c in line.strip("|").split("|")] for line in rows]


def _compose(overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=overrides, return_hydra_config=True)


DEFAULT = _compose([])
GENERIC = _compose(
    ["corpus=beir", "corpus.path=/x", "variant=D", "retrievers=[bm25,dense,rm3]", "generator=llama_cpp"]
)
DEMO = _compose(["variant=D"])
ROWS = _table()
_ABSENT = object()


def _value(cfg, key: str) -> object:
    if key in ("variant", "corpus", "generator"):
        return DEFAULT.hydra.runtime.choices[key]
    value = OmegaConf.select(cfg, key, default=_ABSENT, throw_on_missing=False)
    return OmegaConf.to_container(value) if OmegaConf.is_config(value) else value


def _same(readme: str, actual: object) -> bool:
    readme = readme.replace(" ", "")
    if isinstance(actual, list):
        return readme == "[" + ",".join(str(a) for a in actual) + "]"
    if isinstance(actual, bool):
        return readme.lower() == str(actual).lower()
    if actual is None:
        return readme in ("null", "none")
    return readme == str(actual)


def test_the_table_has_rows():
    assert len(ROWS) >= 10


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_every_key_and_default_in_the_readme_is_the_config(row):
    key = row[0].strip("`")
    default = row[1]
    block = key[:-2] if key.endswith(".*") else None
    if block:
        assert OmegaConf.select(GENERIC, block) is not None, f"README names {key}, the config has no {block}"
    else:
        assert _value(GENERIC, key) is not _ABSENT or _value(DEMO, key) is not _ABSENT, (
            f"README names {key}: not in config"
        )
        first = re.match(r"^`([^`]+)`", default)
        if first and "$" not in first.group(1) and "=" not in first.group(1):
            cfg = DEMO if default.startswith("demo:") else GENERIC
            assert _same(first.group(1), _value(cfg, key)), (
                f"{key}: README says {first.group(1)}, config {_value(cfg, key)}"
            )
        demo = re.search(r"demo: `([^`]+)`", default)
        if demo:
            assert _same(demo.group(1), _value(DEMO, key)), f"{key} on the demo: README says {demo.group(1)}"
    # every `name=value` the row quotes is the config's default too
    for name, value in re.findall(r"`([\w.]+)=([^`\s]+)`", " ".join(row[1:])):
        if name in ("retrievers", "fusion", "reranker", "variant", "corpus", "generator"):
            continue  # choosing a group option, not a default
        full = name if "." in name else f"{block or key.split('.')[0]}.{name}"
        if full.startswith(("corpus.path", "corpus.split")):
            continue  # examples of what to set, not defaults
        assert _same(value, _value(GENERIC, full)), (
            f"{full}: README says {value}, config {_value(GENERIC, full)}"
        )
