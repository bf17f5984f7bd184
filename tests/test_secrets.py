"""The one redaction of secrets (:mod:`ablate.secrets`), as properties over keys and the forms a text carries them in:
the whole key or any part of it 6 characters or longer, each character written as itself, JSON-/backslash-escaped,
URL-encoded (upper or lower hex, ``+`` for a space) or as an HTML character reference, mixed character by character,
never survives; a text holding no such part is left as it was."""

from __future__ import annotations

import html
import json
import re
import urllib.parse

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ablate.secrets import REDACTED, redact

#: What an API key is made of (letters, digits and the punctuation keys use), and a few characters beyond ASCII.
KEY_CHARS = st.sampled_from(
    list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./+=:~ ") + ["é", "ß", "€", "𝔘"]
)
keys = st.text(KEY_CHARS, min_size=6, max_size=64)
#: Text around a key: anything, including the characters escapes are made of.
noise = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


def _encode(ch: str, how: int, upper: bool) -> str:
    """``ch`` written one way: 0 itself, 1 ``\\uXXXX``, 2 ``\\xXX`` (or ``\\U`` beyond a byte), 3 ``\\c``,
    4 ``%XX`` of its UTF-8 bytes, 5 a JSON escape twice (``\\\\uXXXX``), 6 ``&#N;``, 7 ``&#xX;``, 8 ``%25XX``."""
    hexa = (lambda s: s.upper()) if upper else (lambda s: s.lower())
    code = ord(ch)
    if how == 1 and code <= 0xFFFF:
        return "\\u" + hexa(f"{code:04x}")
    if how == 2:
        return "\\x" + hexa(f"{code:02x}") if code < 256 else "\\U" + hexa(f"{code:08x}")
    if how == 3:
        return "\\" + ch
    if how == 4:
        return "".join("%" + hexa(f"{b:02x}") for b in ch.encode("utf-8")) if ch != " " else "+"
    if how == 5 and code <= 0xFFFF:
        return "\\\\u" + hexa(f"{code:04x}")
    if how == 6:
        return f"&#{code};"
    if how == 7:
        return "&#x" + hexa(f"{code:x}") + ";"
    if how == 8:
        return "".join("%25" + hexa(f"{b:02x}") for b in ch.encode("utf-8"))
    return ch


@st.composite
def leaked(draw: st.DrawFn) -> tuple[str, str, str]:
    """(key, the part of it that leaks: >= 6 characters or the whole key, a text holding that part in mixed forms)."""
    key = draw(keys)
    start = draw(st.integers(0, len(key) - 6))
    end = draw(st.integers(start + 6, len(key)))
    part = key[start:end]
    forms = draw(st.lists(st.integers(0, 8), min_size=len(part), max_size=len(part)))
    uppers = draw(st.lists(st.booleans(), min_size=len(part), max_size=len(part)))
    written = "".join(_encode(c, f, u) for c, f, u in zip(part, forms, uppers, strict=True))
    return key, part, draw(noise) + written + draw(noise)


def _decoded(text: str) -> list[str]:
    """The text read back by the ordinary decoders (each on its own, and JSON then URL)."""
    out = [text, urllib.parse.unquote(text), urllib.parse.unquote_plus(text), html.unescape(text)]
    unesc = re.sub(r"\\+u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
    unesc = re.sub(r"\\+x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), unesc)
    unesc = re.sub(r"\\+U([0-9a-fA-F]{8})", lambda m: chr(int(m.group(1), 16)), unesc)
    out += [unesc, re.sub(r"\\(.)", r"\1", unesc), urllib.parse.unquote(urllib.parse.unquote(text))]
    return out


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(leaked())
def test_no_form_of_any_part_of_the_key_survives(case):
    key, part, text = case
    out = redact(text, key)
    assert REDACTED in out
    for view in _decoded(out):
        assert part not in view, (text, out)


@settings(max_examples=200, deadline=None)
@given(keys, st.lists(st.integers(0, 8), min_size=64, max_size=64), st.booleans())
def test_the_whole_key_written_any_way_is_gone(key, forms, upper):
    text = (
        "Bearer " + "".join(_encode(c, f, upper) for c, f in zip(key, forms, strict=False)) + " was refused"
    )
    out = redact(text, key)
    assert out.startswith("Bearer ") and out.endswith(" was refused") and REDACTED in out
    for view in _decoded(out):
        for i in range(len(key) - 5):
            assert key[i : i + 6] not in view, (text, out)


@settings(max_examples=200, deadline=None)
@given(st.text(st.sampled_from("abcdefghij0123456789 -"), min_size=6, max_size=40), st.text(max_size=80))
def test_a_text_without_six_characters_of_the_key_is_left_as_it_was(key, text):
    if any(key[i : i + 6] in t for t in _decoded(text) for i in range(len(key) - 5)):
        return  # the text happens to hold a part of the key in some form
    clean = "".join(c for c in text if c not in key and c not in "\\%&+")
    assert redact(clean, key) == clean


def test_examples_from_the_probe():
    key = "sk-proj-Abc123Def456Ghi789Jkl012Mno345"
    tail, head = key[-20:], key[:8]
    assert redact(f"invalid key ...{tail}", key) == "invalid key ..." + REDACTED
    assert redact(f"key {head}... rejected", key) == f"key {REDACTED}... rejected"
    assert redact(json.dumps({"k": key}).replace("-", "\\u002d"), key) == '{"k": "' + REDACTED + '"}'
    assert redact("".join(f"%{b:02x}" for b in key.encode()), key) == REDACTED
    assert redact(urllib.parse.quote_plus(f"a {key} b"), key) == f"a+{REDACTED}+b"
    assert redact("sk-pr and Abc12", key) == "sk-pr and Abc12"  # five characters are ordinary text
    assert redact("", key) == "" and redact("text", None) == "text" and redact("text", "") == "text"


def test_several_secrets_and_a_remembered_one(monkeypatch):
    import ablate.secrets as S

    monkeypatch.setattr(S, "_REMEMBERED", set())
    assert redact("pw hunter22 tok Tok3nValue", ["hunter22", "Tok3nValue"]) == f"pw {REDACTED} tok {REDACTED}"
    S.remember("Remembered-Key-42")
    assert redact("failed: Remembered-Key-42 refused") == f"failed: {REDACTED} refused"
