"""The contract corpus every stage contract runs on (:mod:`ablate.testing.contracts`): English and Chinese text, two
documents with identical text listed in the reverse of their id order, a finance-only document, graded clause-level
labels on a dev split and a train split."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ablate.data.corpus import load_corpus
from ablate.data.snapshot import Snapshot

DOCS: list[dict[str, Any]] = [
    {
        "_id": "POL-2026",
        "title": "Travel policy 2026",
        "version": "2026",
        "sections": [
            {"id": "4.2-a", "text": "City transport in Shanghai is reimbursed up to 80 yuan per trip."},
            {"id": "4.2-b", "text": "Any excess over the standard requires supervisor approval."},
            {"id": "5.1", "text": "Hotel rates in Beijing are capped at 600 yuan per night."},
        ],
    },
    {
        "_id": "INV-102",
        "title": "Invoice INV-102",
        "text": "Invoice INV-102 from Acme Ltd, amount 1,250 yuan, paid.",
    },
    {
        "_id": "INV-120",
        "title": "Invoice INV-120",
        "text": "Invoice INV-120 from Apex Co, amount 980 yuan, pending.",
    },
    # identical texts, listed against their id order: a stage that keeps corpus order on a tie ranks B first
    {"_id": "DUP-B", "title": "Notice", "text": "Taxi receipts must be attached to every travel claim."},
    {"_id": "DUP-A", "title": "Notice", "text": "Taxi receipts must be attached to every travel claim."},
    {
        "_id": "FIN-1",
        "title": "Audit memo",
        "acl": ["finance"],
        "text": "The audit found 3 duplicate taxi claims.",
    },
    {"_id": "ZH-1", "title": "差旅费管理办法", "text": "市内交通费用超出标准的部分须经主管审批后报销。"},
]
QUERIES: list[dict[str, Any]] = [
    {"_id": "q1", "text": "How much is invoice INV-102?", "split": "dev"},
    {"_id": "q2", "text": "taxi fare over the limit, what now", "split": "dev"},
    {"_id": "q3", "text": "taxi receipts travel claim", "split": "dev"},
    {"_id": "q4", "text": "打车超标怎么报销", "split": "dev"},
    {"_id": "q5", "text": "duplicate taxi claims in the audit", "split": "dev"},
    {"_id": "q6", "text": "zzz-unknown-term", "split": "dev"},
    {"_id": "q7", "text": "hotel cap in Beijing", "split": "train"},
]
QRELS = [
    ("q1", "INV-102#p0", 2),
    ("q1", "INV-120#p0", 0),
    ("q2", "POL-2026#4.2-b", 2),
    ("q2", "POL-2026#4.2-a", 1),
    ("q3", "DUP-A#p0", 1),
    ("q3", "DUP-B#p0", 1),
    ("q4", "ZH-1#p0", 2),
    ("q5", "FIN-1#p0", 2),
]
TRAIN_QRELS = [("q7", "POL-2026#5.1", 2), ("q7", "INV-120#p0", 0)]
MANIFEST = """name: contract
language: en
qrels_unit: chunk
chunker: {kind: clause}
identities:
  employee: [staff]
  finance: [staff, finance]
"""


def contract_corpus(root: Path) -> Snapshot:
    """Write the contract corpus to ``root`` and load it."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in DOCS), "utf-8"
    )
    (root / "queries.jsonl").write_text(
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in QUERIES), "utf-8"
    )
    (root / "qrels").mkdir(exist_ok=True)
    lines = ["query-id\tcorpus-id\tscore", *(f"{q}\t{u}\t{g}" for q, u, g in QRELS)]
    (root / "qrels" / "dev.tsv").write_text("\n".join(lines) + "\n", "utf-8")
    train = ["query-id\tcorpus-id\tscore", *(f"{q}\t{u}\t{g}" for q, u, g in TRAIN_QRELS)]
    (root / "qrels" / "train.tsv").write_text("\n".join(train) + "\n", "utf-8")
    (root / "corpus.yaml").write_text(MANIFEST, "utf-8")
    return load_corpus(root)


#: The two chunks with identical text (see :data:`DOCS`), in id order.
TIED = ("DUP-A#p0", "DUP-B#p0")
