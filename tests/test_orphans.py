"""Runs a killed process left RUNNING are found by their owner's process identity and closed FAILED."""

import subprocess
import sys

from ablate import record as R
from ablate.app.runs import main as runs_main
from ablate.runner.orphans import REASON, clean_orphans, process_tags
from ablate.tracking import Tracker


def test_dead_owner_is_closed_live_and_foreign_owners_are_left(mlflow_uri, capsys):
    t = Tracker(mlflow_uri)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead_pid = dead.stdout.strip()
    mine = process_tags()
    gone = t.start("orphans", "gone", {**mine, R.T_PID: dead_pid})
    alive = t.start("orphans", "alive", mine)
    foreign = t.start("orphans", "foreign", {**mine, R.T_HOST: "some-other-host"})
    recycled = t.start("orphans", "recycled", {**mine, R.T_PID_START: "1"})  # our pid, another start time
    report = clean_orphans(t)
    closed = {r.run_id for r in report.closed}
    assert closed == {gone, recycled}
    for rid in closed:
        run = t.get_run(rid)
        assert run.status == "FAILED" and run.failure == REASON
    assert t.get_run(alive).status == "RUNNING" and t.get_run(foreign).status == "RUNNING"
    assert runs_main(["clean", "--tracking-uri", mlflow_uri]) == 0
    assert "0 run(s) closed" in capsys.readouterr().out
    for rid in (alive, foreign):
        t.end(rid)
