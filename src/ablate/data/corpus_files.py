"""The files of a corpus folder read line by line and validated: ``corpus.jsonl`` (documents), ``queries.jsonl``
(queries, their sub-questions and answer parts) and ``qrels/*.tsv`` checked against them.

The first problem raises :class:`~ablate.errors.InputError` naming the file, the line, the problem and the fix.
:func:`ablate.data.corpus.load_corpus` reads a whole folder with them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ablate.data.chunking import SECTION_JOIN, section_block
from ablate.data.qrels import read_qrels, read_text_lines
from ablate.data.study_template import TEMPLATE_TAG
from ablate.data.types import Document, Qrels, Query, Section, SubQuestion, Unit
from ablate.errors import InputError
from ablate.safenames import name_problem

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
            text = SECTION_JOIN.join(section_block(s.sid, s.title, s.text) for s in sections)
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
        tags = _str_list(obj, "tags", where)
        if TEMPLATE_TAG in tags:
            raise InputError(
                where,
                f"query {qid!r} is a template question python -m ablate.init wrote (tag {TEMPLATE_TAG!r})",
                "fill or delete the template questions in queries.jsonl: write the question, its answers and its "
                f"rows in the labels file, then remove the tag {TEMPLATE_TAG!r}",
            )
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
            tags=tags,
            persona=_opt_str(obj, "persona"),
            as_of=_opt_str(obj, "as_of"),
            answers=_str_list(obj, "answers", where) or _str_list(meta, "answers", where),
            split=split,
            group=_opt_str(obj, "group"),
            candidates=_str_list(obj, "candidates", where),
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
