"""A provider that echoes the API key back in every form (a real HTTP server on 127.0.0.1, started and stopped here):
JSON-escaped (``sk\\u002d...``), escaped character by character in a mix, URL-encoded (upper and lower hex), with
backslashes, cut to its last 20 or first 8 characters, inside an error body, its reason phrase, a ``Location`` header
and inside an answer. The key, in no form and no part of 6 characters or more, may reach the console, the MLflow
store (tags, params, metric names, artifacts, the database file), ``answers.csv`` or the generation cache."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from ablate.app.paths import CONF_DIR
from ablate.cache import Cache
from ablate.stages.generate.openai import GeneratorUnavailable, OpenAIGenerator
from conftest import TINY_DOCS, TINY_MANIFEST, TINY_QRELS, TINY_QUERIES, serving, write_corpus

flask = pytest.importorskip("flask")
PROMPT = str(CONF_DIR / "prompts" / "strict.txt")
#: Letters no hash or run id is made of, and the characters that URL and JSON encodings change.
KEY = "sk-Zq9-WxYvTtRr+PpNnMm/KjHgFdSa Qw=Er"
KEY_ENV = "ABLATE_TEST_LEAKY_KEY"


def _json_escaped(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


def _mixed(text: str) -> str:
    """Every other character escaped, alternating the ways (and the case of the hex)."""
    ways = [
        lambda c: f"\\u{ord(c):04X}",
        lambda c: c,
        lambda c: f"%{ord(c):02x}",
        lambda c: "\\" + c,
        lambda c: f"&#{ord(c)};",
        lambda c: c,
    ]
    return "".join(ways[i % len(ways)](c) for i, c in enumerate(text))


def _forms(key: str) -> dict[str, str]:
    return {
        "verbatim": key,
        "json": json.dumps(key)[1:-1].replace("-", "\\u002d"),
        "json-all": _json_escaped(key),
        "mixed": _mixed(key),
        "url-upper": urllib.parse.quote(key, safe=""),
        "url-lower": "".join(f"%{b:02x}" for b in key.encode()),
        "url-plus": urllib.parse.quote_plus(key),
        "backslashed": "".join("\\" + c for c in key),
        "tail-20": key[-20:],
        "head-8": key[:8],
        "middle-7": key[10:17],
    }


def _app() -> flask.Flask:
    app = flask.Flask("leaky-openai")

    @app.post("/<mode>/v1/chat/completions")
    def chat(mode: str) -> flask.Response | dict:
        auth = flask.request.headers.get("Authorization", "")
        key = auth.removeprefix("Bearer ")
        forms = _forms(key)
        if mode == "answer":  # the key in every form inside a completion's content
            content = " | ".join(f"{name}={text}" for name, text in forms.items()) + " [1]"
            return {
                "choices": [{"message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 7, "completion_tokens": 3},
            }
        if mode in forms:  # one form, in an error body and the reason phrase (401)
            body = json.dumps({"error": {"message": f"invalid api key {forms[mode]}"}}, ensure_ascii=False)
            r = flask.Response(body, 401, content_type="application/json")
            r.status = f"401 Bad key ...{key[-20:]}"
            return r
        if mode == "tail-403":  # what the probe saw: the last 20 characters
            return flask.Response(f"key ending {key[-20:]} is not allowed", 403)
        if mode == "url-500":
            return flask.Response(f"upstream GET /v1?key={urllib.parse.quote(key)} failed", 500)
        if mode == "redirect":
            return flask.Response(
                "", 302, headers={"Location": f"http://x.invalid/?k={urllib.parse.quote(key)}"}
            )
        return flask.Response("unknown mode", 404)

    return app


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with serving(_app()) as url:
        yield url


def _views(text: str) -> list[str]:
    """``text`` as the ordinary decoders read it back (each alone, and the escapes undone then URL-decoded)."""
    unesc = re.sub(r"\\+u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
    unesc = re.sub(r"\\(.)", r"\1", unesc)
    return [
        text,
        unesc,
        urllib.parse.unquote(text),
        urllib.parse.unquote_plus(text),
        html.unescape(text),
        urllib.parse.unquote_plus(html.unescape(unesc)),
    ]


def _leaks(text: str, key: str = KEY) -> list[str]:
    """Each part of ``key`` (6 characters) that ``text`` holds in some form."""
    found = set()
    for view in _views(text):
        found.update(key[i : i + 6] for i in range(len(key) - 5) if key[i : i + 6] in view)
    return sorted(found)


def _files_leaking(root: Path) -> dict[str, list[str]]:
    out = {}
    for p in root.rglob("*"):
        if p.is_file():
            got = _leaks(p.read_bytes().decode("latin-1"))
            if got:
                out[str(p)] = got
    return out


def _gen(server: str, mode: str) -> OpenAIGenerator:
    return OpenAIGenerator(
        base_url=f"{server}/{mode}/v1", prompt=PROMPT, api_key_env=KEY_ENV, max_retries=0, timeout_s=10
    )


@pytest.mark.parametrize("mode", [*_forms(KEY), "tail-403", "url-500", "redirect"])
def test_an_error_echoing_the_key_in_any_form_says_nothing_of_it(server, tmp_path, monkeypatch, mode):
    monkeypatch.setenv(KEY_ENV, KEY)
    gen = _gen(server, mode)
    with pytest.raises(GeneratorUnavailable) as e:
        gen.generate([gen.template.render("q?", ["p"])], Cache(tmp_path / "cache"))
    msg = str(e.value)
    assert "[redacted]" in msg and not _leaks(msg), msg
    assert not _files_leaking(tmp_path)


def test_an_answer_echoing_the_key_in_every_form_is_stored_without_it(server, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    gen = _gen(server, "answer")
    (out,) = gen.generate([gen.template.render("q?", ["p"])], Cache(tmp_path / "cache"))
    text = out[0].text
    for name in _forms(KEY):
        assert f"{name}=[redacted]" in text, text
    assert not _leaks(text), text
    assert list((tmp_path / "cache").rglob("*.json")) and not _files_leaking(tmp_path / "cache")


def _cli(args: list[str], cwd: Path, cache: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "ABLATE_CACHE_DIR": str(cache),
        KEY_ENV: KEY,
    }
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [sys.executable, "-m", "ablate", *args, "progress=false", "stats.bootstrap=50"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_cli_the_key_in_any_form_reaches_no_store_artifact_cache_or_console(server, tmp_path):
    """Through the real entry point, with a store of its own: a run whose answers echo the key in every form and a
    run whose provider refuses it echoing its last 20 characters. Every tag, param and metric name, every artifact,
    the database file, answers.csv, the cache and the console hold no part of it."""
    from ablate.tracking import Tracker

    corpus = write_corpus(tmp_path / "tiny", TINY_DOCS, TINY_QUERIES, TINY_QRELS, TINY_MANIFEST)
    store = tmp_path / "store"
    store.mkdir()
    uri = f"sqlite:///{store / 'mlflow.db'}"
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
        [*common, f"generator.base_url={server}/answer/v1", "tracking.experiment=leak-ok"],
        tmp_path,
        tmp_path / "cache",
    )
    bad = _cli(
        [*common, f"generator.base_url={server}/json/v1", "tracking.experiment=leak-401"],
        tmp_path,
        tmp_path / "cache",
    )
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert bad.returncode == 2 and "refused the key (HTTP 401 Bad key ...[redacted]" in bad.stderr, bad.stderr
    for out in (ok.stdout, ok.stderr, bad.stdout, bad.stderr):
        assert not _leaks(out), out
    t = Tracker(uri)
    (ran,) = t.find_runs([t.experiment_id("leak-ok", create=False)])
    (failed,) = t.find_runs([t.experiment_id("leak-401", create=False)])
    assert failed.status == "FAILED" and "[redacted]" in failed.tags["ablate.failure"]
    for run in (ran, failed):
        record = json.dumps([run.tags, run.params, sorted(run.metrics)], ensure_ascii=False)
        assert not _leaks(record), record
    answers = Path(t.artifact_uri(ran.run_id).removeprefix("file://")) / "answers.csv"
    assert "json-all=[redacted]" in answers.read_text(encoding="utf-8")
    # the store's whole folder (database, its journal, every artifact), the cache, Hydra's outputs
    assert not _files_leaking(tmp_path)
