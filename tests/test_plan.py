"""The plan of a command (ablate.app.plan): its cells are Hydra's basic sweeper's, composed as Hydra composes them,
each distinct set of config-group choices once; the task function carries it, so a job in this process takes its
JobSpec (stages built once) from it, and nothing of it outlives the command."""

from __future__ import annotations

import pickle

import pytest
from hydra import compose, initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper  # the reference, in tests only
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from ablate.app.cli import Command
from ablate.app.compose import Composer
from ablate.app.paths import CONF_DIR, register_resolvers
from ablate.app.plan import Plan, batches, split_cells, task_cell
from ablate.errors import ConfigError

CASES = [
    ["variant=C"],
    ["variant=A", "corpus=scifact", "corpus.split=train"],
    ["variant=C", "++rrf.k=1", "retrieval.window=20"],
    ["variant=C", "++rrf.k=100", "retrieval.window=100"],
    ["variant=D", "corpus=demo_zh", "++rerank.depth=5"],
    ["variant=B", "++dense.index=hnsw", "++dense.hnsw.m=16"],
    ["variant=oracle", "generator=none"],
    ["variant=C", "hydra/launcher=joblib", "hydra.launcher.n_jobs=3"],
    ["variant=C", "+extra_key=1"],
    ["variant=C", "~progress"],
    ["variant=A", "variant.name=A-stem", "bm25.k1=1.2"],
    ["variant=C", "eval.ks=[1,5]", "corpus.chunker={kind:tokens,size:50,overlap:10}"],
    ["rrf.k=7", "variant=C", "retrievers=[bm25]"],
    ["variant=C", "hydra.job.chdir=false", "hydra.mode=RUN"],
]


@pytest.fixture(scope="module")
def hydra_dir():
    register_resolvers()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        yield


def _checked(cfg):
    """What the plan reads of a composed config: the job's settings and stages (every key but hydra, resolved the
    way the job resolves them), and the Hydra parts the command-line check inspects."""
    job = OmegaConf.to_yaml(OmegaConf.masked_copy(cfg, [str(k) for k in cfg if k != "hydra"]), resolve=True)
    parts = {
        p: OmegaConf.to_container(cfg.hydra[p], resolve=False) for p in ("launcher", "sweeper", "callbacks")
    }
    return (
        job,
        parts,
        list(cfg.hydra.overrides.task),
        list(cfg.hydra.overrides.hydra),
        OmegaConf.is_struct(cfg),
    )


@pytest.mark.parametrize("overrides", CASES, ids=[" ".join(c) for c in CASES])
def test_a_planned_cell_is_composed_as_hydra_composes_it(hydra_dir, overrides):
    mine = Composer().compose(overrides)
    own = compose(config_name="config", overrides=overrides, return_hydra_config=True)
    a, b = _checked(mine), _checked(own)
    assert a[:2] == b[:2] and a[4] == b[4]
    assert sorted(a[2]) == sorted(b[2]) and sorted(a[3]) == sorted(b[3])  # recorded, each kind in its order


def test_the_cells_of_a_value_sweep_share_one_composition(hydra_dir):
    composer = Composer()
    cells = [["variant=C", f"++rrf.k={k}", f"retrieval.window={w}"] for k in (1, 10, 60) for w in (20, 50)]
    cfgs = [composer.compose(c) for c in cells]
    assert composer.composed == 1
    assert [(c.rrf.k, c.retrieval.window) for c in cfgs] == [(k, w) for k in (1, 10, 60) for w in (20, 50)]
    cfgs[0].rrf.k = 999  # a copy per cell: one cell's config is its own
    assert composer.compose(cells[0]).rrf.k == 1 and cfgs[1].rrf.k == 1
    composer.compose(["variant=A"])
    assert composer.composed == 2  # another group choice: another composition


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        (["variant=C", "rrf.kk=3"], "rrf.kk"),
        (["variant=E"], "variant"),
        (["variant=C", "retrieval.window=[1"], "retrieval.window=[1"),
        (["variant=C", "+progress=false"], "set already"),
        (["variant=C", "~nothing_here"], "nothing to delete"),
    ],
)
def test_a_cell_hydra_refuses_is_refused_in_one_line(hydra_dir, overrides, said):
    with pytest.raises(ConfigError) as e:
        Composer().compose(overrides)
    assert said in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(Exception):  # noqa: B017 - Hydra refuses it too (its own exception types)
        compose(config_name="config", overrides=overrides, return_hydra_config=True)


@pytest.mark.parametrize(
    "overrides",
    [
        ["variant=A,B,C,D,oracle"],
        ["variant=C", "rrf.k=1,10,60,100", "retrieval.window=20,50,100"],
        ["rrf.k=1,2", "variant=A,B", "rrf.k=3,4,5", "++bm25.k1=1.2", "corpus=demo"],
        ["retrievers=[bm25],[bm25,dense]", "+x=choice(a,b)", "hydra/launcher=joblib"],
    ],
)
def test_the_cells_are_hydras_basic_sweepers(overrides):
    parsed = OverridesParser.create().parse_overrides(overrides)
    for size in (None, 2):
        assert batches(split_cells(overrides), size) == BasicSweeper.split_arguments(parsed, size)
    assert split_cells(overrides, sweep=False) == [overrides]


def test_a_range_sweep_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="only lists of values"):
        split_cells(["rrf.k=interval(1,10)"])


def test_the_command_carries_its_plan_and_leaves_it_behind_in_other_processes():
    plan = Plan(multirun=True)
    assert plan.cell(["a=1"]) is None and len(plan) == 0
    command = Command(plan, "/tmp")
    assert command.plan is plan and command.size == 0 and command.launched is None
    copy = pickle.loads(pickle.dumps(command))  # what a joblib or Ray worker gets
    assert copy.plan is not plan and copy.plan.cells == [] and copy.plan.multirun
    assert task_cell(["a=1", "hydra.sweep.dir=x", "hydra/launcher=joblib", "+hydra.y=1"]) == ("a=1",)


def test_the_expected_jobs_of_a_sweep_are_its_cells():
    from ablate.app.callbacks import expected_jobs

    config = OmegaConf.create(
        {
            "hydra": {
                "sweeper": {"params": {"stats.seed": "0,1"}},
                "overrides": {"task": ["variant=A,B", "rrf.k=1,2,3"]},
            }
        }
    )
    assert expected_jobs(config) == 12


COUNT_BUILDS = """
import sys
from ablate.app import config

built = []
original = config.build_stage


def counted(key, node):
    built.append(key)
    return original(key, node)


config.build_stage = counted
sys.argv = ["ablate", *sys.argv[1:]]
from ablate.app.cli import main

try:
    main()
finally:
    print("built:", " ".join(built), file=sys.stderr)
"""


def test_each_cell_s_stages_are_built_once_per_command(tmp_path, mlflow_uri):
    """The check builds every cell's stages; the job run in this process takes them from the plan."""
    import os
    import subprocess
    import sys

    env = dict(os.environ)  # the session's cache (tests/conftest.py)
    args = ["-m", "variant=A,oracle", f"tracking.uri={mlflow_uri}", "tracking.reuse=false"]
    args += ["progress=false", "stats.bootstrap=10", "tracking.experiment=built-once"]
    p = subprocess.run(
        [sys.executable, "-c", COUNT_BUILDS, *args], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr
    built = next(line for line in p.stderr.splitlines() if line.startswith("built:")).split()[1:]
    assert sorted(built) == ["bm25", "oracle"]  # one build per stage of each cell (A: bm25; oracle: oracle)
