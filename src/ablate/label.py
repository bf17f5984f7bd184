"""``python -m ablate.label pool|serve|judge|validate|commit``: labels that grow with the runs (see
:mod:`ablate.app.label`)."""

import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch is imported; see src/ablate/__main__.py

from ablate.app.supervise import supervise  # noqa: E402

#: The commands that ask an LLM at length (llama.cpp in this process): a crash in native code is one line from ablate.
SUPERVISED = ("judge", "validate", "validate-answers")

if __name__ == "__main__" and sys.argv[1:2] and sys.argv[1] in SUPERVISED:
    supervise()

from ablate.app.label import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
