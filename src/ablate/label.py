"""``python -m ablate.label pool|serve|judge|validate|commit``: labels that grow with the runs (see
:mod:`ablate.app.label`). Ctrl-C and SIGTERM end every command as they end ``python -m ablate``: one line
``error: ...``, exit 130 or 143 (:mod:`ablate.app.interrupts`)."""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch is imported; see src/ablate/__main__.py

from ablate.app import interrupts  # noqa: E402  (the standard library only)


def _main() -> None:
    from ablate.app.label import main  # imported with the signals handled: Ctrl-C here is one line too

    raise SystemExit(main())


if __name__ == "__main__":
    interrupts.guarded(_main)
