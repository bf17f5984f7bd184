"""The composed config -> a validated :class:`~ablate.runner.job.JobSpec`: the only code that reads a DictConfig.

* **Stages** are the top-level blocks that carry ``_target_`` (``bm25``, ``dense``, ``oracle``, ``rrf``, ``rerank``,
  and any a plugin adds); each is instantiated with Hydra, named after its block, and sorted by its kind
  (retriever, fuser, reranker). Retrievers keep their config order.
* **Allowed targets** (:mod:`ablate.app.targets`): a ``_target_`` is resolved without being called and must be a
  stage class defined in ablate (its own module, not a name an ablate module imports) or registered by an installed
  package under the entry-point group ``ablate.stages``; only then is it constructed, so a config cannot build
  arbitrary objects.
* **Parameters**: each stage's constructor checks its own values (one place); an unknown parameter is refused here,
  naming the known ones. A block of a stage the variant does not select (written with ``++``) is ignored, with a note;
  any other unknown top-level key is refused.
* **Settings**: every other top-level key is read once, as plain resolved data (:func:`settings_of`), and parsed
  and checked in one place, :func:`ablate.runner.settings.job_settings`, into frozen typed values (the corpus, the
  scoring rules, where the job writes, the variant); nothing below this module reads the config again.
* **The answer judge** (``answer.judge``, ``answer.judge_model``, ``answer.judge_prompt``): built with the pipeline
  by :func:`ablate.runner.judge.build_judge` (an LLM judge without a generator is refused here).
* **Sources**: a stage parameter whose value is ``${other.key}`` is recorded as fed by that key
  (``retrieval.window`` -> ``rrf.window``), so reports can map a sweep's overrides to the params that changed.
"""

from __future__ import annotations

import difflib
import inspect
import re
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from ablate.app.paths import CONF_DIR, register_resolvers, stage_blocks
from ablate.app.targets import check_nested_targets, has_target, stage_class
from ablate.errors import AblateError, ConfigError
from ablate.runner.settings import SETTING_BLOCKS, SETTING_FLAGS, experiment_of, job_settings
from ablate.stages.base import kind_of

if TYPE_CHECKING:  # the runner (pandas and the evaluation) loads once the stages and settings are accepted
    from ablate.runner.job import JobSpec
    from ablate.runner.pipeline import Pipeline

#: Top-level keys that are settings, not stages (:mod:`ablate.runner.settings` parses them; ``hydra`` is Hydra's).
SETTINGS_KEYS = (*SETTING_BLOCKS, *SETTING_FLAGS, "hydra")
_INTERPOLATION = re.compile(r"^\$\{([A-Za-z_][\w.]*)\}$")


def check_target(key: str, target: object) -> type:
    """The stage class ``target`` names if it may be built (:func:`ablate.app.targets.stage_class`: resolved,
    defined in ablate or registered by a plugin, of a stage kind), else a ConfigError. Nothing is constructed."""
    return stage_class(key, target)


def constructor_params(cls: type) -> tuple[list[str], bool]:
    """The keyword parameters ``cls(...)`` accepts, following ``**kwargs`` that a constructor hands to its base
    class's (RM3 -> BM25, a generator -> the common decoding settings), and whether it accepts any name at all."""
    names: list[str] = []
    for klass in cls.__mro__:
        if klass is object:
            break
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = list(inspect.signature(init).parameters.values())[1:]  # without self
        names += [
            p.name
            for p in params
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in names
        ]
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            return names, False
    return names, True


def build_stage(key: str, node: DictConfig) -> Any:
    """Instantiate the stage block ``key`` (Hydra ``_target_``), named ``key``; errors become one-line ConfigErrors."""
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    target = node.get("_target_")
    cls = check_target(key, target)  # resolved and checked: nothing is constructed before this
    raw = OmegaConf.to_container(node, resolve=True)
    assert isinstance(raw, dict)
    check_nested_targets(key, {k: v for k, v in raw.items() if k != "_target_"})
    accepted, takes_any = constructor_params(cls)
    if not takes_any:
        for param in raw:
            if param != "_target_" and param not in accepted:
                names = [p for p in accepted if p != "name"]
                close = difflib.get_close_matches(str(param), names, n=1)
                hint = f"did you mean {key}.{close[0]}? " if close else ""
                raise ConfigError(
                    f"{key}.{param!s}",
                    raw[param],
                    f"{hint}{cls.__name__} has no such parameter; known: {', '.join(names)}",
                )
    params = {str(k): v for k, v in raw.items() if k != "_target_"}
    # plain values (every stage ablate ships): called with what instantiate would pass, ~15x sooner than instantiate
    if not has_target(params):
        try:
            stage = cls(name=key, **params)
        except AblateError:
            raise
        except Exception as e:  # noqa: BLE001 - a constructor's refusal, as instantiate reports it below
            raise ConfigError(key, target, f"could not be built: {e}") from None
    else:
        try:
            stage = instantiate(node, name=key, _convert_="all")
        except InstantiationException as e:
            cause = e.__cause__
            if isinstance(cause, AblateError):
                raise cause from None
            raise ConfigError(key, target, f"could not be built: {cause or e}") from None
    try:
        kind_of(stage)
    except TypeError as e:
        raise ConfigError(f"{key}._target_", target, str(e)) from None
    return stage


def param_sources(cfg: DictConfig, stage_keys: list[str]) -> dict[str, str]:
    """Config keys that feed a stage parameter through a plain interpolation: ``{"retrieval.window": "rrf.window"}``."""
    out: dict[str, str] = {}
    for key in stage_keys:
        raw = OmegaConf.to_container(cfg[key], resolve=False)
        assert isinstance(raw, dict)
        for param, value in raw.items():
            m = _INTERPOLATION.match(value) if isinstance(value, str) else None
            if m:
                out[m.group(1)] = f"{key}.{param!s}"
    return out


def build_pipeline(cfg: DictConfig, notes: list[str] | None = None) -> tuple[Pipeline, list[str]]:
    """The stages of the composed config as a :class:`Pipeline`, and the stage block names (config order)."""
    known_blocks = stage_blocks()
    retrievers: list[Any] = []
    fusers: list[Any] = []
    rerankers: list[Any] = []
    generators: list[Any] = []
    keys: list[str] = []
    for key in cfg:
        key = str(key)
        if key in SETTINGS_KEYS:
            continue
        node = cfg[key]
        if not isinstance(node, DictConfig) or "_target_" not in node:
            if key in known_blocks:
                if notes is not None:
                    notes.append(
                        f"note: {key}.* is set but stage {key} ({known_blocks[key]}) does not run in this variant; "
                        "ignored"
                    )
                continue
            hint = (
                f"there is no such top-level setting; use one of {', '.join(SETTINGS_KEYS[:-1])} or the stage "
                f"blocks {', '.join(known_blocks)}"
            )
            raise ConfigError(
                key, OmegaConf.to_container(node) if isinstance(node, DictConfig) else node, hint
            )
        stage = build_stage(key, node)
        keys.append(key)
        {"retriever": retrievers, "fuser": fusers, "reranker": rerankers, "generator": generators}[
            kind_of(stage)
        ].append(stage)
    for kind, found in (("fuser", fusers), ("reranker", rerankers), ("generator", generators)):
        if len(found) > 1:
            names = ", ".join(s.name for s in found)
            raise ConfigError(kind, names, f"a pipeline has at most one {kind}; choose one")
    from ablate.runner.pipeline import Pipeline

    pipe = Pipeline(
        tuple(retrievers),
        fusers[0] if fusers else None,
        rerankers[0] if rerankers else None,
        generators[0] if generators else None,
    )
    return pipe, keys


def _plain(cfg: DictConfig, key: str) -> dict[str, Any]:
    node = cfg.get(key)
    if node is None:
        return {}
    out = OmegaConf.to_container(node, resolve=True)
    if not isinstance(out, dict):
        raise ConfigError(key, out, "it must be a mapping of settings")
    return {str(k): v for k, v in out.items()}


def settings_of(cfg: DictConfig) -> dict[str, Any]:
    """The composed config's settings (every key but the stage blocks and ``hydra``) as plain data, resolved: each
    of :data:`~ablate.runner.settings.SETTING_BLOCKS` a mapping (empty when absent), each flag its value."""
    out: dict[str, Any] = {key: _plain(cfg, key) for key in SETTING_BLOCKS}
    out.update({key: cfg[key] for key in SETTING_FLAGS if key in cfg})
    return out


def experiment_name(cfg: DictConfig) -> str:
    """``tracking.experiment``, else the corpus name, else the corpus folder's name
    (:func:`~ablate.runner.settings.experiment_of`, reading only those keys of ``cfg``)."""
    return experiment_of(cfg.tracking, cfg.corpus)


def split_named(cfg: DictConfig) -> bool:
    """Whether the command line set ``corpus.split`` (an override recorded in ``hydra.overrides.task``, however it
    was prefixed), rather than the corpus config's default."""
    hydra = cfg.get("hydra") if isinstance(cfg, DictConfig) else None
    task = OmegaConf.select(hydra, "overrides.task", default=None) if hydra is not None else None
    for o in task or ():
        key = str(o).partition("=")[0].lstrip("+~")
        if key == "corpus.split":
            return True
    return False


def job_from_config(
    cfg: DictConfig,
    launch_dir: str | None = None,
    *,
    sweep_id: str | None = None,
    parent_run_id: str | None = None,
    overrides: tuple[str, ...] = (),
    notes: list[str] | None = None,
) -> JobSpec:
    """Validate the composed config and build the :class:`JobSpec` (no corpus read, no run started). The config is
    read here, once: the stage blocks become stages, everything else plain data; what follows sees no DictConfig."""
    from omegaconf.errors import MissingMandatoryValue

    register_resolvers()
    try:
        pipeline, stage_keys = build_pipeline(cfg, notes)
        plain = settings_of(cfg)
    except MissingMandatoryValue as e:
        key = str(getattr(e, "full_key", "") or "a key")
        raise ConfigError(
            key, "???", f"it has no value; set it on the command line, e.g. {key}=..."
        ) from None
    # the stages are accepted (a bad value was refused above, before the runner and pandas load)
    from ablate.runner.heldout import pilot_corpus
    from ablate.runner.job import JobSpec
    from ablate.runner.judge import build_judge

    sources, named = param_sources(cfg, stage_keys), split_named(cfg)
    config_yaml = OmegaConf.to_yaml(
        OmegaConf.masked_copy(cfg, [str(k) for k in cfg if k != "hydra"]), resolve=True
    )
    pipeline = replace(pipeline, judge=build_judge(plain["answer"], pipeline.generator, CONF_DIR / "prompts"))
    settings = job_settings(plain, launch_dir)
    corpus, pilot_note = pilot_corpus(settings.corpus, split_named=named)
    if pilot_note and notes is not None:
        notes.append(pilot_note)
    return JobSpec(
        variant=settings.variant,
        pipeline=pipeline,
        corpus=corpus,
        settings=settings.run,
        output=settings.output,
        variant_order=settings.variant_order,
        config_yaml=config_yaml,
        param_sources=sources,
        overrides=overrides,
        sweep_id=sweep_id,
        parent_run_id=parent_run_id,
        test_confirmed=settings.test_confirmed,
    )


def print_notes(notes: list[str]) -> None:
    for n in dict.fromkeys(notes):
        print(n, file=sys.stderr)
