"""What one run emits: its metrics (flat, canonical keys), its artifact files, and its console summary.

Pure functions of a :class:`~ablate.pipeline.RunResult`; ``tracking`` logs them and ``cli`` prints them.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

HEADLINE = ("ndcg@10", "recall@10", "hit@10", "mrr@10", "recall@100")
SLICE_METRICS = ("ndcg@10", "recall@10", "hit@10", "mrr@10")


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def headline_cis(result: Any, bootstrap: int, seed: int) -> dict[str, tuple[float, float, float]]:
    """95% bootstrap intervals over the answerable queries for every mean metric (shared resamples)."""
    from ablate.evaluation.stats import bootstrap_cis

    ev = result.evaluation
    pq = ev.per_query
    rows = pq[pq["category"] == "answerable"] if "category" in pq else pq
    cols = [c for c in pq.columns if "@" in c and not c.startswith("unjudged")]
    if rows.empty or bootstrap <= 0:
        return {}
    cis = bootstrap_cis(rows, cols, n_resamples=bootstrap, seed=seed, nan_policy="omit")
    return {c.replace("rr@", "mrr@") if c.startswith("rr@") else c: v for c, v in cis.items()}


def metrics_for(result: Any, bootstrap: int = 1000, seed: int = 0) -> dict[str, float]:
    ev = result.evaluation
    m: dict[str, float] = {}
    for k, v in ev.means.items():
        f = _num(v)
        if f is not None:
            m[k] = f
    for k, (_, lo, hi) in headline_cis(result, bootstrap, seed).items():
        if _num(lo) is not None:
            m[f"{k}_ci_low"] = float(lo)
            m[f"{k}_ci_high"] = float(hi)
    for k, v in ev.accounting.items():
        f = _num(v)
        if f is not None and not isinstance(v, bool):
            m[f"queries_{k}"] = f
    from ablate.evaluation.stats import wilson_interval  # scipy: imported when a run is scored, not when the CLI starts

    pq = ev.per_query
    for k, v in ev.means.items():
        if k.startswith("hit@") and _num(v) is not None and k in pq:
            col = pq[pq["category"] == "answerable"][k].dropna()
            if len(col):
                _, lo, hi = wilson_interval(int(col.sum()), len(col))
                m[f"{k}_wilson_low"], m[f"{k}_wilson_high"] = lo, hi
    ab = result.abstention
    if ab is not None:
        m["abstain_threshold"] = _num(ab.threshold) if ab.threshold is not None else float("nan")
        for key in ("correct_refusal_rate", "wrong_answer_count", "false_refusal_rate", "balanced_accuracy"):
            f = _num(getattr(ab, key))
            if f is not None:
                m[f"abstain_{key}"] = f
        m["abstain_n_no_answer"] = float(ab.n_no_answer)
    for tag, row in result.slices.items():
        safe = tag.replace("(", "").replace(")", "")
        for key in SLICE_METRICS:
            f = _num(row.get(key))
            if f is not None:
                m[f"slice_{safe}/{key}"] = f
        m[f"slice_{safe}/n"] = float(row.get("n", 0))
    for k, v in result.timings.items():
        m[f"time_{k}"] = float(v)
    for k, v in result.counters.items():
        m[k.replace(".", "_")] = float(v)
    perm = result.permissions
    m["permission_hidden_judgements"] = float(perm.get("hidden_judgements", 0))
    m["permission_queries_made_unanswerable"] = float(perm.get("queries_made_unanswerable", 0))
    m["permission_leaks"] = float(perm.get("leaks", 0))
    return m


def artifacts_for(result: Any, snapshot: Any, config_yaml: str) -> dict[str, str]:
    ev = result.evaluation
    pq = ev.per_query.copy()
    pq.insert(0, "tags", [";".join(snapshot.queries[q].tags) if q in snapshot.queries else "" for q in pq.index])
    files = {
        "config.yaml": config_yaml,
        "run.trec": result.run.to_trec(tag=result.variant),
        "per_query.csv": pq.to_csv(index=True, index_label="qid"),
        "corpus_manifest.json": json.dumps(snapshot.manifest_record(), indent=2, ensure_ascii=False),
        "components.json": json.dumps(result.components, indent=2, ensure_ascii=False, default=str),
        "accounting.json": json.dumps(
            {"accounting": ev.accounting, "permissions": result.permissions}, indent=2, ensure_ascii=False, default=str
        ),
        "unjudged.csv": ev.unjudged.to_csv(index=False),
        "slices.csv": _slices_csv(result.slices),
    }
    if result.abstention is not None:
        from dataclasses import asdict

        abst = {"applied": asdict(result.abstention)}
        if result.threshold_choice is not None:
            abst["chosen_on_dev"] = asdict(result.threshold_choice)
        files["abstention.json"] = json.dumps(abst, indent=2, default=str)
    return files


def _slices_csv(slices: dict[str, dict[str, float]]) -> str:
    import pandas as pd

    if not slices:
        return ""
    return pd.DataFrame.from_dict(slices, orient="index").rename_axis("tag").to_csv()


def format_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """A plain fixed-width table (also valid Markdown)."""
    cells = [[str(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) if cells else len(c) for i, c in enumerate(columns)]
    line = "| " + " | ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = ["| " + " | ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) + " |" for row in cells]
    return "\n".join([line, sep, *body])


def fmt(v: Any, digits: int = 3) -> str:
    f = _num(v)
    return "-" if f is None else f"{f:.{digits}f}"


def print_run_summary(result: Any, run_id: str, uri: str, experiment: str, stream=None) -> None:
    stream = stream or sys.stdout
    ev = result.evaluation
    acc = ev.accounting
    cols = [k for k in HEADLINE if k in ev.means]
    row = {"variant": result.variant, **{k: fmt(ev.means[k]) for k in cols}}
    print(format_table([row], ["variant", *cols]), file=stream)
    counts = ", ".join(f"{k}={v}" for k, v in acc.items() if isinstance(v, (int, float)) and not isinstance(v, bool))
    print(f"queries ({result.split}): {counts}", file=stream)
    print(f"mlflow run {run_id} in experiment {experiment!r} at {uri}", file=stream)
