"""Hydra callback for ``-m`` sweeps: one MLflow parent run per sweep, children nested under it, and the ablation
report printed (and attached to the parent) when the sweep ends.

The parent run id is handed to the jobs through the environment (inherited by the workers of Hydra's joblib
launcher; sent in Ray's ``runtime_env`` by ``hydra/launcher=ray``, :mod:`ablate.app.cluster`) and a file in the sweep's own folder (unique per command), never through a folder two sweeps could share.
The command counts the jobs that failed (FAILED runs, and jobs that never started one) for its exit code
(:func:`ablate.app.cli.sweep_outcome`).
A sweep on the held-out split that the user confirmed (``--confirm-test``) tags its parent ``ablate.test_confirmed=true``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

from ablate import record as R
from ablate.app.command import ENV_PARENT, ENV_TEST_CONFIRMED, PARENT_FILE
from ablate.tracking import Tracker


def expected_jobs(config: Any) -> int:
    """How many jobs the sweep of the multirun ``config`` has: the cells of its sweeper's params and task overrides."""
    from ablate.app.plan import split_cells

    params = config.hydra.sweeper.get("params") or {}
    swept = [f"{k}={v}" for k, v in params.items()]
    return len(split_cells([*swept, *(str(o) for o in config.hydra.overrides.task)]))


def _expected_tag(config: Any) -> str:
    """:func:`expected_jobs` as the parent's tag; empty under a sweeper whose cells are not lists of values."""
    from ablate.errors import AblateError

    try:
        return str(expected_jobs(config))
    except AblateError:
        return ""


class SweepCallback(Callback):
    def __init__(self) -> None:
        self.tracker: Tracker | None = None
        self.parent: str | None = None
        self.sweep_dir: Path | None = None

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        from ablate.app.config import experiment_name
        from ablate.app.paths import register_resolvers
        from ablate.runner.job import git_commit
        from ablate.runner.orphans import process_tags
        from ablate.tracking import resolve_tracking_uri, shared_tracker

        register_resolvers()
        try:
            self.sweep_dir = Path(str(config.hydra.sweep.dir)).resolve()
            self.sweep_dir.mkdir(parents=True, exist_ok=True)
            self.tracker = shared_tracker(resolve_tracking_uri(config.tracking.uri or None, os.getcwd()))
            overrides = list(config.hydra.overrides.task)
            self.parent = self.tracker.start(
                experiment_name(config),
                run_name=f"sweep {self.sweep_dir.name}",
                tags={
                    R.T_SWEEP: str(self.sweep_dir),
                    R.T_ROLE: R.ROLE_SWEEP_PARENT,
                    R.T_OVERRIDES: " ".join(overrides),
                    R.T_GIT: git_commit(),
                    R.T_EXPECTED_CHILDREN: _expected_tag(config),
                    **({R.T_TEST_CONFIRMED: "true"} if os.environ.get(ENV_TEST_CONFIRMED) == "1" else {}),
                    **process_tags(),
                },
            )
            os.environ[ENV_PARENT] = self.parent
            # the report's correction is the sweep's setting (the runs' own stats.* params do not hold it)
            self.tracker.log_params(
                self.parent, {R.P_CORRECTION: str(config.stats.get("correction", "holm"))}
            )
            (self.sweep_dir / PARENT_FILE).write_text(self.parent)
        except Exception as e:  # noqa: BLE001 - a sweep still runs without a parent
            print(f"warning: could not create the sweep's parent run: {e}", file=sys.stderr)
            self.parent = None

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        """Close lost jobs, print and attach the summary and the report, then end the parent FINISHED, last. An
        interrupt or a signal on the way leaves the parent open for the command's stop to end FAILED
        (:mod:`ablate.app.interrupts`); an error in the report still ends it FINISHED (its jobs are done)."""
        if self.tracker is None or self.parent is None:
            return
        from ablate.app.cluster import close_lost_jobs
        from ablate.errors import AblateError

        try:
            # the launcher returned, so nothing else writes the children: they are read once, not four times
            with self.tracker.held_reads():
                close_lost_jobs(
                    self.tracker, self.parent
                )  # jobs whose worker died (e.g. a killed Ray worker)
                self._summarize_and_report(config)
        except (
            AblateError
        ) as e:  # e.g. the tracking server stopped answering: said once, the outcome still counted
            print(f"warning: no summary or report for this sweep: {e}", file=sys.stderr)
            self._finish(quiet=True)
            return
        except Exception:
            self._finish()
            raise
        self._finish()

    def _finish(self, quiet: bool = False) -> None:
        """End the parent FINISHED. A store that fails here is said in one line (not at all when ``quiet``: it was
        said already); the next command on it closes the parent."""
        from ablate.errors import AblateError

        assert self.tracker is not None and self.parent is not None
        try:
            self.tracker.end(self.parent, "FINISHED")
        except AblateError as e:
            if not quiet:
                print(
                    f"warning: the sweep's parent run {self.parent} could not be closed: {e}", file=sys.stderr
                )

    def _summarize_and_report(self, config: Any) -> None:
        from ablate.app.recorded_clusters import recompute
        from ablate.cache import Cache
        from ablate.errors import AblateError
        from ablate.study.report import ReportOptions, ReportRequest, attach_report
        from ablate.study.sweep_summary import summarize_sweep
        from ablate.tracking.ui import where_to_compare

        assert self.tracker is not None and self.parent is not None
        summarize_sweep(self.tracker, self.parent)
        try:
            request = ReportRequest(
                self.parent,
                out=(self.sweep_dir / R.REPORT_DIR) if self.sweep_dir else None,
                options=ReportOptions(
                    bootstrap=int(config.stats.bootstrap),
                    seed=int(config.stats.seed),
                    correction=str(config.stats.get("correction", "holm")),
                ),
                cache=Cache(config.cache.dir or None, enabled=bool(config.cache.enabled)),
                recompute=recompute(
                    self.tracker
                ),  # cells reused from runs logged before clusters were recorded
            )
            attach_report(self.tracker, request)
            parent = self.tracker.get_run(self.parent)
            if parent is not None:
                print(f"compare in the MLflow UI: {where_to_compare(self.tracker.uri, parent.experiment_id)}")
        except AblateError as e:  # e.g. a refused comparison must not crash the end of the sweep
            print(f"warning: no ablation report: {e}", file=sys.stderr)
