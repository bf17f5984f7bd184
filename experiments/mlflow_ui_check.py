"""Prove the MLflow UI compares a sweep's runs: start `mlflow ui` on 127.0.0.1, open the compare page for the latest
sweep's children in headless Chromium, save a screenshot.

    python experiments/mlflow_ui_check.py [--tracking-uri sqlite:///$PWD/mlflow.db] [--parent RUN_ID]
                                          [--out experiments/results/mlflow_compare.png]

Needs Debian's chromium (`apt-get install chromium`). Only loopback traffic; the server is stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, timeout: float = 300.0) -> None:
    t0 = time.time()
    while time.time() - t0 < timeout:
        try:
            with urllib.request.urlopen(url, timeout=3) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1.0)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f}s")


def latest_sweep(uri: str, parent: str | None) -> tuple[str, list[str], str]:
    from ablate.record import ROLE_SWEEP_PARENT, T_ROLE
    from ablate.tracking import Tracker

    t = Tracker(uri)
    if parent is None:
        parents = t.find_runs(
            None, f"tags.`{T_ROLE}` = '{ROLE_SWEEP_PARENT}'", max_results=1, newest_first=True
        )
        if not parents:
            raise SystemExit("error: no sweep parent run in the store; run `python -m ablate -m ...` first")
        parent = parents[0].run_id
    p = t.get_run(parent)
    if p is None:
        raise SystemExit(f"error: no run {parent} in {uri}")
    kids = t.children(parent)
    return p.experiment_id, [k.run_id for k in kids], parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--tracking-uri",
        default=os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path.cwd() / 'mlflow.db'}",
    )
    ap.add_argument("--parent")
    ap.add_argument("--out", default="experiments/results/mlflow_compare.png")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    a = ap.parse_args(argv)
    if not Path(a.chromium).exists():
        print("error: chromium not found; apt-get install chromium", file=sys.stderr)
        return 2
    exp, runs, parent = latest_sweep(a.tracking_uri, a.parent)
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "ui",
            "--backend-store-uri",
            a.tracking_uri,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(f"{base}/health")
        q = urllib.parse.urlencode({"runs": json.dumps(runs), "experiments": json.dumps([exp])})
        url = f"{base}/#/compare-runs?{q}"
        out = Path(a.out).resolve()
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
            subprocess.run(
                [
                    a.chromium,
                    *CHROMIUM_FLAGS,
                    f"--user-data-dir={profile}",
                    "--window-size=1600,2200",
                    "--virtual-time-budget=25000",
                    f"--screenshot={out}",
                    url,
                ],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=180,
            )
        print(
            f"compared {len(runs)} runs of sweep {parent}: {url}\nscreenshot: {out} ({out.stat().st_size} bytes)"
        )
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
