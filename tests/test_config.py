"""Every YAML in conf/ composes with Hydra's real composition and builds a validated job: stages from `_target_`."""

import ast
import itertools
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from ablate.app.config import build_stage, check_target, job_from_config
from ablate.app.paths import CONF_DIR, STAGE_GROUPS, group_options, register_resolvers
from ablate.app.precheck import check_group_options
from ablate.errors import ConfigError, ModelUnavailableError

register_resolvers()
GROUPS = group_options()


def _compose(overrides):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=overrides, return_hydra_config=True)


def _job(overrides, notes=None):
    return job_from_config(_compose(overrides), notes=notes)


#: stage group -> the kind of stage each of its options builds
STAGE_KINDS = {"retrievers": "retriever", "fusion": "fuser", "reranker": "reranker", "generator": "generator"}


def _stage_options() -> dict[str, tuple[str, str]]:
    """``"<group>/<option>"`` -> (block, ``_target_``) for every stage option in conf/ (``none`` has no block)."""
    out = {}
    for group in STAGE_GROUPS:
        for option in GROUPS[group]:
            data = yaml.safe_load((CONF_DIR / group / f"{option}.yaml").read_text(encoding="utf-8")) or {}
            blocks = [(k, v["_target_"]) for k, v in data.items() if isinstance(v, dict) and "_target_" in v]
            assert len(blocks) == (0 if option == "none" else 1), f"{group}/{option}.yaml: {blocks}"
            if blocks:
                out[f"{group}/{option}"] = blocks[0]
    return out


def _contract_options() -> set[str]:
    """The ``option`` every stage contract subclass in tests/ names (read from the source)."""
    found = set()
    for path in Path(__file__).parent.glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                ast.unparse(b).split(".")[-1].endswith("Contract") for b in node.bases
            ):
                for item in node.body:
                    if (
                        isinstance(item, ast.Assign)
                        and [ast.unparse(t) for t in item.targets] == ["option"]
                        and isinstance(item.value, ast.Constant)
                    ):
                        found.add(str(item.value.value))
    return found


def test_groups_are_the_documented_contract():
    assert GROUPS["variant"] == ["A", "B", "C", "D", "oracle"]
    assert {"demo", "beir"} <= set(GROUPS["corpus"])
    assert set(STAGE_GROUPS) == set(STAGE_KINDS)
    for group in ("fusion", "reranker", "generator"):  # pick one or none
        assert "none" in GROUPS[group], group


def test_every_stage_option_builds_a_stage_of_its_group_s_kind():
    """Stages are discovered from conf/: a new option is one YAML (and its module and contract test)."""
    options = _stage_options()
    assert {"retrievers/bm25", "retrievers/dense", "fusion/rrf", "generator/openai"} <= set(options)
    for option, (block, target) in options.items():
        cls = check_target(block, target)
        assert cls.kind == STAGE_KINDS[option.split("/")[0]], option


def test_every_stage_option_runs_the_stage_contract():
    """Each stage YAML in conf/ is named by a contract subclass (``option = "<group>/<name>"``) in tests/, which
    checks that it composes and builds the stage, and everything else the contract checks."""
    missing = sorted(set(_stage_options()) - _contract_options())
    assert not missing, f"stage options without a contract test: {missing}"


EXPECTED = {
    "A": (("bm25",), None, None),
    "B": (("dense",), None, None),
    "C": (("bm25", "dense"), "rrf", None),
    "D": (("bm25", "dense"), "rrf", "rerank"),
    "oracle": (("oracle",), None, None),
}


@pytest.mark.parametrize("variant", GROUPS["variant"])
@pytest.mark.parametrize("corpus", GROUPS["corpus"])
def test_every_variant_and_corpus_composes(variant, corpus):
    ov = [f"variant={variant}", f"corpus={corpus}"]
    embedded = corpus in ("demo", "demo_zh")  # corpora/ folders that ship a trained-reranker default
    if not embedded:
        ov.append("corpus.path=/tmp/some/beir/folder")
    cfg = _compose(ov)
    if variant == "D" and not embedded:  # the hub cross-encoder is not available offline: refused up front
        with pytest.raises(ModelUnavailableError, match="rerank.model=trained"):
            job_from_config(cfg)
        return
    job = job_from_config(cfg)
    retrievers, fuser, reranker = EXPECTED[variant]
    pipe = job.pipeline
    assert job.variant == variant and tuple(r.name for r in pipe.retrievers) == retrievers
    assert (pipe.fuser.name if pipe.fuser else None, pipe.reranker.name if pipe.reranker else None) == (
        fuser,
        reranker,
    )
    if fuser:
        assert (pipe.fuser.k, pipe.fuser.window) == (60.0, 100)
        assert job.param_sources == {"retrieval.window": "rrf.window"}
    assert job.settings.eval.ks == (1, 3, 5, 10, 20, 50, 100) and job.settings.eval.gain == "exponential"
    assert job.variant_order == GROUPS["variant"].index(variant) + 1
    if embedded:
        assert job.corpus.path.endswith(f"corpora/{corpus}")
        if reranker:
            assert (pipe.reranker.model, pipe.reranker.depth) == ("trained", 20)
    instantiate(cfg.hydra.callbacks.ablate_sweep)  # the one callback instantiates


def test_axes_override_independently_of_variant():
    job = _job(["variant=B", "reranker=cross_encoder", "rerank.depth=7"])
    assert [r.name for r in job.pipeline.retrievers] == ["dense"] and job.pipeline.reranker.depth == 7
    job = _job(["variant=D", "reranker=none", "rrf.k=1", "retrieval.window=20"])
    assert job.pipeline.reranker is None and (job.pipeline.fuser.k, job.pipeline.fuser.window) == (1.0, 20)
    job = _job(["variant=A", "eval.ks=[10,5]", "bm25.impl=rank_bm25"])
    assert (
        job.settings.eval.ks == (5, 10)
        and job.settings.depth == 10
        and job.pipeline.retrievers[0].impl == "rank_bm25"
    )
    job = _job(["variant=C", "retrievers=bm25"])  # RRF over one list
    assert [r.name for r in job.pipeline.retrievers] == ["bm25"] and job.pipeline.fuser is not None


def test_a_stage_block_the_variant_does_not_run_is_ignored_with_a_note():
    notes = []
    job = _job(["variant=B", "++bm25.k1=1.2"], notes)
    assert [r.name for r in job.pipeline.retrievers] == ["dense"]
    assert any("bm25" in n and "does not run" in n for n in notes)


@pytest.mark.parametrize(
    "override, key",
    [
        ("eval.gain=cubic", "eval.gain"),
        ("eval.budget=tokens", "eval.budget"),
        ("retrieval.window=0", "retrieval.window"),
        ("rrf.k=abc", "rrf.k"),
        ("rrf.k=nan", "rrf.k"),
        ("rrf.k=inf", "rrf.k"),
        ("rrf.k=-1", "rrf.k"),
        ("eval.ks=[0,10]", "eval.ks"),
        ("fusion=none", "fusion"),  # two retrievers without fusion
        ("bm25.b=1.5", "bm25.b"),
        ("bm25.stemmer=klingon", "bm25.stemmer"),
        ("++bm25.k2=1", "bm25.k2"),
        ("dense.batch_size=0", "dense.batch_size"),
        ("abstain.threshold=maybe", "abstain.threshold"),
        ("stats.bootstrap=-5", "stats.bootstrap"),
        ("++surprise=1", "surprise"),
    ],
)
def test_bad_values_name_the_key(override, key):
    with pytest.raises(ConfigError) as e:
        _job(["variant=C", override])
    assert str(e.value).startswith(key), str(e.value)


def test_targets_outside_ablate_are_refused():
    assert check_target("bm25", "ablate.stages.retrievers.bm25.BM25Retriever")
    for bad in ("os.system", "subprocess.Popen", "builtins.eval"):
        with pytest.raises(ConfigError, match="only classes under ablate."):
            check_target("bm25", bad)
    with pytest.raises(ConfigError, match="only classes under ablate."):
        _job(["variant=A", "bm25._target_=os.system"])
    with pytest.raises(ConfigError, match="no such class"):
        _job(["variant=A", "bm25._target_=ablate.stages.retrievers.bm25.Nope"])
    cfg = _compose(["variant=A"])
    stage = build_stage("bm25", cfg.bm25)
    assert stage.name == "bm25" and stage.k1 == 0.9


def test_precheck_rejects_unknown_group_options():
    check_group_options(["-m", "variant=A,B,C,D,oracle", "rrf.k=1,10", "retrievers=[bm25],[bm25,dense]"])
    for bad in (
        ["variant=E"],
        ["-m", "variant=A,X"],
        ["corpus=nope"],
        ["reranker=colbert"],
        ["retrievers=[bm25,splade]"],
    ):
        with pytest.raises(ConfigError, match="valid options"):
            check_group_options(bad)


def test_all_yaml_files_are_reachable():
    seen = {(g, o) for g, opts in GROUPS.items() for o in opts}
    assert len(seen) == sum(len(v) for v in GROUPS.values())
    for g, o in itertools.islice(sorted(seen), None):
        ov = [f"{g}={o}"] + (["corpus.path=/x"] if (g, o) == ("corpus", "beir") else [])
        _compose(ov)
