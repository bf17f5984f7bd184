"""Evaluate a TREC run file against qrels by ablate's declared rules: ``python -m ablate.evaluate RUN QRELS``.

The declared query set is the set of queries in QRELS (like ``trec_eval -c``): a judged query absent from RUN is
counted as ``missing_from_run`` (scored 0, or excluded with ``--missing exclude``); queries of RUN without judgements
are ignored and counted as ``not_in_query_set``. Run ids are used as given (``chunk_id = doc_id``), and the qrels are
read at ``--unit`` (default: ``chunk`` when every judged id is a chunk id ``DOC#part``, else ``doc``; with
``--corpus``, the corpus's unit). The notes printed under the table (the unit's reason, the query set, the corpus the
labels belong to) are the ``notes`` list of ``--json``. Results are ordered by score with a declared tie rule (``--ties``), printed with the
output. Scores are never rounded; the human table shows 4 decimals, ``--json`` the full values.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ablate.app.parser import add_choice, command_parser
from ablate.data.types import Qrels, Run
from ablate.errors import AblateError, ConfigError
from ablate.evaluation.io import TIE_RULES, read_qrels, read_trec_run

if TYPE_CHECKING:  # evaluation.result imports pandas: loaded when a run is scored, not for --help
    from ablate.evaluation import EvalResult, EvalSettings
    from ablate.evaluation.scoring import ScoringContext
    from ablate.runner.access import Access
    from ablate.runner.rescore import Comparison, Rescored
    from ablate.runner.scoring import ScoringInputs


def _parser() -> argparse.ArgumentParser:
    p = command_parser(
        "evaluate",
        "Evaluate a TREC run file against qrels by ablate's declared rules (ablate.evaluation). The "
        "query set is the qrels' queries (with --corpus or --from-run: the split's questions); run-only queries are "
        "ignored and counted.",
    )
    p.add_argument(
        "run",
        nargs="?",
        help="TREC run file: qid Q0 docid rank score tag (default with --from-run: its run.trec)",
    )
    p.add_argument(
        "qrels",
        nargs="?",
        help="TREC or BEIR qrels (default with --corpus/--from-run: the corpus split's labels)",
    )
    p.add_argument(
        "--from-run",
        metavar="RUN_ID",
        help="score as that tracked run did: its corpus, split, identity and evaluation rules (and its run.trec)",
    )
    p.add_argument(
        "--tracking-uri", help="MLflow store of --from-run (default: $MLFLOW_TRACKING_URI, else ./mlflow.db)"
    )
    p.add_argument(
        "--corpus", metavar="DIR", help="corpus folder: chunk ids map to documents, labels per split"
    )
    p.add_argument("--split", default=None, help="the corpus split (with --corpus; default test)")
    _access_arguments(p)
    p.add_argument("--ks", default=None, help="cutoffs, comma separated (default 1,3,5,10,20,50,100)")
    add_choice(
        p, "--gain", ("exponential", "linear"), "nDCG gain: 2^grade - 1 (default) or grade (trec_eval)"
    )
    p.add_argument(
        "--unit",
        choices=("doc", "chunk"),
        default=None,
        help="unit of the qrels and the run ids (default: the corpus's with --corpus; else chunk when every judged "
        "id is a chunk id DOC#part, else doc)",
    )
    add_choice(
        p,
        "--budget",
        ("chunks", "docs"),
        "chunks: first K results then dedup (default); docs: dedup then first K units",
    )
    add_choice(
        p,
        "--unjudged",
        ("nonrelevant", "condensed"),
        "unjudged results score 0 (default, trec_eval) or are removed before scoring",
    )
    add_choice(
        p, "--ties", tuple(TIE_RULES), "score ties: docid ascending (default) or descending (trec_eval)"
    )
    p.add_argument("--relevance-level", type=int, default=1, help="grade >= this is relevant (default 1)")
    add_choice(
        p,
        "--missing",
        ("zero", "exclude"),
        "judged queries absent from the run: scored 0 (default) or excluded; counted either way",
    )
    p.add_argument("--per-query", action="store_true", help="also print per-query values")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument("--unjudged-csv", metavar="PATH", help="write every unjudged result within max K to PATH")
    return p


def _access_arguments(p: argparse.ArgumentParser) -> None:
    """Who asked and when (with --corpus; --from-run reads them from the run's params)."""
    p.add_argument(
        "--identity",
        default=None,
        help="score for this identity of the corpus (or per_query: each question's persona): labels it cannot see "
        "are dropped",
    )
    p.add_argument(
        "--as-of",
        default=None,
        help="per_query or a date YYYY-MM-DD: labels of versions out of force on the question's date are re-graded 0",
    )
    add_choice(p, "--versions", ("all", "in_force"), "the run's versions.policy (with --as-of)")


def _ks(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        ks = tuple(int(k) for k in text.split(",") if k.strip())
    except ValueError:
        raise ConfigError(
            "--ks", text, "give positive integers separated by commas, e.g. --ks 1,3,10"
        ) from None
    return ks


def _fmt(v: object) -> str:
    try:
        f = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(v)
    return "-" if f != f else f"{f:.4f}"


def render(result: EvalResult, run_path: str, qrels_path: str) -> str:
    """The human report: settings, tie rule, query accounting and one row per metric, one column per K."""
    from ablate.evaluation import METRICS, mean_key

    s = result.settings
    acc = result.accounting
    counts = " ".join(
        f"{k}={acc[k]}"
        for k in (
            "total",
            "answerable",
            "scored",
            "no_answer",
            "idcg_zero",
            "empty_result",
            "fewer_than_k",
            "missing_from_run",
            "not_in_query_set",
            "with_subquestions",
            "without_subquestions",
        )
        if k in acc
    )
    lines = [
        f"run: {result.run_name} ({run_path})   qrels: {qrels_path}",
        f"unit={result.unit} budget={s.budget} gain={s.gain} unjudged={s.unjudged} "
        f"relevance_level={s.relevance_level} missing={s.missing}",
        f"ties: {result.tie_rule}",
        f"queries: {counts}",
        "means over the scored answerable queries:",
    ]
    header = ["metric", *(f"@{k}" for k in s.ks)]
    rows = [
        [mean_key(m, 1).split("@")[0], *(_fmt(result.means[mean_key(m, k)]) for k in s.ks)] for m in METRICS
    ]
    rows += [  # multi-condition questions (ablate.evaluation.subquestions), when the corpus declares them
        [m, *(_fmt(result.means[f"{m}@{k}"]) for k in s.ks)]
        for m in ("subq_coverage", "subq_all")
        if f"{m}@{s.ks[0]}" in result.means
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
            )
        )
    return "\n".join(lines)


@dataclass
class Inputs:
    """What one invocation scores: the run, the labels as the askers see them, the question set, the rules and the
    scoring context (:class:`~ablate.evaluation.scoring.ScoringContext`); ``rescored``: a tracked run re-scored."""

    run: Run
    qrels: Qrels
    qids: list[str]
    settings: EvalSettings
    context: ScoringContext
    note: str
    rescored: Rescored | None = None


def _settings(args: argparse.Namespace) -> EvalSettings:
    """The evaluation rules of the command line."""
    from ablate.evaluation import EvalSettings

    ks = _ks(args.ks)
    return EvalSettings(
        **({"ks": ks} if ks is not None else {}),
        unit=args.unit or "auto",
        budget=args.budget,
        gain=args.gain,
        unjudged=args.unjudged,
        relevance_level=args.relevance_level,
        missing=args.missing,
    )


def _from_corpus(args: argparse.Namespace, run_path: str, settings: EvalSettings) -> Inputs:
    """Score like a tracked run: chunk ids map to documents through the corpus, the query set is the whole split
    (no-answer questions scored apart), labels are restricted per question to what its identity may see and, with a
    date, re-graded by the version in force (:mod:`ablate.runner.access`)."""
    from ablate.runner.access import Resolver
    from ablate.runner.rescore import on_snapshot
    from ablate.runner.scoring import scoring_inputs
    from ablate.runner.session import shared_session
    from ablate.runner.settings import CorpusSpec

    split = args.split or "test"
    spec = CorpusSpec(
        path=args.corpus, split=split, identity=args.identity, as_of=args.as_of, version_policy=args.versions
    )
    snap = shared_session().snapshot(spec)
    access = spec.access
    resolver = Resolver(snap, access)
    resolver.check(snap.split_qids(split))
    raw = read_qrels(args.qrels, unit=snap.qrels_unit) if args.qrels else None
    inp = scoring_inputs(snap, split, access, raw_labels=raw, resolver=resolver)
    run = on_snapshot(read_trec_run(run_path, ties=args.ties), snap, run_path)
    return Inputs(
        run, inp.labels, inp.qids, settings, inp.context, _corpus_note(inp, args.corpus, split, access)
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _corpus_note(inp: ScoringInputs, corpus: str, split: str, access: Access) -> str:
    perm = inp.permissions
    note = (
        f"query set: split {split!r} of {corpus} ({len(inp.qids)} questions); identity {access.identity or 'none'}: "
        f"{_count(perm['hidden_judgements'], 'hidden judgement')} dropped, "
        f"{_count(perm['queries_made_unanswerable'], 'question')} left without visible evidence (scored as no-answer)"
    )
    if access.as_of is not None:
        note += (
            f"; dates: as_of {access.as_of}, versions.policy {access.policy}, "
            f"{_count(perm['regraded_out_of_force'], 'judgement')} re-graded"
        )
    return note


def _from_run(args: argparse.Namespace) -> Inputs:
    """A tracked run re-scored as it was scored (:mod:`ablate.runner.rescore`)."""
    from ablate.runner.rescore import rescore
    from ablate.study.fetch import check_store
    from ablate.tracking import Tracker, check_uri, resolve_tracking_uri

    uri = resolve_tracking_uri(args.tracking_uri)
    check_store(uri)  # never create a store only to find no run in it
    check_uri(uri, "--tracking-uri", writes=False)
    tracker = Tracker(uri)
    got = rescore(tracker, args.from_run, args.run, args.qrels, args.ties)
    inp, corpus = got.inputs, got.corpus
    note = _corpus_note(inp, str(got.snapshot.root), corpus.split, corpus.access)
    return Inputs(
        got.run,
        inp.labels,
        inp.qids,
        got.settings.eval,
        inp.context,
        "\n".join([*got.notes, note]),
        got,
    )


def _inputs(args: argparse.Namespace) -> Inputs:
    if args.from_run:
        return _from_run(args)
    if args.run is None:
        raise AblateError("no run file. Fix: python -m ablate.evaluate RUN QRELS, or --from-run RUN_ID")
    settings = _settings(args)
    if args.corpus:
        return _from_corpus(args, args.run, settings)
    if args.qrels is None:
        raise AblateError(
            "no qrels file. Fix: python -m ablate.evaluate RUN QRELS, or --corpus DIR --split S"
        )
    qrels = read_qrels(args.qrels, unit=args.unit or "doc")
    if not qrels.judgements:
        raise AblateError(
            f"{args.qrels}: no judgements, so there is no query set to evaluate. Fix: give a non-empty qrels file"
        )
    notes = []
    if args.unit is None and labels_are_chunks(qrels):
        qrels = dataclasses.replace(qrels, unit="chunk")
        notes.append(
            "unit=chunk, from the labels: every judged id is a chunk id (DOC#part), so results count as the chunks "
            "they are; document-level scores need the corpus's chunk->document map: --corpus DIR (or --unit doc "
            "to call the ids documents)"
        )
    notes.append(
        f"query set: the {len(qrels.judgements)} judged queries of {args.qrels}; run ids are scored as given, with no "
        "identity and no date: a run made for an identity (permission filtering) or on a date (versions in force) "
        "is scored differently; pass --from-run RUN_ID, or --corpus DIR --split S --identity NAME --as-of DATE, to "
        "score it as it was made"
    )
    notes += _corpus_of(args.qrels)
    from ablate.evaluation.scoring import ScoringContext

    return Inputs(
        read_trec_run(args.run, ties=args.ties),
        qrels,
        list(qrels.judgements),
        settings,
        ScoringContext(labels_unit=qrels.unit),
        "\n".join(notes),
    )


def labels_are_chunks(qrels: Qrels) -> bool:
    """Whether every judged id is a chunk id as ablate's chunkers write them (``DOC#part``: a document id, ``#``,
    the chunk's part), so the labels are at the chunk unit."""
    ids = [u for j in qrels.judgements.values() for u in j]
    return bool(ids) and all(_CHUNK_ID.fullmatch(u) for u in ids)


_CHUNK_ID = re.compile(r"[^#\s]+#[^#\s]+")


def _corpus_of(qrels_path: str) -> list[str]:
    """A note naming the corpus folder the labels belong to (``DIR/qrels/SPLIT.tsv`` beside ``DIR/corpus.jsonl``)
    and, when its questions carry personas or dates, the options that score a run made with them as it was scored."""
    path = Path(qrels_path)
    root = path.parent.parent
    if path.parent.name != "qrels" or not (root / "corpus.jsonl").is_file():
        return []
    split = path.name.split(".")[0]
    queries = root / "queries.jsonl"
    text = queries.read_text(encoding="utf-8", errors="replace") if queries.is_file() else ""
    carry = [what for field, what in (("persona", "personas"), ("as_of", "dates")) if f'"{field}"' in text]
    options = " --identity per_query" * ("personas" in carry) + " --as-of per_query" * ("dates" in carry)
    note = f"these labels are split {split!r} of the corpus {root}"
    if not carry:
        return [f"{note}: --corpus {root} --split {split} scores through its chunk->document map"]
    return [
        f"{note}, whose questions carry {' and '.join(carry)}: a run made with them (corpus.identity=per_query, "
        f"corpus.as_of=per_query) scores as it logged with --corpus {root} --split {split}{options} "
        "(or --from-run RUN_ID)"
    ]


def _check_lines(comparison: Comparison) -> list[str]:
    """The check of a re-scored run against its record, in a few lines."""
    from ablate.runner.rescore import TOLERANCE

    lines = [
        f"check against the run's record: {len(comparison.equal)} metrics re-scored equal the logged ones "
        f"(to {TOLERANCE:g})" + (f"; {len(comparison.different)} differ" if comparison.different else "")
    ]
    for name, logged, now in comparison.different[:10]:
        lines.append(f"  {name}: logged {logged!r}, re-scored {now!r}")
    for why, names in comparison.not_rederived.items():
        lines.append(f"  not re-derived ({why}): {len(names)} metrics, e.g. {names[0]}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from ablate.evaluation.scoring import score_run

    comparison = None
    try:
        inp = _inputs(args)
        if inp.rescored is not None:
            result = inp.rescored.scores.evaluation
            if args.run is None and args.qrels is None:  # the run's own files: they must give its record back
                from ablate.runner.rescore import compare

                comparison = compare(inp.rescored.metrics, inp.rescored.logged)
        else:
            result = score_run(inp.run, inp.qrels, inp.qids, inp.settings, inp.context).evaluation
        if args.unjudged_csv:
            try:
                result.unjudged.to_csv(args.unjudged_csv, index=False)
            except OSError as e:
                raise AblateError(
                    f"{args.unjudged_csv}: cannot write the unjudged CSV ({e.strerror}). Fix: "
                    "give a writable path"
                ) from None
    except AblateError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        out = result.to_dict(per_query=args.per_query)
        out["notes"] = inp.note.splitlines()  # the same notes the table prints under it
        if inp.rescored is not None:
            out["metrics"] = {k: v for k, v in sorted(inp.rescored.metrics.items())}
        if comparison is not None:
            out["check"] = {
                "equal": len(comparison.equal),
                "different": [{"metric": n, "logged": a, "rescored": b} for n, a, b in comparison.different],
                "not_rederived": comparison.not_rederived,
            }
        print(json.dumps(out, ensure_ascii=False, allow_nan=False, default=str))
    else:
        print(
            render(
                result, args.run or f"run.trec of {args.from_run}", args.qrels or "the corpus split's labels"
            )
        )
        print(inp.note)
        if comparison is not None:
            print("\n".join(_check_lines(comparison)))
        if args.per_query:
            print()
            print(result.per_query.to_csv(sep="\t", float_format="%.4f", na_rep="-"), end="")
    if comparison is not None and not comparison.ok:
        name, logged, now = comparison.different[0]
        print(
            f"error: run {args.from_run}: {len(comparison.different)} re-scored metrics differ from its record "
            f"(e.g. {name}: logged {logged!r}, re-scored {now!r}). Fix: check the notes above (a changed corpus or "
            "labels, or a record edited after the run); re-run the configuration to record it anew",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
