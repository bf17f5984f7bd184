"""Load a corpus folder: its manifest, its files, its splits, chunked deterministically into a :class:`Snapshot`.

A corpus folder is the BEIR layout (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``) plus an optional
``corpus.yaml`` manifest and optional per-document fields (version, effective date, ACL groups, series, sections,
metadata) and per-query fields (tags, persona, as-of date, answers, split, group). See docs/architecture.md.

Everything is validated on load (each file by :mod:`ablate.data.corpus_files`); the first problem raises
:class:`~ablate.errors.InputError` naming the file, the line, the problem and the fix. The result and its fingerprint
are :class:`~ablate.data.snapshot.Snapshot`'s.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from ablate.data.chunking import ChunkerSpec, chunk_corpus
from ablate.data.corpus_files import check_subquestion_evidence, load_documents, load_qrels_tsv, load_queries
from ablate.data.labelsets import read_label_version
from ablate.data.language import corpus_language
from ablate.data.projection import (
    DEFAULT_MIN_OVERLAP,
    RULE,
    Counts,
    Span,
    SpanIndex,
    check_min_overlap,
    project_evidence,
    project_judgements,
)
from ablate.data.qrels import read_text_lines
from ablate.data.snapshot import LabelProjection, Snapshot
from ablate.data.types import Chunk, Document, Qrels, Query, SubQuestion
from ablate.errors import ConfigError, InputError
from ablate.safenames import PLAIN_NAME_RULE, inside, name_problem
from ablate.safeyaml import YamlLimitError, safe_load


def _sha_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_manifest(root: Path) -> dict[str, Any]:
    p = root / "corpus.yaml"
    if not p.exists():
        return {}
    lines, _ = read_text_lines(p)
    try:
        m = safe_load("\n".join(lines)) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{p}:{mark.line + 1}" if mark else str(p)
        if isinstance(e, YamlLimitError):
            raise InputError(where, str(e.problem), e.fix) from None
        raise InputError(where, f"invalid YAML ({getattr(e, 'problem', e)})", "fix the YAML syntax") from None
    if not isinstance(m, dict):
        raise InputError(
            str(p), "is not a YAML mapping", "write key: value pairs (name, language, qrels_unit, ...)"
        )
    return m


def _manifest_line(path: Path, key: str) -> int | None:
    """The line of ``path`` (a YAML mapping) where the top-level ``key``'s value starts (for error messages)."""
    lines, _ = read_text_lines(path)
    try:
        node = yaml.compose("\n".join(lines))
    except yaml.YAMLError:
        return None
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if getattr(k, "value", None) == key:
                return int(v.start_mark.line) + 1
    return None


def corpus_name(root: Path, manifest: dict[str, Any], setting: str | None = None) -> str:
    """The snapshot's name: the ``corpus.name`` setting, else corpus.yaml's ``name``, else the folder's name. A
    declared name becomes a folder and file name (``python -m ablate.split``'s output, ``conf/corpus/<name>.yaml``)
    and an MLflow experiment name, so it must be a plain name (:func:`ablate.safenames.name_problem`): the setting
    is refused as :class:`ConfigError`, corpus.yaml's as :class:`InputError` naming ``corpus.yaml:line``."""
    if setting is not None:
        problem = name_problem(setting)
        if problem:
            raise ConfigError("corpus.name", setting, f"{problem}; give {PLAIN_NAME_RULE}")
        return setting
    declared = manifest.get("name")
    if declared is None or declared == "":
        return root.name
    p = root / "corpus.yaml"
    problem = (
        "it is not a string" if isinstance(declared, (list, dict, bool)) else name_problem(str(declared))
    )
    if problem:
        raise InputError(
            f"{p}:{_manifest_line(p, 'name') or '?'}",
            f"name {declared!r} is not a plain name ({problem}); it names folders and files ablate writes",
            f"give {PLAIN_NAME_RULE}, e.g. name: {_suggest(str(declared)) or root.name}",
        )
    return str(declared)


def _suggest(name: str) -> str:
    """A plain name close to ``name`` (its last path component, cleaned), for the fix of an error; may be empty."""
    last = name.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    clean = "".join(c for c in last if not unicodedata.category(c).startswith("C")).strip().lstrip(".")
    clean = clean.replace("..", ".")[:100]
    return clean if clean and name_problem(clean) is None else ""


def _file_hashes(
    root: Path, qfiles: list[Path], qrels: dict[str, Qrels], extra: dict[str, str]
) -> dict[str, str]:
    """Relative path -> sha256 of every file the snapshot was read from (its fingerprint's input)."""
    files = {
        "corpus.jsonl": _sha_file(root / "corpus.jsonl"),
        "queries.jsonl": _sha_file(root / "queries.jsonl"),
    }
    files.update({f"qrels/{f.name}": qrels[f.stem].source_sha256 for f in qfiles})
    files.update(extra)
    if (root / "corpus.yaml").exists():
        files["corpus.yaml"] = _sha_file(root / "corpus.yaml")
    return files


def _merge_extra_qrels(
    root: Path,
    extra: Sequence[str],
    qrels: dict[str, Qrels],
    unit: str,
    queries: dict[str, Query],
    known: set[str],
) -> dict[str, str]:
    """Add the judgements of ``extra`` files (relative to ``root``) to the split that already holds each query;
    returns ``{file: sha256}`` for the snapshot fingerprint."""
    files: dict[str, str] = {}
    for rel in extra:
        try:  # a path read from corpus.yaml stays inside the corpus folder
            f = inside(root, rel)
        except ValueError:
            raise InputError(
                f"extra_qrels {rel!r}",
                f"leads outside the corpus folder {root}",
                "list judgement files inside the corpus folder, relative to it (e.g. qrels/judged_negatives.tsv)",
            ) from None
        if not f.is_file():
            raise InputError(
                str(f), "is missing", "fix corpus.extra_qrels (paths relative to the corpus folder)"
            )
        more = load_qrels_tsv(f, unit, queries, known, f.stem)  # type: ignore[arg-type]
        files[rel] = more.source_sha256
        for q in qrels.values():
            for qid, judged in more.judgements.items():
                if qid in q.judgements:
                    for uid, g in judged.items():
                        q.judgements[qid].setdefault(uid, g)
    return files


def _splits(qrels: dict[str, Qrels], queries: dict[str, Query], qdir: Path) -> dict[str, list[str]]:
    """A query belongs to split S when it is labelled in ``qrels/S.tsv`` or declares ``split: S``; never to two."""
    splits: dict[str, list[str]] = {split: list(q.judgements) for split, q in qrels.items()}
    for query in queries.values():
        if query.split:
            lst = splits.setdefault(query.split, [])
            if query.qid not in lst:
                lst.append(query.qid)
    for split, lst in splits.items():
        for qid in lst:
            qs = queries[qid].split
            if qs and qs != split:
                raise InputError(
                    str(qdir / f"{split}.tsv"),
                    f"query {qid!r} is labelled in split {split!r} but declares split {qs!r} in queries.jsonl",
                    "keep each query in one split",
                )
    return splits


def pilot_split(root: str | Path) -> str | None:
    """The one split of a corpus folder with exactly one labels file (``qrels/<name>.tsv``, whatever its name) and no
    question declaring another split (``"split"`` in ``queries.jsonl``): the labels file's name. Such a corpus has
    no held-out split (an exploratory pilot). ``None`` for any other folder, or one that cannot be read (loading it
    then says why). Reads file names and the questions' ``split`` fields only, so it can run before the corpus is
    loaded."""
    folder = Path(root).expanduser()
    qdir = folder / "qrels"
    files = sorted(qdir.glob("*.tsv")) if qdir.is_dir() else []
    if len(files) != 1:
        return None
    split = files[0].stem
    try:
        with (folder / "queries.jsonl").open(encoding="utf-8") as f:
            for line in f:
                if '"split"' in line:
                    obj = json.loads(line)
                    declared = obj.get("split") if isinstance(obj, dict) else None
                    if declared not in (None, "", split):
                        return None
    except (OSError, ValueError):
        return None
    return split


def _language(setting: str | None, manifest: dict[str, Any], docs: dict[str, Document]) -> tuple[str, str]:
    """The corpus language and where it came from: the setting, corpus.yaml (``declared``) or ``detected`` (per
    document: :func:`~ablate.data.language.corpus_language`, the same rule as ``python -m ablate.ingest``)."""
    lang = setting or manifest.get("language") or "auto"
    source = "setting" if setting else "declared"
    if lang == "auto":
        lang, source = corpus_language(d.text for d in docs.values()).language, "detected"
    if lang not in ("en", "zh"):
        raise ConfigError("corpus.language", lang, "valid options: en, zh, auto")
    return lang, source


def _spans(chunks: Sequence[Chunk]) -> dict[str, Span | None]:
    return {c.chunk_id: Span(c.chunk_id, c.doc_id, *c.span) if c.span else None for c in chunks}


def _lift(judged: dict[str, int], chunk_to_doc: dict[str, str]) -> dict[str, int]:
    """Chunk grades -> document grades (the best grade of a document's judged chunks, as scoring lifts them)."""
    out: dict[str, int] = {}
    for cid, g in judged.items():
        doc = chunk_to_doc[cid]
        if doc not in out or out[doc] < g:
            out[doc] = g
    return out


def project_labels(
    qrels: dict[str, Qrels],
    queries: dict[str, Query],
    native: ChunkerSpec,
    native_chunks: Sequence[Chunk],
    chunks: Sequence[Chunk],
    min_overlap: float,
    label_version: str,
) -> tuple[dict[str, Qrels], dict[str, Query], LabelProjection]:
    """Chunk labels made on ``native_chunks`` carried onto ``chunks`` (:mod:`ablate.data.projection`): the projected
    qrels and queries (sub-question evidence), and the :class:`LabelProjection` that says how, with the original
    labels lifted to documents."""
    old, new = _spans(native_chunks), SpanIndex(Span(c.chunk_id, c.doc_id, *c.span) for c in chunks if c.span)
    c2d = {c.chunk_id: c.doc_id for c in native_chunks}
    projected: dict[str, Qrels] = {}
    counts: dict[str, Counts] = {}
    native_judged: dict[str, dict[str, int]] = {}
    for split, q in qrels.items():
        p = project_judgements(q.judgements, old, new, min_overlap)
        projected[split] = Qrels(p.judgements, unit="chunk", name=q.name, source_sha256=q.source_sha256)
        counts[split] = p.counts
        for qid, judged in q.judgements.items():
            native_judged.setdefault(qid, {}).update(judged)
    evidence: dict[str, Counts] = {}
    doc_evidence: dict[str, dict[str, tuple[str, ...]]] = {}
    new_queries = dict(queries)
    for qid, query in queries.items():
        if not query.subquestions:
            continue
        ev = evidence[qid] = Counts()
        subs = tuple(
            SubQuestion(s.sid, s.text, project_evidence(s.evidence, old, new, min_overlap, ev))
            for s in query.subquestions
        )
        doc_evidence[qid] = {
            s.sid: tuple(dict.fromkeys(c2d[e] for e in s.evidence)) for s in query.subquestions
        }
        new_queries[qid] = replace(query, subquestions=subs)
    projection = LabelProjection(
        native=native,
        min_overlap=min_overlap,
        rule=RULE,
        label_version=label_version,
        counts=counts,
        evidence=evidence,
        native_judgements=native_judged,
        doc_judgements={qid: _lift(j, c2d) for qid, j in native_judged.items()},
        doc_evidence=doc_evidence,
    )
    return projected, new_queries, projection


def _check_unique(chunks: Sequence[Chunk], root: Path) -> None:
    seen: set[str] = set()
    for c in chunks:
        if c.chunk_id in seen:
            raise InputError(
                str(root / "corpus.jsonl"),
                f"chunk id {c.chunk_id!r} is produced twice",
                "make document and section ids unique",
            )
        seen.add(c.chunk_id)


def native_chunker(manifest: dict[str, Any]) -> ChunkerSpec:
    """The chunking the corpus's labels were made on: corpus.yaml's ``chunker`` (default ``none``)."""
    mc = manifest.get("chunker") or {}
    if isinstance(mc, str):
        mc = {"kind": mc}
    return ChunkerSpec(**mc)


def label_folder(labels: str | Path, corpus: str, labels_dir: str | Path = "labels") -> Path:
    """The folder of a label version given as ``labels``: a folder (a path with a separator, or one that exists), or
    a version's name, looked up as ``<labels_dir>/<corpus>/versions/<name>`` (where ``python -m ablate.label commit``
    writes it)."""
    p = Path(labels).expanduser()
    text = str(labels)
    if p.is_dir() or "/" in text or "\\" in text:
        return p
    problem = name_problem(text)
    if problem:
        raise ConfigError("corpus.labels", text, f"{problem}; give a label version's name or its folder")
    folder = inside(Path(labels_dir), corpus, "versions", text)
    if not folder.is_dir():
        have = sorted(d.name for d in folder.parent.glob("*") if d.is_dir()) if folder.parent.is_dir() else []
        known = (
            f"versions of {corpus}: {', '.join(have)}" if have else f"no version of {corpus} is committed yet"
        )
        raise ConfigError(
            "corpus.labels",
            text,
            f"no label version {text!r} in {folder.parent} ({known}); commit one with "
            "python -m ablate.label commit --version NAME, or give the version's folder",
        )
    return folder


def _label_version(
    root: Path, labels: str | Path | None, corpus: str, manifest: dict[str, Any]
) -> tuple[Path, list[Path], dict[str, Any]]:
    """``root/qrels`` and its ``*.tsv`` files without ``labels``; else the folder and ``<split>.tsv`` files of the label version ``labels`` (:mod:`ablate.data.labelsets`) and the
    manifest that records it: ``label_version`` its name, ``label_version_parent`` the one it was made from,
    ``label_assessors``/``labels_llm_made`` who made its labels."""
    if labels is None:
        qdir = root / "qrels"
        return qdir, sorted(qdir.glob("*.tsv")) if qdir.is_dir() else [], manifest
    chosen = read_label_version(label_folder(labels, corpus))
    return (
        chosen.folder,
        list(chosen.files),
        {
            **manifest,
            "label_version": chosen.name,
            "label_version_parent": chosen.parent or str(manifest.get("label_version") or ""),
            "label_assessors": dict(chosen.assessors),
            "labels_llm_made": chosen.llm_made,
        },
    )


def load_corpus(
    path: str | Path,
    chunker: ChunkerSpec | None = None,
    *,
    language: str | None = None,
    qrels_unit: str | None = None,
    name: str | None = None,
    extra_qrels: Sequence[str] = (),
    min_overlap: float = DEFAULT_MIN_OVERLAP,
    labels: str | Path | None = None,
) -> Snapshot:
    """Load, validate and chunk a corpus folder.

    ``chunker``/``language``/``qrels_unit`` override the manifest (``corpus.yaml``); BEIR folders without a manifest
    default to one chunk per document, language auto-detected and document-level qrels. ``extra_qrels`` names
    further judgement files in the folder (e.g. RGB's ``judged_negatives.tsv``) whose lines join the split that
    already holds their query — judged non-relevant results then count as judged, not unknown.

    Chunk-level labels name the chunks of the corpus's own chunker (corpus.yaml's ``chunker``): they are checked
    against those, and when ``chunker`` makes other chunks they are projected onto them by character overlap
    (:func:`project_labels`, share ``min_overlap``); the snapshot's ``projection`` says how. ``labels``: a
    committed label version read instead of ``qrels/`` (:func:`_label_version`)."""
    root = Path(path).expanduser()
    if not root.is_dir():
        raise InputError(
            str(root),
            "is not a folder",
            "set corpus.path to a folder with corpus.jsonl, queries.jsonl, qrels/",
        )
    root = root.resolve()
    manifest = read_manifest(root)
    for fname in ("corpus.jsonl", "queries.jsonl"):
        if not (root / fname).is_file():
            raise InputError(str(root / fname), "is missing", f"a corpus folder needs {fname} (BEIR layout)")
    qdir, qfiles, manifest = _label_version(root, labels, corpus_name(root, manifest, name), manifest)
    native = native_chunker(manifest)
    chunker = chunker or native
    unit = qrels_unit or manifest.get("qrels_unit") or "doc"
    if unit not in ("doc", "chunk"):
        raise ConfigError("corpus.qrels_unit", unit, "valid options: doc, chunk")

    docs = load_documents(root / "corpus.jsonl")
    queries = load_queries(root / "queries.jsonl")
    chunks = chunk_corpus(docs, chunker)
    _check_unique(chunks, root)

    projecting = unit == "chunk" and chunker.params() != native.params()
    native_chunks = chunk_corpus(docs, native) if projecting else chunks
    known = set(docs) if unit == "doc" else {c.chunk_id for c in native_chunks}
    check_subquestion_evidence(root / "queries.jsonl", queries, known, unit)
    qrels = {f.stem: load_qrels_tsv(f, unit, queries, known, f.stem) for f in qfiles}  # type: ignore[arg-type]
    extra = list(extra_qrels) or list(manifest.get("extra_qrels") or [])
    extra_files = _merge_extra_qrels(root, extra, qrels, unit, queries, known)
    splits = _splits(qrels, queries, qdir)
    files = _file_hashes(root, qfiles, qrels, extra_files)
    lang, lang_source = _language(language, manifest, docs)
    projection = None
    if projecting:
        version = str(manifest.get("label_version") or "")
        qrels, queries, projection = project_labels(
            qrels, queries, native, native_chunks, chunks, check_min_overlap(min_overlap), version
        )
    return Snapshot(
        name=corpus_name(root, manifest, name),
        root=root,
        language=lang,
        qrels_unit=unit,  # type: ignore[arg-type]
        documents=docs,
        chunks=chunks,
        queries=queries,
        qrels=qrels,
        splits=splits,
        chunker=chunker,
        files=files,
        manifest=manifest,
        language_source=lang_source,
        projection=projection,
    )
