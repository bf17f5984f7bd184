"""The settings of one job besides its stages, parsed and checked once, into frozen typed values.

:func:`job_settings` takes the composed config's setting blocks as plain data (:mod:`ablate.app.config`, the only
place that sees a DictConfig, converts them once) and returns a :class:`JobSettings`: what the job reads
(:class:`CorpusSpec`), how its output is scored (:class:`RunSettings`), where it writes (:class:`OutputSpec`), the
variant's name and order, and whether a held-out run was confirmed. Everything is checked here, before any corpus is
read or any MLflow run exists; a bad value raises :class:`~ablate.errors.ConfigError` naming its key (``eval.ks``,
``abstain.threshold``, ``stats.bootstrap``, ...). A recorded run's ``config.yaml`` is read back through the same
``from_mapping`` constructors (:mod:`ablate.runner.rescore`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablate.checks import check_bool, check_int, check_str
from ablate.data.chunking import ChunkerSpec
from ablate.data.projection import DEFAULT_MIN_OVERLAP, check_min_overlap
from ablate.errors import ConfigError
from ablate.evaluation import EvalSettings
from ablate.runner.access import Access
from ablate.safenames import PLAIN_NAME_RULE, name_problem
from ablate.tracking import resolve_tracking_uri

ABSTAIN_OPTIONS = (
    "a number (refuse below it), null (refuse only empty results) or dev (tune on the dev split)"
)
#: The composed config's top-level blocks of settings (mappings), in the order a refusal lists them.
SETTING_BLOCKS = (
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
)
#: The composed config's top-level settings that are single values.
SETTING_FLAGS = ("progress", "verbose")


@dataclass(frozen=True)
class CorpusSpec:
    """Which corpus folder a job reads and how: ``path``, the ``split`` it runs, the ``identity`` retrieval runs for
    (``None`` = no permission filtering; ``per_query`` = each question's persona), the chunker and language (``None`` =
    the folder's own), extra judgement files (e.g. RGB's judged negatives), the questions' date ``as_of`` and the
    policy for out-of-force versions (:mod:`ablate.runner.access`)."""

    path: str
    split: str = "test"
    name: str | None = None
    identity: str | None = None
    chunker: ChunkerSpec | None = None
    language: str | None = None
    extra_qrels: tuple[str, ...] = ()
    as_of: str | None = None  # None (dates ignored) | "per_query" | a date YYYY-MM-DD
    version_policy: str = "all"  # versions.policy: all | in_force
    split_file: str | None = (
        None  # python -m ablate.split's split.tsv (absolute): reassigns questions and labels
    )
    #: the corpus has one labels file and no split file: ``split`` is that file's, and no split is held out
    #: (:func:`ablate.runner.heldout.pilot_corpus`)
    exploratory: bool = False
    #: eval.projection.min_overlap: the share of characters chunk labels follow another chunker by
    #: (:mod:`ablate.data.projection`)
    min_overlap: float = DEFAULT_MIN_OVERLAP
    #: eval.unit=doc: score against document labels derived from the original labels (:meth:`Snapshot.doc_view`)
    doc_labels: bool = False
    #: corpus.labels: a committed label version read instead of qrels/ (:mod:`ablate.data.labelsets`): its folder
    #: (absolute), or its name, looked up under ./labels/<corpus>/versions/ (resolved against the starting folder)
    labels: str | None = None

    def __post_init__(self) -> None:
        check_str("corpus.split", self.split)
        if self.name is not None and (problem := name_problem(self.name)):
            raise ConfigError("corpus.name", self.name, f"{problem}; give {PLAIN_NAME_RULE}")
        # validates identity/as_of/policy together; the date as every record writes it (20260415 -> 2026-04-15)
        object.__setattr__(self, "as_of", self.access.as_of)
        object.__setattr__(self, "min_overlap", check_min_overlap(self.min_overlap))

    @property
    def access(self) -> Access:
        """Who asks and when (:mod:`ablate.runner.access`)."""
        return Access(identity=self.identity, as_of=self.as_of, policy=self.version_policy)

    @classmethod
    def from_mapping(
        cls,
        c: Mapping[str, Any],
        versions: Mapping[str, Any] | None = None,
        eval: Mapping[str, Any] | None = None,
    ) -> CorpusSpec:
        path = c.get("path")
        if path in (None, "", "???"):
            raise ConfigError(
                "corpus.path",
                path,
                "name the corpus folder, e.g. corpus=beir corpus.path=../shared/datasets/scifact (a folder with "
                "corpus.jsonl, queries.jsonl and qrels/<split>.tsv), or use a named corpus such as corpus=scifact",
            )
        ch = c.get("chunker")
        if ch is not None and not isinstance(ch, Mapping):
            raise ConfigError(
                "corpus.chunker", ch, "give a mapping, e.g. corpus.chunker={kind:tokens,size:200,overlap:40}"
            )
        chunker = _chunker(ch) if isinstance(ch, Mapping) else None
        extra = c.get("extra_qrels") or ()
        if isinstance(extra, str):
            extra = (extra,)
        return cls(
            path=str(path),
            split=c.get("split", "test"),
            name=_opt_str(c.get("name")),
            identity=_opt_str(c.get("identity")),
            chunker=chunker,
            language=_opt_str(c.get("language")),
            extra_qrels=tuple(str(x) for x in extra),
            as_of=_opt_str(c.get("as_of")),
            version_policy=str((versions or {}).get("policy", "all")),
            split_file=str(Path(sf).expanduser().resolve())
            if (sf := _opt_str(c.get("split_file")))
            else None,
            min_overlap=_projection(eval),
            doc_labels=(eval or {}).get("unit") == "doc",
            labels=_labels(c.get("labels")),
        )


#: ``stats.correction``: the report's adjustments (:data:`ablate.evaluation.stats.CORRECTIONS`, kept apart so that
#: checking a config does not import scipy)
CORRECTIONS: tuple[str, ...] = ("holm", "bh", "none")
#: ``stats.bootstrap``'s ceiling: resamples over queries beyond it narrow no 95% interval visibly and cost minutes
MAX_BOOTSTRAP = 1_000_000


@dataclass(frozen=True)
class RunSettings:
    """How a pipeline's output is scored and summarised.

    ``eval``: the evaluation rules (:class:`~ablate.evaluation.EvalSettings`); the final ranking is ``max(eval.ks)``
    long. ``cache_depth``: candidate lists are computed at least this deep, so smaller windows reuse them.
    ``abstain_threshold``: refuse a query whose top score is below it; ``None`` refuses only empty results; ``"dev"``
    tunes it on ``tune_split`` with the same pipeline. ``bootstrap``/``seed``: resamples over queries for the 95%
    intervals. ``correction``: how the sweep's report adjusts its family of p-values (checked here, before anything
    runs; it changes no run, so it is not part of a run's reuse key).
    """

    eval: EvalSettings = field(default_factory=EvalSettings)
    cache_depth: int = 100
    abstain_threshold: float | str | None = None
    bootstrap: int = 1000
    seed: int = 0
    tune_split: str = "dev"
    correction: str = "holm"

    def __post_init__(self) -> None:
        check_int("retrieval.cache_depth", self.cache_depth, 1)
        check_int("stats.bootstrap", self.bootstrap, 0, MAX_BOOTSTRAP)
        check_int("stats.seed", self.seed, 0)
        if self.correction not in CORRECTIONS:
            raise ConfigError("stats.correction", self.correction, "valid options: " + ", ".join(CORRECTIONS))
        t = self.abstain_threshold
        if (
            t is not None
            and t != "dev"
            and not (isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t))
        ):
            raise ConfigError("abstain.threshold", t, f"give {ABSTAIN_OPTIONS}")
        if isinstance(t, int):  # 1 and 1.0 are one threshold: one cell key, one record
            object.__setattr__(self, "abstain_threshold", float(t))

    @property
    def depth(self) -> int:
        """Length of the final ranking: the largest cutoff scored."""
        return self.eval.max_k

    @classmethod
    def from_mapping(
        cls,
        eval: Mapping[str, Any],
        retrieval: Mapping[str, Any],
        abstain: Mapping[str, Any],
        stats: Mapping[str, Any],
    ) -> RunSettings:
        unknown = sorted(set(eval) - set(EvalSettings.__dataclass_fields__) - {"projection"})
        if unknown:
            raise ConfigError(
                f"eval.{unknown[0]}",
                eval[unknown[0]],
                f"known keys: {', '.join(EvalSettings.__dataclass_fields__)}",
            )
        ev = dict(eval)
        ev.pop(
            "projection", None
        )  # how labels follow another chunker: a corpus setting (CorpusSpec.min_overlap)
        ks = ev.get("ks")
        if isinstance(ks, Sequence) and not isinstance(ks, str):
            ev["ks"] = tuple(ks)
        settings = EvalSettings(**ev)
        t = abstain.get("threshold")
        if isinstance(t, str) and t not in ("dev",):
            try:
                t = float(t)
            except ValueError:
                raise ConfigError("abstain.threshold", t, f"give {ABSTAIN_OPTIONS}") from None
        return cls(
            eval=settings,
            cache_depth=max(
                check_int("retrieval.cache_depth", retrieval.get("cache_depth", 100), 1), settings.max_k
            ),
            abstain_threshold=t,
            bootstrap=stats.get("bootstrap", 1000),
            seed=stats.get("seed", 0),
            correction=stats.get("correction", "holm"),
        )


@dataclass(frozen=True)
class OutputSpec:
    """Where a job writes: the MLflow ``tracking_uri`` and ``experiment``, the cache folder, progress lines, and
    ``verbose`` (``-v``): every query-accounting counter on the console, not only in the run's artifacts.
    ``reuse``: a FINISHED run of the experiment with the same inputs stands for this job instead of running it again
    (:mod:`ablate.runner.reuse`; the command line's ``tracking.reuse`` defaults to true, library callers opt in)."""

    tracking_uri: str
    experiment: str
    cache_dir: str | None = None
    cache_enabled: bool = True
    progress: bool = True
    reuse: bool = False
    verbose: bool = False

    def __post_init__(self) -> None:
        check_bool("cache.enabled", self.cache_enabled)
        check_bool("progress", self.progress)
        check_bool("verbose", self.verbose)
        check_bool("tracking.reuse", self.reuse)


@dataclass(frozen=True)
class JobSettings:
    """Every setting of one job besides its stages and its answer judge (those are built from their own blocks):
    the ``corpus`` it reads, how its output is scored (``run``), where it writes (``output``), the ``variant``'s name
    and ``variant_order`` (its place in the ablation table) and ``test_confirmed`` (``heldout.confirm_test``)."""

    corpus: CorpusSpec
    run: RunSettings
    output: OutputSpec
    variant: str = "custom"
    variant_order: float | None = None
    test_confirmed: bool = False


def job_settings(config: Mapping[str, Any], launch_dir: str | None = None) -> JobSettings:
    """The :class:`JobSettings` of ``config``: the composed config's :data:`SETTING_BLOCKS` (each a plain mapping; a
    missing one is empty) and :data:`SETTING_FLAGS`. ``launch_dir``: where the command started (the default store,
    ``mlflow.db``, is made there). Checked in the order a refusal is looked for: corpus, scoring, output, held-out."""
    blocks = {key: config.get(key) or {} for key in SETTING_BLOCKS}
    corpus = CorpusSpec.from_mapping(blocks["corpus"], blocks["versions"], blocks["eval"])
    run = RunSettings.from_mapping(blocks["eval"], blocks["retrieval"], blocks["abstain"], blocks["stats"])
    tracking, cache = blocks["tracking"], blocks["cache"]
    output = OutputSpec(
        tracking_uri=resolve_tracking_uri(_opt_str(tracking.get("uri")), launch_dir),
        experiment=experiment_of(tracking, blocks["corpus"]),
        cache_dir=_opt_str(cache.get("dir")),
        cache_enabled=cache.get("enabled", True),
        progress=config.get("progress", True),
        verbose=config.get("verbose", False),
        reuse=tracking.get("reuse", True),
    )
    confirm = blocks["heldout"].get("confirm_test", False)
    if not isinstance(confirm, bool):
        raise ConfigError("heldout.confirm_test", confirm, "it must be true or false")
    order = blocks["variant"].get("order")
    return JobSettings(
        corpus=corpus,
        run=run,
        output=output,
        variant=str(blocks["variant"].get("name") or "custom"),
        variant_order=float(order)
        if isinstance(order, (int, float)) and not isinstance(order, bool)
        else None,
        test_confirmed=confirm,
    )


def experiment_of(tracking: Mapping[str, Any], corpus: Mapping[str, Any]) -> str:
    """The MLflow experiment: ``tracking.experiment``, else the corpus name, else the corpus folder's name."""
    for value in (tracking.get("experiment"), corpus.get("name")):
        if value not in (None, "", "null"):
            return str(value)
    return Path(str(corpus.get("path"))).name


def _chunker(ch: Mapping[str, Any]) -> ChunkerSpec | None:
    """``corpus.chunker`` as a spec: ``kind`` null is the corpus's own (None); size and overlap count for ``tokens``
    only, so ``clause`` with any size is one chunker (one cell key)."""
    d = dict(ch)
    if d.get("kind") in (None, "", "null", "None"):
        return None
    if d.get("kind") != "tokens":
        d.pop("size", None), d.pop("overlap", None)
    return ChunkerSpec(**d)


def _projection(eval: Mapping[str, Any] | None) -> Any:
    """``eval.projection.min_overlap`` as given (default :data:`DEFAULT_MIN_OVERLAP`); unknown keys refused."""
    proj = (eval or {}).get("projection") or {}
    if not isinstance(proj, Mapping):
        raise ConfigError("eval.projection", proj, "give a mapping, e.g. eval.projection.min_overlap=0.5")
    unknown = sorted(set(proj) - {"min_overlap"})
    if unknown:
        raise ConfigError(f"eval.projection.{unknown[0]}", proj[unknown[0]], "known keys: min_overlap")
    return proj.get("min_overlap", DEFAULT_MIN_OVERLAP)  # checked by CorpusSpec


def _labels(v: Any) -> str | None:
    """``corpus.labels`` as the session loads it: ``None``, a version folder made absolute, or a version's name
    as ``<cwd>/labels/<name>`` is not yet known (the corpus's name is read with the corpus), kept as the name."""
    s = _opt_str(v)
    if s is None:
        return None
    p = Path(s).expanduser()
    if p.is_dir() or "/" in s or "\\" in s:
        return str(p.resolve())
    return s


def _opt_str(v: Any) -> str | None:
    return None if v in (None, "", "null", "None") else str(v)
