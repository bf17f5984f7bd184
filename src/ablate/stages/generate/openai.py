"""Any OpenAI-compatible chat endpoint: vLLM, Ollama, llama.cpp's server, a hosted API (``conf/generator/openai.yaml``).

``base_url`` (e.g. ``http://127.0.0.1:8080/v1``), ``model`` (the name the server serves), ``api_key_env`` (the *name*
of the environment variable holding the key; the key itself is never logged), ``timeout_s`` and ``max_retries``
(for refused and dropped connections, timeouts and HTTP 429/500/502/503/504, waiting 1 s, 2 s, 4 s ... between
attempts, or a 429's ``Retry-After`` up to 60 s). ``model_version`` is part of the identity: a server cannot prove
which weights it serves under a name, so bump it when they change (cached generations then miss).

Checked when the generator is built (before anything runs): the URL is http(s) and carries no credentials (they
would be logged with it), and the variable ``api_key_env`` names is set.

While running, anything but a chat completion ends the run FAILED with one line naming ``base_url``, what the server
sent (short, on one line) and the fix for that kind of failure: rate limited (429), the server's own error (5xx),
refused key (401/403), unknown path or model (404), a redirect (never followed: it would carry the key elsewhere),
connection refused, no answer in time, a connection dropped mid-response, a body that is not UTF-8 or not JSON, JSON
that is not a completion, a ``content`` that is not text.

**The key never leaves this module.** Every text that comes from the server (an error body, a reason phrase, an
answer's ``content``, an exception's message) goes through :func:`ablate.secrets.redact` before it goes anywhere:
every form of the key (as sent, JSON- or backslash-escaped, URL-encoded, any mix of these) and of any part of it 6
characters or longer (a server that cuts what it echoes) is replaced by ``[redacted]``, so a server that echoes the
``Authorization`` header cannot put the key into the run's record, the generation cache, the console or an error
message.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, ClassVar

from ablate.errors import AblateError, ConfigError
from ablate.secrets import REDACTED, redact, remember
from ablate.stages.base import check_float, check_int, check_str
from ablate.stages.generate.base import Generation, GeneratorBase, Messages

#: Bump when the request changes (part of the fingerprint and of every generation's cache key).
CODE_VERSION = "ablate-openai/1"
#: HTTP statuses worth asking again (rate limits and a server's passing failures)
RETRY_STATUSES = (429, 500, 502, 503, 504)
#: how much of what a server sent goes into a message
SHOWN = 160


class GeneratorUnavailable(AblateError):
    """The endpoint could not answer (down, timed out, refused the request, answered something else)."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is reported, never followed: following it would send the key to wherever it points."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


@dataclass(frozen=True)
class _Failure:
    """One failed attempt: what happened, the fix, and whether asking again may help."""

    what: str
    fix: str
    retry: bool = False


def shown(text: str) -> str:
    """What a server sent, short and on one line (the error is one line)."""
    flat = re.sub(r"\s+", " ", "".join(c if c.isprintable() else " " for c in text)).strip()
    return flat if len(flat) <= SHOWN else flat[:SHOWN] + "..."


class OpenAIGenerator(GeneratorBase):
    """See the module docstring; the parameters of :class:`~ablate.stages.generate.base.GeneratorBase` apply."""

    libraries: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        name: str = "generator",
        base_url: str = "http://127.0.0.1:8080/v1",
        model: str = "default",
        api_key_env: str | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 2,
        model_version: str | None = None,
        **common: Any,
    ) -> None:
        super().__init__(name=name, **common)
        self.base_url = str(check_str(f"{name}.base_url", base_url)).rstrip("/")
        parts = urllib.parse.urlsplit(self.base_url)
        try:
            port_ok = parts.port is None or parts.port > 0
        except ValueError:
            port_ok = False
        if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
            raise ConfigError(
                f"{name}.base_url", base_url, "give an http(s) URL, e.g. http://127.0.0.1:8080/v1"
            )
        if parts.username or parts.password:
            raise ConfigError(
                f"{name}.base_url",
                parts._replace(netloc=f"{REDACTED}@{parts.netloc.rpartition('@')[2]}").geturl(),
                f"it carries credentials, which would be logged with it; put the key in an environment variable "
                f"and name it in {name}.api_key_env",
            )
        self.model = str(check_str(f"{name}.model", model))
        self.api_key_env = check_str(f"{name}.api_key_env", api_key_env, allow_none=True)
        if self.api_key_env and not os.environ.get(self.api_key_env):
            raise ConfigError(f"{name}.api_key_env", self.api_key_env, self._unset_key_fix())
        remember(os.environ.get(self.api_key_env or ""))
        self.timeout_s = check_float(f"{name}.timeout_s", timeout_s, 0.1, 3600.0)
        self.max_retries = check_int(f"{name}.max_retries", max_retries, 0, 10)
        self.model_version = model_version

    def _unset_key_fix(self) -> str:
        return (
            f"the environment variable {self.api_key_env} is not set (or empty). Fix: export "
            f"{self.api_key_env}=<your key> before running (the key is never logged), or set "
            f"{self.name}.api_key_env=null for a server without keys"
        )

    def backend_params(self) -> dict[str, Any]:
        return {
            "base_url": self.base_url,
            "model": self.model,
            "api_key_env": self.api_key_env,
            "timeout_s": self.timeout_s,
            "max_retries": self.max_retries,
            "model_version": self.model_version,
        }

    def model_identity(self) -> dict[str, Any]:
        return {"served_model": self.model, "model_version": self.model_version}

    # -- the request ------------------------------------------------------------------------------------------------
    def _key(self) -> str | None:
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise ConfigError(f"{self.name}.api_key_env", self.api_key_env, self._unset_key_fix())
        remember(key)
        return key

    def _said(self, text: str) -> str:
        """What the server sent, redacted, short and on one line."""
        return shown(redact(text, os.environ.get(self.api_key_env or "") or None))

    def _unavailable(self, failure: _Failure, attempts: int) -> GeneratorUnavailable:
        tried = f" after {attempts} attempts" if attempts > 1 else ""
        return GeneratorUnavailable(
            f"{self.name}.base_url={self.base_url}: {failure.what}{tried}. Fix: {failure.fix}"
        )

    def _request(self, body: dict[str, Any]) -> dict[str, Any]:
        """The parsed JSON of one chat completion; :class:`GeneratorUnavailable` (one line) when there is none."""
        headers = {"Content-Type": "application/json"}
        key = self._key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        req = urllib.request.Request(
            f"{self.base_url}/chat/completions",
            data=json.dumps(body).encode("utf-8"),
            headers=headers,
            method="POST",
        )
        delay = 1.0
        for attempt in range(1, self.max_retries + 2):
            wait = delay
            try:
                with _OPENER.open(req, timeout=self.timeout_s) as resp:
                    raw = resp.read()
                return self._parse(raw)
            except urllib.error.HTTPError as e:
                failure = self._http_failure(e)
                after = e.headers.get("Retry-After", "") if e.headers else ""
                if e.code == 429 and after.strip().isdigit():
                    wait = min(float(after), 60.0)
            except GeneratorUnavailable:
                raise
            except Exception as e:  # noqa: BLE001 - every transport failure is classified, none escapes raw
                failure = self._transport_failure(e)
            if not failure.retry or attempt > self.max_retries:
                raise self._unavailable(failure, attempt) from None
            time.sleep(wait)
            delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    def _http_failure(self, e: urllib.error.HTTPError) -> _Failure:
        """An HTTP error status: what it means and its fix."""
        try:
            detail = self._said(e.read().decode("utf-8", "backslashreplace"))
        except Exception:  # noqa: BLE001 - a body that cannot be read is shown as nothing
            detail = ""
        status = self._said(f"HTTP {e.code} {e.reason or ''}".strip()) + (f": {detail}" if detail else "")
        name = self.name
        if e.code == 429:
            return _Failure(
                f"rate limited ({status})",
                f"wait and run again, raise {name}.max_retries (each retry waits twice as long), or lower the load "
                "on the server (fewer jobs or users at once)",
                retry=True,
            )
        if e.code >= 500:
            return _Failure(
                f"the server failed ({status})",
                "the error is the server's own: see its logs (out of memory, a crashed worker, a model that did not "
                "load)",
                retry=e.code in RETRY_STATUSES,
            )
        if 300 <= e.code < 400:
            where = self._said(e.headers.get("Location", "") if e.headers else "") or "elsewhere"
            return _Failure(
                f"redirects to {where} ({status})",
                f"set {name}.base_url to the URL it points to (a redirect is not followed: it would carry the key "
                "elsewhere)",
            )
        if e.code in (401, 403):
            fix = (
                f"check the key in ${self.api_key_env} ({name}.api_key_env) and what it may use"
                if self.api_key_env
                else f"the server wants a key: export it in a variable and name that in {name}.api_key_env"
            )
            return _Failure(f"refused the key ({status})", fix)
        if e.code == 404:
            return _Failure(
                f"has no such path or model ({status})",
                f"check {name}.base_url (an OpenAI-compatible server's URL usually ends in /v1) and {name}.model "
                "(the name the server serves)",
            )
        return _Failure(
            f"refused the request ({status})",
            f"check {name}.model and {name}.max_tokens against what the server accepts, and its logs",
        )

    def _transport_failure(self, e: BaseException) -> _Failure:
        """A failure below HTTP (no answer, a refused or dropped connection, something that is not HTTP)."""
        reason = e.reason if isinstance(e, urllib.error.URLError) else e
        name, said = self.name, self._said(str(reason) or type(reason).__name__)
        if isinstance(reason, TimeoutError):
            return _Failure(
                f"no answer within {self.timeout_s:g}s",
                f"raise {name}.timeout_s (a large model on a CPU is slow), or check the server is not overloaded",
                retry=True,
            )
        if isinstance(reason, ConnectionRefusedError):
            return _Failure(
                "cannot connect (connection refused)", f"start the server, or fix {name}.base_url", retry=True
            )
        if isinstance(reason, socket.gaierror):
            return _Failure(f"cannot connect (unknown host: {said})", f"fix the host in {name}.base_url")
        if isinstance(reason, (ConnectionError, http.client.IncompleteRead)):
            return _Failure(
                f"the server closed the connection mid-response ({type(reason).__name__}: {said})",
                "see the server's logs (it may have crashed, restarted or hit a limit); raise "
                f"{name}.max_retries if it happens now and then",
                retry=True,
            )
        if isinstance(reason, http.client.HTTPException):
            return _Failure(
                f"answered with something that is not HTTP ({type(reason).__name__}: {said})",
                f"check that {name}.base_url points at the server's HTTP port",
            )
        return _Failure(
            f"cannot connect ({type(reason).__name__}: {said})",
            f"start the server, or fix {name}.base_url",
            retry=isinstance(reason, OSError),
        )

    def _parse(self, raw: bytes) -> dict[str, Any]:
        """The JSON object of a 200 answer, or a one-line :class:`GeneratorUnavailable` saying what came instead."""
        fix = f"check that {self.name}.base_url is the server's OpenAI-compatible /v1 URL"
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            said = self._said(raw.decode("utf-8", "backslashreplace"))
            raise self._unavailable(
                _Failure(f"answered with a body that is not UTF-8: {said}", fix), 1
            ) from None
        try:
            out = json.loads(text)
        except ValueError:
            said = self._said(text) or "an empty body"
            raise self._unavailable(
                _Failure(f"answered with a body that is not JSON: {said}", fix), 1
            ) from None
        if not isinstance(out, dict):
            kind = "null" if out is None else f"a JSON {type(out).__name__}"
            raise self._unavailable(
                _Failure(f"answered with {kind}, not a chat completion: {self._said(text)}", fix), 1
            )
        return out

    def _complete(self, messages: Messages, seed: int) -> Generation:
        body = {
            "model": self.model,
            "messages": messages,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "seed": seed,
        }
        out = self._request(body)
        fix = f"check that {self.name}.base_url is an OpenAI-compatible chat completions server"
        choices = out.get("choices")
        message = (
            choices[0].get("message")
            if isinstance(choices, list) and choices and isinstance(choices[0], dict)
            else None
        )
        if not isinstance(message, dict):
            said = self._said(json.dumps(out, ensure_ascii=False))
            raise self._unavailable(_Failure(f"answered without choices[0].message: {said}", fix), 1)
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            said = self._said(json.dumps(content, ensure_ascii=False))
            raise self._unavailable(
                _Failure(
                    f"answered with choices[0].message.content that is not text ({type(content).__name__}: {said})",
                    fix,
                ),
                1,
            )
        given = out.get("usage")
        usage: dict[str, Any] = given if isinstance(given, dict) else {}
        counts = [usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)]
        if not all(isinstance(c, (int, float)) and not isinstance(c, bool) and c >= 0 for c in counts):
            said = self._said(json.dumps(usage, ensure_ascii=False))
            raise self._unavailable(
                _Failure(f"answered with token counts that are not numbers: {said}", fix), 1
            )
        key = os.environ.get(self.api_key_env or "") or None
        return Generation(redact(content or "", key), int(counts[0]), int(counts[1]), 0.0)
