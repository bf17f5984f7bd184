"""The generator contract for the OpenAI-compatible generator, against a real HTTP server that behaves (Flask on
werkzeug's server, 127.0.0.1, started and stopped here). Its answer depends only on the request, as a greedy model's
would: the last words of the prompt, cut at ``max_tokens`` words, citing [1]. How the generator meets a server that
misbehaves is tests/test_generate_openai.py; against llama.cpp's own server, tests/test_generate.py."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from ablate.app.paths import CONF_DIR
from ablate.stages.generate.openai import OpenAIGenerator
from ablate.testing.contracts import GeneratorContract
from conftest import serving

flask = pytest.importorskip("flask")
PROMPT = str(CONF_DIR / "prompts" / "strict.txt")
KEY_ENV = "ABLATE_TEST_CONTRACT_KEY"
UNSET_ENV = "ABLATE_TEST_CONTRACT_UNSET_KEY"


def _app(requests: Counter[str]) -> flask.Flask:
    app = flask.Flask("openai-compatible")

    @app.post("/v1/chat/completions")
    def chat() -> dict:
        body = flask.request.get_json()
        requests[body["model"]] += 1
        words = " ".join(m["content"] for m in body["messages"]).split()
        answer = " ".join(words[-8:][: int(body.get("max_tokens", 8))]) + " [1]"
        return {
            "choices": [{"message": {"role": "assistant", "content": answer}}],
            "usage": {"prompt_tokens": len(words), "completion_tokens": len(answer.split())},
        }

    return app


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, Counter[str]]]:
    requests: Counter[str] = Counter()
    with serving(_app(requests)) as url:
        yield f"{url}/v1", requests


class TestOpenAIContract(GeneratorContract):
    option = "generator/openai"
    variations = {
        "base_url": "http://127.0.0.1:9/v1",
        "model": "other-model",
        "model_version": "2",
        "api_key_env": KEY_ENV,
        "timeout_s": 30,
        "max_retries": 1,
        "context_k": 3,
        "max_tokens": 16,
        "temperature": 0.7,
        "seed": 3,
        "repeats": 2,
    }
    invalid = {
        "base_url": "ftp://127.0.0.1/v1",
        "model": "",
        "api_key_env": UNSET_ENV,
        "timeout_s": 0,
        "max_retries": -1,
        "context_k": 0,
        "max_tokens": 0,
        "temperature": 3.0,
        "seed": -1,
        "repeats": 0,
    }
    derived = frozenset(
        {"prompt_sha256", "prompt_source"}
    )  # the template's content, where its choice came from

    @pytest.fixture(autouse=True)
    def _served(self, server, monkeypatch):
        type(self).url, type(self).requests = server
        monkeypatch.setenv(KEY_ENV, "sk-contract-test")
        monkeypatch.delenv(UNSET_ENV, raising=False)

    def make(self, **params):
        return OpenAIGenerator(**{"base_url": self.url, "prompt": PROMPT, "max_retries": 0, **params})

    def yaml_overrides(self):
        return [f"generator.base_url={self.url}"]


def test_the_contract_s_generations_reach_the_server(server, tmp_path):
    """The contract's cache test is not answered by something else: the first call asks the server, the second not."""
    from ablate.cache import Cache

    url, requests = server
    gen = OpenAIGenerator(base_url=url, prompt=PROMPT, model="reach", max_tokens=4)
    msgs = [
        gen.template.render("How much is invoice INV-102?", ["Invoice INV-102, amount 1,250 yuan, paid."])
    ]
    cache = Cache(tmp_path / "cache")
    first = gen.generate(msgs, cache)[0][0]
    assert requests["reach"] == 1 and first.text.endswith("[1]") and len(first.text.split()) == 5
    assert gen.generate(msgs, cache)[0][0].cached and requests["reach"] == 1
