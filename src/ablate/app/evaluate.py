"""Evaluate a TREC run file against qrels by ablate's declared rules: ``python -m ablate.evaluate RUN QRELS``.

The declared query set is the set of queries in QRELS (like ``trec_eval -c``): a judged query absent from RUN is
counted as ``missing_from_run`` (scored 0, or excluded with ``--missing exclude``); queries of RUN without judgements
are ignored and counted as ``not_in_query_set``. Run ids are used as given (``chunk_id = doc_id``), and the qrels are
read at ``--unit`` (default doc). Results are ordered by score with a declared tie rule (``--ties``), printed with the
output. Scores are never rounded; the human table shows 4 decimals, ``--json`` the full values.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from ablate.errors import AblateError, ConfigError
from ablate.evaluation import METRICS, EvalResult, EvalSettings, evaluate, mean_key
from ablate.evaluation.io import TIE_RULES, read_qrels, read_trec_run


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, like every ablate entry point
        print(f"error: {message} (see python -m ablate.evaluate --help)", file=sys.stderr)
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m ablate.evaluate",
        description="Evaluate a TREC run file against qrels by ablate's declared rules (ablate.evaluation). The "
        "query set is the qrels' queries; run-only queries are ignored and counted.",
    )
    p.add_argument("run", help="TREC run file: qid Q0 docid rank score tag")
    p.add_argument("qrels", help="TREC qrels (qid 0 docid grade) or BEIR qrels tsv (with its header)")
    p.add_argument("--ks", default=None, help="cutoffs, comma separated (default 1,3,5,10,20,50,100)")
    p.add_argument(
        "--gain",
        choices=("exponential", "linear"),
        default="exponential",
        help="nDCG gain: 2^grade - 1 (default) or grade (trec_eval)",
    )
    p.add_argument(
        "--unit", choices=("doc", "chunk"), default=None, help="unit of the qrels and the run ids (doc)"
    )
    p.add_argument(
        "--budget",
        choices=("chunks", "docs"),
        default="chunks",
        help="chunks: first K results then dedup (default); docs: dedup then first K units",
    )
    p.add_argument(
        "--unjudged",
        choices=("nonrelevant", "condensed"),
        default="nonrelevant",
        help="unjudged results score 0 (default, trec_eval) or are removed before scoring",
    )
    p.add_argument(
        "--ties",
        choices=tuple(TIE_RULES),
        default="docid-asc",
        help="score ties: docid ascending (default) or descending (trec_eval)",
    )
    p.add_argument("--relevance-level", type=int, default=1, help="grade >= this is relevant (default 1)")
    p.add_argument(
        "--missing",
        choices=("zero", "exclude"),
        default="zero",
        help="judged queries absent from the run: scored 0 (default) or excluded; counted either way",
    )
    p.add_argument("--per-query", action="store_true", help="also print per-query values")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument("--unjudged-csv", metavar="PATH", help="write every unjudged result within max K to PATH")
    return p


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
        )
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
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
            )
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        ks = _ks(args.ks)
        settings = EvalSettings(
            **({"ks": ks} if ks is not None else {}),
            unit=args.unit or "auto",
            budget=args.budget,
            gain=args.gain,
            unjudged=args.unjudged,
            relevance_level=args.relevance_level,
            missing=args.missing,
        )
        qrels = read_qrels(args.qrels, unit=args.unit or "doc")
        if not qrels.judgements:
            raise AblateError(
                f"{args.qrels}: no judgements, so there is no query set to evaluate. Fix: give a "
                "non-empty qrels file"
            )
        run = read_trec_run(args.run, ties=args.ties)
        result = evaluate(run, qrels, list(qrels.judgements), settings)
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
        print(result.to_json(per_query=args.per_query))
    else:
        print(render(result, args.run, args.qrels))
        if args.per_query:
            print()
            print(result.per_query.to_csv(sep="\t", float_format="%.4f", na_rep="-"), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
