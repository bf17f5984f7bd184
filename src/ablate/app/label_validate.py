"""``python -m ablate.label validate generator=llama_cpp --holes 0.2 --seed 0 [corpus=...] [--split dev]
[--parent SWEEP_RUN_ID] [--map ...]``: how far an LLM assessor agrees with the human labels
(:mod:`ablate.labels.validation`).

Punches seeded, grade-stratified holes in the split's labels, has the assessor (as ``judge`` builds it) re-judge them
blind, and writes ``labels/<corpus>/validation/<assessor>/`` (``validation.md``, ``validation.json``, ``pairs.csv``):
Cohen's kappa (graded and binary, intervals over questions), the confusion matrix, time per judgement, unparseable
outputs. With ``--parent``: each run of that sweep re-scored on the human labels and on the labels where the holes
take the assessor's grades, and Kendall's tau of the runs' order. The journal is not touched: these are
re-judgements of labelled pairs, not new labels.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from ablate.app.label_common import (
    add_labels_dir,
    add_overrides,
    compose,
    corpus_spec,
    grade_legend,
    load,
    plain,
    workspace,
)
from ablate.app.label_judge import (
    add_assessor_arguments,
    build_assessor,
    cache_of,
    check_generator,
    describe_mapping,
)
from ablate.data.corpus import label_folder
from ablate.data.snapshot import Snapshot
from ablate.errors import AblateError, ConfigError, InputError
from ablate.labels import validation as V
from ablate.labels.assessor import judge_pairs, mapping_text, parse_mapping, time_per_judgement
from ablate.labels.journal import now
from ablate.labels.workspace import assessor_folder

#: The runs' metrics compared under both label versions.
METRICS = ("ndcg@10", "recall@10")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--holes", type=float, default=0.2, help="share of the split's judged pairs to re-judge (0.2)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the holes and of the bootstrap intervals (0)")
    p.add_argument("--split", default=None, help="the split whose labels are holed (default: corpus.split)")
    p.add_argument(
        "--parent", default=None, help="a sweep's run id: re-score its runs on human and assessor labels"
    )
    p.add_argument(
        "--tracking-uri", help="MLflow store of --parent (default: $MLFLOW_TRACKING_URI, else ./mlflow.db)"
    )
    add_assessor_arguments(p)
    add_labels_dir(p)
    add_overrides(p, "generator=llama_cpp corpus=demo_zh")


def _sweep(args: argparse.Namespace) -> tuple[Any, list[Any]]:
    """The tracker and the runs of ``--parent`` (checked before anything is judged)."""
    from ablate.study.fetch import check_store
    from ablate.tracking import Tracker, check_uri, resolve_tracking_uri

    uri = resolve_tracking_uri(args.tracking_uri)
    check_store(uri)
    check_uri(uri, "--tracking-uri", writes=False)
    tracker = Tracker(uri)
    runs = [r for r in tracker.children(args.parent) if r.status == "FINISHED"]
    if not runs:
        raise ConfigError(
            "--parent",
            args.parent,
            f"no finished run of a sweep with that id in {uri}; give a sweep's run id",
        )
    return tracker, sorted(runs, key=lambda r: (int(r.variant_order or 0), r.variant or r.name))


def _sources(snapshot: Snapshot, labels: str | None) -> list[Path]:
    """The label files the snapshot was loaded from (its qrels/ or its label version's)."""
    folder = label_folder(labels, snapshot.name) if labels else snapshot.root / "qrels"
    return sorted(folder.glob("*.tsv"))


def _rescore_runs(
    tracker: Any,
    runs: list[Any],
    snapshot: Snapshot,
    labels: str | None,
    grades: dict[tuple[str, str], int],
    assessor: str,
) -> list[V.RunRow]:
    """Each run re-scored on a copy of the human labels and on the copy where the holes take ``grades``."""
    from ablate.runner.rescore import rescore

    sources = _sources(snapshot, labels)
    parent = snapshot.label_version
    tmp = Path(tempfile.mkdtemp(prefix="ablate-validate-"))
    human = V.write_version(tmp / "human", "validate-human", sources, {}, snapshot.name, parent)
    llm = V.write_version(
        tmp / "assessor",
        f"validate-{assessor_folder(assessor)}",
        sources,
        grades,
        snapshot.name,
        parent,
        assessor,
    )
    rows = []
    for r in runs:
        if r.params.get("corpus.name") not in (None, snapshot.name):
            raise InputError(
                f"run {r.run_id}",
                f"was made on corpus {r.params.get('corpus.name')!r}, not {snapshot.name!r}",
                "give the id of a sweep on the validated corpus, or validate with its corpus=...",
            )
        a = rescore(tracker, r.run_id, labels=human).metrics
        b = rescore(tracker, r.run_id, labels=llm).metrics
        rows.append(
            V.RunRow(
                r.variant or r.name,
                r.run_id,
                {m: a[m] for m in METRICS if m in a},
                {m: b[m] for m in METRICS if m in b},
            )
        )
    return rows


def _labels(cfg: Any, split: str | None) -> tuple[Any, Snapshot, dict[str, dict[str, int]]]:
    """The corpus settings (``--split`` applied), the loaded snapshot and the split's human labels."""
    spec = corpus_spec(cfg)
    if split:
        spec = replace(spec, split=split)
    snapshot = load(spec)
    if snapshot.projection is not None:
        raise InputError(
            str(snapshot.root / "qrels"),
            "its labels were made on another chunking than corpus.chunker (projected)",
            "validate with the corpus's own chunker (drop corpus.chunker)",
        )
    judged = snapshot.split_qrels(spec.split).judgements
    if not any(judged.values()):
        raise ConfigError(
            "--split", spec.split, f"it has no judged pair in {snapshot.name}'s labels; choose another"
        )
    return spec, snapshot, judged


def run(args: argparse.Namespace) -> int:
    share = V.check_share(args.holes)
    cfg = compose(args.overrides)
    check_generator(cfg, args.overrides, "validate")
    sweep = _sweep(args) if args.parent else None
    spec, snapshot, judged = _labels(cfg, args.split)
    split = spec.split
    legend = grade_legend(snapshot)
    mapping = parse_mapping(args.map, legend.values)
    assessor = build_assessor(cfg, args.overrides, args.prompt, mapping)
    level = int(plain(cfg, "eval").get("relevance_level", 1))
    holes = V.holes(judged, share, args.seed)
    print(f"assessor {assessor.identity}", file=sys.stderr)
    print(describe_mapping(mapping, legend), file=sys.stderr)
    n_judged = sum(len(v) for v in judged.values())
    print(
        f"holes: {len(holes)} of {n_judged} judged pairs of {snapshot.name}/{split} (share {share:g}, seed "
        f"{args.seed}), re-judged blind",
        file=sys.stderr,
    )
    t0 = time.perf_counter()
    verdicts = judge_pairs(
        assessor, snapshot, [(h.qid, h.unit) for h in holes], cache_of(cfg), label="validate"
    )
    seconds = time.perf_counter() - t0
    pairs = [
        (h.qid, h.unit, h.human, v.grade) for h, v in zip(holes, verdicts, strict=True) if v.grade is not None
    ]
    bad = [{"qid": v.qid, "unit": v.unit, "output": v.output} for v in verdicts if v.grade is None]
    if not pairs:
        raise AblateError(
            f"validate: the assessor's output was unparseable for every one of the {len(holes)} pairs (e.g. "
            f"{bad[0]['output'][:80]!r}). Fix: a model that follows the template (generator.model=...), or "
            "raise generator.max_tokens"
        )
    ag = V.agreement(pairs, legend.values, level, args.seed)
    rows: list[V.RunRow] = []
    if sweep is not None:
        grades = {
            (h.qid, h.unit): v.grade for h, v in zip(holes, verdicts, strict=True) if v.grade is not None
        }
        rows = _rescore_runs(sweep[0], sweep[1], snapshot, spec.labels, grades, assessor.identity)
    report: dict[str, Any] = {
        "assessor": assessor.identity,
        "details": assessor.details,
        "corpus": snapshot.name,
        "label_version": snapshot.label_version,
        "split": split,
        "legend": legend.as_dict(),
        "mapping": mapping_text(mapping),
        "holes": share,
        "seed": args.seed,
        "judged_pairs": n_judged,
        "n_holes": len(holes),
        "n": len(pairs),
        "kappa": ag.graded.kappa,
        "kappa_binary": ag.binary.kappa,
        "unparseable": len(bad),
        "unparseable_pairs": bad,
        "time_per_judgement_s": time_per_judgement(verdicts),
        "seconds": seconds,
        "parent": args.parent,
        "runs": [
            {"run": r.label, "run_id": r.run_id, "human": r.human, "assessor": r.assessor} for r in rows
        ],
        "tau": V.taus(rows, METRICS) if rows else {},
        "command": "python -m ablate.label " + shlex.join(sys.argv[1:]),
        "created": now(),
    }
    folder = workspace(args, snapshot).validation(assessor.identity)
    V.write_report(folder, report, ag, pairs, V.render_markdown(report, ag, rows, METRICS))
    print(_summary(report, ag))
    print(f"report: {folder / V.VALIDATION_MD}")
    return 0


def _summary(report: dict[str, Any], ag: V.Agreement) -> str:
    def k(x: V.Kappa) -> str:
        return f"{x.kappa:.3f} [{x.low:.3f}, {x.high:.3f}]"

    per = report["time_per_judgement_s"]
    line = (
        f"kappa graded {k(ag.graded)}, binary {k(ag.binary)} on {report['n']} pairs "
        f"({report['unparseable']} unparseable); time per judgement "
        + ("-" if per is None else f"{per:.2f} s")
    )
    if report["tau"]:
        line += "; Kendall tau " + ", ".join(f"{m} {t:.3f}" for m, t in report["tau"].items())
    return line
