"""Which sweep a study command reads without ``--parent``: the latest, unless sweeps overlap it in time; then
``report``, ``plan`` and ``label pool`` refuse alike, one line per sweep, and ask for ``--parent ID``. Real MLflow
sqlite store (the session's), runs logged with the tags a sweep writes."""

from __future__ import annotations

import time
import uuid

from ablate.app import label as label_cli
from ablate.app import plan_questions as plan_cli
from ablate.app import report as report_cli
from ablate.study.latest import latest_parent, span
from ablate.tracking import Tracker
from test_report import log_child, record

SWEEP_TAGS = {"ablate.role": "sweep-parent"}


def _parent(t: Tracker, exp: str, name: str, overrides: str) -> str:
    return t.start(exp, name, tags={**SWEEP_TAGS, "ablate.overrides": overrides})


def _later() -> None:
    """The next run starts in a later millisecond than the last one ended (MLflow's times are in ms)."""
    time.sleep(0.01)


def test_overlapping_sweeps_are_listed_and_a_clear_latest_is_taken(mlflow_uri, tmp_path, capsys):
    t = Tracker(mlflow_uri)
    exp = f"latest-{uuid.uuid4().hex[:8]}"
    _later()
    # a sweep whose process died: never ended, its one run long done; it overlaps nothing started after that run
    orphan = _parent(t, exp, "killed sweep", "variant=A,B")
    log_child(t, exp, orphan, record("A", 1))
    _later()
    # two sweeps from two terminals: the second starts while the first runs, the first ends last
    first = _parent(t, exp, "sweep 1", "variant=A,B,C")
    second = _parent(t, exp, "sweep 2", "variant=A,C rrf.k=1,60")
    log_child(t, exp, second, record("A", 1))
    log_child(t, exp, first, record("A", 1))
    log_child(t, exp, first, record("B", 2))
    t.end(second)
    log_child(t, exp, first, record("C", 3))
    t.end(first)

    assert span(t, t.get_run(orphan)).end < span(t, t.get_run(first)).start
    commands = {
        "report": lambda: report_cli.main(["--tracking-uri", mlflow_uri, "--no-log", "--out", str(tmp_path)]),
        "plan": lambda: plan_cli.main(["--tracking-uri", mlflow_uri]),
        "label pool": lambda: label_cli.main(
            ["pool", "--tracking-uri", mlflow_uri, "--labels-dir", str(tmp_path / "labels")]
        ),
    }
    for command, main in commands.items():
        rc = main()
        err = capsys.readouterr().err
        assert rc == 2, (command, err)
        lines = err.strip().splitlines()
        assert "2 sweeps" in lines[0] and "overlap in time" in lines[0] and "--parent ID" in lines[0], command
        # one line per sweep, newest first: its id, experiment, start, overrides and run count
        assert len(lines) == 3, (command, lines)
        assert lines[1].strip().startswith(f"--parent {second}") and "variant=A,C rrf.k=1,60" in lines[1]
        assert lines[2].strip().startswith(f"--parent {first}") and "variant=A,B,C" in lines[2]
        assert f"experiment {exp!r}" in lines[1] and " UTC" in lines[1]
        assert "1 run(s)" in lines[1] and "3 run(s)" in lines[2]
        assert orphan not in err and "Traceback" not in err

    # named, either sweep is read
    rc = report_cli.main(
        ["--parent", first, "--tracking-uri", mlflow_uri, "--no-log", "--out", str(tmp_path / "r1")]
    )
    assert rc == 0, capsys.readouterr().err
    capsys.readouterr()

    # a sweep started after both ended: one clear latest, taken as before
    _later()
    third = _parent(t, exp, "sweep 3", "variant=A,B")
    log_child(t, exp, third, record("A", 1))
    log_child(t, exp, third, record("B", 2))
    t.end(third)
    assert latest_parent(t) == third
    out = tmp_path / "r3"
    rc = report_cli.main(["--tracking-uri", mlflow_uri, "--no-log", "--out", str(out), "--resamples", "100"])
    assert rc == 0, capsys.readouterr().err
    assert f"(run {third}" not in capsys.readouterr().err
    assert "sweep 3" in (out / "ablation.md").read_text(encoding="utf-8")
