"""``python -m ablate.evaluate``: score a TREC run file by ablate's rules (see :mod:`ablate.app.evaluate`)."""

from ablate.app.evaluate import main

if __name__ == "__main__":
    raise SystemExit(main())
