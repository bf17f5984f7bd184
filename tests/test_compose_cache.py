"""The composition templates (ablate.app.compose_cache) give exactly Hydra's own composition: same YAML, same
flags, same recorded overrides, same errors; and they are reused across the cells of a sweep."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ablate.app import compose_cache
from ablate.app.paths import CONF_DIR, register_resolvers

CASES = [
    ["variant=C"],
    ["variant=A", "corpus=scifact", "corpus.split=train"],
    ["variant=C", "++rrf.k=1", "retrieval.window=20"],
    ["variant=C", "++rrf.k=100", "retrieval.window=100"],
    ["variant=D", "corpus=demo_zh", "++rerank.depth=5"],
    ["variant=B", "++dense.index=hnsw", "++dense.hnsw.m=16"],
    ["variant=oracle", "generator=none"],
    ["variant=C", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
    ["variant=C", "+extra_key=1"],
    ["variant=C", "~progress"],
    ["variant=A", "variant.name=A-stem", "bm25.k1=1.2"],
    ["variant=C", "hydra.job.chdir=false", "hydra.mode=RUN"],
]


def _plain(cfg):
    """Everything Hydra composed, as text, plus the struct/readonly flags of the root and the hydra node."""
    return (
        OmegaConf.to_yaml(cfg, resolve=False),
        OmegaConf.is_struct(cfg),
        OmegaConf.is_readonly(cfg),
        OmegaConf.is_readonly(cfg.hydra),
    )


def _hydra_own(overrides):
    """The composition Hydra does without the templates (the wrapped original)."""
    original = ConfigLoaderImpl._ablate_original
    saved = ConfigLoaderImpl._load_configuration_impl
    ConfigLoaderImpl._load_configuration_impl = original
    try:
        return compose(config_name="config", overrides=overrides, return_hydra_config=True)
    finally:
        ConfigLoaderImpl._load_configuration_impl = saved


@pytest.fixture(scope="module")
def hydra_dir():
    register_resolvers()
    assert compose_cache.install()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        yield


@pytest.mark.parametrize("overrides", CASES, ids=[" ".join(c) for c in CASES])
def test_template_equals_hydras_composition(hydra_dir, overrides):
    fast = compose(config_name="config", overrides=overrides, return_hydra_config=True)
    assert _plain(fast) == _plain(_hydra_own(overrides))
    again = compose(config_name="config", overrides=overrides, return_hydra_config=True)  # from the template
    assert _plain(again) == _plain(fast)


def test_cells_of_a_value_sweep_share_one_template(hydra_dir):
    compose_cache.clear()
    cells = [["variant=C", f"++rrf.k={k}", f"retrieval.window={w}"] for k in (1, 10, 60) for w in (20, 50)]
    cfgs = [compose(config_name="config", overrides=c, return_hydra_config=True) for c in cells]
    assert compose_cache.STATS == {"composed": 1, "reused": 5}
    assert [(c.rrf.k, c.retrieval.window) for c in cfgs] == [(k, w) for k in (1, 10, 60) for w in (20, 50)]
    # a copy per cell: changing one cell's config leaves the template and the others alone
    cfgs[0].rrf.k = 999
    assert compose(config_name="config", overrides=cells[0], return_hydra_config=True).rrf.k == 1
    assert cfgs[1].rrf.k == 1
    compose(config_name="config", overrides=["variant=A"], return_hydra_config=True)
    assert compose_cache.STATS["composed"] == 2  # another group choice: another template


@pytest.mark.parametrize(
    "overrides",
    [
        ["variant=C", "rrf.kk=3"],
        ["variant=E"],
        ["variant=C", "retrieval.window=[1"],
        ["variant=C", "+variant=A"],
    ],
)
def test_errors_are_hydras_errors(hydra_dir, overrides):
    with pytest.raises((HydraException, OmegaConfBaseException)) as fast:
        compose(config_name="config", overrides=overrides, return_hydra_config=True)
    with pytest.raises((HydraException, OmegaConfBaseException)) as own:
        _hydra_own(overrides)
    assert type(fast.value) is type(own.value)
    assert str(fast.value) == str(own.value)
