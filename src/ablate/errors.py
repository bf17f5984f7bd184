"""User-facing errors: one clear message naming the file, line or value and the fix.

Library code raises :class:`AblateError` (or a subclass) for anything a user can correct; entry points print
``error: <message>`` on one line and exit with status 2, without a traceback.
"""

from __future__ import annotations


class AblateError(Exception):
    """A problem the user can fix. ``str(err)`` is the whole message."""


class InputError(AblateError):
    """Malformed or inconsistent input files (corpus, queries, qrels, runs)."""

    def __init__(self, where: str, problem: str, fix: str) -> None:
        self.where, self.problem, self.fix = where, problem, fix
        super().__init__(f"{where}: {problem}. Fix: {fix}")


class ConfigError(AblateError):
    """An invalid setting: names the key, the bad value and the valid options."""

    def __init__(self, key: str, value: object, options: str) -> None:
        self.key, self.value = key, value
        super().__init__(f"{key}={value!r} is not valid; {options}")


class ModelUnavailableError(AblateError):
    """A model that is neither a local path nor in the offline Hugging Face cache."""
