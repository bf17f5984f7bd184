"""``python -m ablate.label COMMAND ...``: labels that grow with the runs.

Two kinds of label (``--kind``, :mod:`ablate.labels.kind`): ``relevance`` (of a unit to a question; the default)
and ``answers`` (the correctness of an answer a run wrote).

========  ==============================================================================================
pool      relevance: the unjudged units in the top ``--depth`` of some runs (TREC depth-k pooling),
          ``labels/<corpus>/pools/``; answers: the distinct answers runs wrote, ``labels/<corpus>/answer_pools/``
sample    draw the random sample of questions people check (relevance or answers), ``human_sample.json``
serve     judge a pool of either kind in the browser; every judgement appended at once to
          ``labels/<corpus>/journal.jsonl`` (relevance) or ``answer_journal.jsonl`` (answers)
judge     judge a pool with an LLM (``generator=llama_cpp`` or ``openai``), into the same journal; relevance
          with ``--repeats R`` asks R times and keeps the majority
validate  relevance: how far an LLM assessor agrees with the human labels (Cohen's kappa, the variants' order);
          answers: how far the answer rule and an LLM answer judge agree with the human grades of a pool
commit    the relevance journal as a new label version beside the old one (``labels/<corpus>/versions/NAME``)
========  ==============================================================================================

Each command is a module ``ablate.app.label_<command>`` with ``add_arguments(parser)`` and ``run(args) -> int``;
it is imported only when it runs (a browser page's web framework is not loaded to make a pool).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from ablate.app.entry import say_unexpected
from ablate.errors import AblateError

COMMANDS: dict[str, str] = {
    "pool": "pool the unjudged results of runs (--kind answers: the answers they wrote) for judging",
    "sample": "draw the random sample of questions people check (their items come first on the page)",
    "serve": "judge a pool of either kind in the browser (a local page on 127.0.0.1)",
    "judge": "judge a relevance pool with an LLM assessor",
    "validate": "measure an LLM assessor against the human labels (--kind answers: the answer judges against "
    "human grades)",
    "commit": "turn the relevance journal into a new label version",
}


#: What an earlier version's label commands are now: a user who types one gets one line saying so (exit 2).
RENAMED = {
    "pool-answers": "pool --kind answers",
    "validate-answers": "validate --kind answers",
    "serve --answers": "serve --pool (an answers pool's .jsonl: the page follows the pool's kind)",
}


def renamed(argv: Sequence[str]) -> str | None:
    """The line for an earlier version's command in ``argv``, or ``None``."""
    old = argv[0] if argv and argv[0] in RENAMED else "serve --answers" if argv[:1] == ["serve"] else None
    if old is None or (old == "serve --answers" and not any(a.startswith("--answers") for a in argv)):
        return None
    return f"error: python -m ablate.label {old} is now python -m ablate.label {RENAMED[old]}"


def module_of(command: str) -> str:
    return "ablate.app.label_" + command


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m ablate.label",
        description="Labels that grow with the runs: pool the unjudged, judge them, commit a new label version, "
        "then re-score both sides with python -m ablate.report --parent ID --labels NAME. Two kinds of label: "
        "--kind relevance (of a unit to a question; the default) and --kind answers (the correctness of the "
        "answers runs wrote), for pool and validate; serve follows its pool's kind.",
    )
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, help_text in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        importlib.import_module(module_of(name)).add_arguments(p)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    if line := renamed(sys.argv[1:] if argv is None else list(argv)):
        print(line, file=sys.stderr)
        return 2
    ap = parser()
    args, extra = ap.parse_known_args(argv)
    # KEY=VALUE settings after an option (``--holes 0.2 corpus=demo_zh``): argparse leaves them over
    if extra and hasattr(args, "overrides") and all("=" in x and not x.startswith("-") for x in extra):
        args.overrides = [*args.overrides, *extra]
    elif extra:
        ap.error(f"unrecognized arguments: {' '.join(extra)}")
    module = importlib.import_module(module_of(args.command))
    try:
        return int(module.run(args))
    except AblateError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    # Ctrl-C and SIGTERM are not caught here: they reach ablate.app.interrupts (python -m ablate.label), which says
    # one line "error: ..." and exits 130 or 143, as python -m ablate does; every journal line written is on disk
    except Exception as e:  # noqa: BLE001 - one line, like the other entry points
        say_unexpected(e)
        return 1
