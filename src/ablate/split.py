"""``python -m ablate.split``: a leakage-safe dev/test split (see :mod:`ablate.app.split`)."""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch is imported; see src/ablate/__main__.py

from ablate.app.split import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
