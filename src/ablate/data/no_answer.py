"""Questions a run scores as no-answer, said before it runs.

A question whose labels in a split hold no row of grade >= the relevance level is a no-answer question: it is scored
apart (:mod:`ablate.evaluation.abstention`; categories ``no_answer`` and ``idcg_zero`` in
:mod:`ablate.evaluation.rules`), where refusing is right. A question of ``queries.jsonl`` with no row in any labels
file and no ``split`` is in no split and never runs. Both follow from what a user wrote, or forgot to write, so
:func:`no_answer_line` says which questions they are and how to mark them otherwise, in one line, for a corpus with
one labels file: a user's own first labels (an exploratory pilot, :func:`ablate.data.corpus.pilot_split`). Shipped
sets, split into dev and test, hold their no-answer questions and spare questions on purpose and stay quiet.
"""

from __future__ import annotations

from collections.abc import Sequence

from ablate.data.chunk_list import CHUNKS_FILE
from ablate.data.corpus import pilot_split
from ablate.data.snapshot import Snapshot

#: Question ids a line names before it says "and N more".
SHOWN = 5


def _ids(qids: Sequence[str]) -> str:
    more = f" and {len(qids) - SHOWN} more" if len(qids) > SHOWN else ""
    return ", ".join(qids[:SHOWN]) + more


def no_answer_line(snapshot: Snapshot, split: str, relevance_level: int = 1) -> str | None:
    """One line naming the questions of ``split`` scored as no-answer and the questions no split holds, with how to
    mark each otherwise; ``None`` when there are none or the corpus is not a pilot (see the module docstring)."""
    if pilot_split(snapshot.root) is None:
        return None
    qrels = snapshot.split_qrels(split)
    none = [q for q in snapshot.split_qids(split) if not qrels.positives(q, relevance_level)]
    held = {q for qids in snapshot.splits.values() for q in qids}
    loose = [q for q in snapshot.queries if q not in held]
    if not none and not loose:
        return None
    unit = "chunk id" if snapshot.qrels_unit == "chunk" else "document id"
    listed = f" ({CHUNKS_FILE} lists them)" if (snapshot.root / CHUNKS_FILE).is_file() else ""
    parts = []
    if none:
        parts.append(
            f"{len(none)} question(s) of split {split!r} have no label of grade >= {relevance_level} "
            f"({_ids(none)}): they are scored as no-answer questions, apart (refusing is right); if one has an "
            f"answer, give it a row of grade 2 naming the {unit} that answers it{listed}"
        )
    if loose:
        parts.append(
            f"{len(loose)} question(s) of queries.jsonl are in no labels file and never run ({_ids(loose)}): give "
            "each a row: grade 2 naming what answers it, or grade-0 rows only for a no-answer question"
        )
    return "note: " + "; ".join(parts)
