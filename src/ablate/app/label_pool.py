"""``python -m ablate.label pool``: the results of some tracked runs that the labels do not judge, to be judged.

Which runs: the children of ``--parent`` (a sweep's parent run), ``--runs ID,ID``, the runs of ``--experiment``, or
(none given) the children of the latest sweep parent in the store (``--tracking-uri`` as for ``python -m
ablate.report``). Each run's ``config.yaml`` rebuilds its corpus as the run loaded it
(:func:`ablate.runner.rescore.recorded_settings`), its ``run.trec`` gives its ranking per question, mapped to the
labels' unit; :func:`ablate.labels.pool.pool` pools them against the split's labels as written, and the pool goes to
``<labels dir>/<corpus>/pools/<name>.tsv`` with its ``.json`` (:mod:`ablate.labels.poolfile`). It prints the pool's
size, each run's judged share of its top ``--depth``, a warning for each run whose top is mostly unjudged
(:mod:`ablate.evaluation.judged`) and the commands that judge the pool.

The labels are the split's label file as written, not as each asker sees them: the asker's view only drops the
judgements of units its identity may not see (which its retrieval cannot return: a leak is counted by the run's
``permission_leaks``) and re-grades out-of-force evidence to 0 (still judged), so for every unit a run returned
both say the same, and the pool never lists a pair the label file already holds.
"""

from __future__ import annotations

import argparse
import re
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ablate import record as R
from ablate.app.label_common import (
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
from ablate.evaluation.judged import warning as judged_warning
from ablate.labels import poolfile
from ablate.labels.journal import now
from ablate.labels.pool import Pooled, check_depth, pool
from ablate.labels.workspace import check_name
from ablate.record import RecordedRun

if TYPE_CHECKING:
    from ablate.tracking import Tracker

#: A default pool name lists the runs' labels when there are at most this many, else it is ``pool-<time>``.
NAMED_RUNS = 4


class PoolRefused(AblateError):
    """Runs that cannot be pooled together, or a pool that cannot be written."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_run_choice(
        p,
        "a sweep's parent run id: pool its child runs (default: the latest sweep)",
        "pool every finished run of this experiment",
    )
    p.add_argument(
        "--depth",
        type=int,
        default=10,
        help="pool the first DEPTH units of each run per question (default 10)",
    )
    p.add_argument(
        "--name",
        help="the pool's name: <labels-dir>/<corpus>/pools/<name>.tsv (default: the runs' labels and the depth, "
        "e.g. A-B-C-top10); an existing pool is never overwritten",
    )
    p.add_argument("--tracking-uri", help="MLflow store (default: $MLFLOW_TRACKING_URI, else ./mlflow.db)")
    add_labels_dir(p)
    add_overrides(p, "corpus=demo (only to check: the pool works on the runs' own corpus)")


def run(args: argparse.Namespace) -> int:
    depth = check_depth(args.depth)
    if args.name is not None:
        check_name("--name", args.name)
    _check_overrides(args.overrides)
    # imported once the arguments are read: they import MLflow, pandas and the scoring code
    from ablate.evaluation.io import read_trec_run
    from ablate.record_digest import RunFiles
    from ablate.runner.rescore import _config, on_snapshot, recorded_settings
    from ablate.study.fetch import latest_parent

    tracker = open_store(args.tracking_uri)
    runs, left_out = _select(tracker, args, latest_parent)
    _check_together(runs)
    labels = run_labels(runs)
    with tempfile.TemporaryDirectory(prefix="ablate-pool-") as tmp:
        trec: dict[str, Path] = {}
        files = {r.run_id: RunFiles(tracker, r, Path(tmp) / r.run_id) for r in runs}  # checked on every read
        for r in runs:
            got = files[r.run_id].get(R.A_RUN)
            if got is None:
                raise PoolRefused(
                    f"run {labels[r.run_id]} ({r.run_id}) has no {R.A_RUN} artifact, so its ranking is unknown. "
                    "Fix: re-run it with this version of ablate, or leave it out (--runs ID,ID)"
                )
            trec[r.run_id] = got
        cfg = _config(tracker, runs[0].run_id, tmp, files[runs[0].run_id])
        corpus, _ = recorded_settings(cfg)
        corpus = replace(corpus, doc_labels=False)  # the labels as written, at their own unit
        _check_corpus(args.overrides, corpus.path, runs[0])
        snapshot = load(corpus)
        _check_snapshot(snapshot, runs)
        unit_of = _unit_of(snapshot)
        rankings: dict[str, dict[str, list[str]]] = {}
        for r in runs:
            ranked = on_snapshot(read_trec_run(trec[r.run_id]), snapshot, str(trec[r.run_id]))
            rankings[labels[r.run_id]] = {
                q: [unit_of(h.chunk_id) for h in hits] for q, hits in ranked.results.items()
            }
    split = corpus.split
    qrels = snapshot.split_qrels(split)
    pooled = pool(rankings, {q: set(j) for q, j in qrels.judgements.items()}, depth)
    ws = workspace(args, snapshot)
    _, path = _where(ws, args.name, list(labels.values()), depth)
    meta = poolfile.PoolMeta(
        corpus=snapshot.name,
        corpus_path=str(snapshot.root),
        unit=snapshot.qrels_unit,
        label_version=snapshot.label_version or "unversioned",
        qrels_sha256=qrels.content_hash(),
        depth=depth,
        split=split,
        snapshot=snapshot.fingerprint,
        runs={labels[r.run_id]: r.run_id for r in runs},
        judged_share={lab: s.share for lab, s in pooled.shares.items()},
        corpus_config=dict(cfg["corpus"]),
        created=now(),
    )
    if pooled.entries:
        poolfile.write(path, poolfile.Pool(meta, pooled.entries))
    parents = {r.tags.get(R.T_PARENT) for r in runs}
    rescore = (
        f"--parent {parents.pop()}" if len(parents) == 1 and None not in parents else "--parent SWEEP_RUN_ID"
    )
    print(_summary(meta, pooled, _shown(path) if pooled.entries else None, left_out, rescore))
    return 0


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


def _check_together(runs: Sequence[RecordedRun]) -> None:
    """Refuse, from the runs' records alone, runs whose units are not the labels' (chunk labels carried onto another
    chunker's chunks), and runs of different corpora, splits, label versions or snapshots."""
    labels = run_labels(runs)
    for r in runs:
        onto = r.tags.get(R.T_UNIT_CHANGE)
        if onto:
            raise PoolRefused(
                f"run {labels[r.run_id]} ({r.run_id}) ranks {onto} chunks, not the corpus's own chunking, and the "
                f"labels of {r.params.get(R.P_CORPUS_NAME)} are per chunk: its chunk ids are not the labels' unit. "
                "Fix: pool runs made with the corpus's own chunker (no corpus.chunker setting), and compare other "
                "chunkers at the document level"
            )
    facts = (
        (
            "corpora",
            lambda r: f"{r.params.get(R.P_CORPUS_NAME)} ({r.params.get('corpus.path')})",
            "one corpus",
        ),
        ("splits", lambda r: str(r.split), "one split (corpus.split)"),
        (
            "label versions",
            lambda r: f"{r.tags.get(R.T_LABEL_VERSION)} (qrels {str(r.qrels_hash)[:12]})",
            "one label version: re-run the older runs on the current labels (unchanged cells are reused)",
        ),
        (
            "corpus snapshots",
            lambda r: str(r.corpus_files)[:12],
            "one snapshot (the same corpus files and chunker): re-run the older runs (unchanged cells are reused)",
        ),
    )
    for what, fact, fix in facts:
        seen: dict[str, str] = {}
        for r in runs:
            seen.setdefault(fact(r), labels[r.run_id])
        if len(seen) > 1:
            listed = "; ".join(f"{lab}: {v}" for v, lab in seen.items())
            raise PoolRefused(f"the runs are of different {what} ({listed}). Fix: pool runs of {fix}")


def _check_snapshot(snapshot: Snapshot, runs: Sequence[RecordedRun]) -> None:
    """The corpus as loaded now must be the one the runs were made on, with the labels at their own unit."""
    if snapshot.projection is not None:
        raise PoolRefused(
            f"the runs' chunker is not {snapshot.name}'s own and its labels are per chunk: their chunk ids are not the "
            "labels' unit. Fix: pool runs made with the corpus's own chunker (no corpus.chunker setting)"
        )
    recorded = runs[0].corpus_files
    if snapshot.fingerprint != recorded:
        raise PoolRefused(
            f"the corpus folder {snapshot.root} changed since the runs (snapshot {snapshot.fingerprint[:12]}, the "
            f"runs' {str(recorded)[:12]}): their rankings and judged shares are of another corpus. Fix: re-run them "
            "on the corpus as it is (unchanged cells are reused), then pool the new runs"
        )


def _unit_of(snapshot: Snapshot) -> Any:
    """Chunk id -> the labels' unit (the chunk itself, or its document for document labels)."""
    if snapshot.qrels_unit == "doc":
        return snapshot.chunk_to_doc.__getitem__
    return lambda c: c


# -- where it goes and what is said ------------------------------------------------------------------------------
def _where(ws: Any, name: str | None, labels: list[str], depth: int) -> tuple[str, Path]:
    """The pool's name and file. A name given that exists is refused (a pool is never overwritten: its pairs may be
    half judged); the default name takes the next free ``-2``, ``-3``, ..."""
    if name is not None:
        path = ws.pool(name)
        if path.exists() or poolfile.meta_path(path).exists():
            raise PoolRefused(
                f"--name {name}: the pool {path} exists (a pool is never overwritten: its pairs may be judged "
                "already). Fix: give another --name, or delete that pool's .tsv and .json"
            )
        return name, path
    base = _default_name(labels, depth)
    n, candidate = 1, base
    while ws.pool(candidate).exists() or poolfile.meta_path(ws.pool(candidate)).exists():
        n += 1
        candidate = f"{base}-{n}"
    return candidate, ws.pool(candidate)


def _default_name(labels: list[str], depth: int) -> str:
    parts = [re.sub(r"[^\w.+-]+", "_", lab).strip("_.") for lab in labels]
    name = "-".join(parts) + f"-top{depth}"
    if len(labels) > NAMED_RUNS or not all(parts) or len(name) > 60:
        name = "pool-" + datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S") + f"-top{depth}"
    return name


def _shown(path: Path) -> Path:
    """``path`` relative to the working folder when it is inside it (what a user types next), else whole."""
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


def _summary(
    meta: poolfile.PoolMeta, pooled: Pooled, path: Path | None, left_out: Sequence[str], rescore: str
) -> str:
    from ablate.tables import format_table

    k = meta.depth
    lines = [
        f"{len(meta.runs)} run(s) of {meta.corpus} (split {meta.split}, labels {meta.label_version}, "
        f"per {meta.unit}), pooled to depth {k}"
    ]
    lines += [f"left out: {x}" for x in left_out]
    rows = [
        {
            "run": lab,
            f"top {k} units": str(s.units),
            "judged": str(s.judged),
            "judged share": f"{s.share:.3f}",
            "unjudged": str(s.units - s.judged),
        }
        for lab, s in pooled.shares.items()
    ]
    lines.append(format_table(rows, list(rows[0])))
    for lab, s in pooled.shares.items():
        if mostly_unjudged(s.share):
            lines.append(
                "WARNING: "
                + judged_warning(lab, s.share, k, "judge this pool, then re-score on the new labels")
            )
    if path is None:
        lines.append(f"pool: empty: the labels judge every unit in the top {k} of every run; nothing written")
        return "\n".join(lines)
    lines.append(
        f"pool: {len(pooled.entries)} (question, {meta.unit}) pairs over {pooled.questions} questions -> {path}"
    )
    lines.append(
        f"next: judge them in the browser:   python -m ablate.label serve --pool {path}\n"
        f"      or with an LLM assessor:     python -m ablate.label judge --pool {path} generator=llama_cpp\n"
        f"      then: python -m ablate.label commit --version NAME; python -m ablate.report {rescore} --labels NAME"
    )
    return "\n".join(lines)
