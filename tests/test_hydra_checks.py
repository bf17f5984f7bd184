"""What the command line may change of Hydra's own node (issue 37): a launcher or sweeper named by its class, a
logging config Hydra cannot apply and a ``hydra.verbose`` it asserts on are refused in one line before anything
runs; the harmless forms run."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ablate.app.hydra_checks import check_hydra_config, check_hydra_overrides
from ablate.app.precheck import compose_cell, hydra_config_dir
from ablate.errors import ConfigError
from ablate.tracking import Tracker

REFUSED = [
    ("hydra.launcher._target_=x", "hydra/launcher=basic|joblib|ray"),
    ("++hydra.launcher._target_=os.system", "not set by its class"),
    ("hydra.launcher={_target_:x}", "hydra/launcher=basic|joblib|ray"),
    ("hydra.launcher=null", "hydra/launcher=basic|joblib|ray"),
    ("~hydra.launcher", "removed"),
    ("hydra.sweeper._target_=x", "hydra/sweeper=ablate|basic"),
    ("hydra/launcher=bogus", "valid options: basic, joblib, ray"),
    ("hydra/job_logging=bogus", "valid options: ablate, default, disabled, none, stdout"),
    ("hydra/job_logging=null", "hydra/job_logging='null' is not valid"),
    ("~hydra/hydra_logging", "Hydra needs this config group"),
    ("hydra.job_logging=null", "only the levels can be set here"),
    ("hydra.job_logging.version=2", "only the levels can be set here"),
    ("hydra.hydra_logging.handlers.console.class=os.system", "only the levels can be set here"),
    ("hydra.job_logging.root.level=info", "it must be a logging level: one of CRITICAL, ERROR, WARNING"),
    ("hydra.verbose=1", "give true, false, a logger name"),
    ("hydra.verbose=[1,2]", "give true, false, a logger name"),
    ("hydra.verbose=null", "hydra.verbose=None is not valid"),
    ("~hydra.verbose", "it cannot be removed"),
]

ACCEPTED = [
    "hydra/launcher=joblib",
    "hydra/sweeper=basic",
    "hydra/job_logging=disabled",
    "hydra/job_logging=none",
    "hydra/hydra_logging=none",
    "hydra.job_logging.root.level=INFO",
    "hydra.job_logging.loggers.ablate.level=DEBUG",
    "hydra.verbose=true",
    "hydra.verbose=[ablate]",
    "hydra.verbose=ablate",
]


@pytest.mark.parametrize(("override", "needle"), REFUSED)
def test_an_override_hydra_cannot_use_is_one_line(override, needle):
    with hydra_config_dir(), pytest.raises(ConfigError) as e:
        check_hydra_overrides(["variant=A", override])
    assert needle in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("override", ACCEPTED)
def test_the_harmless_forms_pass_both_checks(override):
    with hydra_config_dir():
        check_hydra_overrides(["variant=A", override])
        check_hydra_config(compose_cell(["variant=A", override]))


def test_a_composed_launcher_that_is_no_plugin_is_refused():
    """However the node got there (a config file), the composed _target_ must be a launcher plugin Hydra has."""
    from omegaconf import OmegaConf, open_dict

    with hydra_config_dir():
        cfg = compose_cell(["variant=A"])
        with open_dict(cfg):
            OmegaConf.update(cfg, "hydra.launcher._target_", "os.system")
        with pytest.raises(
            ConfigError, match="hydra.launcher._target_='os.system' is not valid; it is not one of"
        ):
            check_hydra_config(cfg)


def test_the_harmless_forms_run_through_the_real_entry_point(tiny_corpus, tmp_path, mlflow_uri):
    """hydra/job_logging=disabled, hydra/hydra_logging=none and hydra.verbose=[ablate] in one command: exit 0, the
    run FINISHED, no traceback."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}  # the session's cache
    env.pop("MLFLOW_TRACKING_URI", None)
    args = [
        "corpus=beir",
        f"corpus.path={tiny_corpus}",
        "corpus.split=dev",
        "corpus.identity=employee",
        f"tracking.uri={mlflow_uri}",
        "tracking.experiment=hydra-logging-forms",
        "progress=false",
        "variant=A",
        "hydra/job_logging=disabled",
        "hydra/hydra_logging=none",
        "hydra.verbose=[ablate]",
    ]
    p = subprocess.run(
        [sys.executable, "-m", "ablate", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and "| A " in p.stdout
    t = Tracker(mlflow_uri)
    runs = t.find_runs([t.experiment_id("hydra-logging-forms", create=False)])
    assert [r.status for r in runs] == ["FINISHED"]
