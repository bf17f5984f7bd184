"""Only the labelling pages themselves can judge (:mod:`ablate.labels.guard`): for the relevance page and the answer
grading page, a request naming another host (DNS rebinding), a POST from another origin or without the page's token
(cross-site request forgery) gets 403 and writes nothing -- checked with Flask's test client, with raw HTTP over a
real socket to a real server, and with a real headless Chromium submitting another site's form."""

from __future__ import annotations

import asyncio
import http.client
import os
import re
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

import test_label_answers as answers_tests
import test_label_answers_serve as answers_serve_tests
import test_label_serve as relevance_tests
from ablate.labels import guard
from ablate.labels.page import ordered
from conftest import serving
from test_label_serve import CHROMIUM, Browser, devtools_url, free_port, page_token, servers  # noqa: F401 - a fixture

PORT = 8765  # the port the test client's requests come in on (its base_url)
BASE = f"http://127.0.0.1:{PORT}"


@dataclass
class Page:
    """One labelling page under test: its app, its journal, and a POST that judges its first item."""

    app: object
    journal: Path
    action: str  # the path that judges
    form: dict[str, str]  # a valid judgement of the first item


def relevance_page(tmp_path: Path) -> Page:
    labels = tmp_path / "labels"
    app, data = relevance_tests.app_for(relevance_tests.make_pool(labels), labels)
    e = ordered(data.entries)[0]
    return Page(app, data.journal, "/judge", {"qid": e.qid, "unit": e.unit, "grade": "2"})


def answer_page(tmp_path: Path) -> Page:
    labels = tmp_path / "labels"
    app, data = answers_tests.app_for(answers_tests.make_pool(labels), labels)
    e = data.entries[0]
    return Page(
        app, data.journal, "/judge", {"qid": e.qid, "answer_sha256": e.answer_sha256, "grade": "correct"}
    )


PAGES: dict[str, Callable[[Path], Page]] = {"relevance": relevance_page, "answers": answer_page}


def journal_bytes(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


# ---------------------------------------------------------------- Flask's test client: every refusal


@pytest.mark.parametrize("which", PAGES)
def test_only_the_page_itself_can_judge(tmp_path: Path, which: str) -> None:
    p = PAGES[which](tmp_path)
    c = p.app.test_client()
    page = c.get("/", base_url=BASE)
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    token = page_token(html)
    assert token == guard.token_of(p.app) and len(token) >= 40
    # every form of the page carries the token: the buttons send it back
    assert html.count('<input type="hidden" name="token" value="' + token + '">') == html.count(
        '<form method="post"'
    )
    assert page.headers["X-Frame-Options"] == "DENY"
    own = {"Origin": BASE}

    def refused(
        reason: str, path: str = p.action, form: dict[str, str] | None = None, **headers: str
    ) -> None:
        r = c.post(path, data=p.form if form is None else form, headers=headers, base_url=BASE)
        assert r.status_code == 403, (reason, r.status_code)
        assert r.get_data(as_text=True).startswith("refused: ") and reason in r.get_data(as_text=True)
        assert not p.journal.exists(), reason  # nothing written

    with_token = {**p.form, "token": token}
    refused("Origin 'http://evil.example' is not this page's", form=with_token, Origin="http://evil.example")
    refused(
        "Origin 'http://127.0.0.1:8766' is not this page's", form=with_token, Origin="http://127.0.0.1:8766"
    )
    refused("Origin 'null' is not this page's", form=with_token, Origin="null")  # a sandboxed frame, a file
    refused(
        "Referer 'http://evil.example/a' is not this page's", form=with_token, Referer="http://evil.example/a"
    )
    refused("Host 'evil.example:8765' is not this server", form=with_token, Host="evil.example:8765", **own)
    refused("Host 'evil.example' is not this server", form=with_token, Host="evil.example")
    refused("carries no token", **own)
    refused(
        "token is not this page's",
        form={**p.form, "token": token[:-1] + ("B" if token.endswith("A") else "A")},
        **own,
    )
    refused("token is not this page's", form={**p.form, "token": "é"}, **own)
    refused("token is not this page's", **own, **{"X-Ablate-Token": "x" * len(token)})
    refused("carries no token", path="/undo", form={}, **own)
    refused("Origin 'http://evil.example' is not this page's", path="/undo", form={"token": token},
            Origin="http://evil.example")  # fmt: skip
    # reads are checked for the Host too: a rebound name cannot read the page (nor its token)
    for host in ("evil.example:8765", "evil.example", "127.0.0.1:8766", "127.0.0.1"):
        r = c.get("/", headers={"Host": host}, base_url=BASE)
        assert r.status_code == 403 and token not in r.get_data(as_text=True), host

    # the page's own requests pass: its token in the form (or the header) and its own origin or none
    r = c.post(p.action, data=with_token, headers=own, base_url=BASE)
    assert r.status_code == 303, r.get_data(as_text=True)
    assert len(relevance_tests.lines(p.journal)) == 1
    r = c.post("/undo", data={"token": token}, headers={"Referer": f"{BASE}/?after=0"}, base_url=BASE)
    assert r.status_code == 303
    local = f"http://localhost:{PORT}"
    r = c.post(p.action, data=p.form, headers={"Origin": local, guard.HEADER: token}, base_url=local)
    assert r.status_code == 303
    assert len(relevance_tests.lines(p.journal)) == 3
    assert c.get("/", base_url=local).status_code == 200
    # another server start: another token; the old page's token is refused
    other = PAGES[which](tmp_path / "again").app
    assert guard.token_of(other) != token
    r = other.test_client().post(p.action, data=with_token, headers=own, base_url=BASE)
    assert r.status_code == 403


def test_refusal_is_a_plain_function_of_the_request() -> None:
    t = guard.new_token()
    ok = {"Host": "127.0.0.1:9000", "Origin": "http://127.0.0.1:9000"}
    assert guard.refusal("POST", "9000", ok, t, t) is None
    assert (
        guard.refusal("POST", "9000", {"Host": "LOCALHOST:9000"}, t, t) is None
    )  # no Origin, no Referer: a script
    assert guard.refusal("GET", "9000", {"Host": "localhost:9000"}, None, t) is None
    assert "Host" in (guard.refusal("GET", "9000", {}, None, t) or "")
    assert "Host" in (guard.refusal("GET", "9000", {"Host": "127.0.0.1:9001"}, None, t) or "")
    assert "Origin" in (guard.refusal("POST", "9000", {**ok, "Origin": "https://127.0.0.1:9000"}, t, t) or "")
    assert "token" in (guard.refusal("PUT", "9000", ok, None, t) or "")
    assert "token" in (guard.refusal("DELETE", "9000", ok, "", t) or "")


# ---------------------------------------------------------------- raw HTTP over a real socket to a real server


def raw(port: int, method: str, path: str, headers: dict[str, str], body: str = "") -> tuple[int, str]:
    """One request as another program (or a browser of another site) would send it: the headers exactly as given."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v)
        data = body.encode()
        if method == "POST":
            conn.putheader("Content-Type", "application/x-www-form-urlencoded")
            conn.putheader("Content-Length", str(len(data)))
        conn.endheaders(data if method == "POST" else None)
        r = conn.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        conn.close()


def start_relevance(tmp_path: Path) -> tuple[subprocess.Popen, int, Path, dict[str, str], str]:
    labels = tmp_path / "labels"
    pool_path = relevance_tests.make_pool(labels)
    e = ordered(relevance_tests.poolfile.read(pool_path).entries)[0]
    port = free_port()
    proc = relevance_tests.start(pool_path, labels, port)
    return (
        proc,
        port,
        labels / "demo" / "journal.jsonl",
        {"qid": e.qid, "unit": e.unit, "grade": "2"},
        "/judge",
    )


def start_answers(tmp_path: Path) -> tuple[subprocess.Popen, int, Path, dict[str, str], str]:
    labels = tmp_path / "labels"
    pool_path = answers_tests.make_pool(labels, corpus="demo_zh")
    e = answers_tests.poolfile.read_answers(pool_path).entries[0]
    port = free_port()
    proc = answers_serve_tests.start(pool_path, labels, port)
    form = {"qid": e.qid, "answer_sha256": e.answer_sha256, "grade": "correct"}
    return proc, port, labels / "demo_zh" / "answer_journal.jsonl", form, "/judge"


STARTS = {"relevance": start_relevance, "answers": start_answers}


@pytest.mark.parametrize("which", STARTS)
def test_raw_http_from_another_origin_or_host_is_refused_by_the_real_server(
    tmp_path: Path,
    servers,  # noqa: F811 - the fixture imported above
    which: str,
) -> None:
    proc, port, journal, form, action = STARTS[which](tmp_path)
    servers.append(proc)
    own_host = f"127.0.0.1:{port}"
    status, html = raw(port, "GET", "/", {"Host": own_host})
    assert status == 200
    token = page_token(html)
    body = urllib.parse.urlencode({**form, "token": token})
    before = journal_bytes(journal)
    for headers, reason in (
        (
            {"Host": own_host, "Origin": "http://evil.example"},
            "Origin 'http://evil.example' is not this page's",
        ),
        ({"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}, "is not this server"),
        ({"Host": f"evil.example:{port}"}, f"Host 'evil.example:{port}' is not this server"),
    ):
        status, text = raw(port, "POST", action, headers, body)
        assert status == 403 and text.startswith("refused: ") and reason in text, text
        assert journal_bytes(journal) == before
    status, text = raw(port, "POST", action, {"Host": own_host, "Origin": f"http://{own_host}"},
                       urllib.parse.urlencode(form))  # fmt: skip
    assert status == 403 and "no token" in text and journal_bytes(journal) == before
    # a rebound name cannot read the page
    status, text = raw(port, "GET", "/", {"Host": f"rebound.example:{port}"})
    assert status == 403 and token not in text
    # the page's own request is written
    status, _ = raw(
        port, "POST", action, {"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"}, body
    )
    assert status == 303
    assert [(x["qid"], str(x["grade"])) for x in relevance_tests.lines(journal)] == [
        (form["qid"], form["grade"])
    ]


# ---------------------------------------------------------------- a real browser: another site's form


@pytest.mark.slow  # a real browser: make test-slow
@pytest.mark.browser
@pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),
    reason="no chromium on PATH (apt-get install chromium; .ci/run installs it)",
)
@pytest.mark.parametrize("which", STARTS)
def test_another_sites_form_in_a_real_browser_writes_nothing(
    tmp_path: Path,
    servers,  # noqa: F811 - the fixture imported above
    which: str,
) -> None:
    """Another site (a second server on another port: another origin) sends the judging form to the page's server
    from Chromium, as a page the user visits could: 403, nothing written; the page itself still judges."""
    assert CHROMIUM, "CI=true but no chromium on PATH: .ci/run installs it with apt-get"
    from werkzeug.wrappers import Request, Response

    proc, port, journal, form, action = STARTS[which](tmp_path)
    servers.append(proc)
    fields = "".join(f'<input type="hidden" name="{k}" value="{v}">' for k, v in form.items())
    attack = (
        f'<!doctype html><form method="post" action="http://127.0.0.1:{port}{action}">{fields}'
        '<input type="hidden" name="token" value="guessed"></form><script>document.forms[0].submit()</script>'
    )

    @Request.application
    def evil(request: Request) -> Response:
        return Response(attack, mimetype="text/html")

    profile = Path(tempfile.mkdtemp(dir=tmp_path))
    chrome = subprocess.Popen(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
         f"--user-data-dir={profile}", "--remote-debugging-port=0", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    servers.append(chrome)

    async def session(evil_url: str) -> None:
        async with Browser(devtools_url(chrome, profile)) as b:
            await b.send("Page.navigate", url=evil_url + "/")
            text = await b.wait_for(
                f"location.href === 'http://127.0.0.1:{port}{action}' && document.body && document.body.innerText"
            )
            assert isinstance(text, str) and text.startswith("refused: Origin 'http://127.0.0.1:"), text
            assert journal_bytes(journal) is None
            # the page itself, in the same browser: its button judges
            await b.send("Page.navigate", url=f"http://127.0.0.1:{port}/")
            await b.wait_for("document.querySelector('form button[type=submit]') !== null")
            await b.click(f"#grade-{form['grade']}")
            deadline = time.time() + 30
            while not journal.exists() and time.time() < deadline:
                await asyncio.sleep(0.05)

    with serving(evil) as evil_url:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", evil_url) and not evil_url.endswith(f":{port}")
        asyncio.run(session(evil_url))
    (line,) = relevance_tests.lines(journal)
    assert line["qid"] == form["qid"] and str(line["grade"]) == form["grade"]
