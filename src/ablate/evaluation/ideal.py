"""Ideal lists: each query's relevant grades sorted descending and cut at max K, the denominator of nDCG (rule
``ndcg`` of :mod:`ablate.evaluation.rules`), with its category and relevant count read from the same labels."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ablate.evaluation.placement import UNJUDGED

#: Up to this many relevant grade levels the ideal lists are built from per-level counts (no sort).
_IDEAL_COUNTED = 16


def ideal_lists(
    n_labels: np.ndarray, flat: Sequence[int] | np.ndarray, level: int, depth: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Query categories (codes into :data:`~ablate.evaluation.accounting.CATEGORIES`), relevant counts and the
    ideal (descending) relevant grades cut at ``depth``, :data:`~ablate.evaluation.placement.UNJUDGED` past each
    query's relevant count, from each query's label count and all label grades in query order."""
    nq = len(n_labels)
    grades = np.asarray(flat, dtype=np.int64)
    rows = np.repeat(np.arange(nq), n_labels)
    keep = grades >= level
    grades, rows = grades[keep], rows[keep]
    n_rel = np.bincount(rows, minlength=nq).astype(np.int64)
    width = max(1, min(depth, int(n_rel.max()) if nq else 1))
    top = int(grades.max()) if len(grades) else level
    span = top - level + 1
    if span <= _IDEAL_COUNTED:
        # Few grade levels: count each query's labels per level (column 0 = the top grade); the ideal list's
        # position j holds the grade whose cumulative count first exceeds j.
        counts = np.bincount(rows * span + (top - grades), minlength=nq * span).reshape(nq, span)
        cum = np.cumsum(counts, axis=1)
        pos = np.arange(width)
        below = np.zeros((nq, width), dtype=np.int32)
        for c in range(span - 1):
            below += cum[:, c, None] <= pos
        ideal = np.where(pos < n_rel[:, None], top - below, UNJUDGED).astype(np.int32)
    else:
        if nq * span < 1 << 62:  # one sort of row * span + (top - grade): rows ascending, grades descending
            packed = np.sort(rows * span + (top - grades))
            rows, grades = packed // span, top - packed % span
        else:
            order = np.lexsort((-grades, rows))
            grades, rows = grades[order], rows[order]
        starts = np.concatenate(([0], np.cumsum(n_rel)[:-1])) if nq else np.zeros(0, dtype=np.int64)
        cols = np.arange(len(rows)) - starts[rows] if len(rows) else np.zeros(0, dtype=np.int64)
        keep = cols < depth
        ideal = np.full((nq, width), UNJUDGED, dtype=np.int32)
        ideal[rows[keep], cols[keep]] = grades[keep]
    category = np.where(n_labels == 0, 1, np.where(n_rel == 0, 2, 0))
    return category, n_rel, ideal
