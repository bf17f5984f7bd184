"""Version conflicts: how often a ranking puts an out-of-force version of the gold evidence above the one in force.

``superseded_first@K`` (per question, 0 or 1; NaN where it is not defined):

* A question is **in conflict** when its *raw* labels (before the date rule of :mod:`ablate.runner.access`) give a
  relevant grade to a unit whose document is out of force on the question's date: the labels say "this clause
  answers the question", the date says "not this version". Undated questions and questions without such a unit are
  not in conflict (NaN) and never enter the mean; nor do questions left without in-force evidence (no-answer on their
  date: scored apart, like every no-answer question).
* In the top-K window of the deduplicated unit list (the run's budget and dedup rules, on the full ranking),
  ``superseded_first@K = 1`` when the first out-of-force relevant unit is ranked above every in-force relevant unit (an
  in-force unit outside the window counts as below it), else 0. A window with no out-of-force relevant unit is 0.
* The mean is over the questions in conflict that are in the run's query set; a question missing from the run scores
  0 (nothing was ranked first).

Under ``versions.policy=in_force`` out-of-force documents are filtered inside retrieval, so the value is 0 by
construction: the metric measures what ``versions.policy=all`` costs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ablate.data.types import Qrels, Run
from ablate.evaluation.units import judgements_at, ranked_units

RULE = (
    "superseded_first@K = 1 when, in the top-K window of the deduplicated unit list (the run's budget; full "
    "ranking), a unit relevant by the raw labels whose document is out of force on the question's date ranks above "
    "every in-force relevant unit; defined only for dated questions whose raw labels make such a unit relevant "
    "(questions in conflict) that still have in-force evidence (answerable on their date), NaN otherwise; mean over "
    "those questions"
)


def superseded_first(
    run: Run,
    raw_qrels: Qrels,
    out_of_force: Mapping[str, frozenset[str]],
    qids: Sequence[str],
    ks: Sequence[int],
    unit: str,
    budget: str,
    chunk_to_doc: Mapping[str, str],
    relevance_level: int = 1,
) -> pd.DataFrame:
    """Per-question ``superseded_first@K`` for every K in ``ks`` (index: ``qids``). ``out_of_force``: question id ->
    documents out of force on its date (absent or empty: undated, or nothing out of force)."""
    judg = judgements_at(raw_qrels, unit, chunk_to_doc)
    depth = max(ks)
    rows = np.full((len(qids), len(ks)), np.nan)
    for i, qid in enumerate(qids):
        off = out_of_force.get(qid)
        if not off:
            continue
        rel = {u for u, g in judg.get(qid, {}).items() if g >= relevance_level}
        stale = {u for u in rel if (u if unit == "doc" else chunk_to_doc[u]) in off}
        if not stale:
            continue
        current = rel - stale
        hits = run.results.get(qid, [])
        ids = [h.doc_id for h in hits] if unit == "doc" else [h.chunk_id for h in hits]
        units, first = ranked_units(ids, depth, budget)
        for c, k in enumerate(ks):
            window = (
                [u for u, p in zip(units, first, strict=True) if p < k] if budget == "chunks" else units[:k]
            )
            first_stale = next((j for j, u in enumerate(window) if u in stale), None)
            first_current = next((j for j, u in enumerate(window) if u in current), len(window))
            rows[i, c] = 1.0 if first_stale is not None and first_stale < first_current else 0.0
    return pd.DataFrame(
        rows,
        index=pd.Index(list(qids), name="qid", dtype=object),
        columns=[f"superseded_first@{k}" for k in ks],
    )
