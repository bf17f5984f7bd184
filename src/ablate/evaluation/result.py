"""The result of evaluating one run (:class:`EvalResult`): per-query metrics, means, query accounting, the settings
and rules it was scored by, its JSON form, and the unjudged export (every unjudged result within max K, as a
labelling CSV)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ablate.data.types import Hit
from ablate.evaluation.settings import EvalSettings
from ablate.evaluation.units import ranked_units
from ablate.tables import text_csv, unquoted_csv


@dataclass
class UnjudgedSource:
    """What the unjudged export needs, captured at evaluation time: references to the run's hit lists of the
    queries that have unjudged results (runs are never mutated once built; see docs/architecture.md)."""

    unit: str
    budget: str
    depth: int
    qids: Sequence[str]
    lists: Sequence[Sequence[Hit]]
    judged: Sequence[Mapping[str, int]]
    which: np.ndarray  # indices of the queries with unjudged results in the window

    @property
    def rows(self) -> list[tuple[str, Sequence[Hit], Mapping[str, int]]]:
        return [(self.qids[i], self.lists[i], self.judged[i]) for i in self.which.tolist()]


_EXPORT_COLUMNS = ["qid", "unit_id", "rank", "chunk_id", "doc_id"]


@dataclass
class EvalResult:
    """Per-query metrics, means over answerable queries, query accounting and the unjudged export of one run."""

    per_query: pd.DataFrame  # index qid; category, status, n_relevant, n_results, n_units, <metric>@<k>...
    means: dict[str, float]  # over the scored answerable queries; rr is reported as mrr
    accounting: dict[str, Any]  # counts + "by_category" + "rules"
    settings: EvalSettings
    unit: str  # the resolved evaluation unit
    tie_rule: str
    run_name: str = ""
    _source: UnjudgedSource | None = field(default=None, repr=False, compare=False)
    _unjudged: pd.DataFrame | None = field(default=None, repr=False, compare=False)

    @property
    def unjudged(self) -> pd.DataFrame:
        """Every unjudged result within max K (on the full, uncondensed ranking): ``qid, unit_id, rank, chunk_id,
        doc_id``, where ``rank`` is the position in the deduplicated unit list and ``chunk_id``/``doc_id`` belong to
        the unit's first result. Ready to export as a labelling CSV. Built on first access."""
        if self._unjudged is None:
            df = pd.DataFrame(self._unjudged_rows(), columns=_EXPORT_COLUMNS)
            df["rank"] = df["rank"].astype("int64")
            self._unjudged = df
        return self._unjudged

    def unjudged_csv(self) -> str:
        """``self.unjudged.to_csv(index=False)``: the same text, written straight from the rows when no field needs
        quoting (no DataFrame built: a sweep writes this file for every run; experiments/results/bench_eval.md times
        both ways), else by pandas."""
        if self._unjudged is None:
            rows = self._unjudged_rows()
            try:  # ids are strings (a join raises otherwise); ranks are ints from enumerate
                lines = [",".join((q, u, str(r), c, d)) for q, u, r, c, d in rows]
            except TypeError:
                lines = []
            text = ",".join(_EXPORT_COLUMNS) + "\n" + "\n".join(lines) + "\n"
            if lines and unquoted_csv(text, len(lines), len(_EXPORT_COLUMNS)):
                return text
        return text_csv(self.unjudged)

    def _unjudged_rows(self) -> list[tuple[str, str, int, str, str]]:
        rows: list[tuple[str, str, int, str, str]] = []
        src = self._source
        if src is not None:
            for qid, hits, judged in src.rows:
                ids = [h.doc_id for h in hits] if src.unit == "doc" else [h.chunk_id for h in hits]
                units, first = ranked_units(ids, src.depth, src.budget)
                for rank, (u, p) in enumerate(zip(units, first, strict=True), start=1):
                    if u not in judged:
                        rows.append((qid, u, rank, hits[p].chunk_id, hits[p].doc_id))
        return rows

    def to_dict(self, per_query: bool = False) -> dict[str, Any]:
        """One flat object: every mean under its canonical key, plus accounting, settings, unit and tie rule. NaN
        becomes ``None``."""
        d: dict[str, Any] = dict(self.means)
        d.update(
            {
                "accounting": self.accounting,
                "settings": self.settings.as_dict(),
                "unit": self.unit,
                "tie_rule": self.tie_rule,
                "run": self.run_name,
            }
        )
        if per_query:
            pq = self.per_query.reset_index()
            d["per_query"] = pq.to_dict(orient="records")
        return _json_safe(d)

    def to_json(self, per_query: bool = False, indent: int | None = None) -> str:
        return json.dumps(
            self.to_dict(per_query=per_query), indent=indent, ensure_ascii=False, allow_nan=False
        )


def _json_safe(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        f = float(x)
        return None if math.isnan(f) or math.isinf(f) else f
    return x
