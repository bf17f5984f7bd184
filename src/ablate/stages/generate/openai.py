"""Any OpenAI-compatible chat endpoint: vLLM, Ollama, llama.cpp's server, a hosted API (``conf/generator/openai.yaml``).

``base_url`` (e.g. ``http://127.0.0.1:8080/v1``), ``model`` (the name the server serves), ``api_key_env`` (the *name*
of the environment variable holding the key; the key itself is never logged), ``timeout_s`` and ``max_retries``
(for connection errors and HTTP 429/5xx, with backoff). ``model_version`` is part of the identity: a server cannot
prove which weights it serves under a name, so bump it when they change (cached generations then miss).

A server that is down or times out is an error naming ``base_url`` and the fix; the run ends FAILED with it.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from typing import Any, ClassVar

from ablate.errors import AblateError
from ablate.stages.base import check_float, check_int, check_str
from ablate.stages.generate.base import Generation, GeneratorBase, Messages

#: Bump when the request changes (part of the fingerprint and of every generation's cache key).
CODE_VERSION = "ablate-openai/1"


class GeneratorUnavailable(AblateError):
    """The endpoint could not answer (down, timed out, refused the request)."""


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
        if not self.base_url.startswith(("http://", "https://")):
            raise AblateError(
                f"{name}.base_url={base_url!r} is not valid; give an http(s) URL, e.g. http://127.0.0.1:8080/v1"
            )
        self.model = str(check_str(f"{name}.model", model))
        self.api_key_env = check_str(f"{name}.api_key_env", api_key_env, allow_none=True)
        self.timeout_s = check_float(f"{name}.timeout_s", timeout_s, 0.1, 3600.0)
        self.max_retries = check_int(f"{name}.max_retries", max_retries, 0, 10)
        self.model_version = model_version

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

    def _request(self, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise GeneratorUnavailable(
                    f"{self.name}.api_key_env={self.api_key_env!r}: that environment variable is not set. Fix: export "
                    f"{self.api_key_env}=... (the key is never logged), or set {self.name}.api_key_env=null"
                )
            headers["Authorization"] = f"Bearer {key}"
        req = urllib.request.Request(
            f"{self.base_url}/chat/completions",
            data=json.dumps(body).encode("utf-8"),
            headers=headers,
            method="POST",
        )
        delay, last = 1.0, ""
        for attempt in range(self.max_retries + 1):
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                    return dict(json.loads(resp.read().decode("utf-8")))
            except urllib.error.HTTPError as e:
                last = f"HTTP {e.code} {e.reason}"
                if e.code not in (429, 500, 502, 503, 504):
                    detail = e.read().decode("utf-8", "replace")[:300]
                    raise GeneratorUnavailable(
                        f"{self.base_url} refused the request ({last}: {detail}). Fix: check {self.name}.model and "
                        "the server's logs"
                    ) from None
            except TimeoutError:
                last = f"no answer within {self.timeout_s:g}s"
            except urllib.error.URLError as e:
                reason = e.reason
                if isinstance(reason, TimeoutError):
                    last = f"no answer within {self.timeout_s:g}s"
                else:
                    last = f"cannot connect ({reason})"
            if attempt < self.max_retries:
                time.sleep(delay)
                delay *= 2
        raise GeneratorUnavailable(
            f"{self.name}.base_url={self.base_url}: {last} after {self.max_retries + 1} attempt(s). Fix: start the "
            f"server (or fix the URL), or raise {self.name}.timeout_s"
        )

    def _complete(self, messages: Messages, seed: int) -> Generation:
        body = {
            "model": self.model,
            "messages": messages,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "seed": seed,
        }
        out = self._request(body)
        try:
            text = out["choices"][0]["message"].get("content") or ""
        except (KeyError, IndexError, TypeError):
            raise GeneratorUnavailable(
                f"{self.base_url} answered without choices: {str(out)[:200]}"
            ) from None
        usage = out.get("usage") or {}
        return Generation(
            text, int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)), 0.0
        )
