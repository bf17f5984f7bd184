"""Settings are parsed once, at the edge: the composed config becomes plain data in one step
(``app.config.settings_of``), one function turns it into frozen typed values (``runner.settings.job_settings``), and
every check of a value lives in one place (``ablate.checks``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import pytest
from hydra import compose, initialize_config_dir

import ablate.checks
import ablate.stages.base
from ablate.app.config import job_from_config, settings_of
from ablate.app.paths import CONF_DIR, register_resolvers
from ablate.errors import ConfigError
from ablate.runner.settings import SETTING_BLOCKS, SETTING_FLAGS, JobSettings, job_settings

register_resolvers()


def _compose(overrides):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=overrides, return_hydra_config=True)


def _plain_only(value: object) -> bool:
    """Whether ``value`` holds nothing but dicts, lists and scalars (no DictConfig, no ListConfig)."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain_only(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain_only(v) for v in value)
    return value is None or isinstance(value, (str, int, float, bool))


def test_the_edge_hands_plain_data_down_and_the_job_carries_what_one_parse_made(tmp_path, monkeypatch):
    """``settings_of`` reads every setting of the composed config as plain data, nothing else; ``job_settings`` of
    that data is exactly what the job carries (the corpus, the scoring rules, the output, the variant)."""
    overrides = [
        "variant=A",
        "corpus=beir",
        "corpus.path=/x/scifact",
        "stats.bootstrap=50",
        "tracking.reuse=false",
    ]
    cfg = _compose(overrides)
    plain = settings_of(cfg)
    assert set(plain) == set(SETTING_BLOCKS) | set(SETTING_FLAGS)
    assert _plain_only(plain)
    assert plain["stats"]["bootstrap"] == 50 and plain["progress"] is True
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    settings = job_settings(plain, str(tmp_path))
    assert isinstance(settings, JobSettings)
    assert settings.run.bootstrap == 50 and settings.output.reuse is False
    assert settings.output.tracking_uri == f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"
    # the corpus folder's name: neither tracking.experiment nor corpus.name is set
    assert settings.output.experiment == "scifact"
    assert (settings.variant, settings.variant_order) == ("A", 1.0)
    job = job_from_config(cfg, str(tmp_path))
    assert (job.variant, job.variant_order, job.settings, job.output, job.test_confirmed) == (
        settings.variant,
        settings.variant_order,
        settings.run,
        settings.output,
        settings.test_confirmed,
    )
    assert job.corpus == settings.corpus  # no split file and no labels file to pilot on: the corpus as parsed
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.variant = "D"  # type: ignore[misc]


def test_job_settings_takes_plain_mappings_and_fills_what_is_absent(tmp_path):
    """Library callers hand plain dicts: a missing block is empty and takes the defaults."""
    settings = job_settings({"corpus": {"path": "/data/mine"}, "tracking": {"uri": "sqlite:///x.db"}})
    assert settings.corpus.path == "/data/mine" and settings.corpus.split == "test"
    assert settings.run.bootstrap == 1000 and settings.run.correction == "holm"
    assert settings.output.tracking_uri == "sqlite:///x.db" and settings.output.experiment == "mine"
    assert (settings.variant, settings.variant_order, settings.test_confirmed) == ("custom", None, False)


@pytest.mark.parametrize(
    "config, message",
    [
        (
            {"stats": {"bootstrap": -5}},
            "stats.bootstrap=-5 is not valid; it must be an integer in [0, 1e+06]",
        ),
        ({"stats": {"seed": 1.5}}, "stats.seed=1.5 is not valid; it must be an integer >= 0"),
        ({"corpus": {"split": ""}}, "corpus.split='' is not valid; it must be a non-empty string"),
        (
            {"eval": {"projection": {"min_overlap": 0}}},
            "eval.projection.min_overlap=0 is not valid; give a share of characters in (0, 1], e.g. 0.5",
        ),
        (
            {"heldout": {"confirm_test": "yes"}},
            "heldout.confirm_test='yes' is not valid; it must be true or false",
        ),
        ({"progress": "no"}, "progress='no' is not valid; it must be true or false"),
        ({"cache": {"enabled": 1}}, "cache.enabled=1 is not valid; it must be true or false"),
    ],
)
def test_each_setting_is_refused_once_in_one_line_naming_its_key(config, message):
    """A bad value is one ConfigError naming its key, as the command line prints it (the catalogue's lines)."""
    corpus = {"path": "/data/mine", **config.pop("corpus", {})}
    with pytest.raises(ConfigError) as e:
        job_settings({"corpus": corpus, "tracking": {"uri": "sqlite:///x.db"}, **config})
    assert str(e.value) == message


def test_stages_are_handed_the_checks_every_setting_uses():
    """A stage author's ``from ablate.stages.base import check_int`` is the one check the job settings use too."""
    for name in ("check_int", "check_float", "check_choice", "check_bool", "check_str"):
        assert getattr(ablate.stages.base, name) is getattr(ablate.checks, name)


def test_settings_keys_are_the_settings_blocks_flags_and_hydra():
    """The top-level keys the config refuses as unknown are derived from the one list of settings."""
    from ablate.app.config import SETTINGS_KEYS

    assert SETTINGS_KEYS == (*SETTING_BLOCKS, *SETTING_FLAGS, "hydra")
    assert isinstance(settings_of(_compose([])), Mapping)
