"""``python -m ablate.encode [--shards N] [--address ADDR] [overrides ...]``: encode a corpus's passages once, split
across the workers of a Ray cluster, into the shared embedding cache (:mod:`ablate.stages.text.sharded`).

The overrides are a job's (``corpus=scifact dense.batch_size=64 cache.dir=/shared/cache``): the command composes the
job's config, so it encodes exactly the passages with exactly the encoder (model, prefixes, length) that job's dense
retriever would, under the key that job looks up. Then every job of a sweep, wherever it runs on that filesystem,
reads the matrix instead of encoding.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ablate.errors import AblateError, ConfigError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m ablate.encode",
        description="Encode a corpus's passages in shards on a Ray cluster, into the shared embedding cache.",
    )
    p.add_argument(
        "overrides", nargs="*", help="a job's config overrides, e.g. corpus=scifact cache.dir=/shared"
    )
    p.add_argument("--shards", type=int, default=2, help="Ray tasks to split the passages over (default 2)")
    p.add_argument(
        "--address",
        default=os.environ.get("RAY_ADDRESS") or None,
        help="the Ray cluster: auto, <head>:6379, ray://<head>:10001 (default $RAY_ADDRESS; unset = a private Ray)",
    )
    p.add_argument("--cpus-per-shard", type=float, default=1.0, help="CPUs each shard reserves (default 1)")
    return p


def run(args: argparse.Namespace) -> int:
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf

    from ablate.app.config import job_from_config
    from ablate.app.paths import CONF_DIR, register_resolvers
    from ablate.app.precheck import compose_cell
    from ablate.cache import default_cache_dir
    from ablate.runner.session import Session
    from ablate.stages.text.sharded import encode_sharded

    register_resolvers()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose_cell(list(args.overrides))
    job = job_from_config(cfg)
    node = cfg.get("dense")
    if node is None or not any(s.name == "dense" for s in job.pipeline.retrievers):
        raise ConfigError(
            "variant",
            str(cfg.variant.get("name")),
            "it runs no dense retriever; choose one that does (B, C, D)",
        )
    block = OmegaConf.to_container(node, resolve=True)
    assert isinstance(block, dict)
    params = {str(k): v for k, v in block.items() if k != "_target_"}
    snapshot = Session().snapshot(job.corpus)
    dense = next(s for s in job.pipeline.retrievers if s.name == "dense").bind(snapshot, job.corpus.split)
    params["model"] = getattr(
        dense, "model", None
    )  # the model that job runs: the one named, else the language's
    texts = [c.text for c in snapshot.chunks]
    cache_dir = job.output.cache_dir or str(default_cache_dir())
    out = encode_sharded(
        texts, params, cache_dir, args.shards, ray_address=args.address, num_cpus=args.cpus_per_shard
    )
    encoded = int(sum(s.get("passages_encoded", 0) for s in out.shard_stats))
    print(
        f"{len(texts)} passages of {snapshot.name}: {encoded} encoded in {len(out.shard_stats)} shards "
        f"({', '.join(str(n) for n in out.shard_sizes)} texts), the rest already in the store; "
        f"matrix {out.matrix.shape[0]}x{out.matrix.shape[1]} stored in {cache_dir}"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.shards < 1:
        print(f"error: --shards {args.shards}: encode in at least 1 shard", file=sys.stderr)
        return 2
    try:
        return run(args)
    except AblateError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
