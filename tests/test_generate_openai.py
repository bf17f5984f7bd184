"""The OpenAI-compatible generator against a real HTTP server (Flask on werkzeug's server, 127.0.0.1, started and
stopped here) that misbehaves on purpose: answers that are not a chat completion, dropped connections, rate limits,
server errors, redirects, and a server that echoes the ``Authorization`` header back. Each failure must be one line
naming ``generator.base_url``, what the server sent and the fix; the key must reach nothing we write."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from ablate.app.paths import CONF_DIR
from ablate.cache import Cache
from ablate.errors import ConfigError
from ablate.stages.generate.openai import GeneratorUnavailable, OpenAIGenerator
from conftest import TINY_DOCS, TINY_MANIFEST, TINY_QRELS, TINY_QUERIES, serving, write_corpus

flask = pytest.importorskip("flask")
PROMPT = str(CONF_DIR / "prompts" / "strict.txt")
KEY = "sk-test-0123456789abcdef-SECRET/key"
KEY_ENV = "ABLATE_TEST_OPENAI_KEY"
SLOW_S = 0.4  # seconds the "slow" route takes per answer


def _app(hits: Counter[str]) -> flask.Flask:
    """One route per misbehaviour: ``/<mode>/v1/chat/completions``; ``hits`` counts the requests of each mode."""
    app = flask.Flask("misbehaving-openai")

    @app.post("/<mode>/v1/chat/completions")
    def chat(mode: str) -> flask.Response | dict | tuple:
        hits[mode] += 1
        auth = flask.request.headers.get("Authorization", "")
        sock = flask.request.environ.get("werkzeug.socket")
        completion = {
            "choices": [{"message": {"role": "assistant", "content": f"You sent {auth!r} [1]"}}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 5},
        }
        raw = {
            "not-json": ("<html><body>502 Bad Gateway (nginx)</body></html>", "text/html"),
            "not-utf8": (b"\xff\xfe{\x00\x93 answer \x94", "application/json"),
            "list": ("[1, 2, 3]", "application/json"),
            "null": ("null", "application/json"),
            "empty": ("", "application/json"),
            "no-choices": ('{"object": "error", "message": "model is loading"}', "application/json"),
            "content-int": ('{"choices": [{"message": {"content": 42}}]}', "application/json"),
            "usage-text": (
                '{"choices": [{"message": {"content": "ok"}}], "usage": {"prompt_tokens": "many"}}',
                "application/json",
            ),
        }
        if mode in raw:
            body, kind = raw[mode]
            return flask.Response(body, status=200, content_type=kind)
        if mode == "echo":
            return completion
        if mode == "slow":  # a server that takes a known time per answer
            time.sleep(SLOW_S)
            return completion
        if mode == "echo-401":  # the key in the body and in the reason phrase
            r = flask.Response(json.dumps({"error": {"message": f"invalid key {auth}"}}), 401)
            r.status = f"401 Bad {auth}"
            return r
        if mode == "echo-cut":  # a part of the key, cut where the server truncates what it echoes
            return flask.Response(f"invalid header {auth[:30]}... (truncated)", 403)
        if mode == "echo-500":
            return flask.Response(f"Traceback: header was {auth}\n  more\n", 500)
        if mode == "echo-redirect":
            return flask.Response("", 302, headers={"Location": f"http://elsewhere.invalid/v1?k={auth}"})
        if mode == "rate":
            return flask.Response('{"error": "slow down"}', 429, headers={"Retry-After": "0"})
        if mode == "fail-500":
            return flask.Response("CUDA out of memory", 500)
        if mode == "drop-before":  # the server closes the socket before answering
            sock.shutdown(socket.SHUT_RDWR)
            return ""
        if mode == "drop-mid":  # ... or after a part of the body

            def body() -> Iterator[bytes]:
                yield b'{"choices": [{"message": '
                sock.shutdown(socket.SHUT_RDWR)

            return flask.Response(
                body(), headers={"Content-Length": "500", "Content-Type": "application/json"}
            )
        return flask.Response("unknown mode", 404)

    return app


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, Counter[str]]]:
    hits: Counter[str] = Counter()
    with serving(_app(hits)) as url:
        yield f"{url}", hits


def _ask(server: tuple[str, Counter[str]], mode: str, tmp_path: Path, **params) -> tuple[str, int, str]:
    """Ask the ``mode`` route one question; (the error's text, the requests it made, the URL)."""
    root, hits = server
    url = f"{root}/{mode}/v1"
    gen = OpenAIGenerator(base_url=url, prompt=PROMPT, **{"max_retries": 0, **params})
    before = hits[mode]
    with pytest.raises(GeneratorUnavailable) as e:
        gen.generate([gen.template.render("q?", ["p"])], Cache(tmp_path / "cache"))
    return str(e.value), hits[mode] - before, url


@pytest.mark.parametrize(
    "mode, says",
    [
        (
            "not-json",
            "answered with a body that is not JSON: <html><body>502 Bad Gateway (nginx)</body></html>",
        ),
        ("not-utf8", "answered with a body that is not UTF-8: \\xff\\xfe{"),
        ("list", "answered with a JSON list, not a chat completion: [1, 2, 3]"),
        ("null", "answered with null, not a chat completion"),
        ("empty", "answered with a body that is not JSON: an empty body"),
        (
            "no-choices",
            'answered without choices[0].message: {"object": "error", "message": "model is loading"}',
        ),
        ("content-int", "answered with choices[0].message.content that is not text (int: 42)"),
        ("usage-text", 'answered with token counts that are not numbers: {"prompt_tokens": "many"}'),
    ],
)
def test_an_answer_that_is_not_a_completion_is_one_line_with_the_url_and_the_fix(
    server, tmp_path, mode, says
):
    msg, requests, url = _ask(server, mode, tmp_path, max_retries=2)
    assert msg.startswith(f"generator.base_url={url}: {says}"), msg
    assert "Fix: check that generator.base_url" in msg and "\n" not in msg
    assert requests == 1  # the same server would send the same thing again: not retried


@pytest.mark.parametrize(
    "mode, says",
    [
        ("drop-before", "closed the connection mid-response (RemoteDisconnected"),
        ("drop-mid", "closed the connection mid-response (IncompleteRead"),
    ],
)
def test_a_dropped_connection_is_retried_then_one_line(server, tmp_path, mode, says):
    msg, requests, url = _ask(server, mode, tmp_path, max_retries=1)
    assert requests == 2  # retried like a timeout: generator.max_retries more attempts
    assert msg.startswith(f"generator.base_url={url}: the server {says}"), msg
    assert "after 2 attempts. Fix: see the server's logs" in msg and "\n" not in msg


def test_each_failure_kind_gets_its_own_advice(server, tmp_path):
    rate, n, _ = _ask(server, "rate", tmp_path, max_retries=2)
    assert n == 3 and "rate limited (HTTP 429" in rate and "after 3 attempts" in rate
    assert "Fix: wait and run again, raise generator.max_retries" in rate and "start the server" not in rate
    fail, n, _ = _ask(server, "fail-500", tmp_path, max_retries=1, timeout_s=5)
    assert n == 2 and "the server failed (HTTP 500 INTERNAL SERVER ERROR: CUDA out of memory)" in fail
    assert "Fix: the error is the server's own: see its logs" in fail and "start the server" not in fail
    refused = OpenAIGenerator(base_url=f"http://127.0.0.1:{_free_port()}/v1", prompt=PROMPT, max_retries=0)
    with pytest.raises(
        GeneratorUnavailable, match=r"cannot connect \(connection refused\)\. Fix: start the server"
    ):
        refused.generate([refused.template.render("q?", ["p"])], Cache(tmp_path / "c"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unset_key_variable_is_refused_when_the_generator_is_built(monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(
        ConfigError, match=rf"generator.api_key_env='{KEY_ENV}' is not valid; the environment"
    ):
        OpenAIGenerator(base_url="http://127.0.0.1:1/v1", prompt=PROMPT, api_key_env=KEY_ENV)
    monkeypatch.setenv(KEY_ENV, "")
    with pytest.raises(ConfigError, match="is not set"):
        OpenAIGenerator(base_url="http://127.0.0.1:1/v1", prompt=PROMPT, api_key_env=KEY_ENV)


def test_credentials_in_the_url_are_refused_without_printing_them():
    with pytest.raises(ConfigError) as e:
        OpenAIGenerator(base_url="https://user:hunter2-secret@api.example.org/v1", prompt=PROMPT)
    assert (
        "carries credentials" in str(e.value) and "hunter2" not in str(e.value) and "user" not in str(e.value)
    )
    with pytest.raises(ConfigError, match="give an http"):
        OpenAIGenerator(base_url="http://127.0.0.1:port/v1", prompt=PROMPT)


@pytest.mark.parametrize("mode", ["echo-401", "echo-cut", "echo-500", "echo-redirect"])
def test_a_key_the_server_echoes_in_an_error_is_redacted(server, tmp_path, monkeypatch, mode):
    monkeypatch.setenv(KEY_ENV, KEY)
    msg, _, _ = _ask(server, mode, tmp_path, api_key_env=KEY_ENV)
    assert "[redacted]" in msg and KEY not in msg and "0123456789abcde" not in msg, msg
    assert "\n" not in msg


def test_a_key_the_server_echoes_in_an_answer_is_redacted_before_the_cache(server, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    root, _ = server
    gen = OpenAIGenerator(base_url=f"{root}/echo/v1", prompt=PROMPT, api_key_env=KEY_ENV)
    (out,) = gen.generate([gen.template.render("q?", ["p"])], Cache(tmp_path / "cache"))
    assert out[0].text == "You sent 'Bearer [redacted]' [1]" and out[0].tokens_in == 11
    assert not _files_holding(tmp_path / "cache", KEY)


def _files_holding(root: Path, secret: str) -> list[str]:
    """Every file under ``root`` whose bytes hold ``secret`` (or its distinctive middle) in any common form."""
    needles = [secret.encode(), b"0123456789abcdef", json.dumps(secret).encode()[1:-1]]
    return [str(p) for p in root.rglob("*") if p.is_file() and any(n in p.read_bytes() for n in needles)]


# -- through the real entry point: the key reaches no store, artifact, cache or console --------------------------------


def _cli(
    args: list[str], cwd: Path, cache: Path | None, env_extra: dict[str, str]
) -> subprocess.CompletedProcess:
    """``python -m ablate``; ``cache``: a cold cache of the test's own (searched for the key, or its first run must
    ask the server), else ``None``: the session's (tests/conftest.py)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **env_extra}
    if cache is not None:
        env["ABLATE_CACHE_DIR"] = str(cache)
    env.pop("MLFLOW_TRACKING_URI", None)
    from inprocess import run_module  # in this process: tests/inprocess.py

    return run_module("ablate", [*args, "progress=false", "stats.bootstrap=50"], cwd=cwd, env=env)


def test_cli_a_server_that_echoes_the_key_leaks_it_nowhere(server, tmp_path, mlflow_uri):
    """A 200 answer whose content holds the ``Authorization`` header, and a 401 whose body and reason phrase hold it:
    the sqlite store, the artifacts, the cache, stdout and stderr never hold the key."""
    from ablate.tracking import Tracker

    root, _ = server
    corpus = write_corpus(tmp_path / "tiny", TINY_DOCS, TINY_QUERIES, TINY_QRELS, TINY_MANIFEST)
    uri = mlflow_uri  # the session's store: its whole folder (database, journal, artifacts) is searched below
    store = Path(uri.removeprefix("sqlite:///")).parent
    common = [
        "corpus=beir",
        f"corpus.path={corpus}",
        "corpus.split=dev",
        "corpus.identity=employee",
        "variant=A",
        "generator=openai",
        f"generator.api_key_env={KEY_ENV}",
        "generator.max_retries=0",
        f"tracking.uri={uri}",
    ]
    ok = _cli(
        [*common, f"generator.base_url={root}/echo/v1", "tracking.experiment=echo-ok"],
        tmp_path,
        tmp_path / "cache",
        {KEY_ENV: KEY},
    )
    bad = _cli(
        [*common, f"generator.base_url={root}/echo-401/v1", "tracking.experiment=echo-401"],
        tmp_path,
        tmp_path / "cache",
        {KEY_ENV: KEY},
    )
    t = Tracker(uri)
    (ran,) = t.find_runs([t.experiment_id("echo-ok", create=False)])
    artifacts = Path(t.artifact_uri(ran.run_id).removeprefix("file://"))
    assert (artifacts / "answers.csv").is_file()
    # the store's whole folder (database, its journal, every artifact), the cache, Hydra's outputs, the console
    leaks = (
        _files_holding(store, KEY) + _files_holding(tmp_path / "cache", KEY) + _files_holding(tmp_path, KEY)
    )
    assert not leaks, leaks
    for out in (ok.stdout, ok.stderr, bad.stdout, bad.stderr):
        assert KEY not in out and "0123456789abcdef" not in out
    # ... while the runs still say what happened
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert "Bearer [redacted]" in (artifacts / "answers.csv").read_text(encoding="utf-8")
    assert bad.returncode == 2 and "refused the key (HTTP 401 Bad Bearer [redacted]" in bad.stderr, bad.stderr
    (failed,) = t.find_runs([t.experiment_id("echo-401", create=False)])
    assert failed.status == "FAILED" and "[redacted]" in failed.tags["ablate.failure"]


def test_cli_an_answer_that_is_not_json_fails_the_run_with_one_line(server, tmp_path, mlflow_uri):
    from ablate.tracking import Tracker

    root, _ = server
    corpus = write_corpus(tmp_path / "tiny", TINY_DOCS, TINY_QUERIES, TINY_QRELS, TINY_MANIFEST)
    url = f"{root}/not-json/v1"
    p = _cli(
        [
            "corpus=beir",
            f"corpus.path={corpus}",
            "corpus.split=dev",
            "corpus.identity=employee",
            "variant=A",
            "generator=openai",
            f"generator.base_url={url}",
            f"tracking.uri={mlflow_uri}",
            "tracking.experiment=openai-not-json",
        ],
        tmp_path,
        None,  # the session's cache: a route that never answers has no cached answer (its URL is in the key)
        {},
    )
    errors = [line for line in p.stderr.splitlines() if line.startswith("error:")]
    assert p.returncode == 2 and len(errors) == 1 and "Traceback" not in p.stderr, p.stderr
    assert errors[0].startswith(f"error: generator.base_url={url}: answered with a body that is not JSON")
    assert "unexpected" not in errors[0] and "Fix:" in errors[0]
    t = Tracker(mlflow_uri)
    (run,) = t.find_runs([t.experiment_id("openai-not-json", create=False)])
    assert run.status == "FAILED" and "is not JSON: <html>" in run.tags["ablate.failure"]


def test_cli_a_cached_answer_reports_the_latency_it_was_generated_with(server, tmp_path, mlflow_uri):
    """A run whose answers all come from the cache logs the latency measured when they were generated (here the
    server's known delay), not the cache's lookup time, and the console says the figures are the cached ones'."""
    from ablate.tracking import Tracker

    root, hits = server
    corpus = write_corpus(tmp_path / "tiny", TINY_DOCS, TINY_QUERIES, TINY_QRELS, TINY_MANIFEST)
    args = [
        "corpus=beir",
        f"corpus.path={corpus}",
        "corpus.split=dev",
        "corpus.identity=employee",
        "variant=A",
        "generator=openai",
        f"generator.base_url={root}/slow/v1",
        f"tracking.uri={mlflow_uri}",
        "tracking.experiment=cached-latency",
    ]
    before = hits["slow"]
    first = _cli(args, tmp_path, tmp_path / "cache", {})
    asked = hits["slow"] - before
    again = _cli(args, tmp_path, tmp_path / "cache", {})
    assert first.returncode == 0 and again.returncode == 0, (first.stderr[-3000:], again.stderr[-3000:])
    assert asked >= 3 and hits["slow"] - before == asked  # the second run asked the server nothing
    t = Tracker(mlflow_uri)
    old, new = sorted(
        t.find_runs([t.experiment_id("cached-latency", create=False)]), key=lambda r: r.start_time
    )
    assert new.metrics["answer_generations_cached"] == asked and old.metrics["answer_generations_cached"] == 0
    for name in ("answer_latency_p50_s", "answer_latency_p95_s"):
        assert SLOW_S <= old.metrics[name] < SLOW_S + 1.0
        assert new.metrics[name] == pytest.approx(old.metrics[name], abs=1e-9)
    p50 = f"latency p50 {old.metrics['answer_latency_p50_s']:.2f}s"
    assert p50 in first.stdout and "from the cache" not in first.stdout.split(p50, 1)[1].splitlines()[0]
    line = next(x for x in again.stdout.splitlines() if p50 in x)
    assert f"as generated: {asked} of {asked} answers from the cache" in line, line


def test_a_cache_entry_without_a_latency_gives_an_unknown_latency_not_the_lookup_time(server, tmp_path):
    root, hits = server
    gen = OpenAIGenerator(base_url=f"{root}/echo/v1", prompt=PROMPT, max_retries=0)
    prompts = [gen.template.render("q?", ["p"])]
    cache = Cache(tmp_path / "cache")
    (first,) = gen.generate(prompts, cache)[0]
    assert not first.cached and first.latency_s > 0
    (entry,) = (tmp_path / "cache" / "generations").rglob("*.json")
    stored = cache.load_json("generations", entry.stem)
    del stored["latency_s"]  # an entry written without the measurement
    cache.save_json("generations", entry.stem, stored)
    before = hits["echo"]
    (again,) = gen.generate(prompts, cache)[0]
    assert again.cached and again.text == first.text and hits["echo"] == before
    assert math.isnan(again.latency_s)
