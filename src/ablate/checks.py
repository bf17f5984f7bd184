"""Checked settings: a value of the expected type and range, else one :class:`~ablate.errors.ConfigError` naming
its key (``bm25.k1``, ``stats.bootstrap``, ``retrieval.window``), the bad value and what is valid.

The one place a setting's type and range are checked, below every layer: the job settings
(:mod:`ablate.runner.settings`) and every stage's constructor (re-exported by :mod:`ablate.stages.base` for stage
authors) call these, so a refusal reads the same wherever the value came from.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ablate.errors import ConfigError


def check_int(key: str, value: object, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer (not a bool) in ``[minimum, maximum]``, else a :class:`ConfigError` naming ``key``."""
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if ok and minimum is not None and value < minimum:  # type: ignore[operator]
        ok = False
    if ok and maximum is not None and value > maximum:  # type: ignore[operator]
        ok = False
    if not ok:
        raise ConfigError(key, value, f"it must be an integer{_range(minimum, maximum)}")
    return int(value)  # type: ignore[call-overload]


def check_float(
    key: str,
    value: object,
    minimum: float | None = None,
    maximum: float | None = None,
    hint: str = "",
) -> float:
    """A finite number (int or float, not a bool) in ``[minimum, maximum]``, else a :class:`ConfigError`."""
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    f = float(value) if ok else math.nan  # type: ignore[arg-type]
    if not math.isfinite(f) or (minimum is not None and f < minimum) or (maximum is not None and f > maximum):
        raise ConfigError(key, value, f"it must be a finite number{_range(minimum, maximum)}{hint}")
    return f


def check_choice(key: str, value: object, options: Sequence[str]) -> str:
    """One of ``options``, else a :class:`ConfigError` listing them."""
    if value not in options:
        raise ConfigError(key, value, f"valid options: {', '.join(options)}")
    return str(value)


def check_bool(key: str, value: object) -> bool:
    """``True`` or ``False`` (not 0, 1 or a string), else a :class:`ConfigError`."""
    if not isinstance(value, bool):
        raise ConfigError(key, value, "it must be true or false")
    return value


def check_str(key: str, value: object, allow_none: bool = False) -> str | None:
    """A non-empty string (or ``None`` when ``allow_none``), else a :class:`ConfigError`."""
    if value is None and allow_none:
        return None
    if not isinstance(value, str) or (not value.strip() and not allow_none):
        raise ConfigError(key, value, "it must be a non-empty string" + (" or null" if allow_none else ""))
    return value


def _range(lo: float | None, hi: float | None) -> str:
    if lo is not None and hi is not None:
        return f" in [{lo:g}, {hi:g}]"
    if lo is not None:
        return f" >= {lo:g}"
    if hi is not None:
        return f" <= {hi:g}"
    return ""
