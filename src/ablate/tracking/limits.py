"""MLflow's limits on what one call may log, and the batches that keep within them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")


#: MLflow's ``log_batch`` limits: params and tags per call, metrics per call, entities (all three) per call.
MAX_PARAMS_TAGS, MAX_METRICS, MAX_ENTITIES = 100, 1000, 1000


def batches(
    params: Sequence[T], metrics: Sequence[T], tags: Sequence[T]
) -> Iterator[tuple[list[T], list[T], list[T]]]:
    """Split params, metrics and tags into ``log_batch`` calls within MLflow's limits (:data:`MAX_PARAMS_TAGS`,
    :data:`MAX_METRICS`, :data:`MAX_ENTITIES`), in order, every item exactly once, as few calls as the limits
    allow; nothing to log -> no call."""
    ip = im = it = 0
    while ip < len(params) or im < len(metrics) or it < len(tags):
        bp = list(params[ip : ip + MAX_PARAMS_TAGS])
        bt = list(tags[it : it + MAX_PARAMS_TAGS])
        room = min(MAX_METRICS, MAX_ENTITIES - len(bp) - len(bt))
        bm = list(metrics[im : im + room])
        ip, im, it = ip + len(bp), im + len(bm), it + len(bt)
        yield bp, bm, bt
