"""Encode a large corpus once, split across the workers of a Ray cluster, into the shared embedding cache.

The passages are split into shards by the vector-store bucket their text hash falls in
(:data:`ablate.stages.text.encoders.N_BUCKETS_HEX`), so no two shards ever write the same bucket file. Each shard is a
Ray task that builds the dense encoder from the same parameters a job would (:class:`DenseRetriever`) and encodes its
texts into the content-addressed store in ``cache_dir`` (a folder every worker sees: a shared filesystem). Then this
process asks the same encoder for the whole list: every vector is found in the store, the model is never loaded, and
the matrix is written under exactly the key a single process would have used. A job that later encodes the corpus
(any launcher, any machine on that filesystem) reads that one matrix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ablate.cache import Cache, sha256_text
from ablate.stages.text.encoders import N_BUCKETS_HEX, Role


def shard_of(text: str, shards: int) -> int:
    """The shard a text goes to: its vector-store bucket (leading hex digits of its sha256) modulo ``shards``."""
    return int(sha256_text(text)[:N_BUCKETS_HEX], 16) % shards


def split_shards(texts: Sequence[str], shards: int) -> list[list[str]]:
    """``texts`` split into ``shards`` lists (order kept inside each); texts sharing a bucket share a shard."""
    out: list[list[str]] = [[] for _ in range(shards)]
    for t in texts:
        out[shard_of(t, shards)].append(t)
    return out


def _encoder(params: Mapping[str, Any], cache_dir: str) -> Any:
    from ablate.stages.retrievers.dense import DenseRetriever

    encoder = DenseRetriever(**dict(params)).require_encoder()  # params name the model the job runs
    encoder.cache = Cache(cache_dir)
    return encoder


def encode_shard(params: Mapping[str, Any], cache_dir: str, texts: list[str], role: Role) -> dict[str, float]:
    """Encode one shard into the store (what a Ray task runs); returns the encoder's counters."""
    encoder = _encoder(params, cache_dir)
    encoder.embed(texts, role)
    return {k: float(v) for k, v in encoder.stats.items()}


@dataclass
class ShardedEncoding:
    matrix: np.ndarray
    shard_sizes: list[int]  # texts per shard
    shard_stats: list[dict[str, float]]
    assembly_stats: dict[
        str, float
    ]  # the assembling encoder's counters: it encodes nothing when the shards did


def encode_sharded(
    texts: Sequence[str],
    params: Mapping[str, Any],
    cache_dir: str | Path,
    shards: int,
    role: Role = "passage",
    ray_address: str | None = None,
    num_cpus: float = 1,
) -> ShardedEncoding:
    """Encode ``texts`` with the dense encoder ``params`` (``model``, ``batch_size``, ``max_seq_length``, prefixes:
        the ``dense`` block of a job's config) in ``shards`` Ray tasks writing into ``cache_dir``, then assemble and store
        the matrix under the key one process would use. A shard whose vectors are stored already loads no model (so a
    second call, or one after a single-process run, encodes nothing). Ray is joined at ``ray_address`` (``auto``, ``host:port``), or
        the one this process already joined, or started here when both are None."""
    import ray

    from ablate.errors import ConfigError

    if shards < 1:
        raise ConfigError("shards", str(shards), "encode in at least 1 shard")
    root = str(Path(cache_dir).expanduser().resolve())
    assembler = _encoder(
        params, root
    )  # resolves the model offline: fails here, before any task, if it is missing
    parts = split_shards(texts, shards)
    if not ray.is_initialized():
        if ray_address:
            ray.init(address=ray_address)
        else:  # Ray started here: a small object store, no dashboard
            ray.init(address="local", object_store_memory=200_000_000, include_dashboard=False)
    task = ray.remote(num_cpus=num_cpus, max_retries=1)(encode_shard)
    refs = [task.remote(dict(params), root, part, role) for part in parts if part]
    stats = ray.get(refs)
    matrix = assembler.embed(list(texts), role)
    return ShardedEncoding(matrix, [len(p) for p in parts], stats, dict(assembler.stats))
