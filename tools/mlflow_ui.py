"""``make ui``: the MLflow UI on a tracking store, opened on the runs table of the latest sweep's experiment.

    python tools/mlflow_ui.py [--tracking-uri sqlite:///$PWD/mlflow.db] [--host 127.0.0.1] [--port 5000] [--print-url]

MLflow's UI (3.17) opens an experiment on the tab its *workflow type* names: the URL's ``workflowType`` parameter,
else the one the browser last chose (its local storage), else ``genai``, whose first page is the GenAI overview and
traces, empty for ablate's runs. The experiment's ``mlflow.experimentKind`` tag does not decide it there. So the URL
printed here names the runs tab and ``workflowType=machine_learning``; the UI keeps that parameter as you move between
its pages. It then starts ``mlflow ui`` and opens the URL in a browser where there is one. ``--print-url`` prints the
URL and starts nothing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import urllib.request
import webbrowser
from pathlib import Path

from ablate.tracking.ui import runs_table_url

#: seconds to wait for ``mlflow ui`` to answer before opening the browser: its first start migrates a new store
SERVER_START_S = 120.0


def latest_sweep(uri: str) -> tuple[str, str, str] | None:
    """(experiment id, experiment name, sweep run name) of the newest sweep parent in the store, None without one."""
    from ablate.record import ROLE_SWEEP_PARENT, T_ROLE
    from ablate.tracking import Tracker

    tracker = Tracker(uri)
    parents = tracker.find_runs(
        None, f"tags.`{T_ROLE}` = '{ROLE_SWEEP_PARENT}'", max_results=1, newest_first=True
    )
    if not parents:
        return None
    exp_id = parents[0].experiment_id
    return exp_id, tracker.experiment_name(exp_id), parents[0].name


def _store_file(uri: str) -> Path | None:
    return Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None


def _wait_for(url: str, server: subprocess.Popen[bytes], timeout: float) -> bool:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout and server.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=3) as r:
                if r.status == 200:
                    return True
        except OSError:
            time.sleep(0.5)
    return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="make ui", description=__doc__.splitlines()[0])
    ap.add_argument("--tracking-uri", default=f"sqlite:///{Path.cwd() / 'mlflow.db'}")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=5000)
    ap.add_argument("--print-url", action="store_true", help="print the URL and start nothing")
    a = ap.parse_args(argv)
    db = _store_file(a.tracking_uri)
    if db is not None and not db.exists():
        print(
            f"error: no tracking store at {db}; fix: run a sweep first (make demo, or python -m ablate -m variant=A,B,C)",
            file=sys.stderr,
        )
        return 2
    base = f"http://{a.host}:{a.port}"
    found = latest_sweep(a.tracking_uri)
    if found is None:
        url = base
        print(f"MLflow UI: {url} (no sweep in {a.tracking_uri} yet: the experiments list)")
    else:
        exp_id, exp_name, sweep = found
        url = runs_table_url(base, exp_id)
        print(f"MLflow UI: {url} (experiment {exp_name}, latest sweep {sweep})")
    if a.print_url:
        return 0
    command = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", a.tracking_uri]
    server = subprocess.Popen([*command, "--host", a.host, "--port", str(a.port)], env=os.environ.copy())
    try:
        if _wait_for(f"{base}/health", server, SERVER_START_S):
            webbrowser.open(url)  # False where there is no browser: the URL is printed above
        return server.wait()
    except KeyboardInterrupt:
        server.terminate()
        server.wait(timeout=20)
        return 130


if __name__ == "__main__":
    sys.exit(main())
