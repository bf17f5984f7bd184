"""``python -m ablate.label commit --version NAME [KEY=VALUE ...] [--labels-dir DIR]``: the journal as a new label
version, ``labels/<corpus>/versions/NAME/`` (:mod:`ablate.labels.commit`).

The corpus is the composed one (``corpus=demo`` by default, ``corpus=demo_zh``, ``corpus.path=...``); its current
labels are its ``qrels/`` files, or the label version it is loaded with (``corpus.labels=OLD``), which becomes the
new version's parent. Beside the headline qrels the version keeps the assessor view, who judged what, the answer
grades and the random human samples drawn with ``python -m ablate.label sample`` (:mod:`ablate.labels.views`).
Nothing is written when anything is refused: an existing name, a bad journal line, nothing new, LLM judgements
without a validation report.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections import Counter
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
from ablate.labels import views as V
from ablate.labels.kind import ANSWERS, RELEVANCE, Kind
from ablate.labels.sample import HumanSample, read_sample
from ablate.labels.workspace import DEFAULT_DIR, Workspace, check_name
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
    st = V.standing(judged)
    graded = journal.read_grades(ws.journal_of(ANSWERS), common.pair_check(snapshot, ANSWERS))
    answers = V.standing(graded) if graded else None
    standing = st.headline
    if not standing and not (answers and answers.headline):
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
    plan.view_assessors = dict(Counter(j.assessor for j in st.llm.values()))
    beside = C.Beside(st, answers, _drawn(ws, RELEVANCE, snapshot), _drawn(ws, ANSWERS, snapshot))
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

    data, written = C.version_files(plan, record, dict(legend.grades), beside)
    if not plan.added and not plan.changed and _same_beside(data, written, parent_folder, corpus.labels):
        raise InputError(
            str(ws.journal),
            f"adds nothing to {snapshot.label_version or 'the current labels'}: each of its {len(standing)} standing "
            "judgement(s) is already a label with the same grade",
            "judge more pairs first, or keep using the current labels",
        )
    C.write_version(folder, data)
    _say(args, folder, name, plan, snapshot)
    _say_beside(written, folder)
    return 0


def _drawn(ws: Workspace, kind: Kind, snapshot: Snapshot) -> HumanSample | None:
    """The workspace's random human sample of ``kind``, its questions checked to be the corpus's."""
    path = ws.sample_of(kind)
    sample = read_sample(path)
    unknown = [q for q in (sample.questions if sample else ()) if q not in snapshot.queries]
    if unknown:
        raise InputError(
            str(path),
            f"names question(s) {', '.join(unknown[:5])} that {snapshot.name}'s queries.jsonl does not have",
            "draw the sample again on this corpus: python -m ablate.label sample --pool FILE --replace ...",
        )
    return sample


def _same_beside(
    data: Mapping[str, bytes], record: Mapping[str, Any], parent: Path, labels: str | None
) -> bool:
    """Whether what the version keeps beside its qrels is what its parent version keeps (``True`` also for a
    version without any: a journal that adds nothing)."""
    keys = ("views", RELEVANCE.sample_key, ANSWERS.sample_key)
    if V.ANSWER_GRADES not in data and not any(k in record for k in keys):
        return True  # judged.csv alone says who made labels that did not change
    if not labels:
        return False
    beside = {
        k: v
        for k, v in data.items()
        if k != C.CHANGELOG
        and not k.endswith(C.VERSION_FILE)  # they hold the time they were made
        and (not k.endswith(".tsv") or k.startswith(V.ASSESSOR + "/"))
    }
    old = read_label_version(parent).raw
    same_files = all(  # the same lines: a version's files group the parent's lines by question
        (parent / k).is_file() and sorted((parent / k).read_bytes().splitlines()) == sorted(v.splitlines())
        for k, v in beside.items()
    )
    return same_files and all(old.get(k) == record.get(k) for k in keys)


def _say_beside(record: Mapping[str, Any], folder: Path) -> None:
    """What the version keeps beside its qrels: the assessor view and the human samples."""
    if V.ASSESSOR in (record.get("views") or {}):
        print(f"  the assessor view (the LLM's grades where a person overruled them): {folder / V.ASSESSOR}")
    for kind in (RELEVANCE, ANSWERS):
        sample = record.get(kind.sample_key)
        if sample:
            how = (
                f"drawn at random, seed {sample['seed']}"
                if sample["drawn_by"] == "sample"
                else "picked by hand"
            )
            print(f"  human sample ({kind.name}): {len(sample['questions'])} questions, {how}")


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
