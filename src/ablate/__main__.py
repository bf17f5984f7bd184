"""``python -m ablate``: see :mod:`ablate.app.cli`."""

import os

# torch's OpenMP threads otherwise spin while waiting, which on a shared machine slows dense query encoding several
# times over (experiments/results/bench_encode.md). Must be set before torch is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from ablate.app import interrupts  # noqa: E402  (the standard library only)
from ablate.app.supervise import supervise  # noqa: E402  (the standard library only)


def _main() -> None:
    from ablate.app.cli import main  # imported with the signals handled: Ctrl-C here is one line too

    main()


if __name__ == "__main__":
    supervise()  # a crash in native code still ends with one line and no run left RUNNING
    interrupts.guarded(_main)
