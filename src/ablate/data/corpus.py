"""Load and validate a corpus folder, chunk it deterministically, and fingerprint the snapshot.

A corpus folder is the BEIR layout (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``) plus an optional
``corpus.yaml`` manifest and optional per-document fields (version, effective date, ACL groups, series, sections,
metadata) and per-query fields (tags, persona, as-of date, answers, split, group). See docs/architecture.md.

Everything is validated on load; the first problem raises :class:`~ablate.errors.InputError` naming the file, the
line, the problem and the fix. The snapshot fingerprint is a sha256 over the content of every file read and the
chunker's parameters, so two runs with the same fingerprint indexed the very same text.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ablate.data.chunking import ChunkerSpec, chunk_corpus
from ablate.data.language import detect_language
from ablate.data.qrels import read_qrels, read_text_lines
from ablate.data.types import Chunk, Document, IdTable, Qrels, Query, Section, SubQuestion, Unit
from ablate.errors import ConfigError, InputError
from ablate.safenames import PLAIN_NAME_RULE, inside, name_problem

FORMAT_VERSION = "ablate-corpus-1"


@dataclass
class Snapshot:
    """A frozen, validated corpus: documents, their chunks, queries, qrels per split, and fingerprints."""

    name: str
    root: Path
    language: str
    qrels_unit: Unit
    documents: dict[str, Document]
    chunks: list[Chunk]
    queries: dict[str, Query]
    qrels: dict[str, Qrels]
    splits: dict[str, list[str]]
    chunker: ChunkerSpec
    files: dict[str, str]  # relative path -> sha256
    manifest: dict[str, Any] = field(default_factory=dict)
    #: where ``language`` came from: ``declared`` (corpus.yaml), ``setting`` (the corpus.language setting) or
    #: ``detected`` (:func:`~ablate.data.language.detect_language` over the documents; ``auto`` or nothing declared)
    language_source: str = "declared"

    @cached_property
    def fingerprint(self) -> str:
        """sha256 over the files' content hashes and the chunker parameters."""
        return _sha(
            json.dumps(
                {"format": FORMAT_VERSION, "files": self.files, "chunker": self.chunker.params()},
                sort_keys=True,
            )
        )

    @cached_property
    def content_fingerprint(self) -> str:
        """sha256 over the documents' files only (independent of chunking and labels): the index snapshot."""
        return _sha(json.dumps({k: v for k, v in self.files.items() if k == "corpus.jsonl"}, sort_keys=True))

    @cached_property
    def chunk_to_doc(self) -> dict[str, str]:
        return {c.chunk_id: c.doc_id for c in self.chunks}

    @cached_property
    def chunk_version(self) -> dict[str, str | None]:
        return {c.chunk_id: c.version for c in self.chunks}

    @cached_property
    def chunk_text(self) -> dict[str, str]:
        return {c.chunk_id: c.text for c in self.chunks}

    @cached_property
    def chunk_index(self) -> dict[str, int]:
        return self.id_table.index

    @cached_property
    def id_table(self) -> IdTable:
        """The chunk table coded runs over this snapshot refer to (position = code), built once."""
        return IdTable.of(self.chunks)

    @property
    def identities(self) -> dict[str, list[str]]:
        return dict(self.manifest.get("identities") or {})

    @property
    def label_version(self) -> str:
        return str(self.manifest.get("label_version") or "")

    def split_qids(self, split: str) -> list[str]:
        if split not in self.splits:
            raise ConfigError(
                "corpus.split",
                split,
                f"the corpus {self.name!r} has splits: {', '.join(sorted(self.splits)) or 'none'}; choose one",
            )
        return self.splits[split]

    def split_qrels(self, split: str) -> Qrels:
        self.split_qids(split)
        return self.qrels.get(split) or Qrels({}, unit=self.qrels_unit, name=split)

    def allowed_mask(self, groups: Iterable[str] | None) -> np.ndarray | None:
        """Boolean mask over ``chunks`` for an identity holding ``groups`` (``None`` = no filtering)."""
        if groups is None:
            return None
        groups = list(groups)
        return np.fromiter((c.visible_to(groups) for c in self.chunks), dtype=bool, count=len(self.chunks))

    def manifest_record(self) -> dict[str, Any]:
        """What a run logs about its snapshot (JSON-ready)."""
        return {
            "name": self.name,
            "root": str(self.root),
            "language": self.language,
            "language_source": self.language_source,
            "qrels_unit": self.qrels_unit,
            "fingerprint": self.fingerprint,
            "content_fingerprint": self.content_fingerprint,
            "chunker": self.chunker.params(),
            "files": self.files,
            "n_documents": len(self.documents),
            "n_chunks": len(self.chunks),
            "n_queries": len(self.queries),
            "splits": {s: len(q) for s, q in self.splits.items()},
            "qrels": {
                s: {"sha256": q.source_sha256, "content_hash": q.content_hash(), "queries": len(q.judgements)}
                for s, q in self.qrels.items()
            },
            "label_version": self.label_version,
        }


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _sha_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --------------------------------------------------------------------------------------------------------------------
# JSONL readers


def _read_jsonl(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    lines, _ = read_text_lines(path)
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(
                f"{path}:{lineno}",
                f"invalid JSON ({e.msg} at column {e.colno})",
                "make each line one JSON object",
            ) from None
        if not isinstance(obj, dict):
            raise InputError(f"{path}:{lineno}", "is not a JSON object", "make each line one JSON object")
        yield lineno, obj


def _req_id(obj: dict[str, Any], where: str, key: str = "_id") -> str:
    v = obj.get(key)
    if isinstance(v, int) and not isinstance(v, bool):
        v = str(v)
    if not isinstance(v, str) or not v.strip():
        raise InputError(where, f"missing or empty {key!r}", f'give every line a non-empty string "{key}"')
    if any(ch.isspace() for ch in v):
        raise InputError(
            where, f"id {v!r} contains whitespace", "ids must not contain spaces or tabs (TREC files)"
        )
    return v


def _str_list(obj: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    v = obj.get(key)
    if v is None:
        return ()
    if isinstance(v, str):
        return (v,)
    if not isinstance(v, list) or not all(isinstance(x, (str, int, float)) for x in v):
        raise InputError(where, f"{key!r} must be a list of strings", f'write e.g. "{key}": ["a", "b"]')
    return tuple(str(x) for x in v)


def _opt_str(obj: dict[str, Any], key: str) -> str | None:
    v = obj.get(key)
    return None if v is None or v == "" else str(v)


def load_documents(path: Path) -> dict[str, Document]:
    docs: dict[str, Document] = {}
    for lineno, obj in _read_jsonl(path):
        where = f"{path}:{lineno}"
        did = _req_id(obj, where)
        if did in docs:
            raise InputError(where, f"duplicate document id {did!r}", "give every document a unique _id")
        if "#" in did:
            raise InputError(
                where, f"document id {did!r} contains '#'", "'#' separates doc and chunk ids; rename it"
            )
        sections: list[Section] = []
        seen: set[str] = set()
        raw_sections = obj.get("sections") or []
        if not isinstance(raw_sections, list):
            raise InputError(
                where, "'sections' must be a list", 'write "sections": [{"id": "1.1", "text": "..."}]'
            )
        for s in raw_sections:
            if not isinstance(s, dict):
                raise InputError(where, "a section is not an object", 'write {"id": "1.1", "text": "..."}')
            sid = _req_id(s, where + " (section)", "id")
            if sid in seen:
                raise InputError(
                    where, f"duplicate section id {sid!r} in document {did!r}", "make section ids unique"
                )
            seen.add(sid)
            sections.append(Section(sid=sid, text=str(s.get("text") or ""), title=str(s.get("title") or "")))
        text = obj.get("text")
        if text is None and sections:
            text = "\n\n".join(f"{s.sid} {s.title + ': ' if s.title else ''}{s.text}" for s in sections)
        if not isinstance(text, str):
            raise InputError(
                where, f"document {did!r} has no 'text' (and no 'sections')", 'add a "text" string'
            )
        meta = obj.get("metadata") or {}
        if not isinstance(meta, dict):
            raise InputError(where, "'metadata' must be an object", "write it as a JSON object or drop it")
        docs[did] = Document(
            doc_id=did,
            title=str(obj.get("title") or ""),
            text=text,
            version=_opt_str(obj, "version"),
            effective_date=_opt_str(obj, "effective_date"),
            acl=_str_list(obj, "acl", where),
            series=_opt_str(obj, "series"),
            sections=tuple(sections),
            metadata=meta,
        )
    if not docs:
        raise InputError(str(path), "contains no documents", "add at least one JSON line with _id and text")
    return docs


def load_queries(path: Path) -> dict[str, Query]:
    queries: dict[str, Query] = {}
    for lineno, obj in _read_jsonl(path):
        where = f"{path}:{lineno}"
        qid = _req_id(obj, where)
        if qid in queries:
            raise InputError(where, f"duplicate query id {qid!r}", "give every query a unique _id")
        text = obj.get("text")
        if not isinstance(text, str) or not text.strip():
            raise InputError(where, f"query {qid!r} has no text", 'add a non-empty "text"')
        raw_meta = obj.get("metadata")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        split = _opt_str(obj, "split")
        if split is not None and (problem := name_problem(split)):
            raise InputError(
                where,
                f"query {qid!r}: split {split!r} is not a plain name ({problem}); it names qrels/<split>.tsv",
                'write a split name such as "dev" or "test"',
            )
        queries[qid] = Query(
            qid=qid,
            text=text,
            tags=_str_list(obj, "tags", where),
            persona=_opt_str(obj, "persona"),
            as_of=_opt_str(obj, "as_of"),
            answers=_str_list(obj, "answers", where) or _str_list(meta, "answers", where),
            split=split,
            group=_opt_str(obj, "group"),
            **_subquestions(obj, qid, where),
        )
    if not queries:
        raise InputError(str(path), "contains no queries", "add at least one JSON line with _id and text")
    return queries


_SUBQ_FORM = '"subquestions": [{"id": "s1", "text": "...", "evidence": ["<unit id>", ...]}, ...]'


def _subquestions(obj: dict[str, Any], qid: str, where: str) -> dict[str, Any]:
    """``subquestions`` and ``answer_parts`` of one queries.jsonl line, validated (empty when absent)."""
    raw = obj.get("subquestions")
    parts = obj.get("answer_parts")
    if raw is None and parts is None:
        return {}
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise InputError(where, f"query {qid!r}: 'subquestions' is not a list", f"write {_SUBQ_FORM}")
    subs: list[SubQuestion] = []
    for i, s in enumerate(raw, start=1):
        at = f"{where} (sub-question {i})"
        if not isinstance(s, dict):
            raise InputError(at, f"query {qid!r}: a sub-question is not an object", f"write {_SUBQ_FORM}")
        sid = _req_id(s, at, "id")
        if any(x.sid == sid for x in subs):
            raise InputError(
                at, f"query {qid!r}: duplicate sub-question id {sid!r}", "make sub-question ids unique"
            )
        if "evidence" not in s or s["evidence"] is None:
            raise InputError(
                at,
                f"query {qid!r}, sub-question {sid!r}: no 'evidence'",
                'list the units (at the labels\' unit) that answer it: "evidence": ["DOC#4.2-a"]',
            )
        evidence = tuple(dict.fromkeys(_str_list(s, "evidence", at)))
        if not evidence or not all(e.strip() for e in evidence):
            raise InputError(
                at,
                f"query {qid!r}, sub-question {sid!r}: empty 'evidence'",
                "give at least one unit id that answers it (any one of them covers the sub-question); a part "
                "without evidence cannot be scored, so leave it out or label it",
            )
        text = s.get("text")
        subs.append(SubQuestion(sid=sid, text=text if isinstance(text, str) else "", evidence=evidence))
    out: dict[str, Any] = {"subquestions": tuple(subs)}
    if parts is not None:
        aliases = _answer_parts(parts)
        if aliases is None:
            raise InputError(
                where,
                f"query {qid!r}: 'answer_parts' must be a list of parts, each a string or a list of alias strings",
                'write one gold answer per part, e.g. "answer_parts": ["1,500 yuan", "department head"] or, with '
                'aliases, [["1,500 yuan", "1500 元"], ["department head"]]',
            )
        if subs and len(aliases) != len(subs):
            raise InputError(
                where,
                f"query {qid!r}: {len(aliases)} answer_parts for {len(subs)} subquestions",
                "give exactly one answer part per sub-question, in the same order",
            )
        out["answer_parts"] = aliases
    return out


def _answer_parts(parts: Any) -> tuple[tuple[str, ...], ...] | None:
    """``answer_parts`` as parts of aliases: ``["a", ["b", "b2"]]`` -> ``(("a",), ("b", "b2"))`` (RGB's format is a
    list of alias lists); ``None`` when it is not of that shape (or a part is empty)."""
    if not isinstance(parts, list):
        return None
    out: list[tuple[str, ...]] = []
    for p in parts:
        if isinstance(p, (str, int, float)) and not isinstance(p, bool):
            out.append((str(p),))
        elif isinstance(p, list) and p and all(isinstance(a, (str, int, float)) for a in p):
            out.append(tuple(str(a) for a in p))
        else:
            return None
    return tuple(out)


def _query_line(path: Path, qid: str) -> int | None:
    """The line of ``path`` (queries.jsonl) that declares ``qid`` (for error messages only)."""
    for lineno, obj in _read_jsonl(path):
        if str(obj.get("_id")) == qid:
            return lineno
    return None


def check_subquestion_evidence(path: Path, queries: dict[str, Query], known: set[str], unit: str) -> None:
    """Every sub-question's evidence id is a unit of the snapshot at the labels' unit (doc ids for
    ``qrels_unit: doc``, chunk ids for ``chunk``), else :class:`InputError` naming queries.jsonl:line and the id."""
    what = "document" if unit == "doc" else "chunk"
    for q in queries.values():
        for s in q.subquestions:
            bad = next((e for e in s.evidence if e not in known), None)
            if bad is not None:
                raise InputError(
                    f"{path}:{_query_line(path, q.qid) or '?'}",
                    f"query {q.qid!r}, sub-question {s.sid!r}: evidence {bad!r} is not a {what} id of this corpus "
                    f"(evidence is given at the labels' unit, qrels_unit: {unit})",
                    "use the ids the qrels use"
                    + (" (the chunker's DOC#section ids)" if unit == "chunk" else " (document _id)"),
                )


def load_qrels_tsv(
    path: Path, unit: Unit, queries: dict[str, Query], known_ids: set[str], name: str
) -> Qrels:
    """A corpus folder's qrels file (:func:`ablate.data.qrels.read_qrels`), every judged query and id checked against
    the folder's queries and the snapshot's documents/chunks."""
    what = "document" if unit == "doc" else "chunk"
    hint = (
        "check the id, or the chunker: chunk-level qrels need the chunker that makes these ids "
        "(e.g. chunker=clause for DOC#section ids)"
        if unit == "chunk"
        else "add the document or remove the qrels line"
    )

    def check(qid: str, uid: str, where: str) -> None:
        if qid not in queries:
            raise InputError(
                where, f"query id {qid!r} is not in queries.jsonl", "add the query or remove the qrels line"
            )
        if uid not in known_ids:
            raise InputError(where, f"{what} id {uid!r} is not in the corpus", hint)

    return read_qrels(path, unit, name=name, check=check)


# --------------------------------------------------------------------------------------------------------------------
# The folder


def read_manifest(root: Path) -> dict[str, Any]:
    p = root / "corpus.yaml"
    if not p.exists():
        return {}
    lines, _ = read_text_lines(p)
    try:
        m = yaml.safe_load("\n".join(lines)) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{p}:{mark.line + 1}" if mark else str(p)
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


def _language(setting: str | None, manifest: dict[str, Any], docs: dict[str, Document]) -> tuple[str, str]:
    """The corpus language and where it came from: the setting, corpus.yaml (``declared``) or ``detected``."""
    lang = setting or manifest.get("language") or "auto"
    source = "setting" if setting else "declared"
    if lang == "auto":
        lang, source = detect_language([d.text for d in docs.values()]), "detected"
    if lang not in ("en", "zh"):
        raise ConfigError("corpus.language", lang, "valid options: en, zh, auto")
    return lang, source


def load_corpus(
    path: str | Path,
    chunker: ChunkerSpec | None = None,
    *,
    language: str | None = None,
    qrels_unit: str | None = None,
    name: str | None = None,
    extra_qrels: Sequence[str] = (),
) -> Snapshot:
    """Load, validate and chunk a corpus folder.

    ``chunker``/``language``/``qrels_unit`` override the manifest (``corpus.yaml``); BEIR folders without a manifest
    default to one chunk per document, language auto-detected and document-level qrels. ``extra_qrels`` names
    further judgement files in the folder (e.g. RGB's ``judged_negatives.tsv``) whose lines join the split that
    already holds their query — judged non-relevant results then count as judged, not unknown.
    """
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
    qdir = root / "qrels"
    qfiles = sorted(qdir.glob("*.tsv")) if qdir.is_dir() else []

    if chunker is None:
        mc = manifest.get("chunker") or {}
        if isinstance(mc, str):
            mc = {"kind": mc}
        chunker = ChunkerSpec(**mc)
    unit = qrels_unit or manifest.get("qrels_unit") or "doc"
    if unit not in ("doc", "chunk"):
        raise ConfigError("corpus.qrels_unit", unit, "valid options: doc, chunk")

    docs = load_documents(root / "corpus.jsonl")
    queries = load_queries(root / "queries.jsonl")
    chunks = chunk_corpus(docs, chunker)
    seen: set[str] = set()
    for c in chunks:
        if c.chunk_id in seen:
            raise InputError(
                str(root / "corpus.jsonl"),
                f"chunk id {c.chunk_id!r} is produced twice",
                "make document and section ids unique",
            )
        seen.add(c.chunk_id)

    known = set(docs) if unit == "doc" else seen
    check_subquestion_evidence(root / "queries.jsonl", queries, known, unit)
    qrels = {f.stem: load_qrels_tsv(f, unit, queries, known, f.stem) for f in qfiles}  # type: ignore[arg-type]
    extra = list(extra_qrels) or list(manifest.get("extra_qrels") or [])
    extra_files = _merge_extra_qrels(root, extra, qrels, unit, queries, known)
    splits = _splits(qrels, queries, qdir)
    files = _file_hashes(root, qfiles, qrels, extra_files)
    lang, lang_source = _language(language, manifest, docs)
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
    )
