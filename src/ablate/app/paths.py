"""Where the config, the embedded corpora and the shared datasets live, and the OmegaConf resolvers naming them."""

from __future__ import annotations

import copy
import functools
import os
from pathlib import Path
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parents[1]
#: Config groups whose options are stages (each option file puts one block with ``_target_`` at the top level).
STAGE_GROUPS = ("retrievers", "fusion", "reranker", "generator")
REPO_DIR = PACKAGE_DIR.parent.parent
CONF_DIR = (REPO_DIR / "conf").resolve()


def corpora_dir() -> Path:
    """Where embedded corpora live: ``$ABLATE_CORPORA``, else ``corpora/`` of this checkout, else ``./corpora``."""
    env = os.environ.get("ABLATE_CORPORA")
    if env:
        return Path(env).expanduser().resolve()
    here = REPO_DIR / "corpora"
    return here.resolve() if here.is_dir() else (Path.cwd() / "corpora").resolve()


def datasets_dir() -> Path:
    """Shared evaluation sets: ``$ABLATE_DATASETS``, else ``../shared/datasets`` beside this checkout."""
    env = os.environ.get("ABLATE_DATASETS")
    if env:
        return Path(env).expanduser().resolve()
    return (REPO_DIR.parent / "shared" / "datasets").resolve()


def register_resolvers() -> None:
    """``${ablate_corpora:demo}`` and ``${ablate_datasets:scifact}`` (idempotent; joblib workers call it too)."""
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("ablate_corpora"):
        OmegaConf.register_new_resolver("ablate_corpora", lambda name: str(corpora_dir() / name))
    if not OmegaConf.has_resolver("ablate_datasets"):
        OmegaConf.register_new_resolver("ablate_datasets", lambda name: str(datasets_dir() / name))
    if not OmegaConf.has_resolver("ablate_conf"):
        OmegaConf.register_new_resolver("ablate_conf", lambda name: str(CONF_DIR / name))


def group_options() -> dict[str, list[str]]:
    """Config groups (``conf/<group>/``) and their options, except Hydra's own."""
    out = {}
    for d in sorted(CONF_DIR.iterdir()):
        if d.is_dir() and d.name != "hydra":
            out[d.name] = sorted(p.stem for p in d.glob("*.yaml"))
    return out


@functools.lru_cache(maxsize=512)
def _parsed_yaml(path: str, mtime_ns: int, size: int) -> Any:
    from ablate.safeyaml import safe_load

    return safe_load(Path(path).read_text(encoding="utf-8"))


def read_yaml(path: Path) -> Any:
    """A YAML file of ``conf/`` parsed, once per content state (path, mtime, size) in this process: the command-line
    check and every job of a sweep read the same files. A copy, so a caller may change it."""
    st = path.stat()
    return copy.deepcopy(_parsed_yaml(str(path), st.st_mtime_ns, st.st_size))


def stage_blocks() -> dict[str, str]:
    """Top-level block name -> the option file that defines it, over the stage groups (``bm25`` ->
    ``retrievers/bm25.yaml``): what a parameter of a stage that is not selected refers to."""
    out: dict[str, str] = {}
    for group in STAGE_GROUPS:
        for f in sorted((CONF_DIR / group).glob("*.yaml")):
            data = read_yaml(f) or {}
            if isinstance(data, dict):
                for key, value in data.items():
                    if isinstance(value, dict) and "_target_" in value:
                        out[str(key)] = f"{group}/{f.name}"
    return out
