"""``python -m ablate.gate``: fail a build when a candidate is worse than its baseline by more than a margin, honestly
about what n clustered questions can tell (the decision: :mod:`ablate.study.gate`; its words:
:mod:`ablate.study.gate_text`; the two sides: :mod:`ablate.app.gate_sides`).

    python -m ablate.gate --baseline B --candidate C --metric ndcg@10 --margin 0.02 [--alpha 0.05]
        [--cluster evidence|group|none] [--json] [--summary FILE] [--tracking-uri URI] [--corpus NAME [KEY=VALUE ...]]

``B`` and ``C`` are each an MLflow run id or a run's name, or a TREC run file scored on ``--corpus NAME`` (its
questions and labels, through the one scoring function runs use). Per-question values are the questions scored as
answerable with the metric defined on both sides, as every table's mean; a question without a value on either side
(an answer metric on a question with no gold answer) is left out of both. Both sides must stand on one corpus
snapshot, label version and split. ``--metric`` may repeat: Holm's step-down over the metrics at family level alpha.
Exit codes: 0 pass, 1 regression (on any metric), 3 inconclusive, 2 bad input, 4 the gate itself failed (one line).
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ablate.app.entry import run_command
from ablate.app.parser import add_choice, command_parser
from ablate.errors import AblateError

if TYPE_CHECKING:
    import pandas as pd

    from ablate.app.gate_sides import Corpus, Side
    from ablate.study.gate_text import Gate

CLUSTERS = ("evidence", "group", "none")
OPTIONS = ("--baseline", "--candidate")


def parser() -> Any:
    p = command_parser(
        "gate",
        "Gate a candidate against a baseline (each a tracked run or a TREC run file): exit 0 pass, 1 regression, "
        "3 inconclusive.",
    )
    side = "an MLflow run id or run name, or a TREC run file (scored on --corpus)"
    p.add_argument("--baseline", required=True, metavar="RUN_OR_FILE", help=f"the baseline: {side}")
    p.add_argument("--candidate", required=True, metavar="RUN_OR_FILE", help=f"the candidate: {side}")
    p.add_argument(
        "--metric",
        action="append",
        required=True,
        help="a per-question metric (ndcg@10, answer_correct); may repeat: Holm's step-down over them at --alpha",
    )
    p.add_argument("--margin", type=float, required=True, help="the largest drop you accept (e.g. 0.02)")
    p.add_argument(
        "--alpha", type=float, default=0.05, help="each claim's one-sided family level (default 0.05)"
    )
    add_choice(
        p,
        "--cluster",
        CLUSTERS,
        "evidence (default): questions that share gold evidence, a declared group or their text move together; "
        "group: the queries' declared group only; none: every question alone",
    )
    p.add_argument("--json", action="store_true", help="print the decision as JSON")
    p.add_argument(
        "--summary",
        metavar="FILE",
        help="also append the decision as Markdown to FILE (a CI job summary: $GITHUB_STEP_SUMMARY)",
    )
    p.add_argument("--tracking-uri", help="the MLflow store (default: ./mlflow.db, or MLFLOW_TRACKING_URI)")
    p.add_argument(
        "--corpus",
        metavar="NAME",
        help="the corpus a run file is scored on: a conf/corpus name (demo) or a corpus folder, as corpus=NAME in "
        "python -m ablate; a run beside it must stand on it",
    )
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help="settings of --corpus as for python -m ablate (corpus.split=test, corpus.labels=VERSION)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(parser(), _run, argv, unexpected=4)  # study.gate.UNEXPECTED: scipy stays unloaded here


def _run(args: Any) -> int:
    # imported once the arguments are read: MLflow, pandas and scipy
    from ablate.app import gate_sides as S
    from ablate.study.gate import EXIT_CODES, check_settings, decide_metrics
    from ablate.study.gate_text import console, json_rows, markdown

    _check(args)
    check_settings(args.margin, args.alpha)
    given = dict(zip(OPTIONS, (args.baseline, args.candidate), strict=True))
    files = {o: S.is_file(g, o) for o, g in given.items()}
    for o, is_file in files.items():
        if is_file and not args.corpus:
            raise AblateError(
                f"{o} {given[o]!r} is a run file: it is scored on a corpus's questions and labels. Fix: add "
                f"--corpus NAME (one of {', '.join(S.corpus_names())}, or a corpus folder)"
            )
    tracker: Any = None if all(files.values()) else _store(args.tracking_uri)  # no store for two files
    runs = {o: S.resolve_run(tracker, given[o], o) for o in OPTIONS if not files[o]}
    corpus = S.load_corpus(args.corpus, args.overrides) if args.corpus else None
    with tempfile.TemporaryDirectory(prefix="ablate-gate-") as tmp:
        read = {o: S.read_run(tracker, r, o, given[o], tmp) for o, r in runs.items()}
        _same_ground(read, corpus)  # before a file is scored: a refusal is quick
        base, cand = (read[o] if o in read else _file_side(o, given[o], corpus) for o in OPTIONS)
        groups = _groups(args.cluster, base, corpus)
    pairs: dict[str, tuple[dict[str, float], dict[str, float]]] = {}
    left_out: dict[str, int] = {}
    for metric in args.metric:
        b, c = _values(base, metric), _values(cand, metric)
        none = {q for q, v in b.items() if math.isnan(v)} & {q for q, v in c.items() if math.isnan(v)}
        left_out[metric] = len(none)
        pairs[metric] = (_defined(b), _defined(c))
    decisions = decide_metrics(pairs, margin=args.margin, alpha=args.alpha, groups=groups)
    gate = _gate(decisions, pairs, left_out, base, cand, corpus)
    rows = json_rows(gate)
    if args.summary is not None:  # first: a summary that cannot be written is refused before a verdict prints
        _write(args.summary, markdown(gate))
    print(json.dumps(rows[0] if len(rows) == 1 else rows, indent=2) if args.json else console(gate))
    return EXIT_CODES[gate.outcome]


def _check(args: Any) -> None:
    """What the command line alone can refuse."""
    if args.overrides and not args.corpus:
        raise AblateError(
            f"{args.overrides[0]!r}: settings go with --corpus NAME. Fix: add --corpus NAME, or drop them"
        )
    twice = sorted({m for m in args.metric if args.metric.count(m) > 1})
    if twice:
        raise AblateError(f"--metric {twice[0]!r} is given twice. Fix: give each metric once")


def _store(uri_given: str | None) -> Any:
    from ablate.app.label_common import open_store

    return open_store(uri_given)


def _file_side(option: str, given: str, corpus: Corpus | None) -> Side:
    """A run file's side, scored on ``corpus`` (a file without ``--corpus`` was refused before)."""
    from pathlib import Path

    from ablate.app.gate_sides import Side, score_file

    assert corpus is not None
    path = Path(given).expanduser()
    return Side(option, given, score_file(path, corpus), file=path)


def _write(path: str, text: str) -> None:
    from pathlib import Path

    try:
        with Path(path).expanduser().open("a", encoding="utf-8") as f:  # appended, as a job summary is
            f.write(text if text.endswith("\n") else text + "\n")
    except OSError as e:
        raise AblateError(
            f"--summary {path}: cannot be written ({e.strerror}). Fix: give a path in a writable folder"
        ) from None


def _same_ground(runs: dict[str, Side], corpus: Corpus | None) -> None:
    """Two runs on one snapshot and label version; a run beside ``--corpus`` on the corpus as scored there."""
    from ablate.app import gate_sides as S

    if len(runs) == 2:
        base, cand = (runs[o].run for o in OPTIONS)
        assert base is not None and cand is not None
        S.same_runs(base, cand)
    if corpus is not None:
        for side in runs.values():
            S.run_on_corpus(side, corpus)


def _groups(how: str, base: Side, corpus: Corpus | None) -> dict[str, str] | None:
    """Each answerable question's cluster: the clusters the baseline's per-question table records (as the report and
    the plan read them: :mod:`ablate.study.clusters`), else from ``--corpus`` when given, else from the corpus the
    baseline run recorded (as the split tool groups them: :func:`ablate.data.splitting.evidence_groups`)."""
    if how == "none":
        return None
    from ablate.app.label_common import load
    from ablate.data.splitting import evidence_groups
    from ablate.runner.rescore import recorded_settings
    from ablate.study.clusters import labels_for, recorded

    pq = base.per_query
    qids = sorted(
        str(q) for q in (pq.index[pq["category"] == "answerable"] if "category" in pq else pq.index)
    )
    got = recorded(pq)
    if got is not None:
        return labels_for(qids, how, got)
    if corpus is not None:
        snapshot, level = corpus.snapshot, corpus.settings.eval.relevance_level
    else:
        assert base.config is not None
        spec, settings = recorded_settings(base.config)
        snapshot, level = load(spec), settings.eval.relevance_level
    if how == "group":
        return {q: g for q in qids if q in snapshot.queries and (g := snapshot.queries[q].group)}
    return evidence_groups(snapshot, qids, level)


def _known(table: pd.DataFrame) -> str:
    """The per-question metrics of a table, each family once with its cutoffs (``ndcg@{1,3,10}``)."""
    fams: dict[str, list[str]] = {}
    for c in map(str, table.columns):
        if "@" in c:
            name, _, k = c.rpartition("@")
            fams.setdefault(name, []).append(k)
        elif c.startswith("answer_"):
            fams.setdefault(c, [])
    return ", ".join(f"{n}@{{{','.join(ks)}}}" if ks else n for n, ks in fams.items())


def _values(side: Side, metric: str) -> dict[str, float]:
    """The answerable questions' values on ``metric`` (NaN where the question has none)."""
    import pandas as pd

    pq = side.per_query
    if metric not in pq.columns:
        why = (
            " (a run file holds a ranking, not answers)"
            if side.file is not None and "@" not in metric
            else ""
        )
        raise AblateError(
            f"--metric {metric!r}: {side.name} has no such per-question value{why}; it has {_known(pq)}"
        )
    rows = pq[pq["category"].astype(str) == "answerable"] if "category" in pq.columns else pq
    values = pd.to_numeric(rows[metric], errors="coerce")
    return {str(q): float(v) for q, v in values.items()}


def _defined(values: dict[str, float]) -> dict[str, float]:
    return {q: v for q, v in values.items() if not math.isnan(v)}


def _gate(
    decisions: list[Any],
    pairs: dict[str, tuple[dict[str, float], dict[str, float]]],
    left_out: dict[str, int],
    base: Side,
    cand: Side,
    corpus: Corpus | None,
) -> Gate:
    from ablate import record as R
    from ablate.study.compare import describe_change
    from ablate.study.gate_text import Gate, Verdict, changes

    if base.run is not None and cand.run is not None:
        changed = describe_change(base.run, cand.run)
        version = base.run.tags.get(R.T_LABEL_VERSION)
    else:
        changed = "not known (a run file records no settings)"
        version = corpus.label_version if corpus is not None else None
    retrievers = R.json_list(cand.run.params.get(R.P_RETRIEVERS)) if cand.run is not None else []
    verdicts = []
    for d in decisions:
        b, c = pairs[d.metric]
        funnels = (base.funnel, cand.funnel)
        broke, fixed = changes(d.metric, b, c, base.per_query, cand.per_query, funnels, retrievers)
        verdicts.append(Verdict(d, broke, fixed, left_out[d.metric]))
    return Gate(verdicts, base.label, cand.label, base.name, cand.name, changed, version)
