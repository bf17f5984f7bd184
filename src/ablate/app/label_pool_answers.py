"""``python -m ablate.label pool-answers``: the distinct answers some tracked runs wrote, to be graded.

Which runs: as ``pool`` (``--parent``, ``--runs``, ``--experiment``, else the latest sweep). Each run's
``answers.csv`` (a run with a generator writes one) gives its answers per question (every repeat); the first run's
``config.yaml`` rebuilds the corpus, whose questions give the question text and gold answers. Answers to questions
without gold answers (the no-answer questions: the rule scores only refusals there) are left out and counted.
Identical answer texts to a question are pooled once, with every run that wrote them
(:mod:`ablate.labels.answerpool`), into ``<labels dir>/<corpus>/answer_pools/<name>.jsonl`` and its ``.json``.
"""

from __future__ import annotations

import argparse
import re
import tempfile
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ablate import record as R
from ablate.app.label_common import add_labels_dir, add_overrides, add_run_choice, load, open_store, workspace
from ablate.app.label_pool import PoolRefused, _check_corpus, _check_overrides, _select, _shown, run_labels
from ablate.labels import answerpool
from ablate.labels.journal import now
from ablate.labels.workspace import Workspace, check_name
from ablate.record import RecordedRun

if TYPE_CHECKING:
    from ablate.tracking import Tracker


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_run_choice(
        p,
        "a sweep's parent run id: pool its runs' answers (default: the latest sweep)",
        "pool the answers of every finished run of this experiment",
    )
    p.add_argument(
        "--name",
        help="the pool's name: <labels-dir>/<corpus>/answer_pools/<name>.jsonl (default: the runs' labels, e.g. "
        "A-oracle-answers); an existing pool is never overwritten",
    )
    p.add_argument("--tracking-uri", help="MLflow store (default: $MLFLOW_TRACKING_URI, else ./mlflow.db)")
    add_labels_dir(p)
    add_overrides(p, "corpus=demo (only to check: the pool works on the runs' own corpus)")


def run(args: argparse.Namespace) -> int:
    if args.name is not None:
        check_name("--name", args.name)
    _check_overrides(args.overrides)
    from ablate.runner.rescore import recorded_settings
    from ablate.study.fetch import latest_parent

    tracker = open_store(args.tracking_uri)
    runs, left_out = _select(tracker, args, latest_parent)
    _check_one_corpus(runs)
    labels = run_labels(runs)
    rows, cfg = _answers(tracker, runs, labels, left_out)
    with_answers = [r for r in runs if labels[r.run_id] in rows]
    corpus, _ = recorded_settings(cfg)
    _check_corpus(args.overrides, corpus.path, with_answers[0])
    snapshot = load(corpus)
    if snapshot.fingerprint != with_answers[0].corpus_files:
        raise PoolRefused(
            f"the corpus folder {snapshot.root} changed since the runs (snapshot {snapshot.fingerprint[:12]}, the "
            f"runs' {str(with_answers[0].corpus_files)[:12]}): their questions and gold answers may be others. "
            "Fix: re-run them on the corpus as it is (unchanged cells are reused), then pool the new runs"
        )
    seen = dict.fromkeys(q for rs in rows.values() for q, _, _ in rs)
    questions = {
        q: (snapshot.queries[q].text, tuple(a for a in snapshot.queries[q].answers if a.strip()))
        for q in seen
        if q in snapshot.queries
    }
    no_gold = [q for q, (_, golds) in questions.items() if not golds]
    questions = {q: v for q, v in questions.items() if v[1]}
    entries = answerpool.collect(rows, questions)
    read = sum(len(rs) for rs in rows.values())
    ws = workspace(args, snapshot)
    path = _where(ws, args.name, list(rows))
    meta = answerpool.AnswerPoolMeta(
        corpus=snapshot.name,
        corpus_path=str(snapshot.root),
        split=corpus.split,
        snapshot=snapshot.fingerprint,
        language=snapshot.language,
        runs={labels[r.run_id]: r.run_id for r in with_answers},
        answers_read=read,
        corpus_config=dict(cfg["corpus"]),
        created=now(),
    )
    if entries:
        answerpool.write(path, answerpool.AnswerPool(meta, entries))
    lines = [f"{len(rows)} run(s) of {snapshot.name} wrote {read} answers to {len(seen)} questions"]
    lines += [f"left out: {x}" for x in left_out]
    if no_gold:
        lines.append(f"left out: {len(no_gold)} question(s) without gold answers ({', '.join(no_gold[:8])})")
    if not entries:
        lines.append("pool: empty: no answer to a question with gold answers; nothing written")
        print("\n".join(lines))
        return 0
    shown = _shown(path)
    lines += [
        f"pool: {len(entries)} distinct answers to {len({e.qid for e in entries})} questions -> {shown}",
        f"next: grade them in the browser:  python -m ablate.label serve --answers {shown}\n"
        f"      then: python -m ablate.label validate-answers --pool {shown} generator=llama_cpp",
    ]
    print("\n".join(lines))
    return 0


def _answers(
    tracker: Tracker, runs: Sequence[RecordedRun], labels: dict[str, str], left_out: list[str]
) -> tuple[dict[str, list[tuple[str, str, tuple[str, ...]]]], dict[str, Any]]:
    """Each run's answers (label -> ``(qid, text, context ids)``, every repeat) and the config of the first run that
    has some; a run without ``answers.csv`` is said in ``left_out``; none with one is refused."""
    from ablate.record_digest import RunFiles
    from ablate.runner.rescore import _config, read_answers

    rows: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {}
    with tempfile.TemporaryDirectory(prefix="ablate-pool-answers-") as tmp:
        first = None
        files = {r.run_id: RunFiles(tracker, r, Path(tmp) / r.run_id) for r in runs}  # checked on every read
        for r in runs:
            got = files[r.run_id].get(R.A_ANSWERS)
            if got is None:
                left_out.append(
                    f"{labels[r.run_id]} ({r.run_id}): no {R.A_ANSWERS} (a run without a generator)"
                )
                continue
            first = first or r
            rows[labels[r.run_id]] = [
                (q, t, a.context) for q, a in read_answers(got).items() for t in a.texts
            ]
        if first is None:
            raise PoolRefused(
                f"none of the {len(runs)} run(s) wrote {R.A_ANSWERS}: there is no answer to grade. Fix: pool runs "
                "made with a generator (python -m ablate generator=llama_cpp ...)"
            )
        return rows, _config(tracker, first.run_id, tmp, files[first.run_id])


def _check_one_corpus(runs: Sequence[RecordedRun]) -> None:
    """Runs of one corpus folder and snapshot (their answers are graded against one set of questions)."""
    labels = run_labels(runs)
    for what, fact in (
        ("corpora", lambda r: f"{r.params.get(R.P_CORPUS_NAME)} ({r.params.get('corpus.path')})"),
        ("corpus snapshots", lambda r: str(r.corpus_files)[:12]),
    ):
        seen: dict[str, str] = {}
        for r in runs:
            seen.setdefault(fact(r), labels[r.run_id])
        if len(seen) > 1:
            listed = "; ".join(f"{lab}: {v}" for v, lab in seen.items())
            raise PoolRefused(f"the runs are of different {what} ({listed}). Fix: pool answers of one corpus")


def _where(ws: Workspace, name: str | None, labels: list[str]) -> Path:
    """The pool's file: ``--name`` (refused when it exists), else the runs' labels and the next free ``-2``..."""
    if name is not None:
        path = ws.answer_pool(name)
        if path.exists() or answerpool.meta_path(path).exists():
            raise PoolRefused(
                f"--name {name}: the answers pool {path} exists (a pool is never overwritten: its answers may be "
                "graded already). Fix: give another --name, or delete that pool's .jsonl and .json"
            )
        return path
    parts = [re.sub(r"[^\w.+-]+", "_", lab).strip("_.") for lab in labels]
    base = "-".join(parts) + "-answers"
    if len(labels) > 4 or not all(parts) or len(base) > 60:
        base = "answers-" + datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    n, candidate = 1, base
    while ws.answer_pool(candidate).exists() or answerpool.meta_path(ws.answer_pool(candidate)).exists():
        n += 1
        candidate = f"{base}-{n}"
    return ws.answer_pool(candidate)
