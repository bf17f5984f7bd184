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
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ablate.app.paths import CONF_DIR, register_resolvers, stage_blocks
from ablate.app.targets import check_nested_targets, has_target, stage_class
from ablate.errors import AblateError, ConfigError
from ablate.runner.heldout import pilot_corpus
from ablate.runner.job import JobSpec
from ablate.runner.judge import build_judge
from ablate.runner.pipeline import Pipeline
from ablate.runner.settings import CorpusSpec, OutputSpec, RunSettings
from ablate.stages.base import kind_of
from ablate.tracking import resolve_tracking_uri

#: Top-level keys that are settings, not stages.
SETTINGS_KEYS = (
    "variant",
    "corpus",
    "versions",
    "retrieval",
    "eval",
    "abstain",
    "stats",
    "answer",
    "heldout",
    "tracking",
    "cache",
    "progress",
    "verbose",
    "hydra",
)
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


def experiment_name(cfg: DictConfig) -> str:
    """``tracking.experiment``, else the corpus name, else the corpus folder's name."""
    exp = cfg.tracking.get("experiment")
    if exp not in (None, "", "null"):
        return str(exp)
    name = cfg.corpus.get("name")
    if name not in (None, "", "null"):
        return str(name)
    return Path(str(cfg.corpus.path)).name


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
    """Validate the composed config and build the :class:`JobSpec` (no corpus read, no run started)."""
    from omegaconf.errors import MissingMandatoryValue

    register_resolvers()
    try:
        pipeline, stage_keys = build_pipeline(cfg, notes)
        judge = build_judge(_plain(cfg, "answer"), pipeline.generator, CONF_DIR / "prompts")
        pipeline = replace(pipeline, judge=judge)
        corpus, pilot_note = pilot_corpus(
            CorpusSpec.from_mapping(_plain(cfg, "corpus"), _plain(cfg, "versions"), _plain(cfg, "eval")),
            split_named=split_named(cfg),
        )
        if pilot_note and notes is not None:
            notes.append(pilot_note)
        settings = RunSettings.from_mapping(
            _plain(cfg, "eval"), _plain(cfg, "retrieval"), _plain(cfg, "abstain"), _plain(cfg, "stats")
        )
        tracking, cache = _plain(cfg, "tracking"), _plain(cfg, "cache")
        output = OutputSpec(
            tracking_uri=resolve_tracking_uri(_opt(tracking.get("uri")), launch_dir),
            experiment=experiment_name(cfg),
            cache_dir=_opt(cache.get("dir")),
            cache_enabled=cache.get("enabled", True),
            progress=cfg.get("progress", True),
            verbose=cfg.get("verbose", False),
            reuse=tracking.get("reuse", True),
        )
        variant = _plain(cfg, "variant")
        confirm = _plain(cfg, "heldout").get("confirm_test", False)
        if not isinstance(confirm, bool):
            raise ConfigError("heldout.confirm_test", confirm, "it must be true or false")
    except MissingMandatoryValue as e:
        key = str(getattr(e, "full_key", "") or "a key")
        raise ConfigError(
            key, "???", f"it has no value; set it on the command line, e.g. {key}=..."
        ) from None
    order = variant.get("order")
    return JobSpec(
        variant=str(variant.get("name") or "custom"),
        pipeline=pipeline,
        corpus=corpus,
        settings=settings,
        output=output,
        variant_order=float(order)
        if isinstance(order, (int, float)) and not isinstance(order, bool)
        else None,
        config_yaml=OmegaConf.to_yaml(
            OmegaConf.masked_copy(cfg, [str(k) for k in cfg if k != "hydra"]), resolve=True
        ),
        param_sources=param_sources(cfg, stage_keys),
        overrides=overrides,
        sweep_id=sweep_id,
        parent_run_id=parent_run_id,
        test_confirmed=confirm,
    )


def _opt(v: Any) -> str | None:
    return None if v in (None, "", "null", "None") else str(v)


def print_notes(notes: list[str]) -> None:
    for n in dict.fromkeys(notes):
        print(n, file=sys.stderr)
