"""``python -m ablate.label pool|serve|judge|validate|commit``: labels that grow with the runs (see
:mod:`ablate.app.label`). Ctrl-C and SIGTERM end every command as they end ``python -m ablate``: one line
``error: ...``, exit 130 or 143 (:mod:`ablate.app.interrupts`)."""

import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch is imported; see src/ablate/__main__.py

from ablate.app import interrupts  # noqa: E402  (the standard library only)
from ablate.app.supervise import supervise  # noqa: E402

#: The commands that ask an LLM at length (llama.cpp in this process): a crash in native code is one line from ablate.
SUPERVISED = ("judge", "validate")


def _main() -> None:
    from ablate.app.label import main  # imported with the signals handled: Ctrl-C here is one line too

    raise SystemExit(main())


if __name__ == "__main__":
    if sys.argv[1:2] and sys.argv[1] in SUPERVISED:
        supervise()
    interrupts.guarded(_main)
