"""``python -m ablate.train_reranker``: fine-tune the cross-encoder reranker ahead of a run (see
:mod:`ablate.stages.rerank.training`)."""

from ablate.stages.rerank.training import main

if __name__ == "__main__":
    raise SystemExit(main())
