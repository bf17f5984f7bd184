"""Hydra entry point: ``python -m ablate variant=C rrf.k=60`` / ``python -m ablate -m variant=A,B,C,D,oracle``.

The task function turns the composed config into a :class:`~ablate.runner.job.JobSpec` (:mod:`ablate.app.config`)
and hands it to :func:`ablate.runner.job.run_job`. Anything a user can fix ends as one line ``error: ...`` and exit
status 2 (single run), or a failed job that does not stop the sweep (multirun).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

from ablate.app.paths import CONF_DIR, group_options, register_resolvers
from ablate.errors import AblateError, ConfigError

log = logging.getLogger("ablate")

PARENT_FILE = ".ablate_parent_run"


def precheck_overrides(argv: list[str]) -> None:
    """Reject an unknown config-group option (``variant=X``) with one line, before Hydra prints a wall of text."""
    groups = group_options()
    for arg in argv:
        if "=" not in arg or arg.startswith(("-", "+", "~")):
            continue
        key, _, value = arg.partition("=")
        key = key.removeprefix("override ")
        if key in groups and value:
            plain = not value.startswith(("range(", "choice(", "glob("))
            vals = value.replace("[", "").replace("]", "").split(",") if plain else []
            for v in vals:
                v = v.strip()
                if v and v not in groups[key]:
                    raise ConfigError(key, v, f"valid options: {', '.join(groups[key])} (from conf/{key}/)")


def stage_overrides_where_they_run(argv: list[str]) -> list[str]:
    """``bm25.k1=1.2`` -> ``++bm25.k1=1.2`` for every key inside a stage block (``bm25``, ``dense``, ``rrf``,
    ``rerank``, ...): Hydra then sets it where the stage runs and adds an orphan block elsewhere, which the job
    ignores with a note. So ``-m variant=A,B,C bm25.k1=1.2`` sets k1 for A and C and leaves B alone, instead of
    failing B's composition because B has no ``bm25`` block."""
    from ablate.app.paths import stage_blocks

    blocks = stage_blocks()
    out = []
    for arg in argv:
        key, eq, _ = arg.partition("=")
        if eq and not arg.startswith(("-", "+", "~")) and "." in key and key.split(".", 1)[0] in blocks:
            arg = "++" + arg
        out.append(arg)
    return out


def _sweep_context() -> tuple[str | None, Path | None, tuple[str, ...]]:
    """(sweep id, sweep dir, this job's overrides) under Hydra; (None, None, ...) for a single run."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return None, None, ()
    hc = HydraConfig.get()
    overrides = tuple(str(o) for o in hc.overrides.task)
    if hc.mode == RunMode.MULTIRUN:
        d = Path(hc.sweep.dir).resolve()
        return str(d), d, overrides
    return None, None, overrides


def run_task(cfg: Any, launch_dir: str | None = None) -> dict[str, Any]:
    """One configured job (what Hydra calls per job). Returns the headline metrics and the run id."""
    from ablate.app.config import job_from_config, print_notes
    from ablate.runner.job import run_job

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    register_resolvers()  # also in joblib workers, which never ran main()
    sweep_id, sweep_dir, overrides = _sweep_context()
    parent = None
    if sweep_dir is not None and (sweep_dir / PARENT_FILE).exists():
        parent = (sweep_dir / PARENT_FILE).read_text().strip() or None
    notes: list[str] = []
    job = job_from_config(
        cfg, launch_dir, sweep_id=sweep_id, parent_run_id=parent, overrides=overrides, notes=notes
    )
    print_notes(notes)
    return run_job(job).headline()


def _terminate_as_exit() -> None:
    """Turn SIGTERM (``kill``, a CI timeout) into SystemExit so the open MLflow run ends FAILED with a reason
    instead of being left RUNNING."""
    import signal

    def _handler(signum: int, frame: object) -> None:
        raise SystemExit(f"terminated by signal {signum}")

    try:
        signal.signal(signal.SIGTERM, _handler)
    except ValueError:  # not the main thread (e.g. a launcher's worker): leave the default
        pass


def main() -> None:
    import hydra

    register_resolvers()
    argv = sys.argv[1:]
    try:
        precheck_overrides(argv)
    except AblateError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    sys.argv[1:] = argv = stage_overrides_where_they_run(argv)
    launch_dir = os.getcwd()
    multirun = any(a in ("-m", "--multirun") for a in argv)
    _terminate_as_exit()

    @hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
    def _app(cfg: Any) -> dict[str, Any]:
        try:
            return run_task(cfg, launch_dir)
        except AblateError as e:
            print(f"error: {e}", file=sys.stderr)
            if multirun:  # the run (if it started) is FAILED in MLflow; the sweep goes on
                return {"error": str(e)}
            sys.exit(2)
        except Exception as e:  # an unexpected failure: still one line, still FAILED in MLflow
            if os.environ.get("ABLATE_DEBUG"):
                raise
            print(
                f"error: unexpected {type(e).__name__}: {e} (set ABLATE_DEBUG=1 for the traceback)",
                file=sys.stderr,
            )
            if multirun:
                return {"error": str(e)}
            sys.exit(1)

    _app()


if __name__ == "__main__":
    main()
