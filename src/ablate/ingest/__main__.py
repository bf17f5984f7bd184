"""``python -m ablate.ingest``: documents to a corpus folder (see :mod:`ablate.app.ingest`)."""

from ablate.app.ingest import main

if __name__ == "__main__":
    raise SystemExit(main())
