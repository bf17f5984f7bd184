"""``python -m ablate.runs clean``: close runs a killed process left RUNNING (see :mod:`ablate.app.runs`)."""

from ablate.app.runs import main

if __name__ == "__main__":
    raise SystemExit(main())
