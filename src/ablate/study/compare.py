"""One-factor discipline: may two tracked runs be compared, and what exactly changed between them?

An ablation row is only readable when it changes one thing. This module
decides, from what a run recorded (:class:`ablate.record.RecordedRun`: its params, its ``ablate.fp.<component>``
fingerprints, its corpus and label tags), whether a run differs from a baseline only in the factor being studied.
Pure functions over plain data: no MLflow here.

Rules (:func:`check_comparison`):

* **Refused** (raises :class:`ComparisonRefused` unless ``force``): the two runs were scored against different labels
  (``ablate.qrels_hash``, on the same split) or over different documents (the corpus snapshot). Their numbers are not
  comparable at all; with ``force`` the comparison goes ahead and keeps a ``FORCED`` flag.
* **Flagged**: a different split (loudly when one of the two is the held-out ``test`` split), and any factor that
  changed beyond the one being studied ("two factors changed: retrievers/fusion and bm25.k1").
* **Chunkers**: runs over different chunkers score different chunk labels, yet the same labels as written when one
  run's labels were projected onto its chunks (:mod:`ablate.data.projection`; tag ``ablate.qrels_source_hash``). That
  is not refused but flagged as a change of the evaluation unit, to be compared at the document level. The chunker
  (``corpus.chunker``, swept as ``corpus.chunker.kind`` / ``.size`` / ``.overlap``) is ONE factor, ``chunker``.

What counts as a factor. Runs log only the parameters of the stages that ran, each under the stage's name, so a
parameter difference counts when both runs log it (``rrf.k`` of a run without fusion does not exist). Adding or
removing a stage is the variant's declared change: the *pipeline params* (``pipeline.retrievers``,
``pipeline.fuser``, ``pipeline.reranker``: what ``conf/variant/*.yaml`` sets) together form one factor, ``variant``.
A component whose fingerprint differs although no parameter explains it (model files, tokenizer rules, a library or
code version changed under the same name) is a factor of its own; a setting explains the component that records it
(``versions.policy`` and ``corpus.as_of`` the ``dates`` component: :data:`ablate.record.PARAM_COMPONENTS`), so a
version-policy sweep is one factor. A missing fingerprint means "component absent".

``factor`` names the studied factor: ``"variant"`` (the A/B/C/D ablation table), parameter names (a sweep:
``"rrf.k,rrf.window"`` or a list), or ``None`` (nothing declared: at most one factor may change).
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ablate import record as R
from ablate.errors import AblateError
from ablate.record import RecordedRun

__all__ = [
    "ComparisonCheck",
    "ComparisonRefused",
    "bookkeeping_param",
    "check_comparison",
    "component_of",
    "describe_change",
    "differing_components",
    "norm_value",
    "parse_factor",
    "varying_params",
]

_NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


class ComparisonRefused(AblateError):
    """Two runs whose numbers are not comparable (different labels or documents); ``--force`` overrides."""


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
    if s.startswith(("[", "{")):
        try:
            parsed = json.loads(s)
        except ValueError:
            return s
        return norm_value(parsed) if isinstance(parsed, list) else json.dumps(parsed, sort_keys=True)
    try:
        f = float(s)
    except ValueError:
        return s
    return s if math.isnan(f) else f


def bookkeeping_param(key: str) -> bool:
    """Params (:data:`ablate.record.BOOKKEEPING_PARAMS`, and where a value came from:
    :data:`ablate.record.SOURCE_PARAM_SUFFIX`) that never change rankings or scores."""
    return key.endswith(R.SOURCE_PARAM_SUFFIX) or any(
        key == p or (p.endswith(".") and key.startswith(p)) for p in R.BOOKKEEPING_PARAMS
    )


def component_of(key: str, stages: Collection[str] = ()) -> str | None:
    """The component a param configures (the ``ablate.fp.<component>`` it feeds), or ``None`` for the pipeline's
    shape. Stage params are ``<stage>.<param>``."""
    if key in R.PIPELINE_PARAMS:
        return None
    head = key.split(".", 1)[0]
    if head in stages:
        return head
    if key == R.P_IDENTITY:
        return "identity"
    if key in R.PARAM_COMPONENTS:  # versions.policy, corpus.as_of: recorded in ablate.fp.dates
        return R.PARAM_COMPONENTS[key]
    if head == "corpus":
        return "snapshot"
    if head in ("eval", "abstain"):
        return head
    return head


#: A param ending so is the content hash of the file another param names (``generator.prompt_sha256`` of
#: ``generator.prompt``): when both change, the file is the one factor; alone, an edit of the same file is one.
CONTENT_HASH_SUFFIX = "_sha256"


def _hash_of_changed(key: str, changed: Collection[str]) -> bool:
    """``key`` is the content hash of a param that changed too (:data:`CONTENT_HASH_SUFFIX`)."""
    return key.endswith(CONTENT_HASH_SUFFIX) and key[: -len(CONTENT_HASH_SUFFIX)] in changed


def varying_params(runs: Sequence[RecordedRun]) -> list[str]:
    """Params whose value differs between ``runs``: the pipeline's shape, and params every run logs (a stage's
    params that only some runs log are part of the shape change), bookkeeping left out, and a file's content hash
    when the param naming the file differs too. Sorted, shape first."""
    shape = [k for k in R.PIPELINE_PARAMS if len({repr(_shape(r, k)) for r in runs}) > 1]
    keys = sorted(set.intersection(*(set(r.params) for r in runs))) if runs else []
    rest = [
        k
        for k in keys
        if not bookkeeping_param(k)
        and k not in R.PIPELINE_PARAMS
        and len({repr(norm_value(r.params.get(k))) for r in runs}) > 1
    ]
    return shape + [k for k in rest if not _hash_of_changed(k, rest)]


def differing_components(a: Mapping[str, str], b: Mapping[str, str]) -> list[str]:
    """Components whose fingerprints differ (a component missing on one side counts as different), sorted."""
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def parse_factor(factor: str | Collection[str] | None) -> list[str]:
    """``"rrf.k,rrf.window"`` / ``["rrf.k"]`` / ``"variant"`` -> the names, in order (``None`` -> [])."""
    if factor is None:
        return []
    items = factor.split(",") if isinstance(factor, str) else list(factor)
    return list(dict.fromkeys(str(x).strip() for x in items if str(x).strip()))


# --------------------------------------------------------------------------------------------------------------
# what changed


def _shape(run: RecordedRun, key: str) -> Any:
    if key == R.P_RETRIEVERS:
        return tuple(sorted(R.json_list(run.params.get(key))))
    v = run.params.get(key)
    return R.NONE if v in (None, "", R.NONE) else str(v)


@dataclass
class _Diff:
    axes: list[str]  # pipeline axes that differ (names from PIPELINE_PARAMS)
    params: dict[str, tuple[Any, Any]]  # relevant param differences: key -> (baseline, other)
    fp_only: list[str]  # components whose fingerprint differs with no param to explain it
    split: tuple[str | None, str | None] | None


def _diff(a: RecordedRun, b: RecordedRun) -> _Diff:
    axes = [axis for key, axis in R.PIPELINE_PARAMS.items() if _shape(a, key) != _shape(b, key)]
    stages = set(a.stages) | set(b.stages)
    params: dict[str, tuple[Any, Any]] = {}
    explained: set[str] = set()
    for key in sorted(set(a.params) | set(b.params)):
        if bookkeeping_param(key) or key in R.PIPELINE_PARAMS:
            continue
        ra, rb = a.params.get(key), b.params.get(key)
        if norm_value(ra) == norm_value(rb):
            continue
        comp = component_of(key, stages)
        if comp is not None:
            explained.add(comp)
        if key in a.params and key in b.params:
            params[key] = (ra, rb)
    for key in [k for k in params if _hash_of_changed(k, params)]:
        del params[key]  # the file's name changed: its content hash is that change, not another factor
    if axes:
        explained |= set(a.stages) ^ set(b.stages)
    split = (a.split, b.split) if a.split != b.split else None
    if split or a.qrels_hash != b.qrels_hash or a.snapshot != b.snapshot or a.corpus_files != b.corpus_files:
        explained.add("snapshot")  # reported by the split / label / corpus rules
    fa, fb = a.fingerprints, b.fingerprints
    fp_only = [
        comp
        for comp in differing_components(fa, fb)
        if comp not in explained
        and comp in fa
        and comp in fb  # a component added / removed is the variant's change
    ]
    return _Diff(axes, params, fp_only, split)


def _show(v: Any) -> str:
    if v is None:
        return "(unset)"
    n = norm_value(v)
    if isinstance(n, tuple):
        return "[" + ",".join(str(x) for x in n) + "]"
    if isinstance(n, float) and n.is_integer():
        return str(int(n))
    return str(v)


def _stage_summary(run: RecordedRun, stage: str) -> str:
    """``rrf(k=60, window=100)``: a stage and its top-level params (not batch sizes, the llama.cpp build's system info
    and tier name, or nested settings)."""
    pre = f"{stage}."
    items = [
        f"{k[len(pre) :]}={_show(v)}"
        for k, v in run.params.items()
        if k.startswith(pre)
        and "." not in k[len(pre) :]
        and not k.endswith(("batch_size", ".build", ".build_tier"))
    ]
    return f"{stage}({', '.join(items)})" if items else stage


def _variant_words(a: RecordedRun, b: RecordedRun, axes: list[str]) -> list[str]:
    words: list[str] = []
    if "retrievers" in axes:
        ra, rb = set(_shape(a, R.P_RETRIEVERS)), set(_shape(b, R.P_RETRIEVERS))
        words += [f"-{r}" for r in sorted(ra - rb)] + [f"+{r}" for r in sorted(rb - ra)]
    for key, axis in ((R.P_FUSER, "fusion"), (R.P_RERANKER, "reranker"), (R.P_GENERATOR, "generator")):
        if axis not in axes:
            continue
        sa, sb = _shape(a, key), _shape(b, key)
        if sb == R.NONE:
            words.append(f"-{sa}")
        elif sa == R.NONE:
            words.append(f"+{_stage_summary(b, sb)}")
        else:
            words.append(f"{axis} {sa}->{_stage_summary(b, sb)}")
    return words


def describe_change(baseline: RecordedRun, other: RecordedRun, order: Sequence[str] = ()) -> str:
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


def source_labels(run: RecordedRun) -> str | None:
    """The labels as written a run was scored by: before any projection onto other chunks, its qrels_hash."""
    return run.tags.get(R.T_QRELS_SOURCE) or run.qrels_hash


def unit_change(baseline: RecordedRun, other: RecordedRun) -> str | None:
    """The flag when two runs scored the same labels projected onto different chunks, else None."""
    pa, pb = baseline.tags.get(R.T_UNIT_CHANGE), other.tags.get(R.T_UNIT_CHANGE)
    if not (pa or pb) or source_labels(baseline) != source_labels(other):
        return None
    if pa == pb:  # the same chunks, labels projected by another rule or share (eval.projection.min_overlap)
        if baseline.qrels_hash == other.qrels_hash:
            return None
        return f"labels projected onto {pa} chunks by another share: the labels changed; compare at the document level"
    where = " and ".join(f"{r.short} onto {p} chunks" for r, p in ((baseline, pa), (other, pb)) if p)
    return f"labels projected ({where}): the unit changed; compare at the document level"


#: What the chunker is called as a factor; the params and swept keys that are it.
CHUNKER_FACTOR = "chunker"
_CHUNKER_PARAM = "corpus.chunker"


def _is_chunker(name: str) -> bool:
    return name in (CHUNKER_FACTOR, _CHUNKER_PARAM) or name.startswith(_CHUNKER_PARAM + ".")


def _refusal_problems(baseline: RecordedRun, other: RecordedRun) -> list[str]:
    problems = []
    if (
        baseline.split == other.split
        and baseline.qrels_hash
        and other.qrels_hash
        and baseline.qrels_hash != other.qrels_hash
        and unit_change(baseline, other) is None
    ):
        problems.append(
            f"labels differ: qrels_hash {baseline.qrels_hash} (baseline {baseline.short}) vs {other.qrels_hash} "
            f"({other.short})"
        )
    if baseline.snapshot and other.snapshot and baseline.snapshot != other.snapshot:
        problems.append(
            f"documents differ: corpus snapshot {baseline.snapshot} (baseline {baseline.short}) vs {other.snapshot} "
            f"({other.short})"
        )
    return problems


def _split_flag(other: RecordedRun, split: tuple[str | None, str | None]) -> str:
    sa, sb = split
    if "test" in (sa, sb):
        return (
            f"SPLIT MIX: {other.short} is on split {sb!r} but the baseline is on {sa!r}: the held-out test split is "
            "run once, after tuning on dev, and never compared against dev runs to pick settings"
        )
    return f"split differs: {sb!r} vs the baseline's {sa!r} (different queries)"


def check_comparison(
    baseline: RecordedRun,
    other: RecordedRun,
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
    if any(_is_chunker(s) for s in studied):  # corpus.chunker.kind and .size are one factor: the chunker
        studied = list(dict.fromkeys(_CHUNKER_PARAM if _is_chunker(s) else s for s in studied))
    problems = _refusal_problems(baseline, other)
    refused = bool(problems)
    if refused and not force:
        raise ComparisonRefused(
            f"cannot compare {other.short} with baseline {baseline.short}: {'; '.join(problems)}; their numbers "
            "were measured on different ground. Fix: compare runs of one corpus snapshot and label version "
            "(re-run the older ones), or pass --force to report them anyway (flagged)"
        )
    flags = [f"FORCED: {p}" for p in problems]
    if (unit := unit_change(baseline, other)) is not None:
        flags.append(unit)
    d = _diff(baseline, other)
    stages = set(baseline.stages) | set(other.stages)
    if d.split:
        flags.append(_split_flag(other, d.split))
    elif (
        not refused
        and baseline.corpus_files
        and other.corpus_files
        and baseline.corpus_files != other.corpus_files
        and not any(component_of(k, stages) == "snapshot" for k in d.params)
    ):
        d.fp_only.append("corpus files")

    studied_parts: list[str] = []
    extra: list[str] = []
    if d.axes:
        label = "/".join(d.axes)
        if "variant" in studied or not studied or any(k in studied for k in R.PIPELINE_PARAMS):
            studied_parts.append(label)
        else:
            extra.append(label)
    swept = [k for k in studied if k in d.params]
    if swept:
        studied_parts.append("/".join(CHUNKER_FACTOR if k == _CHUNKER_PARAM else k for k in swept))
    extra += [CHUNKER_FACTOR if k == _CHUNKER_PARAM else k for k in d.params if k not in studied]
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
