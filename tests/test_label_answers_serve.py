"""``python -m ablate.label serve --pool ANSWERS_POOL``: the command (a real server started here on 127.0.0.1), a real headless
Chromium grading with clicks and keys, a server killed mid-session that loses no acknowledged grade and resumes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from ablate.labels import journal, poolfile
from test_label_answers import lines, make_pool
from test_label_serve import CHROMIUM, Browser, devtools_url, free_port, get, servers  # noqa: F401 - a fixture

REPO = Path(__file__).resolve().parents[1]


def start(pool_path: Path, labels: Path, port: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "ablate.label", "serve", "--pool", str(pool_path), "--labels-dir", str(labels),
           "--assessor", "alice", "--port", str(port)]  # fmt: skip
    proc = subprocess.Popen(
        cmd,
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
    said = []
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        said.append(line)
        if line.startswith("open http://"):
            assert line.split()[1] == f"http://127.0.0.1:{port}/"
            assert said[0].startswith("answers pool A-B-answers of demo_zh: 9 answers,")
            return proc
    proc.kill()
    out, err = proc.communicate()
    raise AssertionError(f"the server did not start: {out}\n{err}")


@pytest.mark.slow  # a real browser: make test-slow
@pytest.mark.browser
@pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),
    reason="no chromium on PATH (apt-get install chromium; .ci/run installs it)",
)
def test_a_real_browser_grades_answers_with_clicks_and_keys_and_a_killed_server_resumes(
    tmp_path: Path,
    servers,  # noqa: F811 - the fixture imported above
) -> None:
    assert CHROMIUM, "CI=true but no chromium on PATH: .ci/run installs it with apt-get"
    labels = tmp_path / "labels"
    pool_path = make_pool(labels, corpus="demo_zh")
    order = [e.key for e in poolfile.read_answers(pool_path).entries]
    port = free_port()
    server = start(pool_path, labels, port)
    servers.append(server)
    base = f"http://127.0.0.1:{port}/"
    profile = Path(tempfile.mkdtemp(dir=tmp_path))
    chrome = subprocess.Popen(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions", "--window-size=1024,768",
         f"--user-data-dir={profile}", "--remote-debugging-port=0", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    servers.append(chrome)
    path = labels / "demo_zh" / "answer_journal.jsonl"

    def graded() -> list[tuple[str, str, str | None]]:
        return [(j["qid"], j["answer_sha256"], j["grade"]) for j in lines(path)]

    async def session() -> None:
        async with Browser(devtools_url(chrome, profile)) as b:
            await b.send("Page.navigate", url=base)

            async def showing(i: int) -> None:
                await b.wait_for(
                    f"document.querySelector('input[name=answer_sha256]')?.value === {json.dumps(order[i][1])}"
                    f" && document.querySelector('input[name=qid]').value === {json.dumps(order[i][0])}"
                )

            await showing(0)
            assert await b.js("document.getElementById('grade-partly').innerText") == "p 部分正确"
            assert (
                await b.js("document.getElementById('answer').innerText")
                == poolfile.read_answers(pool_path).entries[0].answer
            )
            await b.click("#grade-correct")  # a mouse click on the button
            await showing(1)
            assert graded() == [(*order[0], "correct")]
            await b.key("w", "KeyW", 87)  # a key press
            await showing(2)
            await b.key("s", "KeyS", 83)  # skip: nothing written
            await showing(3)
            assert len(graded()) == 2
            await b.key("p", "KeyP", 80)
            await showing(4)
            await b.key("Backspace", "Backspace", 8)  # undo the last grade: that answer shows again
            await showing(3)
            assert graded()[-1] == (*order[3], None)
            await b.key("x", "KeyX", 88)  # not a grade key: nothing happens
            await asyncio.sleep(0.3)
            await showing(3)
            await b.key("c", "KeyC", 67)
            await showing(4)
            await b.wait_for("document.getElementById('all-done').innerText === '3'")

    asyncio.run(session())
    assert graded() == [
        (*order[0], "correct"),
        (*order[1], "wrong"),
        (*order[3], "partly"),
        (*order[3], None),
        (*order[3], "correct"),
    ]
    assert {j["assessor"] for j in lines(path)} == {"human:alice"}
    # killed without warning: every acknowledged grade is on disk; a restart opens at the first ungraded answer
    server.send_signal(signal.SIGKILL)
    server.wait(timeout=30)
    standing = journal.latest(journal.read_grades(path))
    assert {k: g.grade for k, g in standing.items()} == {
        order[0]: "correct",
        order[1]: "wrong",
        order[3]: "correct",
    }
    port2 = free_port()
    servers.append(start(pool_path, labels, port2))
    page = get(f"http://127.0.0.1:{port2}/")
    assert f'name="answer_sha256" value="{order[2][1]}"' in page and 'id="all-done">3<' in page


def test_ctrl_c_ends_serve_answers_with_one_error_line_and_exit_130(
    tmp_path: Path,
    servers,  # noqa: F811 - the fixture imported above
) -> None:
    labels = tmp_path / "labels"
    pool_path = make_pool(labels, corpus="demo_zh")
    server = start(pool_path, labels, free_port())
    servers.append(server)
    server.send_signal(signal.SIGINT)
    out, err = server.communicate(timeout=60)
    assert (server.returncode, err, out) == (130, "error: interrupted by the user\n", "")
