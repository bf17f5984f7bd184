"""Read TREC run files (qrels: :func:`ablate.data.qrels.read_qrels`, re-exported here).

TREC run: ``qid Q0 docid rank score tag`` (whitespace separated). Each line becomes a hit with ``chunk_id = doc_id =
docid``. Like trec_eval, the rank column is ignored: results are ordered by score, descending, and ties are broken by
a declared rule (:data:`TIE_RULES`): ``docid-asc`` (default, the same as :data:`ablate.data.types.TIE_RULE`) or
``trec_eval`` (docid descending, what trec_eval does). The rule is stored in ``run.meta["tie_rule"]``. Refused with
:class:`ablate.errors.InputError` naming ``path:line``: a malformed line, and a docid listed twice for one query
(trec_eval refuses such a file too: which of the two scores counts is undefined, and dropping one silently would
score a run other than the file). A file with no result line is refused as a whole.
"""

from __future__ import annotations

import math
from pathlib import Path

from ablate.data.qrels import read_qrels, read_text_lines
from ablate.data.types import Hit, Run
from ablate.errors import ConfigError, InputError

__all__ = ["TIE_RULES", "read_qrels", "read_trec_run"]

TIE_RULES: dict[str, str] = {
    "docid-asc": "score desc, then docid asc (rank column ignored)",
    "trec_eval": "score desc, then docid desc, as trec_eval (rank column ignored)",
}


def read_trec_run(path: str | Path, ties: str = "docid-asc", name: str | None = None) -> Run:
    """A TREC run file as a :class:`~ablate.types.Run` ordered by ``ties`` (see :data:`TIE_RULES`)."""
    if ties not in TIE_RULES:
        raise ConfigError("ties", ties, f"valid options: {', '.join(TIE_RULES)}")
    lines, sha = read_text_lines(path)
    per_query: dict[str, list[tuple[str, float]]] = {}
    seen: dict[tuple[str, str], int] = {}
    tag = None
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        f = line.split()
        if len(f) != 6:
            raise InputError(
                f"{path}:{n}",
                f"expected 6 fields 'qid Q0 docid rank score tag', found {len(f)}",
                "write one result per line as 'qid Q0 docid rank score tag'",
            )
        qid, _, docid, _, score_s, tag_s = f
        try:
            score = float(score_s)
        except ValueError:
            score = math.nan
        if not math.isfinite(score):
            raise InputError(
                f"{path}:{n}", f"score {score_s!r} is not a finite number", "write a numeric score"
            )
        first = seen.setdefault((qid, docid), n)
        if first != n:
            raise InputError(
                f"{path}:{n}",
                f"query {qid!r} lists docid {docid!r} again (first at line {first})",
                "keep one line per query and docid (trec_eval refuses duplicates too): drop the repeated line",
            )
        per_query.setdefault(qid, []).append((docid, score))
        tag = tag or tag_s
    if not per_query:
        raise InputError(
            str(path),
            "holds no result line, so there is nothing to score",
            "give the run file its results, one per line as 'qid Q0 docid rank score tag'",
        )
    results: dict[str, list[Hit]] = {}
    for qid, rows in per_query.items():
        rows.sort(key=lambda r: r[0], reverse=(ties == "trec_eval"))
        rows.sort(key=lambda r: -r[1])  # stable: the docid order breaks score ties
        results[qid] = [Hit(d, d, s) for d, s in rows]
    meta: dict[str, object] = {
        "source": str(path),
        "source_sha256": sha,
        "tie_rule": TIE_RULES[ties],
    }
    return Run(name or tag or Path(path).stem, results, meta)
