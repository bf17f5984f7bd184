"""`make ui` opens the runs table of the latest sweep's experiment, not MLflow's GenAI pages: tools/mlflow_ui.py (what
`make ui` runs) prints the URL of the newest sweep's runs table in the machine-learning workflow, and MLflow's own UI,
in a real browser, shows the sweep's runs there."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from ablate.record import ROLE_SWEEP_PARENT, T_ROLE
from ablate.tracking import Tracker
from conftest import REPO

TOOL = REPO / "tools" / "mlflow_ui.py"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: seconds a page of MLflow's UI may take to load and show the runs table on a loaded machine
PAGE_S = 90.0


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}


def _ui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=300, env=_env(), cwd=REPO
    )


def _sweep(tracker: Tracker, experiment: str, name: str) -> str:
    """A sweep parent and one child, made as a sweep makes them (Tracker.start, the role tag, the parent tag)."""
    parent = tracker.start(experiment, name, tags={T_ROLE: ROLE_SWEEP_PARENT})
    child = tracker.start(experiment, "C k=60", parent_run_id=parent)
    tracker.end(child)
    tracker.end(parent)
    return parent


def test_make_ui_prints_the_runs_table_of_the_latest_sweeps_experiment(mlflow_uri):
    tracker = Tracker(mlflow_uri)
    _sweep(tracker, "ui-older", "sweep older")
    time.sleep(0.01)  # a later start time than the older sweep's
    _sweep(tracker, "ui-newer", "sweep newest")
    exp_id = tracker.experiment_id("ui-newer", create=False)
    out = _ui("--tracking-uri", mlflow_uri, "--port", "5123", "--print-url")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == (
        f"MLflow UI: http://127.0.0.1:5123/#/experiments/{exp_id}/runs?workflowType=machine_learning "
        "(experiment ui-newer, latest sweep sweep newest)"
    )


def test_make_ui_without_a_store_is_one_line(tmp_path):
    out = _ui("--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db", "--print-url")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and out.stderr.startswith(
        f"error: no tracking store at {tmp_path}/mlflow.db"
    )
    assert not (tmp_path / "mlflow.db").exists()


def test_the_makefile_ui_target_runs_the_tool():
    out = subprocess.run(["make", "-n", "ui"], capture_output=True, text=True, cwd=REPO, check=True)
    assert (
        f"tools/mlflow_ui.py --tracking-uri sqlite:///{REPO}/mlflow.db --host 127.0.0.1 --port 5000"
        in out.stdout
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_http(url: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=3) as r:
                if r.status == 200:
                    return
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None, f"{url} did not answer"
            time.sleep(0.5)


def _devtools_page(profile: Path, proc: subprocess.Popen[bytes]) -> str:
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + 60
    while not (port_file.exists() and len(port_file.read_text().split()) >= 2):
        assert time.monotonic() < deadline and proc.poll() is None, (
            "chromium's DevTools endpoint did not appear"
        )
        time.sleep(0.1)
    port = port_file.read_text().split()[0]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
        return next(t["webSocketDebuggerUrl"] for t in json.load(r) if t["type"] == "page")


async def _landing(ws_url: str, url: str, expect: str) -> tuple[str, str]:
    """Navigate to ``url``; (the location, the page's text) once the text holds ``expect`` (or after PAGE_S)."""
    import aiohttp

    async with aiohttp.ClientSession() as session:
        ws = await session.ws_connect(ws_url, max_msg_size=0)
        counter = iter(range(1, 10**6))

        async def send(method: str, **params: object) -> dict:
            n = next(counter)
            await ws.send_json({"id": n, "method": method, "params": params})
            while True:
                msg = await ws.receive_json(timeout=60)
                if msg.get("id") == n:
                    return msg.get("result", {})

        async def js(expr: str) -> str:
            r = await send("Runtime.evaluate", expression=expr, returnByValue=True)
            return str(r.get("result", {}).get("value", ""))

        await send("Page.enable")
        await send("Page.navigate", url=url)
        deadline = time.monotonic() + PAGE_S
        text = ""
        while time.monotonic() < deadline and expect not in text:
            await asyncio.sleep(0.5)
            text = await js("document.body ? document.body.innerText : ''")
        return await js("location.href"), text


@pytest.mark.slow  # a real browser and a real `mlflow ui`: make test-slow
@pytest.mark.browser
@pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),
    reason="no chromium on PATH (apt-get install chromium; .ci/run installs it)",
)
def test_a_real_browser_lands_on_the_runs_table(mlflow_uri, tmp_path):
    """The URL `make ui` prints shows the sweep's runs in MLflow's runs table, in a fresh browser profile (no
    workflow type remembered: MLflow's default is the GenAI one)."""
    assert CHROMIUM, "CI=true but no chromium on PATH: .ci/run installs it with apt-get"
    tracker = Tracker(mlflow_uri)
    _sweep(tracker, "ui-browser", "sweep browser")
    exp_id = tracker.experiment_id("ui-browser", create=False)
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", mlflow_uri, "--host", "127.0.0.1",
         "--port", str(port), "--workers", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(),
    )  # fmt: skip
    profile = Path(tempfile.mkdtemp(dir=tmp_path))
    chrome = subprocess.Popen(
        [CHROMIUM or "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_http(f"{base}/health", server, 120)
        url = _ui("--tracking-uri", mlflow_uri, "--port", str(port), "--print-url").stdout.split()[2]
        assert url == f"{base}/#/experiments/{exp_id}/runs?workflowType=machine_learning"
        href, text = asyncio.run(_landing(_devtools_page(profile, chrome), url, "sweep browser"))
        assert href.startswith(f"{base}/#/experiments/{exp_id}/runs?workflowType=machine_learning"), href
        assert "sweep browser" in text, text[:2000]  # the sweep's row in the runs table
    finally:
        chrome.terminate()
        server.terminate()
        chrome.wait(timeout=30)
        server.wait(timeout=30)


def test_a_sweeps_console_pointer_names_the_runs_table():
    """The line a sweep ends with opens the runs table, not MLflow's GenAI landing page, for a server and a file."""
    from ablate.tracking.ui import where_to_compare

    assert where_to_compare("http://10.0.0.5:5000/", "7") == (
        "http://10.0.0.5:5000/#/experiments/7/runs?workflowType=machine_learning"
    )
    line = where_to_compare("sqlite:////tmp/x/mlflow.db", "3")
    assert line.startswith("mlflow ui --backend-store-uri sqlite:////tmp/x/mlflow.db, then open ")
    assert line.endswith("http://127.0.0.1:5000/#/experiments/3/runs?workflowType=machine_learning")
