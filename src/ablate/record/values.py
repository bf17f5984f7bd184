"""Values as MLflow keeps them: a typed param value as text, nested settings flattened to dotted keys, a JSON list
read back, and a value too long for MLflow cut with a pointer to the artifact holding it whole."""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import re
from collections.abc import Mapping
from typing import Any

from ablate.record.names import A_FULL_VALUES

#: Hex characters of sha256 added to a key made a file name: 8 (4 billion values) tell the keys of one run apart.
KEY_HASH_CHARS = 8
#: Hex characters of sha256 in a cut value's note: 12 keep two values that differ after the cut apart across runs.
VALUE_HASH_CHARS = 12
#: Floats below this in magnitude are exact integers (2^53, the float64 mantissa): only those are logged as integers.
FLOAT_EXACT_INTEGERS = 2**53


def full_value_artifact(kind: str, key: str) -> str:
    """The artifact holding the whole value of the param (``kind="params"``) or tag (``kind="tags"``) ``key``: the
    key as a file name (another character than a letter, digit, ``.``, ``_`` or ``-`` becomes ``_``, and a short
    hash of the key is added so two keys never share a file)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", key).lstrip(".") or "_"
    if safe != key:
        safe += "-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:KEY_HASH_CHARS]
    return f"{A_FULL_VALUES}/{kind}/{safe}.txt"


_CUT = re.compile(
    rf" \[cut from \d+ characters, sha256 [0-9a-f]{{{VALUE_HASH_CHARS}}}; whole value: artifact (\S+)\]\Z"
)


def shortened(value: str, limit: int, artifact: str) -> str:
    """``value`` cut to ``limit`` characters, ending with where its whole value is and a hash of it (two values that
    differ after the cut stay different)."""
    sha = hashlib.sha256(value.encode("utf-8")).hexdigest()[:VALUE_HASH_CHARS]
    note = f" [cut from {len(value)} characters, sha256 {sha}; whole value: artifact {artifact}]"
    return value[: max(0, limit - len(note))] + note


def cut_artifact(value: str) -> str | None:
    """The artifact holding the whole value when ``value`` was cut by :func:`shortened`, else None."""
    m = _CUT.search(value)
    return m.group(1) if m else None


def json_list(value: Any) -> list[str]:
    """A param holding a JSON list (``["bm25", "dense"]``) as a list; a bare string as one item."""
    if value is None or value == "":
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    try:
        v = json.loads(str(value))
    except ValueError:
        return [str(value)]
    return [str(x) for x in v] if isinstance(v, list) else [str(v)]


def param_value(v: Any) -> str:
    """How a typed param value is written: ``null``, JSON for lists and mappings, an integral float as the integer
    the user wrote (``rrf.k=60`` is checked as the float 60.0 but logged ``60``, so the MLflow filter
    ``params.`rrf.k` = '60'`` finds it; fingerprints keep the typed value), ``str`` otherwise. A value too long for
    MLflow is cut where it is logged (:mod:`ablate.tracking.limits`), with its whole value kept as an artifact."""
    if v is None:
        return "null"
    if isinstance(v, numbers.Real) and not isinstance(v, numbers.Integral):
        f = float(v)
        if math.isfinite(f) and f.is_integer() and abs(f) < FLOAT_EXACT_INTEGERS:
            return str(int(f))
    if isinstance(v, (list, tuple, dict)):
        return json.dumps(
            list(v) if isinstance(v, tuple) else v, ensure_ascii=False, sort_keys=isinstance(v, dict)
        )
    return str(v)


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}`` (lists stay values)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping):
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out
