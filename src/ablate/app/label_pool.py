"""``python -m ablate.label pool [--kind relevance|answers]``: what some tracked runs returned that is not judged yet,
to be judged (:mod:`ablate.labels.kind`).

Which runs: the children of ``--parent`` (a sweep's parent run), ``--runs ID,ID``, the runs of ``--experiment``, or
(none given) the children of the latest sweep parent in the store (``--tracking-uri`` as for ``python -m
ablate.report``). The first run's ``config.yaml`` rebuilds the corpus as the runs loaded it
(:func:`ablate.runner.rescore.recorded_settings`); the pool goes to ``<labels dir>/<corpus>/pools/<name>.tsv``
(relevance) or ``answer_pools/<name>.jsonl`` (answers), with its ``.json`` (:mod:`ablate.labels.poolfile`).

* relevance: each run's ``run.trec`` gives its ranking per question, mapped to the labels' unit;
  :func:`ablate.labels.pool.pool` pools them against the split's labels as written, to ``--depth``. It prints the
  pool's size, each run's judged share of its top ``--depth``, a warning for each run whose top is mostly unjudged
  (:mod:`ablate.evaluation.judged`) and the commands that judge the pool. The labels are the split's label file as
  written, not as each asker sees them: the asker's view only drops the judgements of units its identity may not see
  (which its retrieval cannot return: a leak is counted by the run's ``permission_leaks``) and re-grades
  out-of-force evidence to 0 (still judged), so for every unit a run returned both say the same, and the pool never
  lists a pair the label file already holds.
* answers: each run's ``answers.csv`` (a run with a generator writes one) gives its answers per question (every
  repeat); the corpus's questions give the question text and gold answers. Answers to questions without gold answers
  (the no-answer questions: the rule scores only refusals there) are left out and counted. Identical answer texts to
  a question are pooled once, with every run that wrote them (:func:`ablate.labels.poolfile.collect`).
"""

from __future__ import annotations

import argparse
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ablate import record as R
from ablate.app.label_common import (
    add_kind,
    add_labels_dir,
    add_overrides,
    add_run_choice,
    compose,
    corpus_spec,
    load,
    open_store,
    overridden,
    workspace,
)
from ablate.data.snapshot import Snapshot
from ablate.errors import AblateError, ConfigError
from ablate.evaluation.judged import mostly_unjudged
from ablate.evaluation.judged import summary as judged_summary
from ablate.labels import poolfile
from ablate.labels.journal import now
from ablate.labels.kind import KINDS, RELEVANCE, Kind
from ablate.labels.pool import Pooled, check_depth, pool
from ablate.labels.workspace import Workspace, check_name
from ablate.record import RecordedRun

if TYPE_CHECKING:
    from ablate.tracking import Tracker

#: A default pool name lists the runs' labels when there are at most this many (else it is ``pool-<time>``): more
#: would make a name too long to type.
NAMED_RUNS = 4
#: The longest default pool name built from the runs' labels.
NAME_LENGTH = 60
#: How many units of each run a relevance pool takes per question unless ``--depth`` says (TREC's usual pool depth).
DEFAULT_DEPTH = 10


class PoolRefused(AblateError):
    """Runs that cannot be pooled together, or a pool that cannot be written."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_kind(p, "pool the runs' ranked units, or the distinct answers they wrote (their answers.csv)")
    add_run_choice(
        p,
        "a sweep's parent run id: pool its child runs (default: the latest sweep)",
        "pool every finished run of this experiment",
    )
    p.add_argument(
        "--depth",
        type=int,
        default=None,
        help=f"relevance: pool the first DEPTH units of each run per question (default {DEFAULT_DEPTH})",
    )
    p.add_argument(
        "--name",
        help="the pool's name: <labels-dir>/<corpus>/pools/<name>.tsv, or answer_pools/<name>.jsonl (default: the "
        "runs' labels and the depth, e.g. A-B-C-top10, or A-oracle-answers); an existing pool is never overwritten",
    )
    p.add_argument("--tracking-uri", help="MLflow store (default: $MLFLOW_TRACKING_URI, else ./mlflow.db)")
    add_labels_dir(p)
    add_overrides(p, "corpus=demo (only to check: the pool works on the runs' own corpus)")


@dataclass
class Made:
    """A pool's entries and description (the corpus and runs filled in by :func:`run`), its first line, what is
    said below it, and why it is empty when it is."""

    entries: list[Any]
    meta: poolfile.PoolMeta
    head: str
    said: list[str]
    empty: str


def run(args: argparse.Namespace) -> int:
    kind = KINDS[args.kind]
    if kind is RELEVANCE:
        depth = check_depth(DEFAULT_DEPTH if args.depth is None else args.depth)
    elif args.depth is not None:
        raise ConfigError("--depth", args.depth, "it pools ranked units: drop it with --kind answers")
    if args.name is not None:
        check_name("--name", args.name)
    _check_overrides(args.overrides)
    # imported once the arguments are read: they import MLflow, pandas and the scoring code
    from ablate.runner.rescore import recorded_settings
    from ablate.study.fetch import latest_parent

    tracker = open_store(args.tracking_uri)
    runs, left_out = _select(tracker, args, latest_parent)
    _check_together(runs, kind)
    labels = run_labels(runs)
    with tempfile.TemporaryDirectory(prefix="ablate-pool-") as tmp:
        files, cfg = _artifacts(tracker, runs, labels, kind, tmp, left_out)
        corpus, _ = recorded_settings(cfg)
        if kind is RELEVANCE:
            corpus = replace(corpus, doc_labels=False)  # the labels as written, at their own unit
        first = next(r for r in runs if r.run_id in files)
        _check_corpus(args.overrides, corpus.path, first)
        snapshot = load(corpus)
        _check_snapshot(snapshot, first, kind)
        named = {labels[rid]: path for rid, path in files.items()}
        made = (
            _relevance(snapshot, corpus.split, named, depth)
            if kind is RELEVANCE
            else _answers(snapshot, named)
        )
    meta = replace(
        made.meta,
        corpus=snapshot.name,
        corpus_path=str(snapshot.root),
        split=corpus.split,
        snapshot=snapshot.fingerprint,
        runs={labels[rid]: rid for rid in files},
        corpus_config=dict(cfg["corpus"]),
        created=now(),
    )
    tail = f"top{meta.depth}" if kind is RELEVANCE else "answers"
    path = _where(workspace(args, snapshot), args.name, list(named), kind, tail)
    lines = [made.head, *(f"left out: {x}" for x in left_out), *made.said]
    if not made.entries:
        print("\n".join([*lines, f"pool: empty: {made.empty}; nothing written"]))
        return 0
    poolfile.write(path, poolfile.Pool(meta, made.entries))
    parents = {r.tags.get(R.T_PARENT) for r in runs}
    rescore = (
        f"--parent {parents.pop()}" if len(parents) == 1 and None not in parents else "--parent SWEEP_RUN_ID"
    )
    print("\n".join([*lines, *_next(kind, made.entries, meta, _shown(path), rescore)]))
    return 0


# -- what each kind pools ------------------------------------------------------------------------------------------
def _relevance(snapshot: Snapshot, split: str, trec: dict[str, Path], depth: int) -> Made:
    """The units in the top ``depth`` of each run (label -> its ``run.trec``) the split's labels do not judge."""
    from ablate.evaluation.io import read_trec_run
    from ablate.runner.rescore import on_snapshot

    unit_of: Callable[[str], str] = (
        snapshot.chunk_to_doc.__getitem__ if snapshot.qrels_unit == "doc" else (lambda c: c)
    )
    rankings: dict[str, dict[str, list[str]]] = {}
    for label, path in trec.items():
        ranked = on_snapshot(read_trec_run(path), snapshot, str(path))
        rankings[label] = {q: [unit_of(h.chunk_id) for h in hits] for q, hits in ranked.results.items()}
    qrels = snapshot.split_qrels(split)
    pooled = pool(rankings, {q: set(j) for q, j in qrels.judgements.items()}, depth)
    version = snapshot.label_version or "unversioned"
    meta = poolfile.PoolMeta(
        corpus=snapshot.name,
        corpus_path=str(snapshot.root),
        unit=snapshot.qrels_unit,
        label_version=version,
        qrels_sha256=qrels.content_hash(),
        depth=depth,
        judged_share={lab: s.share for lab, s in pooled.shares.items()},
    )
    head = (
        f"{len(trec)} run(s) of {snapshot.name} (split {split}, labels {version}, per {snapshot.qrels_unit}), "
        f"pooled to depth {depth}"
    )
    empty = f"the labels judge every unit in the top {depth} of every run"
    return Made(pooled.entries, meta, head, _shares(pooled, depth), empty)


def _shares(pooled: Pooled, depth: int) -> list[str]:
    """Each run's judged share of its top units, as a table, and a warning for each mostly unjudged one."""
    from ablate.tables import format_table

    rows = [
        {
            "run": lab,
            f"top {depth} units": str(s.units),
            "judged": str(s.judged),
            "judged share": f"{s.share:.3f}",
            "unjudged": str(s.units - s.judged),
        }
        for lab, s in pooled.shares.items()
    ]
    lines = [format_table(rows, list(rows[0]))]
    low = [(lab, s.share) for lab, s in pooled.shares.items() if mostly_unjudged(s.share)]
    if low:  # one line for every such run: the table above gives each run's share
        fix = "judge this pool, then re-score on the new labels"
        lines.append("WARNING: " + judged_summary(low, depth, fix, len(pooled.shares)))
    return lines


def _answers(snapshot: Snapshot, files: dict[str, Path]) -> Made:
    """The distinct answers of each run (label -> its ``answers.csv``) to the questions with gold answers."""
    from ablate.runner.rescore import read_answers

    rows = {
        label: [(q, t, a.context) for q, a in read_answers(path).items() for t in a.texts]
        for label, path in files.items()
    }
    seen = dict.fromkeys(q for rs in rows.values() for q, _, _ in rs)
    queries = snapshot.queries
    questions = {
        q: (queries[q].text, tuple(a for a in queries[q].answers if a.strip())) for q in seen if q in queries
    }
    no_gold = [q for q, (_, golds) in questions.items() if not golds]
    entries = poolfile.collect(rows, {q: v for q, v in questions.items() if v[1]})
    read = sum(len(rs) for rs in rows.values())
    meta = poolfile.PoolMeta(snapshot.name, str(snapshot.root), language=snapshot.language, answers_read=read)
    head = f"{len(rows)} run(s) of {snapshot.name} wrote {read} answers to {len(seen)} questions"
    said = (
        [f"left out: {len(no_gold)} question(s) without gold answers ({', '.join(no_gold[:8])})"]
        if no_gold
        else []
    )
    return Made(entries, meta, head, said, "no answer to a question with gold answers")


def _artifacts(
    tracker: Tracker,
    runs: Sequence[RecordedRun],
    labels: dict[str, str],
    kind: Kind,
    tmp: str,
    left_out: list[str],
) -> tuple[dict[str, Path], dict[str, Any]]:
    """Each run's ``run.trec`` (relevance: every run must have one) or ``answers.csv`` (answers: a run without one is
    said in ``left_out``; none with one is refused), by run id, and the config of the first run that has one."""
    from ablate.record_digest import RunFiles
    from ablate.runner.rescore import _config

    artifact = R.A_RUN if kind is RELEVANCE else R.A_ANSWERS
    files = {r.run_id: RunFiles(tracker, r, Path(tmp) / r.run_id) for r in runs}  # checked on every read
    got: dict[str, Path] = {}
    for r in runs:
        path = files[r.run_id].get(artifact)
        if path is not None:
            got[r.run_id] = path
        elif kind is RELEVANCE:
            raise PoolRefused(
                f"run {labels[r.run_id]} ({r.run_id}) has no {artifact} artifact, so its ranking is unknown. "
                "Fix: re-run it with this version of ablate, or leave it out (--runs ID,ID)"
            )
        else:
            left_out.append(f"{labels[r.run_id]} ({r.run_id}): no {artifact} (a run without a generator)")
    if not got:
        raise PoolRefused(
            f"none of the {len(runs)} run(s) wrote {artifact}: there is no answer to grade. Fix: pool runs "
            "made with a generator (python -m ablate generator=llama_cpp ...)"
        )
    first = next(iter(got))
    return got, _config(tracker, first, tmp, files[first])


# -- which runs ----------------------------------------------------------------------------------------------------
def _select(
    tracker: Tracker, args: argparse.Namespace, latest_parent: Any
) -> tuple[list[RecordedRun], list[str]]:
    """The finished runs to pool and lines about the unfinished ones left out (``--runs``: an unfinished run is
    refused, it was named)."""
    if args.runs is not None:
        ids = [i.strip() for i in args.runs.split(",") if i.strip()]
        if not ids:
            raise ConfigError("--runs", args.runs, "give run ids separated by commas")
        runs = []
        for rid in dict.fromkeys(ids):
            r = tracker.get_run(rid)
            if r is None:
                raise PoolRefused(
                    f"--runs: no run {rid!r} in {tracker.uri}. Fix: pass run ids of this store (--tracking-uri)"
                )
            if r.status != "FINISHED":
                raise PoolRefused(
                    f"--runs: run {r.name} ({rid}) is {r.status}: it has no whole ranking. Fix: leave it out"
                )
            runs.append(r)
        return [_ablate_run(r, tracker) for r in runs], []
    if args.experiment is not None:
        exp = tracker.experiment_id(args.experiment, create=False)
        if exp is None:
            raise PoolRefused(
                f"--experiment: no experiment {args.experiment!r} in {tracker.uri}. Fix: choose one of "
                f"{tracker.experiment_names()[:15]}"
            )
        found = [r for r in tracker.find_runs([exp]) if r.tags.get(R.T_ROLE) != R.ROLE_SWEEP_PARENT]
        where = f"experiment {args.experiment!r}"
    else:
        pid = args.parent or latest_parent(tracker)
        parent = tracker.get_run(pid)
        if parent is None:
            raise PoolRefused(
                f"--parent: no run {pid!r} in {tracker.uri}. Fix: pass the sweep's parent run id (printed by the "
                "sweep), --runs ID,ID or --experiment NAME"
            )
        found = tracker.children(pid)
        where = f"run {parent.name} ({pid})"
        if not found:
            raise PoolRefused(
                f"--parent: {where} has no child runs. Fix: pass a sweep's parent run id, or this run itself with "
                f"--runs {pid}"
            )
    runs = [r for r in found if r.status == "FINISHED"]
    left_out = [f"{r.name} ({r.run_id}): {r.status}" for r in found if r.status != "FINISHED"]
    if not runs:
        raise PoolRefused(f"{where} has no finished run. Fix: re-run the failed jobs")
    runs.sort(
        key=lambda r: (r.sweep_index if r.sweep_index is not None else 1 << 30, r.variant_order, r.start_time)
    )
    return [_ablate_run(r, tracker) for r in runs], left_out


def _ablate_run(r: RecordedRun, tracker: Tracker) -> RecordedRun:
    if R.P_CORPUS_NAME not in r.params or R.T_SNAPSHOT not in r.tags:
        raise PoolRefused(
            f"run {r.name} ({r.run_id}) is not a finished ablate run of a corpus (no {R.P_CORPUS_NAME} param or "
            f"{R.T_SNAPSHOT} tag). Fix: leave it out (--runs ID,ID)"
        )
    return tracker.whole(r)


def run_labels(runs: Sequence[RecordedRun]) -> dict[str, str]:
    """Run id -> its label in the pool: its name (a sweep names a run by its cell: ``A``, ``C k=1``), with ``+`` for
    ``,`` (the pool file lists runs separated by commas), and its id's first 8 characters when two runs share it."""
    names = {r.run_id: (r.name or r.variant).replace(",", "+") for r in runs}
    counts: dict[str, int] = {}
    for n in names.values():
        counts[n] = counts.get(n, 0) + 1
    return {rid: (f"{n} [{rid[:8]}]" if counts[n] > 1 else n) for rid, n in names.items()}


# -- can they be pooled together -------------------------------------------------------------------------------------
def _check_overrides(overrides: Sequence[str]) -> None:
    for o in overrides:
        if not overridden([o], "corpus"):
            raise ConfigError(
                o.partition("=")[0],
                o.partition("=")[2],
                "drop it: pool reads every setting from the runs' config.yaml (only corpus=... is accepted, to check it)",
            )


def _check_corpus(overrides: Sequence[str], runs_path: str, first: RecordedRun) -> None:
    """A ``corpus=...`` given on the command line must be the runs' corpus (the pool works on theirs)."""
    if not overrides:
        return
    given = corpus_spec(compose(list(overrides)))
    if Path(given.path).expanduser().resolve() != Path(runs_path).expanduser().resolve():
        raise PoolRefused(
            f"{' '.join(overrides)}: the runs were made on corpus {first.params.get(R.P_CORPUS_NAME)} ({runs_path}), "
            f"not {given.name or given.path} ({given.path}). Fix: drop the corpus setting: a pool is made on its runs' corpus"
        )


def _check_together(runs: Sequence[RecordedRun], kind: Kind) -> None:
    """Refuse, from the runs' records alone, runs of different corpora or snapshots, and for relevance runs whose
    units are not the labels' (chunk labels carried onto another chunker's chunks) and runs of different splits or
    label versions."""
    labels = run_labels(runs)
    for r in runs:
        onto = r.tags.get(R.T_UNIT_CHANGE)
        if onto and kind is RELEVANCE:
            raise PoolRefused(
                f"run {labels[r.run_id]} ({r.run_id}) ranks {onto} chunks, not the corpus's own chunking, and the "
                f"labels of {r.params.get(R.P_CORPUS_NAME)} are per chunk: its chunk ids are not the labels' unit. "
                "Fix: pool runs made with the corpus's own chunker (no corpus.chunker setting), and compare other "
                "chunkers at the document level"
            )
    facts: list[tuple[str, Callable[[RecordedRun], str], str]] = [
        (
            "corpora",
            lambda r: f"{r.params.get(R.P_CORPUS_NAME)} ({r.params.get('corpus.path')})",
            "one corpus",
        ),
        (
            "corpus snapshots",
            lambda r: str(r.corpus_files)[:12],
            "one snapshot (the same corpus files and chunker): re-run the older runs (unchanged cells are reused)",
        ),
    ]
    if kind is RELEVANCE:
        facts += [
            ("splits", lambda r: str(r.split), "one split (corpus.split)"),
            (
                "label versions",
                lambda r: f"{r.tags.get(R.T_LABEL_VERSION)} (qrels {str(r.qrels_hash)[:12]})",
                "one label version: re-run the older runs on the current labels (unchanged cells are reused)",
            ),
        ]
    for what, fact, fix in facts:
        seen: dict[str, str] = {}
        for r in runs:
            seen.setdefault(fact(r), labels[r.run_id])
        if len(seen) > 1:
            listed = "; ".join(f"{lab}: {v}" for v, lab in seen.items())
            raise PoolRefused(f"the runs are of different {what} ({listed}). Fix: pool runs of {fix}")


def _check_snapshot(snapshot: Snapshot, first: RecordedRun, kind: Kind) -> None:
    """The corpus as loaded now must be the one the runs were made on; for relevance, with the labels at their own
    unit."""
    if kind is RELEVANCE and snapshot.projection is not None:
        raise PoolRefused(
            f"the runs' chunker is not {snapshot.name}'s own and its labels are per chunk: their chunk ids are not the "
            "labels' unit. Fix: pool runs made with the corpus's own chunker (no corpus.chunker setting)"
        )
    recorded = first.corpus_files
    if snapshot.fingerprint != recorded:
        made = "rankings and judged shares" if kind is RELEVANCE else "questions and gold answers"
        raise PoolRefused(
            f"the corpus folder {snapshot.root} changed since the runs (snapshot {snapshot.fingerprint[:12]}, the "
            f"runs' {str(recorded)[:12]}): their {made} are of another corpus. Fix: re-run them on the corpus as it "
            "is (unchanged cells are reused), then pool the new runs"
        )


# -- where it goes and what is said ------------------------------------------------------------------------------
def _where(ws: Workspace, name: str | None, labels: list[str], kind: Kind, tail: str) -> Path:
    """The pool's file. A name given that exists is refused (a pool is never overwritten: its items may be half
    judged); the default name (the runs' labels and ``tail``) takes the next free ``-2``, ``-3``, ..."""
    if name is not None:
        path = ws.pool(name, kind)
        if path.exists() or poolfile.meta_path(path).exists():
            raise PoolRefused(
                f"--name {name}: the pool {path} exists (a pool is never overwritten: its {kind.items} may be judged "
                f"already). Fix: give another --name, or delete that pool's {kind.suffix} and .json"
            )
        return path
    parts = [re.sub(r"[^\w.+-]+", "_", lab).strip("_.") for lab in labels]
    base = "-".join(parts) + f"-{tail}"
    if len(labels) > NAMED_RUNS or not all(parts) or len(base) > NAME_LENGTH:
        base = "pool-" + datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S") + f"-{tail}"
    n, candidate = 1, base
    while ws.pool(candidate, kind).exists() or poolfile.meta_path(ws.pool(candidate, kind)).exists():
        n += 1
        candidate = f"{base}-{n}"
    return ws.pool(candidate, kind)


def _shown(path: Path) -> Path:
    """``path`` relative to the working folder when it is inside it (what a user types next), else whole."""
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


def _next(kind: Kind, entries: Sequence[Any], meta: poolfile.PoolMeta, path: Path, rescore: str) -> list[str]:
    """The pool's size and where it went, and the commands that judge it."""
    questions = len({e.qid for e in entries})
    if kind is RELEVANCE:
        return [
            f"pool: {len(entries)} (question, {meta.unit}) pairs over {questions} questions -> {path}",
            f"next: judge them in the browser:   python -m ablate.label serve --pool {path}\n"
            f"      or with an LLM assessor:     python -m ablate.label judge --pool {path} generator=llama_cpp\n"
            f"      then: python -m ablate.label commit --version NAME; python -m ablate.report {rescore} --labels NAME",
        ]
    return [
        f"pool: {len(entries)} distinct answers to {questions} questions -> {path}",
        f"next: grade them in the browser:  python -m ablate.label serve --pool {path}\n"
        f"      then: python -m ablate.label validate --kind answers --pool {path} generator=llama_cpp",
    ]
