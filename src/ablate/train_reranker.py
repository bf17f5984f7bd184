"""``python -m ablate.train_reranker``: see :mod:`ablate.app.train_reranker`."""

from ablate.app.train_reranker import main

if __name__ == "__main__":
    raise SystemExit(main())
