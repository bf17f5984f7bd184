"""MLflow's limits on what one call may log (the batches that keep within them) and on the length of a value (a
longer one is cut, says so, and is kept whole as an artifact)."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import TypeVar

from ablate.record import cut_artifact, full_value_artifact, shortened

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


#: The longest tag and param values ablate logs. MLflow 3 keeps tags of up to 8,000 characters and params of up to
#: 6,000, older releases (and servers running them) tags of up to 5,000: 4,900 fits every one of them.
TAG_LIMIT, PARAM_LIMIT = 4900, 6000
#: ``(kind, key)`` of the values this process has said it cut (:func:`fit`): one warning per key, not one per run.
_SAID: set[tuple[str, str]] = set()


def fit(values: Mapping[str, str], kind: str, limit: int) -> tuple[dict[str, str], dict[str, str]]:
    """``values`` as MLflow can hold them, and ``{artifact: whole value}`` for each one cut to ``limit`` characters
    (:func:`ablate.record.shortened`: the cut value names its artifact). The first cut of a key in this process says
    so in one line on stderr; a value already cut (read back and logged again) is left as it is."""
    fitted, whole = dict(values), {}
    for key, value in values.items():
        if len(value) <= limit or cut_artifact(value) is not None:
            continue
        path = full_value_artifact(kind, key)
        fitted[key], whole[path] = shortened(value, limit, path), value
        if (kind, key) not in _SAID:
            _SAID.add((kind, key))
            print(
                f"warning: the {kind[:-1]} {key} is {len(value):,} characters, more than MLflow keeps ({limit:,}): it "
                f"is logged cut, and each run keeps the whole value as its artifact {path}",
                file=sys.stderr,
            )
    return fitted, whole
