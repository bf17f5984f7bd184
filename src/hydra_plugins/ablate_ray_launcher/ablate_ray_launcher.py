"""``hydra/launcher=ray``: every job of a sweep is a Ray task (see :mod:`ablate.app.cluster`).

Hydra loads launchers only from the ``hydra_plugins`` package, so this thin class lives here. It takes the same
configuration as hydra-ray-launcher's local launcher (``ray.init``, ``ray.remote``), from which it is derived, and
needs only Ray (the ``cluster`` extra, docs/cluster.md); this module imports neither, so Hydra's plugin scan works
without them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class AblateRayLauncher(Launcher):
    """Each sweep job is a Ray task. The command's ``ABLATE_*`` and ``MLFLOW_*`` environment (the sweep's parent
    run among it) travels to the workers in Ray's ``runtime_env``; a job whose worker died is reported as a failed
    job instead of aborting the sweep; ``object_store_memory`` is only passed when Ray is started here."""

    def __init__(self, ray: DictConfig) -> None:
        self.ray_cfg = ray
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None
        self.config: DictConfig | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.task_function = task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from ablate.app.cluster import launch_on_ray

        result: Any = launch_on_ray(self, job_overrides, initial_job_idx)
        return list(result)
