"""``python -m ablate.train_reranker``: fine-tune the cross-encoder reranker on a corpus's train split ahead of a run.

Prints the trained model folder; ``rerank.model=trained`` with the same settings finds it in the cache.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from ablate.app.entry import run_command
from ablate.app.parser import add_encoder, command_parser
from ablate.stages.rerank.training import (
    DEFAULT_LR,
    DEFAULT_MIN_STEPS,
    pairs_from_snapshot,
    train_cross_encoder,
)


def _parser() -> argparse.ArgumentParser:
    p = command_parser(
        "train_reranker",
        "Fine-tune a cross-encoder reranker on a corpus's train split (BM25 hard negatives), offline. "
        "Prints the trained model folder on stdout; rerank.model=trained with the same settings finds it in the cache.",
    )
    p.add_argument(
        "--corpus", required=True, help="corpus folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv)"
    )
    p.add_argument("--split", default="train", help="split to train on (default: train)")
    add_encoder(p, "--base-model", "local folder or bundled model name", "rerank.train.base_model")
    p.add_argument(
        "--epochs",
        type=int,
        default=1,
        help="passes over the training pairs (default 1; a floor: see --min-steps)",
    )
    p.add_argument(
        "--min-steps",
        type=int,
        default=DEFAULT_MIN_STEPS,
        help="a small split is cycled (up to 10 epochs) until this many optimizer steps (default %(default)s)",
    )
    p.add_argument("--batch-size", type=int, default=16, help="pairs per optimizer step (default 16)")
    p.add_argument("--max-length", type=int, default=128, help="tokens of query + passage (default 128)")
    p.add_argument("--lr", type=float, default=DEFAULT_LR, help="learning rate (default %(default)g)")
    p.add_argument(
        "--seed", type=int, default=13, help="seed of sampling, shuffling and the head's init (default 13)"
    )
    p.add_argument("--max-negatives", type=int, default=7, help="hard negatives per query (default: 7)")
    p.add_argument(
        "--negative-pool", type=int, default=30, help="BM25 depth the negatives are sampled from (default 30)"
    )
    p.add_argument(
        "--cache-dir", default=None, help="cache folder (default: $ABLATE_CACHE_DIR or ~/.cache/ablate)"
    )
    p.add_argument(
        "--precision",
        default="fp32",
        help="fp32 | bf16 (bf16 only where this CPU runs it faster; see compute.py)",
    )
    p.add_argument(
        "--num-threads", type=int, default=None, help="torch threads for training (default: torch's own)"
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p


def run(args: argparse.Namespace) -> int:
    from ablate.cache import Cache
    from ablate.data.corpus import load_corpus
    from ablate.stages.text.defaults import encoder_choice

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    snapshot = load_corpus(args.corpus)
    base_model, _ = encoder_choice(args.base_model, snapshot.language)
    pairs = pairs_from_snapshot(
        snapshot,
        args.split,
        max_negatives=args.max_negatives,
        seed=args.seed,
        pool_depth=args.negative_pool,
    )
    result = train_cross_encoder(
        pairs,
        base_model=base_model,
        epochs=args.epochs,
        min_steps=args.min_steps,
        batch_size=args.batch_size,
        max_length=args.max_length,
        lr=args.lr,
        seed=args.seed,
        cache=Cache(args.cache_dir) if args.cache_dir else None,
        show_progress=not args.quiet,
        precision=args.precision,
        num_threads=args.num_threads,
    )
    print(result.path)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(_parser(), run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
