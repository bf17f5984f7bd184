"""``python -m ablate.label sample --pool FILE --questions N --seed S [--replace]``: draw the random sample of
questions people check (:mod:`ablate.labels.sample`).

The population is every question of the pool's split that a run scores (relevance: all of the split's questions;
answers, an ``answer_pools/<name>.jsonl`` or ``--kind answers``: those with gold answers); N of them are drawn
uniformly at random, seeded by S, and written to ``labels/<corpus>/human_sample.json`` (answers:
``answer_human_sample.json``), which the labelling page reads (their items come first) and ``commit`` records in
the version. A second draw over an existing one needs ``--replace``: people may have checked its questions already.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from ablate.app.label_common import (
    add_labels_dir,
    add_overrides,
    add_pool_kind,
    corpus_from_mapping,
    load_pool,
)
from ablate.errors import InputError
from ablate.labels import poolfile
from ablate.labels.journal import now
from ablate.labels.kind import ANSWERS, KINDS, RELEVANCE, Kind
from ablate.labels.sample import (
    DRAWN,
    HumanSample,
    check_count,
    check_seed,
    check_size,
    draw,
    read_sample,
    write_sample,
)
from ablate.labels.workspace import Workspace


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--pool",
        required=True,
        help="the pool whose split the questions are drawn from: labels/<corpus>/pools/<name>.tsv, or an answers "
        "pool labels/<corpus>/answer_pools/<name>.jsonl",
    )
    p.add_argument(
        "--questions", type=int, required=True, metavar="N", help="how many questions to draw (>= 2)"
    )
    p.add_argument(
        "--seed", type=int, required=True, metavar="S", help="the draw's seed (a whole number >= 0)"
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="draw anew over an existing sample (its checks stay in the journal)",
    )
    add_pool_kind(p)
    add_labels_dir(p)
    add_overrides(p, "(only to check: the corpus is the pool's)")


def run(args: argparse.Namespace) -> int:
    seed = check_seed(args.seed)
    check_count(args.questions)
    pool_path = Path(args.pool).expanduser().resolve()
    given = KINDS[args.kind] if args.kind else None
    kind = given or (ANSWERS if pool_path.suffix == ANSWERS.suffix else RELEVANCE)
    # before the corpus loads: a draw over an existing one is refused at once
    meta = (poolfile.read(pool_path) if kind is RELEVANCE else poolfile.read_answers(pool_path)).meta
    path = Workspace(Path(args.labels_dir).expanduser().resolve(), meta.corpus).sample_of(kind)
    old = read_sample(path)
    if old is not None and not args.replace:
        raise InputError(
            str(path),
            f"holds a draw already ({len(old.questions)} questions, seed {old.seed}, {old.drawn_by})",
            "keep it (people may have checked its questions), or draw anew with --replace",
        )
    loaded = load_pool(args, args.pool, kind)
    snapshot = loaded.snapshot
    split = loaded.pool.meta.split or corpus_from_mapping(loaded.pool.meta.corpus_config, loaded.cfg).split
    qids = snapshot.split_qids(split)
    if kind is ANSWERS:
        qids = [q for q in qids if any(a.strip() for a in snapshot.queries[q].answers)]
    n = check_size(args.questions, len(qids))
    questions = draw(qids, n, seed)
    sample = HumanSample(questions, seed, DRAWN, loaded.path.name, len(qids))
    write_sample(path, sample, {"split": split, "kind": kind.name, "corpus": snapshot.name, "created": now()})
    _say(sample, loaded.pool.entries, kind, snapshot.name, split, path, loaded.path, old is not None)
    return 0


def _say(
    sample: HumanSample,
    entries: list[object],
    kind: Kind,
    corpus: str,
    split: str,
    path: Path,
    pool: Path,
    replaced: bool,
) -> None:
    what = "of them with gold answers " if kind is ANSWERS else ""
    print(
        f"human sample ({kind.name}) of {corpus}/{split}: {len(sample.questions)} of the {sample.population} "
        f"questions {what}drawn at random (seed {sample.seed}): {', '.join(sample.questions)}"
    )
    chosen = set(sample.questions)
    items = [e for e in entries if getattr(e, "qid", None) in chosen]
    print(
        f"  in pool {pool.name}: {len({getattr(e, 'qid', '') for e in items})} of these questions, "
        f"{len(items)} {kind.items}"
    )
    print(f"{'replaced' if replaced else 'wrote'} {path}")
    page = "judge" if kind is RELEVANCE else "grade"
    print(f"next: {page} every item of these questions in the browser (they come first):")
    print(f"  python -m ablate.label serve --pool {shlex.quote(str(pool))}")
    print(
        "then: python -m ablate.label commit --version NAME; python -m ablate.report --parent SWEEP_RUN_ID "
        "--labels NAME (the report corrects the LLM's figures by its error on these questions)"
    )
