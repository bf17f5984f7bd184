"""The one redaction of secrets (an API key, a tracking password): every form a text can carry one in.

Text that comes from outside (a provider's error body, an answer, a header it echoes back, an exception's message)
goes through :func:`redact` before it is stored anywhere (answers.csv, the generation cache, tags, params, artifacts,
logs) or printed. Every stretch of the text that *decodes* to 6 or more consecutive characters of a secret is
replaced by ``[redacted]``: the whole key or any part of it (a server that cuts what it echoes, its first 8 or last 20
characters), each character written

* as itself;
* JSON- or Python-escaped: ``\\u002d``, ``\\U0000002d``, ``\\x2d`` (hex in either case), ``\\/`` or any ``\\c``
  (a backslash before the character), with any number of backslashes (an escape escaped again);
* URL-encoded: ``%2D`` / ``%2d`` (its UTF-8 bytes; ``%25`` standing for ``%`` any number of times), ``+`` for a space;
* as an HTML character reference: ``&#45;``, ``&#x2d;``;

and any mix of these, character by character. Secrets shorter than :data:`MIN_PART` characters are redacted only
whole.

A module that holds a secret :func:`remember` s it (the OpenAI generator its key): :func:`redact` then redacts it too
wherever it is called without it, so the failure tag and the console's error line are redacted as a last guard
even for a text that did not pass the module's own redaction.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

REDACTED = "[redacted]"
#: The shortest part of a secret that is redacted on its own (a shorter run of its characters is ordinary text).
MIN_PART = 6

_BACKSLASH = re.compile(
    r"\\+(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|x([0-9A-Fa-f]{2})|(.))",
    re.DOTALL,
)
_PERCENT = re.compile(r"%(?:25)*([0-9A-Fa-f]{2})")
_ENTITY = re.compile(r"&#(?:[xX]([0-9A-Fa-f]{1,6})|([0-9]{1,7}));")


def _chr(code: int) -> str | None:
    try:
        return chr(code)
    except (ValueError, OverflowError):
        return None


def _percent_char(text: str, pos: int) -> list[tuple[str, int]]:
    """The characters a run of ``%XX`` bytes starting at ``pos`` decodes to (one UTF-8 character: 1 to 4 bytes)."""
    out: list[tuple[str, int]] = []
    data, end = b"", pos
    for _ in range(4):
        m = _PERCENT.match(text, end)
        if not m:
            break
        data, end = data + bytes([int(m.group(1), 16)]), m.end()
        try:
            out.append((data.decode("utf-8"), end - pos))
            break
        except UnicodeDecodeError:
            continue
    return out


def _decodings(text: str, pos: int) -> list[tuple[str, int]]:
    """Every (character, length) the text at ``pos`` may stand for."""
    c = text[pos]
    out = [(c, 1)]
    if c == "\\":
        m = _BACKSLASH.match(text, pos)
        if m:
            hexa = m.group(1) or m.group(2) or m.group(3)
            ch = _chr(int(hexa, 16)) if hexa else m.group(4)
            if ch is not None:
                out.append((ch, m.end() - pos))
    elif c == "%":
        out.extend(_percent_char(text, pos))
    elif c == "+":
        out.append((" ", 1))
    elif c == "&":
        m = _ENTITY.match(text, pos)
        if m:
            ch = _chr(int(m.group(1), 16) if m.group(1) else int(m.group(2)))
            if ch is not None:
                out.append((ch, m.end() - pos))
    return out


def _spans(text: str, secret: str) -> list[tuple[int, int]]:
    """The spans of ``text`` that decode to a part of ``secret`` (at least :data:`MIN_PART` characters, or the whole
    of a shorter secret), longest first at each start."""
    need = min(MIN_PART, len(secret))
    where: dict[str, list[int]] = {}
    for j, ch in enumerate(secret):
        where.setdefault(ch, []).append(j)
    spans: list[tuple[int, int]] = []
    reach = 0  # text before this is already inside a span
    for i in range(len(text)):
        best = -1
        for ch, n in _decodings(text, i):
            for j in where.get(ch, ()):
                end = _extend(text, secret, i + n, j + 1, need - 1)
                best = max(best, end)
        if best > i and best > reach:
            spans.append((i, best))
            reach = best
    return spans


def _extend(text: str, secret: str, pos: int, k: int, more: int) -> int:
    """How far the text from ``pos`` goes on matching ``secret`` from ``k`` (every decoding tried): the end of the
    longest match once at least ``more`` further characters matched, else -1."""
    states = {pos}
    best, matched = -1, 0
    while states:
        if matched >= more:
            best = max(best, max(states))
        if k >= len(secret):
            break
        want = secret[k]
        states = {p + n for p in states if p < len(text) for ch, n in _decodings(text, p) if ch == want}
        k += 1
        matched += 1
    return best


_REMEMBERED: set[str] = set()


def remember(secret: str | None) -> None:
    """Redact ``secret`` in every later :func:`redact` of this process, also where it is not passed."""
    if secret:
        _REMEMBERED.add(secret)


def forget() -> None:
    """Forget every :func:`remember` ed secret (a long-lived process that is done with its provider: a test
    session, where one test's made-up key must not redact another test's ordinary text)."""
    _REMEMBERED.clear()


def redact(text: str, secrets: str | Iterable[str | None] | None = None) -> str:
    """``text`` with every form of every secret in ``secrets`` and every :func:`remember` ed one (see the module
    docstring) replaced by :data:`REDACTED`. Empty and missing secrets are ignored."""
    if isinstance(secrets, str) or secrets is None:
        secrets = [secrets]
    keys = sorted({s for s in secrets if s} | _REMEMBERED)
    if not keys or not text:
        return text
    spans: list[tuple[int, int]] = []
    for key in keys:
        spans.extend(_spans(text, key))
    if not spans:
        return text
    spans.sort()
    merged: list[list[int]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    out, last = [], 0
    for a, b in merged:
        out.append(text[last:a])
        out.append(REDACTED)
        last = b
    out.append(text[last:])
    return "".join(out)
