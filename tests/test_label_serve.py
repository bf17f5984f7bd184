"""python -m ablate.label serve: the judging page (Flask's test client), the command (a real server started here
on 127.0.0.1), a real headless Chromium clicking and pressing keys, and a server killed mid-session."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from ablate.app import label_common, label_serve
from ablate.labels import guard, journal, poolfile
from ablate.labels.kind import RELEVANCE
from ablate.labels.page import create_app, ordered
from ablate.labels.workspace import Workspace

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- pools made on the demo corpora (real qids and units)


def corpus_block(corpus: str) -> dict:
    return label_common.plain(label_common.compose([f"corpus={corpus}"]), "corpus")


_SNAPSHOTS: dict[str, object] = {}


def snapshot(corpus: str):
    if corpus not in _SNAPSHOTS:
        _SNAPSHOTS[corpus] = label_common.load(label_common.corpus_from_mapping(corpus_block(corpus)))
    return _SNAPSHOTS[corpus]


def unjudged(snap, qids: list[str], per_question: int) -> list[poolfile.PoolEntry]:
    """The first chunks of the corpus that ``qids``' labels do not judge (as a pool would list them)."""
    judged = {(q, u) for qr in snap.qrels.values() for q, js in qr.judgements.items() for u in js}
    out = []
    for qid in qids:
        units = [c.chunk_id for c in snap.chunks if (qid, c.chunk_id) not in judged][:per_question]
        # best ranks out of file order: the page orders each question's pairs by best_rank
        out += [poolfile.PoolEntry(qid, u, ("B", "C"), per_question - k) for k, u in enumerate(units)]
    return out


def make_pool(labels: Path, corpus: str = "demo", qids=("q025", "q003"), per_question: int = 3) -> Path:
    snap = snapshot(corpus)
    meta = poolfile.PoolMeta(
        corpus=corpus,
        corpus_path=str(snap.root),
        unit=snap.qrels_unit,
        label_version=str(snap.manifest.get("label_version", "")),
        qrels_sha256="0" * 64,
        depth=10,
        split="dev",
        snapshot=snap.fingerprint,
        runs={"B": "run-b", "C": "run-c"},
        corpus_config=corpus_block(corpus),
        created=journal.now(),
    )
    path = Workspace(labels, corpus).pool("C-top10")
    poolfile.write(path, poolfile.Pool(meta, unjudged(snap, list(qids), per_question)))
    return path


def app_for(pool_path: Path, labels: Path, assessor: str = "human:alice"):
    pool = poolfile.read(pool_path)
    snap = snapshot(pool.meta.corpus)
    ws = Workspace(labels, snap.name)
    loaded = label_common.Loaded(RELEVANCE, pool_path, pool, None, snap, ws)
    data = label_serve.page_data(loaded, assessor)
    return create_app(data), data


def client(app):
    """Flask's test client sending the page's token with every request, as the page's forms do."""
    c = app.test_client()
    c.environ_base["HTTP_X_ABLATE_TOKEN"] = guard.token_of(app)
    return c


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def shown(html: str) -> tuple[str, str]:
    """The (qid, unit) the page shows."""
    qid = re.search(r'name="qid" value="([^"]*)"', html)
    unit = re.search(r'name="unit" value="([^"]*)"', html)
    assert qid and unit, html
    return qid.group(1), unit.group(1)


# ---------------------------------------------------------------- the page (Flask's test client)


def test_judge_skip_undo_and_resume_write_the_journal(tmp_path: Path) -> None:
    labels = tmp_path / "labels"
    pool_path = make_pool(labels)
    app, data = app_for(pool_path, labels)
    order = [(e.qid, e.unit) for e in ordered(data.entries)]
    # question by question in the pool's order, each by best rank
    assert [q for q, _ in order] == ["q025"] * 3 + ["q003"] * 3
    ranks = [e.best_rank for e in ordered(data.entries)]
    assert ranks == [1, 2, 3, 1, 2, 3]
    c = client(app)
    page = c.get("/").get_data(as_text=True)
    assert shown(page) == order[0]
    q = snapshot("demo").queries["q025"]
    assert q.text in page and q.persona in page and q.as_of in page
    doc_id, _, clause = order[0][1].partition("#")
    doc = snapshot("demo").documents[doc_id]
    assert doc.title in page and f'id="clause">{clause}<' in page
    assert "answers directly" in page and "not relevant" in page  # the legend from corpus.yaml
    assert 'id="all-done">0<' in page and 'id="all-left">6<' in page and 'id="q-left">3<' in page

    r = c.post("/judge", data={"qid": order[0][0], "unit": order[0][1], "grade": "2"})
    assert r.status_code == 303
    page = c.get(r.headers["Location"]).get_data(as_text=True)
    assert shown(page) == order[1]
    assert 'id="q-done">1<' in page and 'id="q-left">2<' in page and 'id="all-done">1<' in page
    (j,) = lines(data.journal)
    assert set(j) == set(journal.FIELDS)
    fields = ("qid", "unit", "grade", "assessor", "pool")
    assert [j[k] for k in fields] == [*order[0], 2, "human:alice", "C-top10"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", j["time"])

    # skip: pair 1 is left undone and the next one shows; nothing is written
    skip = re.search(r'href="(/\?after=\d+)" id="skip"', page)
    assert skip and skip.group(1) == "/?after=1"
    page = c.get("/?after=1").get_data(as_text=True)
    assert shown(page) == order[2]
    c.post("/judge", data={"qid": order[2][0], "unit": order[2][1], "grade": "0"})
    assert len(lines(data.journal)) == 2

    # undo takes back the last judgement (grade null) and shows that pair again
    r = c.post("/undo")
    assert r.status_code == 303 and r.headers["Location"] == "/?at=2"
    last = lines(data.journal)[-1]
    assert (last["qid"], last["unit"], last["grade"]) == (*order[2], None)
    assert shown(c.get("/?at=2").get_data(as_text=True)) == order[2]

    # resume: a new app over the same journal opens at the first undone pair (the skipped one)
    app2, _ = app_for(pool_path, labels)
    assert shown(app2.test_client().get("/").get_data(as_text=True)) == order[1]
    standing = journal.latest(journal.read(data.journal))
    assert {p: j.grade for p, j in standing.items()} == {order[0]: 2}
    # another assessor starts from the beginning: judgements are per assessor
    app3, _ = app_for(pool_path, labels, "human:bob")
    assert shown(app3.test_client().get("/").get_data(as_text=True)) == order[0]


def test_every_pair_judged_says_so_and_undo_reopens(tmp_path: Path) -> None:
    labels = tmp_path / "labels"
    pool_path = make_pool(labels, qids=("q025",), per_question=2)
    app, data = app_for(pool_path, labels)
    c = client(app)
    for qid, unit in [(e.qid, e.unit) for e in ordered(data.entries)]:
        assert c.post("/judge", data={"qid": qid, "unit": unit, "grade": "1"}).status_code == 303
    page = c.get("/").get_data(as_text=True)
    assert 'id="finished"' in page and 'id="all-left">0<' in page
    c.post("/undo")
    assert shown(c.get("/").get_data(as_text=True)) == (data.entries[0].qid, ordered(data.entries)[1].unit)


def test_a_pair_outside_the_pool_or_a_grade_outside_the_legend_is_refused(tmp_path: Path) -> None:
    labels = tmp_path / "labels"
    pool_path = make_pool(labels)
    app, data = app_for(pool_path, labels)
    c = client(app)
    e = ordered(data.entries)[0]
    for form in (
        {"qid": e.qid, "unit": e.unit, "grade": "3"},
        {"qid": e.qid, "unit": e.unit, "grade": "-1"},
        {"qid": e.qid, "unit": e.unit, "grade": "x"},
        {"qid": e.qid, "unit": e.unit},
        {"qid": "q999", "unit": e.unit, "grade": "1"},
        {"qid": e.qid, "unit": "POL-TRAVEL-2026#9.9", "grade": "1"},
        {"qid": "q001", "unit": e.unit, "grade": "1"},  # a real question, not in this pool
    ):
        r = c.post("/judge", data=form)
        assert r.status_code == 400, form
    assert not data.journal.exists()


def test_values_from_the_data_are_escaped(tmp_path: Path) -> None:
    from dataclasses import replace

    from ablate.labels.page import PageData, PassageText, QuestionText

    labels = tmp_path / "labels"
    pool_path = make_pool(labels, qids=("q025",), per_question=1)
    _, data = app_for(pool_path, labels)
    e = data.entries[0]
    evil = "<script>alert(1)</script>"
    data2: PageData = replace(
        data,
        questions={e.qid: QuestionText(e.qid, evil, evil, "2026-01-01")},
        passages={e.unit: PassageText(e.unit, evil, evil, evil, None, evil, evil)},
    )
    page = create_app(data2).test_client().get("/").get_data(as_text=True)
    assert evil not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_chinese_demo_page_is_in_chinese(tmp_path: Path) -> None:
    labels = tmp_path / "labels"
    pool_path = make_pool(labels, corpus="demo_zh")
    app, data = app_for(pool_path, labels)
    r = app.test_client().get("/")
    assert r.headers["Content-Type"] == "text/html; charset=utf-8"
    page = r.get_data(as_text=True)
    assert '<html lang="zh-CN">' in page
    for text in ("本问题", "跳过", "撤销", "直接回答", "有帮助", "不相关"):
        assert text in page
    qid, unit = shown(page)
    assert snapshot("demo_zh").queries[qid].text in page
    doc = snapshot("demo_zh").documents[unit.partition("#")[0]]
    assert doc.title in page and re.search(r"[\u4e00-\u9fff]", doc.title)
    # the English page has none of them
    app_en, _ = app_for(make_pool(tmp_path / "en"), tmp_path / "en")
    page_en = app_en.test_client().get("/").get_data(as_text=True)
    assert "Skip" in page_en and "跳过" not in page_en


# ---------------------------------------------------------------- the command: a real server on 127.0.0.1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_cmd(pool_path: Path, labels: Path, port: int, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "ablate.label", "serve", "--pool", str(pool_path), "--labels-dir", str(labels),
        "--assessor", "alice", "--port", str(port), *extra,
    ]  # fmt: skip


def start(pool_path: Path, labels: Path, port: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        serve_cmd(pool_path, labels, port),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        # as a shell starts a command in the foreground: a suite run as a background job (`make test &`) has SIGINT
        # ignored, its children inherit that, and the server would rightly keep it ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stdout is not None
    deadline = time.time() + 120
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("open http://"):
            assert line.split()[1] == f"http://127.0.0.1:{port}/"
            return proc
    proc.kill()
    out, err = proc.communicate()
    raise AssertionError(f"the server did not start: {out}\n{err}")


@pytest.fixture
def servers() -> Iterator[list[subprocess.Popen]]:
    procs: list[subprocess.Popen] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.terminate()  # chromium closes its own child processes
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
        p.communicate(timeout=30)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **k):  # noqa: ANN002, ANN003 - urllib's signature
        return None


def page_token(html: str) -> str:
    """The token a served page carries (its forms send it back)."""
    m = re.search(r'<meta name="ablate-token" content="([^"]+)">', html)
    assert m, html
    return m.group(1)


def post(url: str, form: dict[str, str]) -> tuple[int, str]:
    """POST a form the way the page's buttons do (its token, fetched from the page first); (status, Location)."""
    form = {"token": page_token(get(urllib.parse.urljoin(url, "/"))), **form}
    opener = urllib.request.build_opener(NoRedirect)
    req = urllib.request.Request(url, data=urllib.parse.urlencode(form).encode(), method="POST")
    try:
        with opener.open(req, timeout=30) as r:
            return r.status, r.headers.get("Location", "")
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Location", "")


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read().decode("utf-8")


def test_killed_server_loses_no_acknowledged_judgement_and_resumes(tmp_path: Path, servers) -> None:
    labels = tmp_path / "labels"
    pool_path = make_pool(labels)
    order = [(e.qid, e.unit) for e in ordered(poolfile.read(pool_path).entries)]
    port = free_port()
    proc = start(pool_path, labels, port)
    servers.append(proc)
    base = f"http://127.0.0.1:{port}"
    acknowledged = []
    for k, (qid, unit) in enumerate(order[:4]):
        grade = str(k % 3)
        status, _ = post(base + "/judge", {"qid": qid, "unit": unit, "grade": grade})
        assert status == 303
        acknowledged.append((qid, unit, int(grade)))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    path = labels / "demo" / "journal.jsonl"
    assert [(j["qid"], j["unit"], j["grade"]) for j in lines(path)] == acknowledged
    # restart: the page opens at the next undone pair
    proc2 = start(pool_path, labels, port)
    servers.append(proc2)
    assert shown(get(base + "/")) == order[4]
    assert 'id="all-done">4<' in get(base + "/")


@pytest.mark.parametrize(("signum", "code", "line"), [
    (signal.SIGINT, 130, "error: interrupted by the user"),
    (signal.SIGTERM, 143, "error: terminated by signal 15"),
])  # fmt: skip
def test_ctrl_c_or_sigterm_ends_serve_with_one_error_line_and_its_exit_code(
    tmp_path: Path, servers, signum: int, code: int, line: str
) -> None:
    labels = tmp_path / "labels"
    pool_path = make_pool(labels)
    e = ordered(poolfile.read(pool_path).entries)[0]
    port = free_port()
    proc = start(pool_path, labels, port)
    servers.append(proc)
    assert post(f"http://127.0.0.1:{port}/judge", {"qid": e.qid, "unit": e.unit, "grade": "1"})[0] == 303
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (code, line + "\n")
    assert out == ""  # what it printed before (the pool, the address) was read by start()
    assert [(j["qid"], j["grade"]) for j in lines(labels / "demo" / "journal.jsonl")] == [(e.qid, 1)]
    with socket.socket() as s:  # the port is free again
        s.bind(("127.0.0.1", port))


def test_serve_refuses_a_bad_journal_line_a_busy_port_and_a_pool_of_another_corpus(tmp_path: Path) -> None:
    labels = tmp_path / "labels"
    pool_path = make_pool(labels)
    e = poolfile.read(pool_path).entries[0]
    path = labels / "demo" / "journal.jsonl"
    journal.append(path, journal.judgement(e.qid, e.unit, 2, "human:alice", "C-top10"))
    path.write_text(
        path.read_text(encoding="utf-8")
        + json.dumps(
            {"qid": e.qid, "unit": e.unit, "grade": 7, "assessor": "human:alice", "time": "t", "pool": ""}
        )
        + "\n",
        encoding="utf-8",
    )
    r = subprocess.run(serve_cmd(pool_path, labels, free_port()), capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == (
        f"error: {path}:2: grade 7 is not in the corpus's grade legend (2, 1, 0). Fix: give one of those grades"
    )
    assert r.stdout == ""
    path.unlink()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = subprocess.run(serve_cmd(pool_path, labels, port), capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2 and r.stderr.strip() == (
        f"error: --port={port} is not valid; 127.0.0.1:{port} cannot be served (Address already in use); "
        "give another, or 0 for any free one"
    )
    r = subprocess.run(
        serve_cmd(pool_path, labels, free_port(), "corpus=demo_zh"), capture_output=True, text=True, cwd=REPO
    )
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert (
        f"pool {pool_path} was made on corpus demo (" in r.stderr
        and "Fix: drop the corpus settings" in r.stderr
    )
    assert not path.exists()


# ---------------------------------------------------------------- a real headless Chromium: clicks and keys


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    """Debian's chromium, headless, driven over the DevTools protocol (aiohttp's websocket client)."""

    def __init__(self, ws_url: str) -> None:
        self.ws_url = ws_url
        self.n = 0

    async def __aenter__(self) -> Browser:
        import aiohttp

        self.session = aiohttp.ClientSession()
        self.ws = await self.session.ws_connect(self.ws_url, max_msg_size=0)
        await self.send("Page.enable")
        await self.send("Runtime.enable")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.ws.close()
        await self.session.close()

    async def send(self, method: str, **params: object) -> dict:
        self.n += 1
        n = self.n
        await self.ws.send_json({"id": n, "method": method, "params": params})
        while True:
            msg = await self.ws.receive_json(timeout=60)
            if msg.get("id") == n:
                assert "error" not in msg, msg
                return msg.get("result", {})

    async def js(self, expr: str) -> object:
        r = await self.send("Runtime.evaluate", expression=expr, returnByValue=True)
        return r["result"].get("value")

    async def wait_for(self, expr: str, timeout: float = 30) -> object:
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                value = await self.js(expr)
            except AssertionError:
                value = None  # the page is navigating
            if value:
                return value
            await asyncio.sleep(0.05)
        raise AssertionError(f"timed out waiting for {expr}: {await self.js('document.body.innerText')}")

    async def key(self, key: str, code: str, vk: int) -> None:
        text = key if len(key) == 1 else ""
        await self.send("Input.dispatchKeyEvent", type="keyDown", key=key, code=code,
                        windowsVirtualKeyCode=vk, text=text)  # fmt: skip
        await self.send("Input.dispatchKeyEvent", type="keyUp", key=key, code=code, windowsVirtualKeyCode=vk)

    async def click(self, selector: str) -> None:
        """A real mouse click at the element's centre."""
        box = await self.js(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.scrollIntoView({{block: 'center'}});"
            " const r = e.getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        assert isinstance(box, list)
        x, y = box
        for kind in ("mousePressed", "mouseReleased"):
            await self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)


def devtools_url(proc: subprocess.Popen, profile: Path) -> str:
    deadline = time.time() + 60
    port_file = profile / "DevToolsActivePort"
    while time.time() < deadline:
        if port_file.exists() and len(port_file.read_text().split()) >= 2:
            port, _ = port_file.read_text().split()[:2]
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
                pages = [t for t in json.load(r) if t["type"] == "page"]
            if pages:
                return pages[0]["webSocketDebuggerUrl"]
        if proc.poll() is not None:
            raise AssertionError(f"chromium exited: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.1)
    raise AssertionError("chromium's DevTools endpoint did not appear")


@pytest.mark.slow  # a real browser: make test-slow
@pytest.mark.browser
@pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),
    reason="no chromium on PATH (apt-get install chromium; .ci/run installs it)",
)
def test_a_real_browser_judges_with_clicks_and_keys(tmp_path: Path, servers) -> None:
    assert CHROMIUM, "CI=true but no chromium on PATH: .ci/run installs it with apt-get"
    labels = tmp_path / "labels"
    pool_path = make_pool(labels, corpus="demo_zh")
    order = [(e.qid, e.unit) for e in ordered(poolfile.read(pool_path).entries)]
    port = free_port()
    servers.append(start(pool_path, labels, port))
    base = f"http://127.0.0.1:{port}/"
    profile = Path(tempfile.mkdtemp(dir=tmp_path))
    chrome = subprocess.Popen(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions", "--window-size=1024,768",
         f"--user-data-dir={profile}", "--remote-debugging-port=0", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    servers.append(chrome)
    path = labels / "demo_zh" / "journal.jsonl"

    def journal_pairs() -> list[tuple[str, str, int | None]]:
        return [(j["qid"], j["unit"], j["grade"]) for j in lines(path)]

    async def session() -> None:
        async with Browser(devtools_url(chrome, profile)) as b:
            await b.send("Page.navigate", url=base)

            async def showing(i: int) -> None:
                await b.wait_for(
                    f"document.querySelector('input[name=unit]')?.value === {json.dumps(order[i][1])}"
                    f" && document.querySelector('input[name=qid]').value === {json.dumps(order[i][0])}"
                )

            await showing(0)
            assert await b.js("document.getElementById('skip').innerText") == "s 跳过"
            question = await b.js("document.getElementById('question').innerText")
            assert question == snapshot("demo_zh").queries[order[0][0]].text
            await b.click("#grade-2")  # a mouse click on the button
            await showing(1)
            assert journal_pairs() == [(*order[0], 2)]
            await b.key("1", "Digit1", 49)  # a key press
            await showing(2)
            assert journal_pairs()[-1] == (*order[1], 1)
            await b.key("s", "KeyS", 83)  # skip: nothing written
            await showing(3)
            assert len(journal_pairs()) == 2
            await b.key("0", "Digit0", 48)
            await showing(4)
            await b.key("Backspace", "Backspace", 8)  # undo the last judgement: that pair shows again
            await showing(3)
            assert journal_pairs()[-1] == (*order[3], None)
            await b.key("u", "KeyU", 85)  # undo again: the one before it
            await showing(1)
            await b.key("9", "Digit9", 57)  # not a grade of the legend: nothing happens
            await asyncio.sleep(0.3)
            await showing(1)
            await b.key("2", "Digit2", 50)  # judge it again, differently
            await showing(2)  # the skipped pair is the next undone one
            await b.wait_for("document.getElementById('q-done').innerText === '2'")

    asyncio.run(session())
    assert journal_pairs() == [
        (*order[0], 2),
        (*order[1], 1),
        (*order[3], 0),
        (*order[3], None),
        (*order[1], None),
        (*order[1], 2),
    ]
    assert {j["assessor"] for j in lines(path)} == {"human:alice"}
    assert {j["pool"] for j in lines(path)} == {"C-top10"}
    standing = journal.latest(journal.read(path))
    assert {p: j.grade for p, j in standing.items()} == {order[0]: 2, order[1]: 2}
