"""What every ``python -m ablate.label`` command shares: the labels folder, the corpus it works on (composed from
the same settings as ``python -m ablate``: ``corpus=demo_zh``, ``corpus.path=...``), the loaded snapshot, the check
that a judged item belongs to it, its grade legend, a pool loaded with its own corpus (either kind), and which
tracked runs a command reads from which store."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ablate.data.snapshot import Snapshot
from ablate.errors import AblateError, InputError
from ablate.labels import poolfile
from ablate.labels.journal import PairCheck
from ablate.labels.kind import ANSWERS, KINDS, RELEVANCE, Kind
from ablate.labels.legend import Legend, legend
from ablate.labels.workspace import DEFAULT_DIR, Workspace
from ablate.runner.settings import CorpusSpec

if TYPE_CHECKING:
    from ablate.tracking import Tracker


def add_labels_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--labels-dir",
        default=DEFAULT_DIR,
        help="the labels folder: pools, the journal and versions live in <labels-dir>/<corpus>/ (default ./labels)",
    )


def add_run_choice(p: argparse.ArgumentParser, parent_help: str, experiment_help: str) -> None:
    """``--parent``, ``--runs`` or ``--experiment`` (one of them): which tracked runs a pool reads."""
    which = p.add_mutually_exclusive_group()
    which.add_argument("--parent", help=parent_help)
    which.add_argument("--runs", help="run ids separated by commas")
    which.add_argument("--experiment", help=experiment_help)


def open_store(tracking_uri: str | None) -> Tracker:
    """The MLflow store ``--tracking-uri`` names (else the default), checked to exist and opened to read only."""
    # imported here: it imports MLflow, which a label command that reads no runs does not need
    from ablate.study.fetch import check_store
    from ablate.tracking import Tracker, check_uri, resolve_tracking_uri

    uri = resolve_tracking_uri(tracking_uri)
    check_store(uri)
    check_uri(uri, "--tracking-uri", writes=False)
    return Tracker(uri)


def add_kind(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--kind",
        choices=list(KINDS),
        default=RELEVANCE.name,
        help=f"what is judged: relevance (of a unit to a question; the default) or answers (their correctness): {what}",
    )


def add_pool_kind(p: argparse.ArgumentParser) -> None:
    """``--kind`` of a command that reads a pool file: by default the pool's own kind, by its file's ending."""
    p.add_argument(
        "--kind",
        choices=list(KINDS),
        default=None,
        help="relevance or answers (default: the pool's kind, by its file's ending)",
    )


def add_overrides(p: argparse.ArgumentParser, example: str = "corpus=demo_zh") -> None:
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help=f"settings as for python -m ablate, e.g. {example}",
    )


def compose(overrides: Sequence[str]) -> Any:
    """The composed config for ``overrides`` (Hydra's compose API on ablate's conf/), errors as one line."""
    from ablate.app.paths import register_resolvers
    from ablate.app.precheck import compose_cell, hydra_config_dir

    register_resolvers()
    with hydra_config_dir():
        return compose_cell(list(overrides))


def plain(cfg: Any, key: str) -> dict[str, Any]:
    """A block of the composed config as plain data (resolved)."""
    from ablate.app.config import _plain

    return _plain(cfg, key)


def corpus_spec(cfg: Any) -> CorpusSpec:
    """The corpus settings of a composed config."""
    return CorpusSpec.from_mapping(plain(cfg, "corpus"), plain(cfg, "versions"), plain(cfg, "eval"))


def corpus_from_mapping(block: dict[str, Any], cfg: Any | None = None) -> CorpusSpec:
    """Corpus settings from a recorded ``corpus`` block (a run's config.yaml, a pool's description)."""
    versions = plain(cfg, "versions") if cfg is not None else {}
    evals = plain(cfg, "eval") if cfg is not None else {}
    return CorpusSpec.from_mapping(block, versions, evals)


def overridden(overrides: Sequence[str], key: str) -> bool:
    """Whether ``overrides`` set ``key`` or a key under it (``corpus=x``, ``corpus.path=...``)."""
    for o in overrides:
        k = o.lstrip("+~").partition("=")[0]
        if k == key or k.startswith(key + "."):
            return True
    return False


def load(corpus: CorpusSpec) -> Snapshot:
    """The corpus snapshot, loaded and validated as a run loads it (split file, projection and label version
    included)."""
    from ablate.runner.session import shared_session

    return shared_session().snapshot(corpus)


def workspace(args: argparse.Namespace, snapshot: Snapshot) -> Workspace:
    return Workspace(Path(args.labels_dir).expanduser().resolve(), snapshot.name)


def pair_check(snapshot: Snapshot, kind: Kind = RELEVANCE) -> PairCheck:
    """Why a (qid, item) is not one of this corpus's (an unknown question; for relevance, a unit that is not one of
    its documents or chunks at the labels' unit), or ``None``."""
    queries = set(snapshot.queries)
    doc_unit = snapshot.qrels_unit == "doc"
    units = set(snapshot.documents) if doc_unit else {c.chunk_id for c in snapshot.chunks}
    what = "document" if doc_unit else "chunk"

    def check(qid: str, item: str) -> str | None:
        if qid not in queries:
            return f"question {qid!r} is not in {snapshot.name}'s queries.jsonl"
        if kind is RELEVANCE and item not in units:
            return f"{item!r} is not a {what} of {snapshot.name} (labels are per {what})"
        return None

    return check


def grade_legend(snapshot: Snapshot) -> Legend:
    """The corpus's grade legend: corpus.yaml's ``grades``, else one that follows its labels and language."""
    used = {g for q in snapshot.qrels.values() for j in q.judgements.values() for g in j.values()}
    return legend(snapshot.manifest, used, snapshot.language, str(snapshot.root / "corpus.yaml"))


def pool_corpus(pool_path: Path, meta: poolfile.PoolMeta, overrides: list[str]) -> Any:
    """The composed config for ``overrides``; a corpus setting that is not the pool's is refused."""
    if not meta.corpus_config:
        raise InputError(
            str(poolfile.meta_path(pool_path)),
            "has no corpus_config: it does not say which corpus settings the pool was made on",
            "make the pool with python -m ablate.label pool",
        )
    cfg = compose(overrides)
    if overridden(overrides, "corpus"):
        given = plain(cfg, "corpus")
        differ = sorted(
            k for k in set(given) | set(meta.corpus_config) if given.get(k) != meta.corpus_config.get(k)
        )
        if differ:
            fix = "Fix: drop the corpus settings: a pool is judged on the corpus it was made on"
            gpath = str(given.get("path") or "")
            gname = given.get("name") or Path(gpath).name
            if gname != meta.corpus or Path(gpath).resolve() != Path(meta.corpus_path).resolve():
                raise AblateError(
                    f"pool {pool_path} was made on corpus {meta.corpus} ({meta.corpus_path}), "
                    f"not {gname} ({gpath}). {fix}"
                )
            k = differ[0]
            raise AblateError(
                f"pool {pool_path} was made on corpus {meta.corpus} with corpus.{k}="
                f"{meta.corpus_config.get(k)!r}, not {given.get(k)!r}. {fix}"
            )
    return cfg


@dataclass
class Loaded:
    """A pool (either kind) with the corpus it was made on, loaded, and that corpus's labels folder."""

    kind: Kind
    path: Path
    pool: poolfile.Pool[Any]  # Pool[PoolEntry] or Pool[AnswerEntry], as ``kind`` says
    cfg: Any
    snapshot: Snapshot
    workspace: Workspace


def load_pool(
    args: argparse.Namespace,
    path_text: str,
    kind: Kind | None = None,
    before: Callable[[Any], None] | None = None,
) -> Loaded:
    """The pool at ``path_text`` (its kind by its file's ending unless ``kind`` is given), its corpus loaded as its
    runs loaded it (a ``corpus=...`` that is not the pool's is refused), every entry checked against it
    (``file:line`` when not), and the labels folder. ``before(cfg)`` checks the composed settings before the corpus
    loads (a refusal is quick)."""
    path = Path(path_text).expanduser().resolve()
    kind = kind or (ANSWERS if path.suffix == ANSWERS.suffix else RELEVANCE)
    pool: poolfile.Pool[Any] = poolfile.read(path) if kind is RELEVANCE else poolfile.read_answers(path)
    cfg = pool_corpus(path, pool.meta, list(args.overrides))
    if before is not None:
        before(cfg)
    snapshot = load(corpus_from_mapping(pool.meta.corpus_config, cfg))
    again = "make the pool again with python -m ablate.label pool" + (
        "" if kind is RELEVANCE else " --kind answers"
    )
    if pool.meta.corpus != snapshot.name:
        raise InputError(
            str(path),
            f"pool {path} was made on corpus {pool.meta.corpus}, but its settings load {snapshot.name}",
            again,
        )
    if kind is RELEVANCE and pool.meta.unit != snapshot.qrels_unit:
        raise InputError(
            str(path),
            f"its pairs are per {pool.meta.unit}, {snapshot.name}'s labels per {snapshot.qrels_unit}",
            again,
        )
    check = pair_check(snapshot, kind)
    first = 2 if kind is RELEVANCE else 1  # the line of the first entry (a .tsv has a header line)
    for line, e in enumerate(pool.entries, first):
        if problem := check(*e.key):
            raise InputError(f"{path}:{line}", problem, again)
    return Loaded(kind, path, pool, cfg, snapshot, workspace(args, snapshot))
