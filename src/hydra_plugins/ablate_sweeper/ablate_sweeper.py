"""``hydra/sweeper=ablate`` (the default): Hydra's basic sweeper, minus the work a cell does not need.

Hydra loads sweepers only from the ``hydra_plugins`` package, so this thin class lives here; the decisions are made in
:mod:`ablate.app.reuse_plan`. It sweeps exactly as Hydra's basic sweeper does (the same cartesian product, order and
batches), with two differences:

* a cell whose inputs match a FINISHED run (``tracking.reuse``) is recorded as a reused run under the sweep's parent
  and not launched;
* a cell the command-line check already composed and validated in this process is not composed a second time for
  Hydra's own validation (the launcher still composes every job it runs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf


class AblateSweeper(BasicSweeper):
    def sweep(self, arguments: list[str]) -> Any:
        import os

        from ablate.app.cli import ENV_PARENT
        from ablate.app.reuse_plan import all_checked, run_cells

        assert self.config is not None
        assert self.launcher is not None
        assert self.hydra_context is not None

        params_conf = self._parse_config()
        params_conf.extend(arguments)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        overrides = parser.parse_overrides(params_conf)
        batches = self.split_arguments(overrides, self.max_batch_size)

        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")

        # the parent run exists: the sweep callback's on_multirun_start ran before the sweeper
        self.overrides = run_cells(batches, str(sweep_dir.resolve()), os.environ.get(ENV_PARENT) or None)
        returns = []
        initial_job_idx = 0
        while not self.is_done():
            batch = self.get_job_batch()
            if not all_checked(batch):
                self.validate_batch_is_legal(batch)
            results = self.launcher.launch(batch, initial_job_idx=initial_job_idx)
            for r in results:
                _ = r.return_value  # a failed job raises here, as with Hydra's basic sweeper
            initial_job_idx += len(batch)
            returns.append(results)
        return returns
