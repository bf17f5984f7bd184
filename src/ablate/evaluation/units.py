"""Evaluation units: which id a hit is scored under, and how qrels are brought to that unit.

* The **unit** is what one ranked result *is* when it is scored: a document (``doc``) or a chunk (``chunk``).
  ``auto`` means the qrels' own unit, so labels and results are always counted in the same unit (seed 000:
  "先定好标注到哪一级,评分就按同一级来").
* A chunk-level hit becomes a document through its explicit ``Hit.doc_id`` -- never by parsing the chunk id.
* Chunk qrels are **lifted** to documents when the unit is ``doc``: a document's grade is the maximum grade of its
  judged chunks, and a document is judged when any of its chunks is. That needs the snapshot's chunk->doc mapping.
* Document qrels cannot be pushed **down** to chunks (which of a document's chunks holds the answer is exactly what a
  document label does not say), so ``unit=chunk`` with ``doc`` qrels is refused.
* Negative grades (some TREC collections use -1/-2 for spam) are kept: they are judged, below any relevance level,
  and give no gain (trec_eval also gives them none).
"""

from __future__ import annotations

from collections.abc import Mapping

from ablate.data.types import UNITS, Qrels
from ablate.errors import ConfigError, InputError


def resolve_unit(requested: str, qrels_unit: str) -> str:
    """The unit results are scored in: ``requested`` or, for ``auto``, the qrels' unit."""
    if qrels_unit not in UNITS:
        raise ConfigError("qrels.unit", qrels_unit, f"valid options: {', '.join(UNITS)}")
    unit = qrels_unit if requested == "auto" else requested
    if unit not in UNITS:
        raise ConfigError("eval.unit", requested, "valid options: auto, doc, chunk")
    if unit == "chunk" and qrels_unit == "doc":
        raise ConfigError(
            "eval.unit",
            requested,
            "the qrels are labelled at unit 'doc' and document labels cannot be mapped down to chunks (which chunk "
            "holds the answer is what a document label does not say). Fix: evaluate with eval.unit=doc (or auto), "
            "or label chunks (qrels_unit: chunk)",
        )
    return unit


def judgements_at(
    qrels: Qrels, unit: str, chunk_to_doc: Mapping[str, str] | None = None
) -> dict[str, dict[str, int]]:
    """``qid -> {unit_id: grade}`` at ``unit`` (already resolved). Read-only: when no lifting is needed this is
    ``qrels.judgements`` itself (not copied, never mutated)."""
    if qrels.unit == unit:
        return qrels.judgements
    if qrels.unit == "chunk" and unit == "doc":
        if chunk_to_doc is None:
            raise ConfigError(
                "chunk_to_doc",
                None,
                "qrels are labelled at unit 'chunk' and evaluation is at unit 'doc', so chunk labels must be lifted "
                "to their documents. Fix: pass chunk_to_doc (the snapshot's chunk->doc mapping), or evaluate with "
                "eval.unit=chunk (or auto)",
            )
        out: dict[str, dict[str, int]] = {}
        unknown: list[str] = []
        for q, j in qrels.judgements.items():
            lifted: dict[str, int] = {}
            for cid, g in j.items():
                doc = chunk_to_doc.get(cid)
                if doc is None:
                    unknown.append(f"{q}:{cid}")
                    continue
                old = lifted.get(doc)
                if old is None or old < g:
                    lifted[doc] = g
            out[q] = lifted
        if unknown:
            shown = ", ".join(unknown[:5]) + (f" (and {len(unknown) - 5} more)" if len(unknown) > 5 else "")
            raise InputError(
                f"qrels {qrels.name or '(unnamed)'}",
                f"{len(unknown)} judged chunk id(s) are not chunks of this snapshot: {shown}",
                "label the chunks the current chunker produces (or re-chunk with the chunker the labels were made "
                "for), so every judged chunk maps to its document",
            )
        return out
    # doc qrels at chunk unit: resolve_unit refuses this first; kept for direct callers.
    resolve_unit(unit, qrels.unit)
    raise AssertionError("unreachable")  # pragma: no cover


def ranked_units(ids: list[str], depth: int, budget: str) -> tuple[list[str], list[int]]:
    """The deduplicated ranked unit list inside the ``depth`` budget, and each unit's first position (0-based) in
    ``ids``.

    ``budget="chunks"``: first ``depth`` ids, then dedup (a unit is in when its first chunk is).
    ``budget="docs"``: dedup the whole list, then the first ``depth`` units.
    Units are ordered by first appearance. A plain reference implementation; :func:`ablate.evaluation.evaluate`
    uses a vectorised equivalent and this one builds the unjudged export.
    """
    window = ids[:depth] if budget == "chunks" else ids
    first: dict[str, int] = {}
    for p, u in enumerate(window):
        if u not in first:
            first[u] = p
    units = list(first)[:depth]
    return units, [first[u] for u in units]
