"""``hydra/sweeper=ablate`` (the default): the sweep of ablate's plan, through Hydra's public sweeper interface.

Hydra loads sweepers only from the ``hydra_plugins`` package, so this thin class lives here; the decisions are made in
:mod:`ablate.app.plan` and :mod:`ablate.app.reuse_plan`. It launches the cells of Hydra's basic sweeper (the same
cartesian product, order, spelling and batches: :func:`ablate.app.plan.split_cells`), with two differences when the
task function carries the command's plan (:class:`ablate.app.command.Command`, which Hydra hands to ``setup``):

* a cell whose inputs match a FINISHED run (``tracking.reuse``) is recorded as a reused run under the sweep's parent
  and not launched;
* the cells are not composed again to validate them: the plan composed and checked every one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf


class AblateSweeper(Sweeper):
    def __init__(self, max_batch_size: int | None = None, params: dict[str, str] | None = None) -> None:
        self.max_batch_size = max_batch_size
        self.params = dict(params or {})
        self.hydra_context: HydraContext | None = None
        self.config: DictConfig | None = None
        self.launcher: Launcher | None = None
        self.task_function: TaskFunction | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.hydra_context = hydra_context
        self.config = config
        self.task_function = task_function
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> list[Sequence[JobReturn]]:
        from ablate.app.command import ENV_PARENT, Command
        from ablate.app.plan import batches, split_cells
        from ablate.app.reuse_plan import run_cells

        assert self.config is not None and self.launcher is not None
        cells = split_cells([*(f"{k}={v}" for k, v in self.params.items()), *arguments])
        todo = batches(cells, self.max_batch_size)
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")

        command = self.task_function if isinstance(self.task_function, Command) else None
        if command is not None and command.plan.cells:
            # the parent run exists: the sweep callback's on_multirun_start ran before the sweeper
            if command.progress is not None:
                todo = run_cells(
                    command.plan,
                    todo,
                    str(sweep_dir.resolve()),
                    os.environ.get(ENV_PARENT) or None,
                    command.places,
                    command.progress,
                )
            launched = sum(len(b) for b in todo)
            command.launched = launched if launched < len(cells) else None
        returns: list[Sequence[JobReturn]] = []
        initial_job_idx = 0
        for batch in todo:
            if command is None or not command.plan.cells:
                self.validate_batch_is_legal(batch)
            try:
                results = self.launcher.launch(batch, initial_job_idx=initial_job_idx)
            except Exception as e:  # a worker that crashed in native code: the command ends as a crash
                from ablate.app.supervise import worker_crash

                crash = worker_crash(e)
                if crash is None:
                    raise
                raise crash from None
            for r in results:
                _ = r.return_value  # a failed job raises here, as with Hydra's basic sweeper
            initial_job_idx += len(batch)
            returns.append(results)
        if command is not None and command.progress is not None:
            command.progress.close(launched=initial_job_idx)
        return returns
