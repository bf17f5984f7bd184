"""``python -m ablate.init CORPUS_DIR``: a question template, a labels file and the next commands (see
:mod:`ablate.app.init`)."""

from ablate.app.init import main

if __name__ == "__main__":
    raise SystemExit(main())
