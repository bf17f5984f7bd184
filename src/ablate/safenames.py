"""Names read from data that become file or folder names, and paths built from data kept inside their folder.

A corpus's ``name`` (``corpus.yaml``, or the ``corpus.name`` setting) is a folder name (``python -m ablate.split``'s
default output), part of a file name it reads (``conf/corpus/<name>.yaml``) and an MLflow experiment name. It must
be a *plain name*: one path component that cannot walk anywhere (:func:`name_problem`). Every path ablate builds
from data also goes through :func:`inside`, which refuses a result outside its base folder, so a name that slipped
past a check still writes nothing elsewhere.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

MAX_NAME = 100
PLAIN_NAME_RULE = (
    f"a plain name: 1 to {MAX_NAME} characters, letters (any script), digits, spaces and punctuation, but no '/' or "
    "'\\', no '..', not starting with '.' or a space, no control characters"
)


def name_problem(name: str) -> str | None:
    """Why ``name`` is not a plain name (see :data:`PLAIN_NAME_RULE`), or ``None`` when it is one."""
    if not name:
        return "it is empty"
    if len(name) > MAX_NAME:
        return f"it is {len(name)} characters long (at most {MAX_NAME})"
    if "/" in name or "\\" in name:
        return "it contains a path separator"
    if ".." in name:
        return "it contains '..'"
    if name[0] == ".":
        return "it starts with '.'"
    if name != name.strip():
        return "it starts or ends with white space"
    bad = next((c for c in name if unicodedata.category(c).startswith("C")), None)
    if bad is not None:
        return f"it contains the control or invisible character U+{ord(bad):04X}"
    return None


def inside(base: Path, *parts: str) -> Path:
    """``base / parts`` when the result stays inside ``base`` (compared lexically, ``..`` resolved), else
    :class:`ValueError`: the last guard of a path built from data (callers check names first and say why)."""
    root = Path(os.path.normpath(os.path.abspath(base)))
    target = Path(os.path.normpath(os.path.abspath(root.joinpath(*parts))))
    if target == root or root not in target.parents:
        raise ValueError(f"{'/'.join(parts)!r} leads outside {root}")
    return target
