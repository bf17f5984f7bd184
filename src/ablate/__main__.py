"""``python -m ablate``: see :mod:`ablate.cli`."""

import os

# torch's OpenMP threads otherwise spin while waiting; on a shared 2-core machine that made dense query encoding up
# to 6.8x slower (experiments/results/bench_encode.md). Must be set before torch is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from ablate.app.cli import main  # noqa: E402

if __name__ == "__main__":
    main()
