"""FAISS index kinds for dense retrieval: ``flat`` (exact), ``hnsw`` and ``ivf_pq`` (approximate), built from FAISS
index factory strings over L2-normalised vectors with ``METRIC_INNER_PRODUCT`` (so scores are cosines).

* ``flat`` -> ``"Flat"``: exhaustive search (Johnson, Douze & Jégou 2019, "Billion-scale similarity search with
  GPUs"); no approximation.
* ``hnsw`` -> ``"HNSW{m},Flat"``: a hierarchical navigable small-world graph over the full vectors (Malkov &
  Yashunin 2018, "Efficient and robust approximate nearest neighbor search using Hierarchical Navigable Small World
  graphs", TPAMI). ``m`` links per node, ``ef_construction`` candidates while building, ``ef_search`` while searching
  (FAISS searches with ``max(ef_search, k)``).
* ``ivf_pq`` -> ``"IVF{nlist},PQ{m}x{nbits}"``: an inverted file of ``nlist`` k-means lists, vectors compressed by
  product quantisation into ``m`` codes of ``nbits`` bits (Jégou, Douze & Schmid 2011, "Product quantization for
  nearest neighbor search", TPAMI); ``nprobe`` lists are scanned per query. ``nlist: null`` = ``round(4 * sqrt(N))``
  capped at ``N // 39`` so every list gets at least 39 training vectors (FAISS's own minimum per centroid), at least 1.

Pure helpers only (no stage, no cache): :func:`check_index` validates a config block, :func:`factory_string` turns it
into FAISS's string for ``n`` vectors of dimension ``dim`` (also used by ``experiments/bench_scale.py``),
:func:`build_index` trains and fills an index, :func:`search_parameters` gives the per-search FAISS parameters with a
permission selector.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from ablate.errors import ConfigError
from ablate.stages.base import check_choice, check_int

INDEX_KINDS = ("flat", "hnsw", "ivf_pq")

#: Each kind's parameters and defaults (the ``dense.<kind>`` blocks of ``conf/retrievers/dense.yaml``).
DEFAULTS: dict[str, dict[str, Any]] = {
    "flat": {},
    "hnsw": {"m": 32, "ef_construction": 40, "ef_search": 64},
    "ivf_pq": {"nlist": None, "nprobe": 16, "m": 48, "nbits": 8},
}

#: FAISS's ``min_points_per_centroid``: fewer training vectors per k-means centroid and it warns.
MIN_POINTS_PER_LIST = 39


def check_params(kind: str, params: Mapping[str, Any] | None, setting: str = "dense") -> dict[str, Any]:
    """The ``<setting>.<kind>`` block with defaults filled in, checked; a one-line ConfigError otherwise."""
    given = dict(params or {})
    for k in given:
        if k not in DEFAULTS[kind]:
            valid = ", ".join(DEFAULTS[kind]) or "none"
            raise ConfigError(f"{setting}.{kind}.{k}", given[k], f"unknown parameter; valid: {valid}")
    p = {**DEFAULTS[kind], **given}
    key = f"{setting}.{kind}"
    if kind == "hnsw":
        p["m"] = check_int(f"{key}.m", p["m"], 2, 512)
        p["ef_construction"] = check_int(f"{key}.ef_construction", p["ef_construction"], 1)
        p["ef_search"] = check_int(f"{key}.ef_search", p["ef_search"], 1)
    elif kind == "ivf_pq":
        if p["nlist"] is not None:
            p["nlist"] = check_int(f"{key}.nlist", p["nlist"], 1)
        p["nprobe"] = check_int(f"{key}.nprobe", p["nprobe"], 1)
        p["m"] = check_int(f"{key}.m", p["m"], 1)
        p["nbits"] = check_int(f"{key}.nbits", p["nbits"], 1, 16)
    return p


def check_index(
    kind: object, params: Mapping[str, Any] | None = None, setting: str = "dense"
) -> tuple[str, dict[str, Any]]:
    """``(kind, its parameters with defaults)``; an unknown kind's ConfigError lists the choices."""
    kind = check_choice(f"{setting}.index", kind, INDEX_KINDS)
    return kind, check_params(kind, params, setting)


def auto_nlist(n: int) -> int:
    """``round(4 * sqrt(n))``, capped so every list gets at least :data:`MIN_POINTS_PER_LIST` vectors; >= 1."""
    return max(1, min(round(4 * math.sqrt(n)), n // MIN_POINTS_PER_LIST))


def factory_string(kind: str, params: Mapping[str, Any] | None, n: int, dim: int) -> str:
    """FAISS's index factory string for ``kind`` with ``params`` over ``n`` vectors of dimension ``dim``.

    A ConfigError (naming ``dense.<kind>.<param>``) when the data cannot carry the index: PQ's ``m`` must divide
    ``dim``; IVF needs at least ``nlist`` vectors and PQ at least ``2**nbits`` (the centroids each trains)."""
    kind, p = check_index(kind, params)
    if kind == "flat":
        return "Flat"
    if kind == "hnsw":
        return f"HNSW{p['m']},Flat"
    m, nbits = p["m"], p["nbits"]
    if dim % m:
        divisors = [d for d in range(1, dim + 1) if dim % d == 0 and 4 <= d <= 96]
        raise ConfigError(
            "dense.ivf_pq.m",
            m,
            f"it must divide the embedding dimension {dim} (e.g. {', '.join(map(str, divisors))})",
        )
    nlist = p["nlist"] if p["nlist"] is not None else auto_nlist(n)
    if n < nlist:
        raise ConfigError(
            "dense.ivf_pq.nlist",
            nlist,
            f"IVF trains nlist lists on the vectors and there are only {n}; lower it or set null (auto)",
        )
    if n < 2**nbits:
        raise ConfigError(
            "dense.ivf_pq.nbits",
            nbits,
            f"PQ trains 2**nbits = {2**nbits} centroids per sub-vector and there are only {n} vectors; "
            "lower nbits, or use dense.index=flat (exact, fast at this size)",
        )
    return f"IVF{nlist},PQ{m}x{nbits}"


def build_index(kind: str, params: Mapping[str, Any] | None, vectors: np.ndarray) -> Any:
    """A trained, filled FAISS index of ``kind`` over ``vectors`` (float32, unit-norm rows; id = row number)."""
    import faiss

    n, dim = vectors.shape
    kind, p = check_index(kind, params)
    index: Any = faiss.index_factory(dim, factory_string(kind, p, n, dim), faiss.METRIC_INNER_PRODUCT)
    if kind == "hnsw":
        index.hnsw.efConstruction = p["ef_construction"]
    elif kind == "ivf_pq":
        # index_factory turns on polysemous training for 8-bit PQ: it only serves Hamming-threshold search, which
        # ablate never uses, and it costs minutes on a few thousand vectors.
        index.do_polysemous_training = False
        recommended = MIN_POINTS_PER_LIST * 2 ** p["nbits"]
        if n < recommended:
            # FAISS would print its warning once per sub-quantizer (m times): say it once, then quieten it.
            print(
                f"note: dense.index=ivf_pq trains {2 ** p['nbits']} PQ centroids per sub-vector on {n:,} vectors "
                f"(FAISS recommends >= {recommended:,}); recall against flat may suffer",
                file=sys.stderr,
            )
            index.pq.cp.min_points_per_centroid = 1
        index.train(vectors)
    index.add(vectors)
    return index


def search_parameters(kind: str, params: Mapping[str, Any], selector: Any = None) -> Any:
    """FAISS search parameters for one search: ``ef_search`` / ``nprobe`` and the permission ``selector``
    (an ``IDSelector`` or None). The caller keeps ``selector`` (and what it points into) alive during the search."""
    import faiss

    if kind == "hnsw":
        sp: Any = faiss.SearchParametersHNSW()  # type: ignore[attr-defined]  # missing from faiss' stubs
        sp.efSearch = int(params["ef_search"])
    elif kind == "ivf_pq":
        sp = faiss.SearchParametersIVF()
        sp.nprobe = int(params["nprobe"])
    else:
        sp = faiss.SearchParameters()
    if selector is not None:
        sp.sel = selector
    return sp
