"""``python -m ablate.encode``: a corpus encoded once in shards on a Ray cluster (see :mod:`ablate.app.encode`)."""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch is imported; see src/ablate/__main__.py
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from ablate.app.encode import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
