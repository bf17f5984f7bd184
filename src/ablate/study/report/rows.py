"""The rows of a report: which runs, in what order, under which labels, against which baseline. A sweep's runs are
ordered as it declared them and its first cell is the default baseline; an ablation's by its variants' declared order
(A first). :func:`make_plan` decides it once; :mod:`.compute` computes the numbers over it."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ablate import record as R
from ablate.errors import ConfigError
from ablate.record import RecordedRun
from ablate.study.compare import norm_value, varying_params
from ablate.study.fetch import RunRecord
from ablate.study.report.heldout import HeldOutMarking, heldout_marking


def _sort_value(key: str, r: RunRecord) -> tuple[int, float, str]:
    if key == "variant":
        return (0, r.variant_order, r.variant)
    n = norm_value(r.params.get(key))
    if isinstance(n, float):
        return (0, n, "")
    return (1, 0.0, "" if n is None else str(n))


def _short_keys(keys: list[str]) -> dict[str, str]:
    """``rrf.k`` -> ``k``, ``pipeline.retrievers`` -> ``retrievers``: the last part, unless two keys share it."""
    last = [k.rsplit(".", 1)[-1] for k in keys]
    return {k: (t if last.count(t) == 1 else k) for k, t in zip(keys, last, strict=True)}


def _label_value(key: str, v: Any) -> str:
    if key == R.P_RETRIEVERS:
        return ",".join(R.json_list(v))
    if key == "corpus.chunker":  # {"kind": "tokens", "size": 100, ...} -> tokens-100
        try:
            d = json.loads(str(v))
        except ValueError:
            return str(v)
        return "-".join(str(d[k]) for k in ("kind", "size") if k in d) if isinstance(d, dict) else str(v)
    n = norm_value(v)
    if isinstance(n, float) and n.is_integer():
        return str(int(n))
    return str(v)


def run_labels(records: Sequence[RecordedRun], swept: Sequence[str] = ()) -> dict[str, str]:
    """Unique row labels. Runs of one variant: a run named by its sweep's cell (``C k=1 window=20``: a name of its
    own, unique among them) keeps its name; any other gets its name plus the swept params that tell the variant's
    runs apart (short keys: ``C k=1 window=20``), then other params all of them log; then an id prefix."""
    by_variant: dict[str, list[RecordedRun]] = {}
    for r in records:
        by_variant.setdefault(r.variant, []).append(r)
    labels: dict[str, str] = {}
    for variant, group in by_variant.items():
        if len(group) == 1:
            labels[group[0].run_id] = group[0].name
            continue
        names = [r.name for r in group]
        common = [k for k in varying_params(group) if all(k in r.params for r in group)]
        keys = [k for k in dict.fromkeys([*swept, *common]) if k != "variant"]
        keys = [k for k in keys if len({repr(norm_value(r.params.get(k))) for r in group}) > 1]
        short = _short_keys(keys)
        for r in group:
            if r.name != variant and names.count(r.name) == 1:  # a sweep's cell label (plan.cell_labels)
                labels[r.run_id] = r.name
                continue
            parts = [f"{short[k]}={_label_value(k, r.params.get(k))}" for k in keys]
            labels[r.run_id] = " ".join([r.name, *parts])
    counts: dict[str, int] = {}
    for lab in labels.values():
        counts[lab] = counts.get(lab, 0) + 1
    return {rid: (f"{lab} [{rid[:8]}]" if counts[lab] > 1 else lab) for rid, lab in labels.items()}


def pick_baseline(
    ordered: list[RunRecord], kind: str, baseline: str | None, labels: dict[str, str]
) -> tuple[RunRecord, list[str]]:
    """The run named by ``baseline`` (id, id prefix, label, name or variant), else the first in order: the lowest
    ``variant.order`` of an ablation table (A), or the first cell of a sweep."""
    if baseline:
        for match in (
            lambda r: r.run_id == baseline,
            lambda r: labels[r.run_id] == baseline,
            lambda r: r.name == baseline,
            lambda r: r.variant == baseline,
        ):
            hits = [r for r in ordered if match(r)]
            if hits:
                return hits[0], []
        prefixed = [r for r in ordered if len(baseline) >= 6 and r.run_id.startswith(baseline)]
        if len(prefixed) == 1:
            return prefixed[0], []
        opts = ", ".join(dict.fromkeys([*(r.variant for r in ordered), *(labels[r.run_id] for r in ordered)]))
        raise ConfigError("--baseline", baseline, f"choose a run id, name or variant of: {opts}")
    warnings = []
    if kind == "ablation" and math.isinf(ordered[0].variant_order):
        warnings.append(
            f"the runs declare no variant order: the baseline is {labels[ordered[0].run_id]} (first by name)"
        )
    return ordered[0], warnings


@dataclass
class Plan:
    """What the table is about: its kind, the swept params, the studied factor, the row order and labels."""

    kind: str
    swept: list[str]
    factor: list[str]
    columns_params: list[str]
    order_keys: list[str]
    ordered: list[RunRecord]
    labels: dict[str, str]
    heldout: HeldOutMarking = field(default_factory=lambda: HeldOutMarking({}, {}))
    #: the runs by variant order and swept values: its first is the default baseline (``ordered`` is the rows'
    #: order: the sweep's as declared when the runs are one sweep's, else this)
    ranked: list[RunRecord] = field(default_factory=list)

    @property
    def shown(self) -> dict[str, str]:
        """Row labels as tables show them: with the held-out marks (``C k=10 †``)."""
        return self.heldout.labels(self.labels)


def _swept_param(key: str) -> str:
    """The param a swept config key is logged as: ``corpus.chunker.size`` -> ``corpus.chunker`` (one JSON param),
    ``eval.projection.min_overlap`` -> ``labels.projection.min_overlap``."""
    if key.startswith("corpus.chunker."):
        return "corpus.chunker"
    return R.P_PROJECTION + key[len("eval.projection") :] if key.startswith("eval.projection.") else key


def make_plan(records: list[RunRecord], swept: Sequence[str] | None) -> Plan:
    kind = "ablation" if len({r.variant for r in records}) > 1 else "sweep"
    if swept is not None:  # corpus.chunker.kind, .size, .overlap: one param, corpus.chunker
        swept = list(dict.fromkeys(_swept_param(k) for k in swept))
    if swept is None:
        inferred = varying_params(records)
        swept_l = ["variant"] if kind == "ablation" else inferred
        factor = list(swept_l)
        columns_params = inferred
    else:
        swept_l = list(swept)
        factor = list(swept)
        columns_params = [p for p in swept if p != "variant"]
    order_keys = [p for p in swept_l if p != "variant"] or columns_params
    ordered = sorted(
        records,
        key=lambda r: (_sort_value("variant", r), *(_sort_value(p, r) for p in order_keys), r.name, r.run_id),
    )
    if kind == "sweep":  # the first cell: smallest values of the swept params, in order
        ordered.sort(key=lambda r: tuple(_sort_value(p, r) for p in order_keys))
    ranked = list(ordered)
    if one_sweep_declared(records):  # the rows as the sweep was declared; the baseline stays the first ranked
        ordered = sorted(records, key=lambda r: (r.sweep_index or 0, r.start_time, r.run_id))
    labels = run_labels(ordered, swept_l)
    return Plan(
        kind,
        swept_l,
        factor,
        columns_params,
        order_keys,
        ordered,
        labels,
        heldout_marking(ordered, labels),
        ranked,
    )


def one_sweep_declared(runs: Sequence[RecordedRun]) -> bool:
    """Whether ``runs`` are cells of one sweep that all carry their place as declared (``ablate.sweep_index``)."""
    return bool(runs) and (
        all(r.sweep_index is not None for r in runs) and len({r.tags.get(R.T_SWEEP) for r in runs}) == 1
    )
