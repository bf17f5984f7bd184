"""Hydra entry point: ``python -m ablate variant=C rrf.k=60`` / ``python -m ablate -m variant=A,B,C,D,oracle``.

The only module that sees a DictConfig: it turns the config into plain specs, runs :func:`ablate.pipeline.run_variant`
inside an MLflow run (``ablate.tracking``), and prints a summary. Anything a user can fix ends as one line
``error: ...`` and exit status 2 (single run) or a FAILED MLflow run that does not stop the sweep (multirun).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

from ablate.errors import AblateError, ConfigError
from ablate.runner.heldout import HELD_OUT_SPLITS

log = logging.getLogger("ablate")

PACKAGE_DIR = Path(__file__).resolve().parents[1]
CONF_DIR = (PACKAGE_DIR.parent.parent / "conf").resolve()
from ablate.runner.emit import HEADLINE  # noqa: E402


def corpora_dir() -> Path:
    """Where embedded corpora live: ``$ABLATE_CORPORA``, else ``corpora/`` of this checkout, else ``./corpora``."""
    env = os.environ.get("ABLATE_CORPORA")
    if env:
        return Path(env).expanduser().resolve()
    here = PACKAGE_DIR.parent.parent / "corpora"
    return here.resolve() if here.is_dir() else (Path.cwd() / "corpora").resolve()


def datasets_dir() -> Path:
    """Shared evaluation sets: ``$ABLATE_DATASETS``, else ``../shared/datasets`` beside this checkout."""
    env = os.environ.get("ABLATE_DATASETS")
    if env:
        return Path(env).expanduser().resolve()
    return (PACKAGE_DIR.parent.parent.parent / "shared" / "datasets").resolve()


def _register_resolvers() -> None:
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("ablate_corpora"):
        OmegaConf.register_new_resolver("ablate_corpora", lambda name: str(corpora_dir() / name))
    if not OmegaConf.has_resolver("ablate_datasets"):
        OmegaConf.register_new_resolver("ablate_datasets", lambda name: str(datasets_dir() / name))


# ----------------------------------------------------------------------------------------------------------------
# Config -> plain specs


def _opt(v: Any) -> Any:
    return None if v in (None, "", "null", "None") else v


def specs_from_config(cfg: Any):
    """Turn the composed config into (VariantSpec, EvalSettings, ChunkerSpec|None)."""
    from omegaconf import OmegaConf

    from ablate.data.corpus import ChunkerSpec
    from ablate.evaluation import EvalSettings
    from ablate.runner.pipeline import BM25Spec, DenseSpec, RerankSpec, VariantSpec

    keys = ("eval", "rerank", "retrieval", "rrf", "variant", "fusion", "bm25", "dense", "corpus")
    c: dict[str, Any] = {k: OmegaConf.to_container(cfg[k], resolve=True) for k in keys}
    ks = c["eval"]["ks"]
    if isinstance(ks, int):
        ks = [ks]
    if not ks or not all(isinstance(k, int) and k > 0 for k in ks):
        raise ConfigError("eval.ks", ks, "give a list of positive integers, e.g. eval.ks=[1,5,10]")
    ks = tuple(sorted(set(ks)))
    rr = c["rerank"]
    rerank = None
    if rr.get("enabled"):
        t = rr.get("train") or {}
        rerank = RerankSpec(
            model=str(rr["model"]),
            depth=int(rr["depth"]),
            batch_size=int(rr["batch_size"]),
            max_length=int(rr["max_length"]),
            train_split=str(t.get("split", "train")),
            train_base_model=str(t.get("base_model", "all-MiniLM-L6-v2")),
            train_epochs=int(t.get("epochs", 1)),
            train_max_negatives=int(t.get("max_negatives", 7)),
            train_max_length=int(t.get("max_length", 128)),
            train_seed=int(t.get("seed", 13)),
            train_min_steps=int(t.get("min_steps", 100)),
        )
    window = c["retrieval"]["window"]
    if not isinstance(window, int) or window < 1:
        raise ConfigError("retrieval.window", window, "it must be a positive integer, e.g. retrieval.window=100")
    try:
        rrf_k = float(c["rrf"]["k"])
    except (TypeError, ValueError):
        raise ConfigError("rrf.k", c["rrf"]["k"], "it must be a number >= 0 (default 60)") from None
    spec = VariantSpec(
        name=str(c["variant"]["name"]),
        retrievers=tuple(c["retrieval"]["retrievers"]),
        fusion=str(c["fusion"]["method"]),
        rrf_k=rrf_k,
        window=window,
        rerank=rerank,
        bm25=BM25Spec(**{**c["bm25"], "stemmer": _opt(c["bm25"].get("stemmer"))}),
        dense=DenseSpec(**c["dense"]),
        identity=_opt(c["corpus"].get("identity")),
        depth=max(ks),
        cache_depth=max(int(c["retrieval"].get("cache_depth", 100)), max(ks)),
    )
    spec.validate()
    e = c["eval"]
    options = {
        "eval.unit": ("auto", "doc", "chunk"),
        "eval.budget": ("chunks", "docs"),
        "eval.gain": ("exponential", "linear"),
        "eval.unjudged": ("nonrelevant", "condensed"),
        "eval.missing": ("zero", "exclude"),
    }
    for key, opts in options.items():
        v = e[key.split(".")[1]]
        if v not in opts:
            raise ConfigError(key, v, f"valid options: {', '.join(opts)}")
    settings = EvalSettings(
        ks=ks,
        unit=e["unit"],
        budget=e["budget"],
        gain=e["gain"],
        unjudged=e["unjudged"],
        relevance_level=int(e["relevance_level"]),
        missing=e["missing"],
    )
    ch = c["corpus"].get("chunker")
    chunker = ChunkerSpec(**ch) if isinstance(ch, dict) else None
    return spec, settings, chunker


# ----------------------------------------------------------------------------------------------------------------
# One job


def component_tags(components: dict[str, Any], settings: Any) -> dict[str, str]:
    """``ablate.fp.<component>`` = sha256 of each component's parameters: what one-factor comparisons check."""
    from dataclasses import asdict

    from ablate.cache import key_of

    comps = {**components, "eval": asdict(settings)}
    return {f"ablate.fp.{name}": key_of(value) for name, value in comps.items()}


def _sweep_context() -> tuple[str | None, Path | None]:
    """(sweep id, sweep dir) when running under ``-m``, else (None, None)."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hc = HydraConfig.get()
        if hc.mode == RunMode.MULTIRUN:
            d = Path(hc.sweep.dir).resolve()
            return str(d), d
    except Exception:  # noqa: BLE001 - not under Hydra (tests call run_job directly)
        pass
    return None, None


def _is_number(v: Any) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True


def _git_commit() -> str:
    import subprocess

    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=PACKAGE_DIR, capture_output=True, text=True, timeout=5, check=False
        )
        return out.stdout.strip() or "unknown"
    except Exception:  # noqa: BLE001
        return "unknown"


def _heldout_verdict(tracker: Any, experiment: str, run_id: str, result: Any, settings: Any, snapshot: Any,
                     sweep_id: str | None):
    from dataclasses import asdict

    from ablate.runner.heldout import PriorTestRun, config_fingerprint, judge_test_run

    cfp = config_fingerprint(result.components, asdict(settings))
    tracker.set_tags(run_id, {"ablate.config_fp": cfp})
    filt = (
        f"tags.`ablate.split` = 'test' and tags.`ablate.index_snapshot` = '{snapshot.content_fingerprint}' "
        f"and tags.`ablate.qrels_hash` = '{snapshot.split_qrels('test').content_hash()}'"
    )
    prior = [
        PriorTestRun(r.info.run_id, r.data.tags.get("ablate.config_fp", ""), r.data.tags.get("ablate.sweep"),
                     r.info.start_time)
        for r in tracker.search([tracker.experiment_id(experiment)], filt)
        if r.info.run_id != run_id and r.data.tags.get("ablate.config_fp")
    ]
    return judge_test_run(prior, cfp, sweep_id)


# Jobs of one sweep run in one process (Hydra's basic launcher, or one joblib worker): the snapshot and the built
# retrievers are shared between them instead of being rebuilt per job. Keyed by content, so a changed file reloads.
_SNAPSHOTS: dict[tuple, Any] = {}
_SOURCES: dict[tuple, Any] = {}


def _load_snapshot(path: str, chunker: Any, language: str | None, name: str | None, extra: tuple[str, ...]):
    from ablate.data.corpus import load_corpus

    root = Path(path)
    stamp = tuple(
        (str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(root.rglob("*")) if p.is_file()
    ) if root.is_dir() else ()
    key = (str(root.resolve()) if root.exists() else path, chunker, language, name, extra, stamp)
    if key not in _SNAPSHOTS:
        _SNAPSHOTS.clear()  # one corpus at a time is enough; keeps memory bounded across corpus sweeps
        _SOURCES.clear()
        _SNAPSHOTS[key] = load_corpus(path, chunker, language=language, name=name, extra_qrels=list(extra))
    return _SNAPSHOTS[key]


def run_job(cfg: Any, launch_dir: str | None = None) -> dict[str, Any]:
    """Run one configured job inside an MLflow run. Returns the headline metrics (and the run id)."""
    from omegaconf import OmegaConf

    from ablate.cache import Cache
    from ablate.runner.emit import artifacts_for, metrics_for, print_run_summary
    from ablate.runner.pipeline import run_variant
    from ablate.tracking import Tracker, flatten, resolve_tracking_uri

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    _register_resolvers()  # also in joblib workers, which never ran main()
    sweep_id, sweep_dir = _sweep_context()
    corpus_path = cfg.corpus.path
    experiment = _opt(cfg.tracking.experiment) or _opt(cfg.corpus.name) or Path(str(corpus_path)).name
    tracker = Tracker(resolve_tracking_uri(_opt(cfg.tracking.uri), launch_dir))
    parent = None
    if sweep_dir is not None and (sweep_dir / ".ablate_parent_run").exists():
        parent = (sweep_dir / ".ablate_parent_run").read_text().strip() or None
    variant = str(cfg.variant.name)
    tags = {"ablate.variant": variant, "ablate.git_commit": _git_commit()}
    if sweep_id:
        tags["ablate.sweep"] = sweep_id
    container = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(container, dict)
    with tracker.run(experiment, run_name=variant, tags=tags, parent_run_id=parent) as run_id:
        params = {k: v for k, v in flatten(container).items() if not k.startswith("hydra")}
        params["variant"] = variant
        tracker.log_params(run_id, params)
        spec, settings, chunker = specs_from_config(cfg)
        snapshot = _load_snapshot(
            str(corpus_path),
            chunker,
            _opt(cfg.corpus.get("language")),
            _opt(cfg.corpus.get("name")),
            tuple(cfg.corpus.get("extra_qrels") or ()),
        )
        split = str(cfg.corpus.split)
        cache = Cache(_opt(cfg.cache.dir), enabled=bool(cfg.cache.enabled))
        source_key = (snapshot.fingerprint, split, str(cache.root))
        source = _SOURCES.get(source_key)
        log.info(
            "corpus %s: %d documents, %d chunks, split %s with %d queries; variant %s",
            snapshot.name, len(snapshot.documents), len(snapshot.chunks), split, len(snapshot.split_qids(split)), variant,
        )
        thr = _opt(cfg.abstain.threshold)
        if source is None:
            from ablate.runner.pipeline import CandidateSource

            source = CandidateSource(snapshot, cache, qrels=snapshot.split_qrels(split), show_progress=bool(cfg.progress))
            _SOURCES[source_key] = source
        source.cache = cache  # this job's cache counters
        source.timings, source.counters = {}, {}
        result = run_variant(
            snapshot, split, spec, settings, cache, source=source, show_progress=bool(cfg.progress),
            abstain_threshold=thr if thr in (None, "dev") else float(thr) if _is_number(thr) else thr,
        )
        tracker.set_tags(run_id, {
            "ablate.snapshot": snapshot.fingerprint,
            "ablate.index_snapshot": snapshot.content_fingerprint,
            "ablate.qrels_hash": snapshot.split_qrels(split).content_hash(),
            "ablate.qrels_file_sha256": snapshot.split_qrels(split).source_sha256,
            "ablate.label_version": snapshot.label_version or "unversioned",
            "ablate.split": split,
            "ablate.data.corpus": snapshot.name,
            "ablate.identity": spec.identity or "none",
            **component_tags(result.components, settings),
        })
        if split in HELD_OUT_SPLITS:
            verdict = _heldout_verdict(tracker, experiment, run_id, result, settings, snapshot, sweep_id)
            tracker.set_tags(run_id, verdict.tags())
            if verdict.message:
                print(verdict.message, file=sys.stderr)
        metrics = metrics_for(result, bootstrap=int(cfg.stats.bootstrap), seed=int(cfg.stats.seed))
        tracker.log_metrics(run_id, metrics)
        files = artifacts_for(result, snapshot, OmegaConf.to_yaml(cfg, resolve=True))
        tracker.log_files(run_id, files)
        print_run_summary(result, run_id, tracker.uri, experiment)
    return {"run_id": run_id, **{k: result.evaluation.means.get(k) for k in HEADLINE}}


# ----------------------------------------------------------------------------------------------------------------
# Command line


def _group_options() -> dict[str, list[str]]:
    out = {}
    for d in sorted(CONF_DIR.iterdir()):
        if d.is_dir() and d.name != "hydra":
            out[d.name] = sorted(p.stem for p in d.glob("*.yaml"))
    return out


def precheck_overrides(argv: list[str]) -> None:
    """Reject an unknown config-group option (``variant=X``) with one line, before Hydra prints a wall of text."""
    groups = _group_options()
    for arg in argv:
        if "=" not in arg or arg.startswith("-") or arg.startswith("+") or arg.startswith("~"):
            continue
        key, _, value = arg.partition("=")
        key = key.removeprefix("override ")
        if key in groups and value:
            vals = value.strip("[]").split(",") if not value.startswith(("range(", "choice(", "glob(")) else []
            for v in vals:
                if v and v not in groups[key]:
                    raise ConfigError(key, v, f"valid options: {', '.join(groups[key])} (from conf/{key}/)")


def _terminate_as_exit() -> None:
    """Turn SIGTERM (``kill``, a CI timeout) into SystemExit so the open MLflow run ends FAILED with a reason
    instead of being left RUNNING."""
    import signal

    def _handler(signum, frame):  # noqa: ANN001, ARG001
        raise SystemExit(f"terminated by signal {signum}")

    try:
        signal.signal(signal.SIGTERM, _handler)
    except ValueError:  # not the main thread (e.g. a launcher's worker): leave the default
        pass


def main() -> None:
    import hydra

    _register_resolvers()
    argv = sys.argv[1:]
    try:
        precheck_overrides(argv)
    except AblateError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    launch_dir = os.getcwd()
    multirun = any(a in ("-m", "--multirun") for a in argv)
    _terminate_as_exit()

    @hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
    def _app(cfg):  # noqa: ANN001
        try:
            return run_job(cfg, launch_dir)
        except AblateError as e:
            print(f"error: {e}", file=sys.stderr)
            if multirun:  # the run is marked FAILED in MLflow; the sweep goes on
                return {"error": str(e)}
            sys.exit(2)
        except Exception as e:  # an unexpected failure: still one line, still FAILED in MLflow
            if os.environ.get("ABLATE_DEBUG"):
                raise
            print(f"error: unexpected {type(e).__name__}: {e} (set ABLATE_DEBUG=1 for the traceback)", file=sys.stderr)
            if multirun:
                return {"error": str(e)}
            sys.exit(1)

    _app()


if __name__ == "__main__":
    main()
