"""A new label version from the journal (``python -m ablate.label commit --version NAME``): pure logic.

The version is the *current* labels (the corpus's ``qrels/`` files, or the label version the corpus is loaded with)
with the journal's standing judgements merged in, a person's before an LLM assessor's (the human grade where a pair
has one, else the assessor's: :func:`ablate.labels.views.standing`):

* a judged pair the current labels lack is **added** to the split file that holds its question (the question's split
  comes from the labels, else from the snapshot: ``queries.jsonl``'s ``split`` or a split file);
* a judged pair the current labels grade otherwise is **changed** (the judgement wins);
* a judged pair with the same grade is unchanged.

Each split file keeps the current file's lines in their order (changed grades in place), then the added pairs in
(qid, unit) order, as a BEIR tsv with its header line, so the same labels and journal always give the same bytes.
``version.json`` and ``CHANGELOG.md`` say what the version holds and where each label came from. Beside the headline
qrels the version keeps what the assessor said where a person overruled it (the assessor view ``assessor/``), who
judged what (``judged.csv``), the answer grades (``answer_grades.csv``) and the random human samples
(:mod:`ablate.labels.views`, :func:`beside_files`).

An LLM's judgements (assessor ``llm:...``) go into a version only when a validation report exists for that assessor
and corpus (:func:`validation_report`, the one gate; ``python -m ablate.label validate`` writes the report).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablate.cache import ordinary_folder
from ablate.data.labelsets import CHANGELOG, VERSION_FILE
from ablate.errors import ConfigError, InputError
from ablate.labels import views as V
from ablate.labels.journal import AnswerGrade, Judgement
from ablate.labels.kind import ANSWERS, RELEVANCE
from ablate.labels.sample import HumanSample
from ablate.labels.workspace import Workspace

HEADER = "query-id\tcorpus-id\tscore"
#: ``validation.json`` inside a validation folder (:meth:`Workspace.validation`).
VALIDATION_FILE = "validation.json"

#: A split's labels as written: qid -> unit -> grade, in file order.
Labels = Mapping[str, Mapping[str, int]]


@dataclass(frozen=True)
class Change:
    """One pair the journal adds (``old`` None) or regrades, and who judged it."""

    split: str
    qid: str
    unit: str
    old: int | None
    new: int
    assessor: str


@dataclass
class CommitPlan:
    """The new version's ``files`` (split -> rows ``(qid, unit, grade)`` in written order), what changed, and the
    standing labels each journal assessor made in it (``assessors``; ``llm_made``: those by ``llm:`` assessors)."""

    files: dict[str, list[tuple[str, str, int]]]
    added: list[Change] = field(default_factory=list)
    changed: list[Change] = field(default_factory=list)
    assessors: dict[str, int] = field(default_factory=dict)
    before: dict[str, int] = field(default_factory=dict)  # labels per split in the parent
    #: the LLM assessors' standing judgements in the assessor view (those a person overruled included)
    view_assessors: dict[str, int] = field(default_factory=dict)

    @property
    def llm_made(self) -> int:
        return sum(n for a, n in self.assessors.items() if a.startswith("llm:"))

    @property
    def labels(self) -> int:
        return sum(len(rows) for rows in self.files.values())


def plan_commit(
    current: Mapping[str, Labels],
    standing: Mapping[tuple[str, str], Judgement],
    split_of: Callable[[str], str | None],
    journal: str = "journal.jsonl",
) -> CommitPlan:
    """Merge the journal's ``standing`` judgements into the ``current`` labels (split -> qid -> unit -> grade).

    A question the current labels hold stays in that split; any other goes to ``split_of(qid)``; a question in no
    split is refused (one line naming ``journal`` and the question)."""
    home: dict[str, str] = {}
    for split, labels in current.items():
        for qid in labels:
            home.setdefault(qid, split)
    grades: dict[str, dict[str, dict[str, int]]] = {
        s: {q: dict(units) for q, units in labels.items()} for s, labels in current.items()
    }
    plan = CommitPlan(files={}, before={s: sum(len(u) for u in lab.values()) for s, lab in current.items()})
    new_pairs: dict[str, list[tuple[str, str]]] = {}
    for (qid, unit), j in sorted(standing.items()):
        assert j.grade is not None  # latest() drops undone pairs
        found = home.get(qid) or split_of(qid)
        if not found:
            raise InputError(
                journal,
                f"question {qid!r} (judged by {j.assessor} at {j.time}) is in no split of the corpus: no label file "
                "holds it and queries.jsonl gives it no split",
                'give the question a "split" in queries.jsonl (or a label in qrels/<split>.tsv), or take the judgement '
                "back",
            )
        split = found
        units = grades.setdefault(split, {}).setdefault(qid, {})
        old = units.get(unit)
        if old is None:
            plan.added.append(Change(split, qid, unit, None, j.grade, j.assessor))
            new_pairs.setdefault(split, []).append((qid, unit))
        elif old != j.grade:
            plan.changed.append(Change(split, qid, unit, old, j.grade, j.assessor))
        units[unit] = j.grade
        plan.assessors[j.assessor] = plan.assessors.get(j.assessor, 0) + 1
    for split in sorted(grades):
        rows = [(q, u, grades[split][q][u]) for q, units in current.get(split, {}).items() for u in units]
        rows += [(q, u, grades[split][q][u]) for q, u in sorted(new_pairs.get(split, []))]
        plan.files[split] = rows
    plan.assessors = dict(sorted(plan.assessors.items()))
    return plan


def tsv(rows: Sequence[tuple[str, str, int]]) -> str:
    """A split's rows as a BEIR tsv with its header line."""
    return "".join([HEADER + "\n", *(f"{q}\t{u}\t{g}\n" for q, u, g in rows)])


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_version_name(ws: Workspace, name: str, current: str) -> Path:
    """The folder of the new version ``name``: refused when it exists or is the current label version's name."""
    folder = ws.version(name)
    if name == current:
        raise ConfigError(
            "--version",
            name,
            f"it is the current label version of {ws.corpus} (the labels the version is made from); give a new name, "
            "e.g. " + _next_name(ws, name),
        )
    if folder.exists():
        raise ConfigError(
            "--version",
            name,
            f"{folder} exists and a label version is never overwritten; give a new name, e.g. "
            + _next_name(ws, name),
        )
    return folder


def _next_name(ws: Workspace, name: str) -> str:
    """A free name after ``name``: its trailing number plus one (``v2`` -> ``v3``), else ``name-2``, ..."""
    m = re.fullmatch(r"(.*?)(\d+)", name)
    stem, n = (m.group(1), int(m.group(2)) + 1) if m else (name + "-", 2)
    while ws.version(f"{stem}{n}").exists() or f"{stem}{n}" == name:
        n += 1
    return f"{stem}{n}"


def validation_report(ws: Workspace, assessor: str) -> Path | None:
    """The validation report (``validation/<assessor>/validation.json``) that lets ``assessor``'s judgements into a
    version of ``ws.corpus``: the file must exist and name the same assessor and corpus. ``None`` when there is none.

    The one gate for LLM labels: ``python -m ablate.label validate`` writes the report through
    :meth:`Workspace.validation`; a stricter rule (e.g. a minimum agreement) belongs here."""
    path = ws.validation(assessor) / VALIDATION_FILE
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, OSError):
        return None
    if not isinstance(raw, dict) or raw.get("assessor") != assessor or raw.get("corpus") != ws.corpus:
        return None
    return path


def check_llm_validated(ws: Workspace, plan: CommitPlan) -> dict[str, str]:
    """Each ``llm:`` assessor of the plan (the headline's and the assessor view's) -> its validation report; refused
    (one line) for one without."""
    out: dict[str, str] = {}
    for assessor, n in sorted({**plan.view_assessors, **plan.assessors}.items()):
        if not assessor.startswith("llm:"):
            continue
        report = validation_report(ws, assessor)
        if report is None:
            raise InputError(
                str(ws.journal),
                f"{n} standing judgement(s) by {assessor} have no validation report for {ws.corpus} "
                f"({ws.validation(assessor) / VALIDATION_FILE} naming that assessor and corpus): LLM labels enter a "
                "version only once validated",
                "run python -m ablate.label validate with that assessor's generator settings first, or take its "
                "judgements back",
            )
        out[assessor] = str(report)
    return out


def version_record(
    name: str,
    corpus: str,
    parent: str,
    parent_folder: Path,
    parent_files: Mapping[str, str],
    plan: CommitPlan,
    files: Mapping[str, str],
    journal: Mapping[str, Any],
    validation: Mapping[str, str],
    created: str,
    unit: str,
) -> dict[str, Any]:
    """``version.json``: what the version is, where it came from and who made its labels."""
    return {
        "name": name,
        "corpus": corpus,
        "unit": unit,
        "parent": parent,
        "parent_folder": str(parent_folder),
        "parent_qrels": dict(parent_files),
        "created": created,
        "labels": plan.labels,
        "added": len(plan.added),
        "changed": len(plan.changed),
        "assessors": dict(plan.assessors),
        "llm_made": plan.llm_made,
        "journal": dict(journal),
        "validation": dict(validation),
        "files": dict(files),
    }


def _count_rows(changes: Sequence[Change], key: Callable[[Change], str]) -> Counter[str]:
    return Counter(key(c) for c in changes)


def changelog(record: Mapping[str, Any], plan: CommitPlan, legend: Mapping[int, str]) -> str:
    """``CHANGELOG.md``: per split the labels before, added, changed and after; per assessor what it added and changed;
    the grades of the added pairs; every changed grade (old -> new, by whom) and every added pair."""
    splits = sorted(plan.files)
    added, changed = _count_rows(plan.added, lambda c: c.split), _count_rows(plan.changed, lambda c: c.split)
    lines = [
        f"# Label version {record['name']} ({record['corpus']})",
        "",
        f"Made {record['created']} by `python -m ablate.label commit` from {record['parent'] or 'the corpus labels'} "
        f"({record['parent_folder']}) and the journal ({record['journal']['lines']} lines, sha256 "
        f"{record['journal']['sha256'][:12]}). {record['labels']} labels: {len(plan.added)} added, "
        f"{len(plan.changed)} changed, {record['llm_made']} made by an LLM.",
        "",
        "| split | labels before | added | changed | labels after |",
        "|---|---:|---:|---:|---:|",
    ]
    for s in splits:
        lines.append(
            f"| {s} | {plan.before.get(s, 0)} | {added.get(s, 0)} | {changed.get(s, 0)} | {len(plan.files[s])} |"
        )
    lines += [
        "",
        "## By assessor",
        "",
        "| assessor | added | changed | standing labels |",
        "|---|---:|---:|---:|",
    ]
    by_added = _count_rows(plan.added, lambda c: c.assessor)
    by_changed = _count_rows(plan.changed, lambda c: c.assessor)
    for a, n in plan.assessors.items():
        lines.append(f"| {a} | {by_added.get(a, 0)} | {by_changed.get(a, 0)} | {n} |")
    lines += ["", "## Grades of the added pairs", "", "| grade | meaning | " + " | ".join(splits) + " |"]
    lines.append("|---|---|" + "---:|" * len(splits))
    per = {s: Counter(c.new for c in plan.added if c.split == s) for s in splits}
    for g in sorted({c.new for c in plan.added} | set(legend), reverse=True):
        lines.append(
            f"| {g} | {legend.get(g, '')} | " + " | ".join(str(per[s].get(g, 0)) for s in splits) + " |"
        )
    if plan.changed:
        lines += [
            "",
            "## Changed grades",
            "",
            "| split | qid | unit | old -> new | assessor |",
            "|---|---|---|---|---|",
        ]
        for c in plan.changed:
            lines.append(f"| {c.split} | {c.qid} | {c.unit} | {c.old} -> {c.new} | {c.assessor} |")
    lines += _beside_lines(record)
    if plan.added:
        lines += [
            "",
            "## Added pairs",
            "",
            "| split | qid | unit | grade | assessor |",
            "|---|---|---|---:|---|",
        ]
        for c in sorted(plan.added, key=lambda c: (c.split, c.qid, c.unit)):
            lines.append(f"| {c.split} | {c.qid} | {c.unit} | {c.new} | {c.assessor} |")
    return "\n".join(lines) + "\n"


def write_version(folder: Path, files: Mapping[str, bytes]) -> None:
    """Write the version's files into a temp folder beside ``folder`` and rename it into place: a version is there
    whole or not at all, and an existing folder is never written into (the rename fails)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = ordinary_folder(Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent)))
    try:
        for name, data in files.items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            with open(tmp / name, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        os.rename(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@dataclass(frozen=True)
class Beside:
    """What a version keeps beside its headline qrels: the relevance journal's standing lines (people's and LLM
    assessors'), the answer journal's (``None``: no answer grades) and the random human sample of each kind drawn in
    the workspace (``None``: none drawn)."""

    relevance: V.Standing[Judgement]
    answers: V.Standing[AnswerGrade] | None = None
    drawn: HumanSample | None = None
    answers_drawn: HumanSample | None = None


def _json(record: Mapping[str, Any]) -> bytes:
    return (json.dumps(record, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def beside_files(
    plan: CommitPlan, beside: Beside, base: Mapping[str, Any]
) -> tuple[dict[str, bytes], dict[str, Any]]:
    """The files beside the headline qrels (the assessor view with its own ``version.json``, ``judged.csv``,
    ``answer_grades.csv``) and what the version's record adds (``views``, the human samples); ``base``: the
    version's record (its name, corpus, unit, created)."""
    st = beside.relevance
    out: dict[str, bytes] = {}
    add: dict[str, Any] = {}
    if st.human or st.llm:
        out[V.JUDGED] = V.judged_csv(plan.files, st)
    if st.llm:
        rows = V.assessor_rows(plan.files, st.llm)
        sub = {f"{s}.tsv": tsv(r).encode("utf-8") for s, r in rows.items()}
        view = {
            "name": f"{base['name']}@{V.ASSESSOR}",
            "corpus": base["corpus"],
            "unit": base["unit"],
            "parent": base["name"],
            "view": V.ASSESSOR,
            "created": base["created"],
            "labels": sum(len(r) for r in rows.values()),
            "assessors": dict(sorted(plan.view_assessors.items())),
            "llm_made": len(st.llm),
            "note": f"the assessor view of label version {base['name']}: every pair an LLM assessor judged carries "
            "its grade, every other pair its grade in the version",
            "files": {k: sha256(v) for k, v in sub.items()},
        }
        sub[VERSION_FILE] = _json(view)
        out.update({f"{V.ASSESSOR}/{k}": v for k, v in sub.items()})
        add["views"] = {V.ASSESSOR: V.ASSESSOR}
    rel = V.items_by_question(
        (q, _g(st.human, (q, u)), _g(st.llm, (q, u))) for q, u in {**st.human, **st.llm}
    )
    sample = V.sample_record(beside.drawn, rel)
    if sample is not None:
        add[RELEVANCE.sample_key] = sample.record()
    if beside.answers is not None:
        ans = beside.answers
        out[V.ANSWER_GRADES] = V.answer_csv(ans)
        graded = {**ans.human, **ans.llm}
        add["answer_grades"] = {"answers": len(graded), "human": len(ans.human), "llm": len(ans.llm)}
        by_q = V.items_by_question((q, _g(ans.human, (q, a)), _g(ans.llm, (q, a))) for q, a in graded)
        answer_sample = V.sample_record(beside.answers_drawn, by_q)
        if answer_sample is not None:
            add[ANSWERS.sample_key] = answer_sample.record()
    return out, add


def _g(lines: Mapping[tuple[str, str], Judgement | AnswerGrade], key: tuple[str, str]) -> object:
    line = lines.get(key)
    return None if line is None else line.grade


def version_files(
    plan: CommitPlan,
    record_fn: Callable[[Mapping[str, str]], dict[str, Any]],
    legend: Mapping[int, str],
    beside: Beside | None = None,
) -> tuple[dict[str, bytes], dict[str, Any]]:
    """The bytes of every file of the version (``<split>.tsv``, what :func:`beside_files` adds, ``version.json``,
    ``CHANGELOG.md``) and its record; ``record_fn`` builds the record from the files' sha256s."""
    out = {f"{s}.tsv": tsv(rows).encode("utf-8") for s, rows in plan.files.items()}
    add: dict[str, Any] = {}
    if beside is not None:
        more, add = beside_files(plan, beside, record_fn({}))
        out.update(more)
    record = {**record_fn({k: sha256(v) for k, v in sorted(out.items())}), **add}
    out[VERSION_FILE] = _json(record)
    out[CHANGELOG] = changelog(record, plan, legend).encode("utf-8")
    return out, record


def _beside_lines(record: Mapping[str, Any]) -> list[str]:
    """The CHANGELOG's lines on the assessor view and the human samples."""
    lines: list[str] = []
    if V.ASSESSOR in (record.get("views") or {}):
        lines += [
            "",
            "## The assessor view",
            "",
            f"`{V.ASSESSOR}/` holds the same files with every pair an LLM assessor judged at its grade (a person's "
            f"grade stands in the files above); `{V.JUDGED}` lists each judged pair's human and assessor grade.",
        ]
    for kind in (RELEVANCE, ANSWERS):
        sample = record.get(kind.sample_key)
        if sample:
            how = (
                f"drawn at random by `python -m ablate.label sample` (seed {sample['seed']}, {len(sample['questions'])} "
                f"of {sample['population']} questions, pool {sample['pool']})"
                if sample["drawn_by"] == "sample"
                else f"picked by hand ({len(sample['questions'])} questions checked without a recorded draw: no "
                "random sample)"
            )
            lines += ["", f"## Human sample ({kind.name})", "", how + ": " + ", ".join(sample["questions"])]
    return lines
