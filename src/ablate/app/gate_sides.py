"""The two sides of ``python -m ablate.gate``: each a tracked run (its id or name) or a TREC run file scored against
``--corpus``, with the per-question table both are compared on and what they stand on.

A tracked run's table is its ``per_query.csv`` (checked against its sealed record) and, for the stage a broken
question lost its evidence at, its ``funnel_per_query.csv``. A run file is scored the way a run scores its final
ranking: the corpus ``--corpus NAME`` names (``conf/corpus/NAME.yaml``, or a corpus folder, composed as
``python -m ablate corpus=NAME`` composes it, ``KEY=VALUE`` settings after it included), its split, identity, dates
and evaluation rules, the labels as the askers see them (:func:`ablate.runner.scoring.scoring_inputs`), the one
scoring function (:func:`ablate.evaluation.scoring.score_run`) and the run's own per-question table
(:func:`ablate.runner.emit.per_query_frame`). Every line of the file is checked: its format
(:func:`ablate.evaluation.io.read_trec_run`), then its question (one of the split's) and its result (a chunk of the
corpus), a refusal naming ``file:line``.

Both sides must stand on one ground: the same corpus snapshot, label version and split, and for a run beside
``--corpus`` the same identity, dates and evaluation rules as the corpus's settings, or the gate refuses with one line
saying which and how to score them alike.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ablate import record as R
from ablate.app.paths import CONF_DIR
from ablate.errors import AblateError, InputError

if TYPE_CHECKING:
    import pandas as pd

    from ablate.data.snapshot import Snapshot
    from ablate.record import RecordedRun
    from ablate.runner.settings import CorpusSpec, RunSettings
    from ablate.tracking import Tracker

#: endings that make a value a file's path rather than a run's name when no such file exists
FILE_ENDINGS = (".trec", ".run", ".txt", ".tsv")
#: the re-score that puts two runs on one label version
RESCORE = "python -m ablate.report --runs BASELINE,CANDIDATE --labels VERSION"


@dataclass
class Corpus:
    """The corpus ``--corpus`` names, loaded: its settings (``spec``, ``settings``), the snapshot and the label
    version (the ``ablate.label_version`` a run on it records)."""

    name: str
    spec: CorpusSpec
    settings: RunSettings
    snapshot: Snapshot
    overrides: tuple[str, ...]

    @property
    def label_version(self) -> str:
        return self.snapshot.label_version or "unversioned"

    @property
    def command(self) -> str:
        return " ".join(["--corpus", self.name, *self.overrides])


@dataclass
class Side:
    """One side as given (``option`` ``--baseline``/``--candidate``): a tracked ``run`` or a run ``file``, its
    per-question table (index ``qid``) and, for a run, its per-question funnel (None when it logged none)."""

    option: str
    given: str
    per_query: pd.DataFrame
    run: RecordedRun | None = None
    file: Path | None = None
    funnel: pd.DataFrame | None = None
    config: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        """What ``--json`` names it by: the run id, or the file's path as given."""
        return self.run.run_id if self.run is not None else self.given

    @property
    def name(self) -> str:
        return f"run {self.run.name}" if self.run is not None else f"file {self.given}"


def is_file(given: str, option: str) -> bool:
    """Whether ``given`` names a run file (an existing file); a path-like value naming none is refused."""
    path = Path(given).expanduser()
    if path.is_file():
        return True
    if os.sep in given or "/" in given or path.suffix.lower() in FILE_ENDINGS:
        raise AblateError(
            f"{option} {given!r}: no such file. Fix: give the TREC run file's path, or a run id or name"
        )
    return False


# ---------------------------------------------------------------------------------------------------------------
# --corpus


def corpus_names() -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / "corpus").glob("*.yaml"))


def load_corpus(name: str, overrides: Sequence[str]) -> Corpus:
    """The corpus ``name`` names with ``overrides`` (``corpus.split=test``), composed and loaded as
    ``python -m ablate corpus=NAME ...`` loads it (a corpus folder: ``corpus=beir corpus.path=FOLDER``)."""
    from ablate.app.config import settings_of
    from ablate.app.label_common import compose, load, overridden
    from ablate.runner.heldout import pilot_corpus
    from ablate.runner.settings import job_settings

    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise AblateError(
            f"{bad[0]!r}: not a setting. Fix: give settings as KEY=VALUE after --corpus (e.g. corpus.split=test)"
        )
    folder = Path(name).expanduser()
    if (CONF_DIR / "corpus" / f"{name}.yaml").is_file() and "/" not in name:
        first = [f"corpus={name}"]
    elif folder.is_dir():
        first = ["corpus=beir", f"corpus.path={folder.resolve()}"]
    else:
        raise AblateError(
            f"--corpus {name!r}: no corpus config conf/corpus/{name}.yaml and no such folder. Fix: name one of "
            f"{', '.join(corpus_names())}, or a corpus folder (corpus.jsonl, queries.jsonl, qrels/)"
        )
    cfg = compose([*first, *overrides])
    settings = job_settings(settings_of(cfg), os.getcwd())
    spec, _ = pilot_corpus(settings.corpus, split_named=overridden(overrides, "corpus.split"))
    return Corpus(name, spec, settings.run, load(spec), tuple(overrides))


# ---------------------------------------------------------------------------------------------------------------
# a run file


def score_file(path: Path, corpus: Corpus) -> pd.DataFrame:
    """The per-question table of the run file at ``path`` scored on ``corpus`` as a run scores its ranking (the
    module docstring); every line checked."""
    from ablate.evaluation.io import read_trec_run
    from ablate.evaluation.scoring import score_run
    from ablate.runner.access import Resolver
    from ablate.runner.emit import per_query_frame
    from ablate.runner.rescore import on_snapshot
    from ablate.runner.scoring import scoring_inputs

    snap, spec = corpus.snapshot, corpus.spec
    raw = read_trec_run(path)  # every line's format: file:line
    check_lines(path, snap, spec.split, corpus.command)
    run = on_snapshot(raw, snap, str(path))
    access = spec.access
    resolver = Resolver(snap, access)
    resolver.check(snap.split_qids(spec.split))
    inputs = scoring_inputs(snap, spec.split, access, resolver=resolver)
    scores = score_run(run, inputs.labels, inputs.qids, corpus.settings.eval, inputs.context)
    return per_query_frame(scores.evaluation, None, None, snap)


def check_lines(path: Path, snapshot: Snapshot, split: str, command: str) -> None:
    """Every result line names a question of ``split`` and a chunk of ``snapshot``, or a refusal naming its line."""
    from ablate.data.qrels import read_text_lines

    lines, _ = read_text_lines(path)
    split_qids = set(snapshot.split_qids(split))
    chunks = snapshot.chunk_to_doc
    for n, line in enumerate(lines, start=1):
        f = line.split()
        if not f:
            continue
        qid, docid = f[0], f[2]
        if qid not in snapshot.queries:
            raise InputError(
                f"{path}:{n}",
                f"question {qid!r} is not a question of {snapshot.name} ({command}; its queries.jsonl)",
                "score the file on the corpus its questions come from (--corpus NAME), or drop its lines",
            )
        if qid not in split_qids:
            other = next((s for s, qs in sorted(snapshot.splits.items()) if qid in qs), None)
            raise InputError(
                f"{path}:{n}",
                f"question {qid!r} is not in split {split!r} of {snapshot.name}"
                + (f" (it is in {other!r})" if other else ""),
                f"name the split the file ranks: add corpus.split={other or 'NAME'} after --corpus; or drop its lines",
            )
        if docid not in chunks:
            raise InputError(
                f"{path}:{n}",
                f"result {docid!r} is not a chunk of {snapshot.name}",
                "score the file on the corpus it was made on (the same chunker): results are chunk ids as a run's "
                "run.trec lists them",
            )


# ---------------------------------------------------------------------------------------------------------------
# a tracked run


def resolve_run(tracker: Tracker, given: str, option: str) -> RecordedRun:
    """The finished run whose id or name is ``given`` (a name must be unique in the store)."""
    run = tracker.get_run(given)
    if run is None:
        quoted = given.replace("'", "\\'")
        found = tracker.find_runs(filter_string=f"attributes.run_name = '{quoted}'")
        if len(found) > 1:
            ids = ", ".join(r.run_id for r in found[:5])
            raise AblateError(
                f"{option} {given!r}: {len(found)} runs have this name ({ids}). Fix: pass a run id"
            )
        if not found:
            raise AblateError(
                f"{option} {given!r}: no run with this id or name in {tracker.uri}, and no such file. Fix: pass a "
                "run id, a run name, or a TREC run file's path"
            )
        run = found[0]
    if run.status != "FINISHED":
        raise AblateError(
            f"{option} {given!r}: run {run.name} ({run.run_id}) is {run.status}, not finished. Fix: gate a "
            "finished run"
        )
    return tracker.whole(run)


def read_run(tracker: Tracker, run: RecordedRun, option: str, given: str, tmp: str) -> Side:
    """A tracked run's side: its per-question table and funnel, and its recorded config."""
    from ablate.runner.rescore import _config
    from ablate.study.fetch import read_funnel_per_query, read_per_query

    return Side(
        option,
        given,
        read_per_query(tracker, run, tmp),
        run=run,
        funnel=read_funnel_per_query(tracker, run, tmp),
        config=_config(tracker, run.run_id, tmp),
    )


# ---------------------------------------------------------------------------------------------------------------
# one ground


def same_runs(base: RecordedRun, cand: RecordedRun) -> None:
    """Two runs stand on one corpus snapshot and one label version."""
    for tag, what in ((R.T_SNAPSHOT, "corpus snapshot"), (R.T_LABEL_VERSION, "label version")):
        b, c = base.tags.get(tag), cand.tags.get(tag)
        if b != c:
            raise AblateError(
                f"the runs stand on different {what}s ({b} in {base.name}, {c} in {cand.name}). Fix: re-score both "
                f"on one: {RESCORE}"
            )


def run_on_corpus(side: Side, corpus: Corpus) -> None:
    """A run beside ``--corpus``: the same snapshot, label version and split, and scored by the same identity,
    dates and evaluation rules as the corpus's settings."""
    from ablate.runner.rescore import recorded_settings

    run = side.run
    assert run is not None and side.config is not None
    who = f"{side.option} {run.name} ({run.run_id})"
    snap = corpus.snapshot
    if run.tags.get(R.T_LABEL_VERSION) != corpus.label_version:
        raise AblateError(
            f"{who} stands on label version {run.tags.get(R.T_LABEL_VERSION)}, {corpus.command} on "
            f"{corpus.label_version}. Fix: score the file on the run's (add corpus.labels=VERSION after --corpus), "
            f"or re-score the run: {RESCORE}"
        )
    if run.tags.get(R.T_SNAPSHOT) != snap.fingerprint:
        raise AblateError(
            f"{who} stands on corpus snapshot {str(run.tags.get(R.T_SNAPSHOT))[:12]}, {corpus.command} on "
            f"{snap.fingerprint[:12]} ({snap.root}): the corpus files, chunker or labels differ. Fix: name the "
            f"corpus and settings the run used after --corpus, or re-run it on this corpus"
        )
    if run.split != corpus.spec.split:
        raise AblateError(
            f"{who} ran split {run.split!r}, {corpus.command} scores split {corpus.spec.split!r}. Fix: add "
            f"corpus.split={run.split} after --corpus"
        )
    spec, settings = recorded_settings(side.config)
    theirs = {
        "corpus.identity": spec.identity,
        "corpus.as_of": spec.as_of,
        "versions.policy": spec.version_policy,
        **{f"eval.{k}": v for k, v in settings.eval.as_dict().items()},
    }
    ours = {
        "corpus.identity": corpus.spec.identity,
        "corpus.as_of": corpus.spec.as_of,
        "versions.policy": corpus.spec.version_policy,
        **{f"eval.{k}": v for k, v in corpus.settings.eval.as_dict().items()},
    }
    for key, value in theirs.items():
        if ours.get(key) != value:
            raise AblateError(
                f"{who} was scored with {key}={_typed(value)}, {corpus.command} scores with "
                f"{key}={_typed(ours.get(key))}. Fix: add {key}={_typed(value)} after --corpus"
            )


def _typed(value: Any) -> str:
    """A setting's value as typed on the command line (``null``, ``[1,3,10]``)."""
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_typed(v) for v in value) + "]"
    return str(value).lower() if isinstance(value, bool) else str(value)
