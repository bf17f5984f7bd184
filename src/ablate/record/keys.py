"""Names as MLflow keys: a library metric key as a tracked metric name (``ndcg@10`` -> ``ndcg_at_10``), a param key,
a slice's and a funnel stage's metric names, and the funnel read back from a run's metrics."""

from __future__ import annotations

import re
from collections.abc import Mapping

_BAD = re.compile(r"[^A-Za-z0-9_\-. /:]")


def metric_key(key: str) -> str:
    """The tracked name of a library metric key: ``ndcg@10`` -> ``ndcg_at_10``, ``slice_x/ndcg@10`` ->
    ``slice_x/ndcg_at_10`` (MLflow refuses ``@``; any other refused character becomes ``_``)."""
    return _BAD.sub("_", key.replace("@", "_at_"))


def param_key(key: str) -> str:
    return _BAD.sub("_", key)


def slice_metric(tag: str, metric: str) -> str:
    """``slice_<tag>/<metric>`` (parentheses dropped from the tag)."""
    return f"slice_{tag.replace('(', '').replace(')', '')}/{metric}"


FUNNEL_PREFIX = "funnel/"


def funnel_metric(position: int, stage: str, what: str) -> str:
    """``funnel/<position>_<stage>_<what>``; the position keeps stage order. ``what``: ``recall`` (the whole list),
    ``depth`` (its length), ``topkrecall`` (recall in its first ``topk``), ``topk``."""
    return f"{FUNNEL_PREFIX}{position}_{stage}_{what}"


_FUNNEL_KEY = re.compile(re.escape(FUNNEL_PREFIX) + r"(\d+)_(.+)_(recall|depth|topkrecall|topk)")


def _funnel_rows(metrics: Mapping[str, float]) -> list[tuple[str, dict[str, float]]]:
    found: dict[tuple[int, str], dict[str, float]] = {}
    for key, value in metrics.items():
        m = _FUNNEL_KEY.fullmatch(key)
        if m:
            found.setdefault((int(m.group(1)), m.group(2)), {})[m.group(3)] = float(value)
    return [(stage, v) for (_, stage), v in sorted(found.items())]


def parse_funnel(metrics: Mapping[str, float]) -> list[tuple[str, float, float]]:
    """``[(stage, recall, depth), ...]`` in stage order from a run's ``funnel/*`` metrics (NaN where not logged)."""
    nan = float("nan")
    return [(stage, v.get("recall", nan), v.get("depth", nan)) for stage, v in _funnel_rows(metrics)]


def parse_funnel_head(metrics: Mapping[str, float]) -> list[tuple[str, float, float]]:
    """``[(stage, recall in the first topk, topk), ...]`` in stage order (NaN where not logged)."""
    nan = float("nan")
    return [(stage, v.get("topkrecall", nan), v.get("topk", nan)) for stage, v in _funnel_rows(metrics)]
