"""``hydra/launcher=ray``: Hydra's Ray launcher (hydra-ray-launcher) with what ablate's sweeps need on a cluster.

Hydra only loads launchers from the ``hydra_plugins`` package, so this thin class lives here; the work is in
:mod:`ablate.app.cluster`. It needs the ``cluster`` extra (``pip install 'ablate[cluster]'``, see docs/cluster.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from hydra.core.utils import JobReturn
from hydra_plugins.hydra_ray_launcher.ray_launcher import RayLauncher


class AblateRayLauncher(RayLauncher):
    """Each sweep job is a Ray task. Differences from :class:`RayLauncher`: the command's ``ABLATE_*`` and
    ``MLFLOW_*`` environment (the sweep's parent run among it, :data:`ablate.app.cluster.FORWARD_ENV`) travels to the workers in Ray's ``runtime_env``; a
    job whose worker died is reported as a failed job instead of aborting the sweep; ``object_store_memory`` is only
    passed when Ray is started here (a running cluster refuses it)."""

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from ablate.app.cluster import launch_on_ray

        return launch_on_ray(self, job_overrides, initial_job_idx)
