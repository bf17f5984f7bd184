"""Labels an ingest into an earlier output would leave behind: ids in the folder's ``qrels/*.tsv`` that the new
``corpus.jsonl`` no longer makes (a document renamed, a clause renumbered). They are named as warnings before the
folder is written, since loading the corpus would then refuse them (``qrels-unknown-chunk``)."""

from __future__ import annotations

import re
from pathlib import Path

from ablate.data.qrels import read_qrels
from ablate.errors import AblateError
from ablate.ingest.build import Result

#: chunk ids the paragraph and token chunkers make (``DOC#p3``, ``DOC#t0``): not sections, so not checked here
_MADE_BY_CHUNKER = re.compile(r"^[pt]\d+$")
SHOW = 5


def stale_labels(out: Path, result: Result) -> list[str]:
    """One message per labels file in ``out/qrels`` that names ids the new documents do not have."""
    qdir = out / "qrels"
    if not qdir.is_dir():
        return []
    sections = {
        str(d.record["_id"]): {s["id"] for s in d.record.get("sections", [])} for d in result.documents
    }
    messages = []
    for f in sorted(qdir.glob("*.tsv")):
        try:
            judged = read_qrels(f, "chunk").judgements
        except AblateError:
            continue  # a broken labels file is named when the corpus is loaded
        gone = []
        for uid in sorted({u for per in judged.values() for u in per}):
            doc, _, local = uid.partition("#")
            if doc not in sections or (local and sections[doc] and local not in sections[doc]
                                       and not _MADE_BY_CHUNKER.match(local)):  # fmt: skip
                gone.append(uid)
        if gone:
            more = f" and {len(gone) - SHOW} more" if len(gone) > SHOW else ""
            messages.append(
                f"qrels/{f.name} labels {len(gone)} id(s) this ingest no longer makes ({', '.join(gone[:SHOW])}{more}): "
                "update those labels, or the corpus will not load"
            )
    return messages
