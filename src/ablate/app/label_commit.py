"""``python -m ablate.label commit --version NAME [KEY=VALUE ...] [--labels-dir DIR]``: the journal as a new label
version, ``labels/<corpus>/versions/NAME/`` (:mod:`ablate.labels.commit`).

The corpus is the composed one (``corpus=demo`` by default, ``corpus=demo_zh``, ``corpus.path=...``); its current
labels are its ``qrels/`` files, or the label version it is loaded with (``corpus.labels=OLD``), which becomes the
new version's parent. Nothing is written when anything is refused: an existing name, a bad journal line, nothing
new, LLM judgements without a validation report.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ablate.app import label_common as common
from ablate.data.corpus import label_folder
from ablate.data.labelsets import read_label_version
from ablate.data.qrels import read_qrels
from ablate.data.snapshot import Snapshot
from ablate.errors import ConfigError, InputError
from ablate.labels import commit as C
from ablate.labels import journal
from ablate.labels.workspace import DEFAULT_DIR, check_name
from ablate.runner.settings import CorpusSpec


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--version", required=True, help="the new label version's name (a plain name, never reused)"
    )
    common.add_labels_dir(p)
    common.add_overrides(p)


def _current_files(corpus: CorpusSpec, snapshot: Snapshot) -> tuple[Path, list[Path]]:
    """The folder and ``<split>.tsv`` files of the labels the snapshot was loaded with."""
    if corpus.labels:
        lv = read_label_version(label_folder(corpus.labels, snapshot.name))
        return lv.folder, list(lv.files)
    qdir = snapshot.root / "qrels"
    return qdir, sorted(qdir.glob("*.tsv")) if qdir.is_dir() else []


def _split_of(snapshot: Snapshot) -> Callable[[str], str | None]:
    def split_of(qid: str) -> str | None:
        q = snapshot.queries.get(qid)
        if q is not None and q.split:
            return q.split
        return next((s for s, qids in sorted(snapshot.splits.items()) if qid in qids), None)

    return split_of


def run(args: argparse.Namespace) -> int:
    name = check_name("--version", args.version)
    corpus = common.corpus_spec(common.compose(args.overrides))
    snapshot = common.load(corpus)
    if snapshot.projection is not None:
        raise ConfigError(
            "corpus.chunker",
            snapshot.chunker.params(),
            "labels are committed on the chunks they were made on (the corpus's own chunker); leave corpus.chunker "
            "unset for commit",
        )
    ws = common.workspace(args, snapshot)
    folder = C.check_version_name(ws, name, snapshot.label_version)
    raw = ws.journal.read_bytes() if ws.journal.is_file() else b""
    legend = common.grade_legend(snapshot)
    judged = journal.read(ws.journal, common.pair_check(snapshot), legend.values)
    standing = journal.latest(judged)
    if not standing:
        raise InputError(
            str(ws.journal),
            "holds no judgement to commit" if not judged else "holds only judgements that were taken back",
            "judge a pool first (python -m ablate.label serve --pool FILE, or judge --pool FILE)",
        )
    parent_folder, files = _current_files(corpus, snapshot)
    current = {f.stem: read_qrels(f, snapshot.qrels_unit, name=f.stem) for f in files}
    plan = C.plan_commit(
        {s: q.judgements for s, q in current.items()}, standing, _split_of(snapshot), str(ws.journal)
    )
    if not plan.added and not plan.changed:
        raise InputError(
            str(ws.journal),
            f"adds nothing to {snapshot.label_version or 'the current labels'}: each of its {len(standing)} standing "
            "judgement(s) is already a label with the same grade",
            "judge more pairs first, or keep using the current labels",
        )
    validation = C.check_llm_validated(ws, plan)
    created = journal.now()

    def record(written: Mapping[str, str]) -> dict[str, Any]:
        return C.version_record(
            name,
            snapshot.name,
            snapshot.label_version,
            parent_folder,
            {f"{s}.tsv": q.source_sha256 for s, q in current.items()},
            plan,
            written,
            {"path": str(ws.journal), "sha256": C.sha256(raw), "lines": raw.count(b"\n")},
            validation,
            created,
            snapshot.qrels_unit,
        )

    data, _ = C.version_files(plan, record, dict(legend.grades))
    C.write_version(folder, data)
    _say(args, folder, name, plan, snapshot)
    return 0


def _say(args: argparse.Namespace, folder: Path, name: str, plan: C.CommitPlan, snapshot: Snapshot) -> None:
    out = sys.stdout
    print(
        f"label version {name} of {snapshot.name}: {plan.labels} labels ({len(plan.added)} added, {len(plan.changed)} "
        f"changed, {plan.llm_made} made by an LLM) from {snapshot.label_version or 'the corpus labels'}",
        file=out,
    )
    for f in sorted(data for data in folder.iterdir()):
        print(f"  wrote {f}", file=out)
    # a name resolves under ./labels; another --labels-dir needs the folder itself
    default = (Path.cwd() / DEFAULT_DIR).resolve() == Path(args.labels_dir).expanduser().resolve()
    labels = name if default else str(folder)
    extra = " ".join(shlex.quote(o) for o in args.overrides if not o.startswith("corpus.labels="))
    print("next:", file=out)
    print(
        f"  python -m ablate {extra + ' ' if extra else ''}variant=C corpus.labels={shlex.quote(labels)}",
        file=out,
    )
    print(
        f"  python -m ablate.report --parent SWEEP_RUN_ID --labels {shlex.quote(labels)}"
        + ("" if default else f" --labels-dir {shlex.quote(str(args.labels_dir))}"),
        file=out,
    )
