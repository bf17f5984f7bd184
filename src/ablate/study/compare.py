"""One-factor discipline: may two tracked runs be compared, and what exactly changed between them?

An ablation row is only readable when it changes one thing (the spec's ablation table: "每次只改一处"). This module
decides, from what a run carries (its flattened params, its ``ablate.fp.<component>`` fingerprints and its corpus /
label tags), whether a run differs from a baseline only in the factor being studied. Pure functions over plain dicts:
no MLflow here (``ablate.report`` fetches the runs).

Rules (:func:`check_comparison`):

* **Refused** (raises :class:`ComparisonRefused` unless ``force``): the two runs were scored against different labels
  (``ablate.qrels_hash``, on the same split) or over different documents (the corpus snapshot). Their numbers are not
  comparable at all; with ``force`` the comparison goes ahead and keeps a ``FORCED`` flag.
* **Flagged**: a different split (loudly when one of the two is the held-out ``test`` split), and any factor that
  changed beyond the one being studied ("two factors changed: retrievers/fusion and bm25.k1").

What counts as a factor. A parameter difference counts only when the component it configures is active in *both*
runs: ``rrf.k`` is irrelevant to a run without fusion, ``bm25.k1`` to a dense-only run. Adding or removing a whole
component (``+dense``, ``+rrf``, ``-rerank``) is the variant's own declared change: the *variant axes*
``retrieval.retrievers``, ``fusion.method`` and ``rerank.enabled`` (what ``conf/variant/*.yaml`` set) together form
one factor. A component whose fingerprint differs although no parameter explains it (model files or tokenizer
changed under the same name) is a factor of its own. A missing fingerprint means "component absent".

``factor`` names the studied factor: ``"variant"`` (the variant axes; the A/B/C/D ablation table), parameter names
(a sweep: ``"rrf.k,retrieval.window"`` or a list), or ``None`` (nothing declared: at most one factor may change).
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ablate.errors import AblateError

__all__ = [
    "IGNORED_PARAMS",
    "VARIANT_AXES",
    "VARIANT_ORDER",
    "ComparisonCheck",
    "ComparisonRefused",
    "RunInfo",
    "check_comparison",
    "component_of",
    "describe_change",
    "differing_components",
    "ignored_param",
    "norm_value",
    "parse_factor",
]

#: Params that say which stack a variant is (set by ``conf/variant/*.yaml``) -> the axis name used in messages.
VARIANT_AXES: dict[str, str] = {
    "retrieval.retrievers": "retrievers",
    "fusion.method": "fusion",
    "rerank.enabled": "reranker",
}
#: Ablation-table order of the variants (the spec's table).
VARIANT_ORDER: dict[str, int] = {"A": 0, "B": 1, "C": 2, "D": 3, "oracle": 4}
#: Params (exact keys, or prefixes ending in ".") that never change a run's rankings or scores: bookkeeping.
#: ``corpus.split`` is checked on its own; ``corpus.path`` is covered by the snapshot fingerprint.
IGNORED_PARAMS: tuple[str, ...] = (
    "variant",
    "variant.",
    "tracking.",
    "cache.",
    "progress",
    "stats.",
    "hydra.",
    "corpus.path",
    "corpus.split",
    "retrieval.cache_depth",
)
_NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


class ComparisonRefused(AblateError):
    """Two runs whose numbers are not comparable (different labels or documents); ``--force`` overrides."""


@dataclass(frozen=True)
class RunInfo:
    """What the comparison rules read from one tracked run.

    ``components``: component -> fingerprint (the ``ablate.fp.<component>`` tags). ``snapshot``: the documents
    (``ablate.index_snapshot``, else ``ablate.snapshot``); ``corpus_files``: every corpus file and the chunker
    (``ablate.snapshot``). ``qrels_hash``: the labels of the run's split (``ablate.qrels_hash``).
    """

    run_id: str
    name: str
    variant: str
    params: Mapping[str, str] = field(default_factory=dict)
    components: Mapping[str, str] = field(default_factory=dict)
    snapshot: str | None = None
    qrels_hash: str | None = None
    split: str | None = None
    corpus_files: str | None = None

    @classmethod
    def from_run(cls, run_id: str, name: str, params: Mapping[str, str], tags: Mapping[str, str]) -> RunInfo:
        """Read the tag contract of ``ablate.cli.run_job``."""
        comps = {k[len("ablate.fp.") :]: str(v) for k, v in tags.items() if k.startswith("ablate.fp.")}
        return cls(
            run_id=run_id,
            name=name,
            variant=str(params.get("variant") or tags.get("ablate.variant") or name),
            params=dict(params),
            components=comps,
            snapshot=tags.get("ablate.index_snapshot") or tags.get("ablate.snapshot"),
            qrels_hash=tags.get("ablate.qrels_hash"),
            split=tags.get("ablate.split") or params.get("corpus.split"),
            corpus_files=tags.get("ablate.snapshot"),
        )

    @property
    def short(self) -> str:
        return f"{self.name} ({self.run_id[:8]})"


@dataclass(frozen=True)
class ComparisonCheck:
    """Outcome of :func:`check_comparison`.

    ``ok``: nothing flagged. ``refused``: the pair would have been refused and was let through by ``force``.
    ``reason``: all flags in one sentence ("" when ok). ``factors``: every factor that changed (studied first);
    ``change``: what changed, in words (``"+dense +rrf(k=60, window=100)"``).
    """

    ok: bool
    flags: list[str]
    refused: bool
    reason: str
    factors: list[str] = field(default_factory=list)
    change: str = ""


# --------------------------------------------------------------------------------------------------------------
# values and components


def norm_value(v: Any) -> Any:
    """A param value as compared: MLflow stores strings, so ``"60"``, ``"60.0"`` and ``60`` are equal, ``"null"``
    is ``None``, ``"true"``/``"True"`` are ``True`` and JSON lists are tuples."""
    if v is None:
        return None
    if isinstance(v, bool):
        return v
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, list | tuple):
        return tuple(norm_value(x) for x in v)
    s = str(v).strip()
    low = s.lower()
    if low in ("null", "none", ""):
        return None
    if low in ("true", "false"):
        return low == "true"
    if s.startswith("["):
        try:
            return norm_value(json.loads(s))
        except ValueError:
            return s
    try:
        f = float(s)
    except ValueError:
        return s
    return s if math.isnan(f) else f


def ignored_param(key: str) -> bool:
    """Bookkeeping params (:data:`IGNORED_PARAMS`) that never change rankings or scores."""
    return any(key == p or (p.endswith(".") and key.startswith(p)) for p in IGNORED_PARAMS)


def component_of(key: str) -> str | None:
    """The component a param configures (the ``ablate.fp.<component>`` it feeds), or ``None``."""
    if key.startswith("bm25."):
        return "bm25"
    if key.startswith("dense."):
        return "dense"
    if key.startswith(("fusion.", "rrf.")) or key == "retrieval.window":
        return "fusion"
    if key.startswith("rerank."):
        return "reranker"
    if key.startswith("eval."):
        return "eval"
    if key == "corpus.identity":
        return "identity"
    if key.startswith("corpus."):
        return "snapshot"
    return None


def _retrievers(info: RunInfo) -> tuple[str, ...]:
    v = norm_value(info.params.get("retrieval.retrievers"))
    if isinstance(v, tuple):
        return tuple(sorted(str(x) for x in v))
    if isinstance(v, str):
        return (v,)
    return tuple(sorted(c for c in ("bm25", "dense", "oracle") if c in info.components))


def _active(info: RunInfo) -> set[str]:
    """Components that shape this run's rankings (from its params; fingerprints where params say nothing)."""
    act = {"snapshot", "identity", "eval"} | set(_retrievers(info))
    method = norm_value(info.params.get("fusion.method"))
    if "fusion.method" in info.params:
        if method not in (None, "none"):
            act.add("fusion")
    elif "fusion" in info.components:
        act.add("fusion")
    if "rerank.enabled" in info.params:
        if norm_value(info.params.get("rerank.enabled")) is True:
            act.add("reranker")
    elif "reranker" in info.components:
        act.add("reranker")
    return act


def _relevant(key: str, info: RunInfo, active: set[str]) -> bool:
    comp = component_of(key)
    if comp is None:
        return True
    if comp not in active:
        return False
    if key.startswith("rerank.train."):
        return norm_value(info.params.get("rerank.model")) == "trained"
    return True


def differing_components(a: Mapping[str, str], b: Mapping[str, str]) -> list[str]:
    """Components whose fingerprints differ (a component missing on one side counts as different), sorted."""
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def parse_factor(factor: str | Collection[str] | None) -> list[str]:
    """``"rrf.k,retrieval.window"`` / ``["rrf.k"]`` / ``"variant"`` -> the names, in order (``None`` -> [])."""
    if factor is None:
        return []
    items = factor.split(",") if isinstance(factor, str) else list(factor)
    return list(dict.fromkeys(str(x).strip() for x in items if str(x).strip()))


# --------------------------------------------------------------------------------------------------------------
# what changed


@dataclass
class _Diff:
    axes: list[str]  # variant axes that differ (names from VARIANT_AXES)
    params: dict[
        str, tuple[Any, Any]
    ]  # relevant param differences (not variant axes): key -> (baseline, other)
    fp_only: list[str]  # components whose fingerprint differs with no param to explain it
    split: tuple[str | None, str | None] | None


def _diff(a: RunInfo, b: RunInfo) -> _Diff:
    act_a, act_b = _active(a), _active(b)
    axes = []
    for key, axis in VARIANT_AXES.items():
        va = _retrievers(a) if key == "retrieval.retrievers" else norm_value(a.params.get(key))
        vb = _retrievers(b) if key == "retrieval.retrievers" else norm_value(b.params.get(key))
        if va != vb:
            axes.append(axis)
    params: dict[str, tuple[Any, Any]] = {}
    explained: set[str] = set()
    for key in sorted(set(a.params) | set(b.params)):
        if ignored_param(key) or key in VARIANT_AXES:
            continue
        ra, rb = a.params.get(key), b.params.get(key)
        if norm_value(ra) == norm_value(rb):
            continue
        comp = component_of(key)
        if comp is not None:
            explained.add(comp)
        if _relevant(key, a, act_a) and _relevant(key, b, act_b):
            params[key] = (ra, rb)
    if "retrievers" in axes:
        explained |= {"bm25", "dense", "oracle"}
    if "fusion" in axes:
        explained.add("fusion")
    if "reranker" in axes:
        explained.add("reranker")
    split = (a.split, b.split) if a.split != b.split else None
    if (
        split
        or (a.qrels_hash != b.qrels_hash)
        or (a.snapshot != b.snapshot)
        or (a.corpus_files != b.corpus_files)
    ):
        explained.add("snapshot")  # reported by the split / label / corpus rules
    fp_only = []
    for comp in differing_components(a.components, b.components):
        if comp in explained or comp not in a.components or comp not in b.components:
            continue  # explained by a param, or a component added / removed (part of the variant's change)
        if comp not in act_a and comp not in act_b:
            continue
        fp_only.append(comp)
    return _Diff(axes, params, fp_only, split)


def _show(v: Any) -> str:
    if v is None:
        return "(unset)"
    s = str(v)
    n = norm_value(s)
    if isinstance(n, tuple):
        return "[" + ",".join(str(x) for x in n) + "]"
    return s


def _variant_words(a: RunInfo, b: RunInfo, axes: list[str]) -> list[str]:
    words: list[str] = []
    if "retrievers" in axes:
        ra, rb = set(_retrievers(a)), set(_retrievers(b))
        words += [f"-{r}" for r in sorted(ra - rb)] + [f"+{r}" for r in sorted(rb - ra)]
    if "fusion" in axes:
        ma, mb = norm_value(a.params.get("fusion.method")), norm_value(b.params.get("fusion.method"))
        if mb in (None, "none"):
            words.append(f"-{ma}")
        else:
            extra = ""
            if mb == "rrf":
                extra = (
                    f"(k={_show(b.params.get('rrf.k'))}, window={_show(b.params.get('retrieval.window'))})"
                )
            words.append(f"+{mb}{extra}" if ma in (None, "none") else f"fusion {ma}->{mb}{extra}")
    if "reranker" in axes:
        if norm_value(b.params.get("rerank.enabled")) is True:
            words.append(
                f"+rerank({_show(b.params.get('rerank.model'))}, depth={_show(b.params.get('rerank.depth'))})"
            )
        else:
            words.append("-rerank")
    return words


def describe_change(baseline: RunInfo, other: RunInfo, order: Sequence[str] = ()) -> str:
    """What ``other`` changes relative to ``baseline``, in words: ``"+dense +rrf(k=60, window=100)"``,
    ``"rrf.k 10->30"``, ``"+dense +rrf(k=60, window=100); bm25.k1 0.9->1.2"``; ``"(no change)"`` if none.
    Params are listed in ``order`` first (e.g. a sweep's), then by name."""
    d = _diff(baseline, other)
    head = " ".join(_variant_words(baseline, other, d.axes))
    keys = [k for k in order if k in d.params] + [k for k in d.params if k not in order]
    tail = [f"{k} {_show(d.params[k][0])}->{_show(d.params[k][1])}" for k in keys]
    tail += [f"{c} fingerprint changed" for c in d.fp_only]
    if d.split:
        tail.append(f"split {d.split[0]}->{d.split[1]}")
    parts = [p for p in (head, ", ".join(tail)) if p]
    return "; ".join(parts) if parts else "(no change)"


def _count(n: int) -> str:
    return _NUMBER_WORDS.get(n, str(n))


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def check_comparison(
    baseline: RunInfo,
    other: RunInfo,
    factor: str | Collection[str] | None,
    force: bool = False,
    order: Sequence[str] = (),
) -> ComparisonCheck:
    """May ``other`` be read against ``baseline`` as a one-factor change? See the module docstring for the rules.

    Raises :class:`ComparisonRefused` (naming both hashes and the ``--force`` fix) when the labels or the documents
    differ, unless ``force``; then ``refused=True`` and a ``FORCED`` flag is kept. ``order``: how to list changed
    params in ``change`` (default: the studied ones first).
    """
    studied = parse_factor(factor)
    flags: list[str] = []
    problems: list[str] = []
    same_split = baseline.split == other.split
    if same_split and baseline.qrels_hash and other.qrels_hash and baseline.qrels_hash != other.qrels_hash:
        problems.append(
            f"labels differ: qrels_hash {baseline.qrels_hash} (baseline {baseline.short}) vs {other.qrels_hash} "
            f"({other.short})"
        )
    if baseline.snapshot and other.snapshot and baseline.snapshot != other.snapshot:
        problems.append(
            f"documents differ: corpus snapshot {baseline.snapshot} (baseline {baseline.short}) vs {other.snapshot} "
            f"({other.short})"
        )
    refused = bool(problems)
    if refused and not force:
        raise ComparisonRefused(
            f"cannot compare {other.short} with baseline {baseline.short}: {'; '.join(problems)}; their numbers "
            "were measured on different ground. Fix: compare runs of one corpus snapshot and label version "
            "(re-run the older ones), or pass --force to report them anyway (flagged)"
        )
    flags += [f"FORCED: {p}" for p in problems]

    d = _diff(baseline, other)
    if d.split:
        sa, sb = d.split
        if "test" in (sa, sb):
            flags.append(
                f"SPLIT MIX: {other.short} is on split {sb!r} but the baseline is on {sa!r}: the held-out test "
                "split is run once, after tuning on dev, and never compared against dev runs to pick settings"
            )
        else:
            flags.append(f"split differs: {sb!r} vs the baseline's {sa!r} (different queries)")
    elif (
        not refused
        and baseline.corpus_files
        and other.corpus_files
        and baseline.corpus_files != other.corpus_files
        and not any(component_of(k) == "snapshot" for k in d.params)
    ):
        d.fp_only.append("corpus files")

    studied_parts: list[str] = []
    extra: list[str] = []
    variant_studied = "variant" in studied or not studied
    if d.axes:
        label = "/".join(d.axes)
        if variant_studied or any(k in studied for k, ax in VARIANT_AXES.items() if ax in d.axes):
            studied_parts.append(label)
        else:
            extra.append(label)
    swept = [k for k in studied if k in d.params]
    if swept:
        studied_parts.append("/".join(swept))
    extra += [k for k in d.params if k not in studied]
    extra += [f"{c} (fingerprint changed, same parameters)" for c in d.fp_only]

    factors = studied_parts + extra
    if studied:
        if extra:
            if studied_parts:
                flags.append(f"{_count(len(factors))} factors changed: {_join(factors)}")
            else:
                what = "the variant" if studied == ["variant"] else "/".join(studied)
                flags.append(f"changed outside the studied factor ({what}): {_join(extra)}")
    elif len(factors) > 1:
        flags.append(f"{_count(len(factors))} factors changed: {_join(factors)}")
    return ComparisonCheck(
        ok=not flags,
        flags=flags,
        refused=refused,
        reason="; ".join(flags),
        factors=factors,
        change=describe_change(baseline, other, order or [f for f in studied if f != "variant"]),
    )
