"""Training pairs for a fine-tuned cross-encoder reranker (``rerank.model=trained``): (query, passage, label).

For each train query, its judged-relevant chunks (qrels grade >= 1) are positives (label 1.0) and a seeded sample of
BM25's top chunks that are not judged relevant are hard negatives (label 0.0) — the recipe of Nogueira & Cho (2019,
arXiv:1901.04085) with BM25 negatives as in Karpukhin et al. (2020, DPR). :mod:`ablate.stages.rerank.training` fits
the model on them.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ablate.errors import ConfigError, InputError

if TYPE_CHECKING:
    from ablate.data.snapshot import Snapshot
    from ablate.stages.retrievers.bm25 import BM25Retriever
    from ablate.stages.text.tokenize import Tokenizer

TrainingPair = tuple[str, str, float]  # (query text, passage text, label in [0, 1])
TrainingPairs = Sequence[TrainingPair]

NEGATIVE_POOL = 30  # BM25 depth the hard negatives are sampled from
#: Hard negatives per query when none is given: conf/reranker/cross_encoder.yaml's ``train.max_negatives``.
DEFAULT_MAX_NEGATIVES = 7
#: Seed of the negatives' sampling when none is given: conf/reranker/cross_encoder.yaml's ``train.seed``.
DEFAULT_SEED = 13


def build_pairs(
    queries: Mapping[str, str],
    positives: Mapping[str, Sequence[str]],
    negatives: Mapping[str, Sequence[str]],
    chunk_text: Mapping[str, str],
    max_negatives: int = DEFAULT_MAX_NEGATIVES,
    seed: int = DEFAULT_SEED,
    exclude: Mapping[str, Iterable[str]] | None = None,
) -> list[TrainingPair]:
    """(query, passage, label) pairs for cross-encoder training; pure and deterministic.

    * ``queries``: query id -> text (the train split's queries).
    * ``positives``: query id -> judged-relevant chunk ids (qrels grade >= 1); each gives a label-1.0 pair.
    * ``negatives``: query id -> candidate chunk ids in rank order (the caller's BM25 top-N). Candidates that are
      positives, or listed in ``exclude`` (other judged-relevant ids, e.g. sibling chunks of a relevant document),
      are dropped; of the rest, ``max_negatives`` are sampled with a per-query seeded RNG (``seed``, query id) and kept
      in rank order. Sampling from the top-N rather than taking the very top lowers the chance of unjudged relevant
      chunks posing as negatives; pass N == ``max_negatives`` to take the top ones.
    * Queries without positives are skipped (a no-answer query has nothing to rank first).

    Output order: query ids sorted, per query its positives then its negatives. Every id used must have a text in
    ``chunk_text`` (a missing one is an :class:`InputError`, not a silent skip).
    """
    if not isinstance(max_negatives, int) or isinstance(max_negatives, bool) or max_negatives < 0:
        raise ConfigError("max_negatives", max_negatives, "must be an integer >= 0 (e.g. 7)")
    exclude = exclude or {}
    out: list[TrainingPair] = []

    def text_of(cid: str, qid: str) -> str:
        if cid not in chunk_text:
            raise InputError(
                "reranker training pairs",
                f"chunk {cid!r} (query {qid!r}) has no text",
                "pass the text of every judged and retrieved chunk (chunk id -> indexed text)",
            )
        return chunk_text[cid]

    for qid in sorted(queries):
        pos = list(dict.fromkeys(positives.get(qid, ())))
        if not pos:
            continue
        qtext = queries[qid]
        banned = set(pos) | set(exclude.get(qid, ()))
        pool = [c for c in dict.fromkeys(negatives.get(qid, ())) if c not in banned]
        if len(pool) > max_negatives:
            rng = random.Random(f"{seed}\x1f{qid}")  # str seeds hash with sha512: stable across processes
            keep = set(rng.sample(range(len(pool)), max_negatives))
            pool = [c for i, c in enumerate(pool) if i in keep]
        out.extend((qtext, text_of(c, qid), 1.0) for c in pos)
        out.extend((qtext, text_of(c, qid), 0.0) for c in pool)
    return out


def pairs_sha256(pairs: TrainingPairs) -> str:
    """Content hash of the pairs, in order (order matters: it seeds the shuffling)."""
    h = hashlib.sha256()
    for q, p, label in pairs:
        h.update(json.dumps([q, p, float(label)], ensure_ascii=False).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def check_pairs(pairs: TrainingPairs) -> list[TrainingPair]:
    checked: list[TrainingPair] = []
    for i, row in enumerate(pairs):
        if len(row) != 3:
            raise InputError(
                "reranker training pairs", f"pair {i} has {len(row)} fields", "give (query, passage, label)"
            )
        q, p, label = row
        if not isinstance(q, str) or not isinstance(p, str):
            raise InputError(
                "reranker training pairs", f"pair {i} has a non-text query or passage", "give strings"
            )
        if not isinstance(label, (int, float)) or not 0.0 <= float(label) <= 1.0:
            raise InputError(
                "reranker training pairs", f"pair {i} has label {label!r}", "use labels in [0, 1]"
            )
        checked.append((q, p, float(label)))
    if not checked:
        raise InputError(
            "reranker training pairs",
            "there are no pairs (no train query has a judged-relevant chunk)",
            "check that the corpus has qrels/train.tsv with grades >= 1 whose ids match the chunks",
        )
    return checked


def pairs_from_snapshot(
    snapshot: Snapshot,
    split: str = "train",
    *,
    max_negatives: int = DEFAULT_MAX_NEGATIVES,
    seed: int = DEFAULT_SEED,
    pool_depth: int = NEGATIVE_POOL,
    tokenizer: Tokenizer | None = None,
) -> list[TrainingPair]:
    """Training pairs from a loaded corpus: ``split``'s judged-relevant chunks and BM25 hard negatives.

    BM25 (k1 0.9, b 0.4, ``tokenizer`` default ``Tokenizer(snapshot.language)`` = the pipeline's BM25 defaults)
    retrieves ``pool_depth`` chunks per query; :func:`build_pairs` samples ``max_negatives`` of them that are not judged
    relevant. With document-level qrels every chunk of a relevant document is a positive (and none is a negative);
    with ``chunker: none`` (BEIR's default) a chunk is its document. This is what ``rerank.model=trained`` uses,
    so ``python -m ablate.train_reranker`` warms the same cache entry as ``rerank.model=trained`` with the same settings.
    """
    from ablate.stages.retrievers.bm25 import BM25Index

    qrels = snapshot.split_qrels(split)
    qids = [q for q in snapshot.split_qids(split) if qrels.positives(q)]
    if not qids:
        raise InputError(
            f"{snapshot.root}/qrels/{split}.tsv",
            f"no {split!r} query has a judged-relevant (grade >= 1) chunk to learn from",
            "add positive labels to that split, or pick another split",
        )
    queries = [snapshot.queries[q] for q in qids]
    if (
        tokenizer is None
    ):  # the BM25 stage's defaults, so the CLI and rerank.model=trained share cache entries
        tokenizer = negatives_retriever(snapshot).tokenizer
    bm25 = BM25Index(snapshot.chunks, tokenizer=tokenizer)  # its k1 and b: the BM25 stage's defaults
    run = bm25.search(queries, max(pool_depth, max_negatives))
    positives = {q: list(qrels.positives(q)) for q in qids}
    if qrels.unit == "doc":
        by_doc: dict[str, list[str]] = {}
        for c in snapshot.chunks:
            by_doc.setdefault(c.doc_id, []).append(c.chunk_id)
        positives = {q: [c for d in ds for c in by_doc.get(d, [])] for q, ds in positives.items()}
    return build_pairs(
        {q.qid: q.text for q in queries},
        positives,
        {q: [h.chunk_id for h in run.get(q)] for q in qids},
        snapshot.chunk_text,
        max_negatives=max_negatives,
        seed=seed,
    )


def negatives_retriever(snapshot: Snapshot) -> BM25Retriever:
    """The BM25 stage (its defaults, bound to ``snapshot``) whose top chunks are the hard negatives."""
    from ablate.stages.retrievers.bm25 import BM25Retriever

    return BM25Retriever().bind(snapshot, "train")


def training_data_fingerprint(snapshot: Snapshot, train: Mapping[str, Any]) -> dict[str, Any]:
    """What determines the training pairs without computing them: the snapshot, the train split's labels, the
    negatives' retriever and the sampling settings."""
    return {
        "snapshot": snapshot.fingerprint,
        "split": train["split"],
        "qrels": snapshot.split_qrels(str(train["split"])).content_hash(),
        "negatives": negatives_retriever(snapshot).fingerprint().key,
        "max_negatives": train["max_negatives"],
        "seed": train["seed"],
        "pool_depth": NEGATIVE_POOL,
    }
