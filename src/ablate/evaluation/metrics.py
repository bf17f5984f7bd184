"""Metric math: hit, recall, RR, nDCG, judged share, completeness and unjudged count per query at every K, as prefix
sums over a placed block (:mod:`ablate.evaluation.placement`) read at each K's window, and their means over the
scored answerable queries (the rules of :mod:`ablate.evaluation.rules`)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from ablate.evaluation.placement import UNJUDGED, Block
from ablate.evaluation.settings import EvalSettings

#: Metrics computed per query at every K, in column order. ``rr`` is averaged into ``mrr``.
METRICS: tuple[str, ...] = ("hit", "recall", "rr", "ndcg", "judged", "complete", "unjudged")
#: Metrics only defined for answerable queries (NaN on the others).
QUALITY_METRICS: tuple[str, ...] = ("hit", "recall", "rr", "ndcg", "complete")


def _take(cum: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``cum[q, w[q, c] - 1]`` (a prefix sum over the first w[q, c] positions), 0 where w[q, c] == 0; ``w`` is
    queries x K (or one value per query)."""
    r = np.arange(cum.shape[0])
    if w.ndim == 2:
        r = r[:, None]
    vals = cum[r, np.maximum(w - 1, 0)]
    return np.where(w > 0, vals, 0)


def gains(grades: np.ndarray, level: int, gain: str) -> np.ndarray:
    """Gain per position, the one nDCG gain (rule ``ndcg``): 2^g - 1 (exponential) or g (linear) for relevant
    grades (g >= level), else 0. Both the ranking's DCG and the ideal list's IDCG take it."""
    rel = grades >= level
    g = np.where(rel, grades, 0).astype(np.float64)
    return np.exp2(g) - 1.0 if gain == "exponential" else g


def block_metrics(
    block: Block,
    category: np.ndarray,
    n_rel: np.ndarray,
    ideal: np.ndarray,
    settings: EvalSettings,
) -> dict[str, np.ndarray]:
    """``metric -> (queries x K)`` values of one block: prefix sums along the deduplicated list, read at each K's
    window (column c is ``ks[c]``)."""
    level, ks = settings.relevance_level, settings.ks
    g = block.scoring.grades
    width = g.shape[1]
    disc = 1.0 / np.log2(np.arange(2, width + 2, dtype=np.float64))
    rel = g >= level
    count = np.uint8 if width < 256 else np.int32  # counts of positions: the narrowest type that holds them
    cum_rel = np.cumsum(rel, axis=1, dtype=count)
    cum_dcg = np.cumsum(gains(g, level, settings.gain) * disc, axis=1)
    first_rel = np.where(rel.any(axis=1), rel.argmax(axis=1), width)
    iwidth = ideal.shape[1]
    idisc = 1.0 / np.log2(np.arange(2, iwidth + 2, dtype=np.float64))
    cum_idcg = np.cumsum(gains(ideal, level, settings.gain) * idisc, axis=1)
    win = block.scoring.windows
    win_full = block.full.windows  # judged statistics are on the full ranking
    cum_judged = np.cumsum(block.full.grades != UNJUDGED, axis=1, dtype=count)

    answerable = (category == 0)[:, None]
    n_rel_f = n_rel.astype(np.float64)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_first = 1.0 / (first_rel + 1.0)
    hits_k = _take(cum_rel, win).astype(np.float64)
    dcg = _take(cum_dcg, win)
    idcg = cum_idcg[:, np.minimum(np.asarray(ks), iwidth) - 1]
    unj = (win_full - _take(cum_judged, win_full)).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        recall = hits_k / n_rel_f
        ndcg = dcg / idcg
        judged_share = np.where(win_full > 0, 1.0 - unj / win_full, 1.0)
    vals = {
        "hit": (hits_k > 0).astype(np.float64),
        "recall": recall,
        "rr": np.where(first_rel[:, None] < win, inv_first[:, None], 0.0),
        "ndcg": ndcg,
        "judged": judged_share,
        "complete": (hits_k >= n_rel_f).astype(np.float64),
        "unjudged": unj,
    }
    for m in QUALITY_METRICS:
        vals[m] = np.where(answerable, vals[m], np.nan)
    return vals


def mean_key(metric: str, k: int) -> str:
    """Canonical key of a mean: ``rr`` is reported as ``mrr``."""
    return f"{'mrr' if metric == 'rr' else metric}@{k}"


def means_of(per_query: pd.DataFrame, ks: Iterable[int]) -> dict[str, float]:
    """Means over the rows of ``per_query`` that are scored answerable queries (``category == "answerable"`` and
    metrics not NaN, i.e. not excluded as missing). Shared by :func:`~ablate.evaluation.retrieval.evaluate` and the
    slices."""
    ks = list(ks)
    scored = per_query[(per_query["category"] == "answerable") & per_query[f"hit@{ks[0]}"].notna()]
    out: dict[str, float] = {}
    for m in METRICS:
        for k in ks:
            col = scored[f"{m}@{k}"].to_numpy(dtype=float)
            out[mean_key(m, k)] = float(col.mean()) if col.size else float("nan")
    return out
