"""``python -m ablate.report``: the ablation report of tracked runs (see :mod:`ablate.app.report`)."""

from ablate.app.report import main

if __name__ == "__main__":
    raise SystemExit(main())
