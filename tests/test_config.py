"""Every YAML in conf/ composes with Hydra's real composition and turns into valid plain specs."""

import itertools

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from ablate.app.cli import CONF_DIR, _group_options, _register_resolvers, precheck_overrides, specs_from_config
from ablate.errors import ConfigError

_register_resolvers()
GROUPS = _group_options()


def _compose(overrides):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=overrides, return_hydra_config=True)


def test_groups_are_the_documented_contract():
    assert GROUPS["variant"] == ["A", "B", "C", "D", "oracle"]
    assert {"demo", "beir"} <= set(GROUPS["corpus"])
    assert set(GROUPS["reranker"]) == {"none", "cross_encoder"}


EXPECTED = {
    "A": (("bm25",), "none", False),
    "B": (("dense",), "none", False),
    "C": (("bm25", "dense"), "rrf", False),
    "D": (("bm25", "dense"), "rrf", True),
    "oracle": (("oracle",), "none", False),
}


@pytest.mark.parametrize("variant", GROUPS["variant"])
@pytest.mark.parametrize("corpus", GROUPS["corpus"])
def test_every_variant_and_corpus_composes(variant, corpus):
    ov = [f"variant={variant}", f"corpus={corpus}"]
    if corpus not in ("demo",):
        ov.append("corpus.path=/tmp/some/beir/folder")
    cfg = _compose(ov)
    spec, settings, _ = specs_from_config(cfg)
    retrievers, fusion, rerank = EXPECTED[variant]
    assert (spec.name, spec.retrievers, spec.fusion, spec.rerank is not None) == (variant, retrievers, fusion, rerank)
    assert spec.rrf_k == 60 and spec.window == 100 and settings.ks == (1, 3, 5, 10, 20, 50, 100)
    assert settings.gain == "exponential"
    if corpus == "demo":
        assert cfg.corpus.path.endswith("corpora/demo") and cfg.rerank.model == "trained"
    else:
        assert cfg.rerank.model == "cross-encoder/ms-marco-MiniLM-L-6-v2"
    # the one callback instantiates
    instantiate(cfg.hydra.callbacks.ablate_sweep)


def test_axes_override_independently_of_variant():
    spec, _, _ = specs_from_config(_compose(["variant=B", "reranker=cross_encoder", "rerank.depth=7"]))
    assert spec.retrievers == ("dense",) and spec.rerank is not None and spec.rerank.depth == 7
    spec, _, _ = specs_from_config(_compose(["variant=D", "reranker=none", "rrf.k=1", "retrieval.window=20"]))
    assert spec.rerank is None and spec.rrf_k == 1 and spec.window == 20
    spec, settings, _ = specs_from_config(_compose(["variant=A", "eval.ks=[10,5]", "bm25.impl=rank_bm25"]))
    assert settings.ks == (5, 10) and spec.depth == 10 and spec.bm25.impl == "rank_bm25"


@pytest.mark.parametrize(
    "override, key",
    [
        ("eval.gain=cubic", "eval.gain"),
        ("eval.budget=tokens", "eval.budget"),
        ("retrieval.window=0", "retrieval.window"),
        ("rrf.k=abc", "rrf.k"),
        ("eval.ks=[0,10]", "eval.ks"),
        ("fusion=none", "fusion"),  # two retrievers without fusion
    ],
)
def test_bad_values_name_the_key(override, key):
    with pytest.raises(ConfigError) as e:
        specs_from_config(_compose(["variant=C", override]))
    assert str(e.value).startswith(key)


def test_precheck_rejects_unknown_group_options():
    precheck_overrides(["-m", "variant=A,B,C,D,oracle", "rrf.k=1,10"])
    for bad in (["variant=E"], ["-m", "variant=A,X"], ["corpus=nope"], ["reranker=colbert"]):
        with pytest.raises(ConfigError, match="valid options"):
            precheck_overrides(bad)


def test_all_yaml_files_are_reachable():
    seen = {(g, o) for g, opts in GROUPS.items() for o in opts}
    assert len(seen) == sum(len(v) for v in GROUPS.values())
    for g, o in itertools.islice(sorted(seen), None):
        ov = [f"{g}={o}"] + (["corpus.path=/x"] if (g, o) == ("corpus", "beir") else [])
        _compose(ov)
