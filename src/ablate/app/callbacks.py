"""Hydra callback for ``-m`` sweeps: one MLflow parent run per sweep, children nested under it, and the ablation
report printed (and attached to the parent) when the sweep ends.

The parent run id is handed to the jobs through a file in the sweep folder, so it also reaches jobs that Hydra's
joblib launcher runs in other processes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

from ablate import record as R
from ablate.app.cli import PARENT_FILE
from ablate.tracking import Tracker


class SweepCallback(Callback):
    def __init__(self) -> None:
        self.tracker: Tracker | None = None
        self.parent: str | None = None
        self.sweep_dir: Path | None = None

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        from ablate.app.config import experiment_name
        from ablate.app.paths import register_resolvers
        from ablate.runner.job import git_commit
        from ablate.tracking import resolve_tracking_uri

        register_resolvers()
        try:
            self.sweep_dir = Path(str(config.hydra.sweep.dir)).resolve()
            self.sweep_dir.mkdir(parents=True, exist_ok=True)
            self.tracker = Tracker(resolve_tracking_uri(config.tracking.uri or None, os.getcwd()))
            overrides = list(config.hydra.overrides.task)
            self.parent = self.tracker.start(
                experiment_name(config),
                run_name=f"sweep {self.sweep_dir.name}",
                tags={
                    R.T_SWEEP: str(self.sweep_dir),
                    R.T_ROLE: R.ROLE_SWEEP_PARENT,
                    R.T_OVERRIDES: " ".join(overrides),
                    R.T_GIT: git_commit(),
                },
            )
            (self.sweep_dir / PARENT_FILE).write_text(self.parent)
        except Exception as e:  # noqa: BLE001 - a sweep still runs without a parent
            print(f"warning: could not create the sweep's parent run: {e}", file=sys.stderr)
            self.parent = None

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        if self.tracker is None or self.parent is None:
            return
        from ablate.errors import AblateError
        from ablate.study.report import attach_report
        from ablate.study.sweep_summary import summarize_sweep

        try:
            table = summarize_sweep(self.tracker, self.parent, quiet=True)
            try:
                attach_report(
                    self.tracker,
                    self.parent,
                    out=(self.sweep_dir / R.REPORT_DIR) if self.sweep_dir else None,
                    bootstrap=int(config.stats.bootstrap),
                    seed=int(config.stats.seed),
                )
                print(f"report: {self.sweep_dir}/{R.REPORT_DIR} (also attached to MLflow run {self.parent})")
            except AblateError as e:  # e.g. a refused comparison must not crash the end of the sweep
                print(table)
                print(f"warning: no ablation report: {e}", file=sys.stderr)
        finally:
            self.tracker.end(self.parent, "FINISHED")
