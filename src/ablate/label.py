"""``python -m ablate.label pool|serve|judge|validate|commit``: labels that grow with the runs (see
:mod:`ablate.app.label`)."""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch is imported; see src/ablate/__main__.py

from ablate.app.label import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
