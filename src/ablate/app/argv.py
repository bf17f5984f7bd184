"""ablate's command line in Hydra's words: the flags Hydra does not know become overrides, and a stage parameter
becomes an override that applies where the stage runs.

``python -m ablate`` takes Hydra's command line plus ``--confirm-test`` and ``-v``/``--verbose``; Hydra's parser
refuses both, and a ``-m`` after the first override. :func:`hydra_argv` turns them into what Hydra reads
(``heldout.confirm_test=true``, ``verbose=true``, ``-m`` first). :func:`stage_overrides_where_they_run` turns
``bm25.k1=1.2`` into ``++bm25.k1=1.2``: the plan composes every cell with it and Hydra's run (which reads
``sys.argv``) composes the same, so a sweep over variants sets k1 where BM25 runs and leaves the others alone.
Nothing heavy is imported: it runs before the command is checked.
"""

from __future__ import annotations

from collections.abc import Sequence

from ablate.app.plan import MULTIRUN_FLAGS

#: The command-line flag that confirms a sweep on the held-out split; it becomes the override below, so the config
#: (and the run's recorded overrides) hold it like any other setting.
CONFIRM_TEST_FLAG, CONFIRM_TEST_OVERRIDE = "--confirm-test", "heldout.confirm_test=true"
#: ``-v`` / ``--verbose``: every query-accounting counter of each run on the console (the setting ``verbose``).
VERBOSE_FLAGS, VERBOSE_OVERRIDE = ("-v", "--verbose"), "verbose=true"
HELP_FLAGS = ("-h", "--help")
#: Hydra's flags that print the config or Hydra's state instead of running (``--cfg job``, ``--info``, ...).
INTROSPECT_PREFIXES = ("--cfg", "-c", "--info", "--resolve", "--package", "-p")


def confirm_test_flag(argv: list[str]) -> list[str]:
    """Strip ``--confirm-test`` (Hydra does not know it) and, when it was given, append ``heldout.confirm_test=true``
    (last, so it wins over an earlier ``heldout.confirm_test=false``)."""
    rest = [a for a in argv if a != CONFIRM_TEST_FLAG]
    return [*rest, CONFIRM_TEST_OVERRIDE] if len(rest) != len(argv) else rest


def verbose_flag(argv: list[str]) -> list[str]:
    """Strip ``-v``/``--verbose`` (Hydra does not know them) and, when given, append ``verbose=true``."""
    rest = [a for a in argv if a not in VERBOSE_FLAGS]
    return [*rest, VERBOSE_OVERRIDE] if len(rest) != len(argv) else rest


def flags_first(argv: list[str]) -> list[str]:
    """``-m``/``--multirun`` moved before the overrides, so ``python -m ablate corpus=demo_zh -m variant=A,B`` works
    (Hydra's parser takes the overrides as one positional list and refuses a flag in the middle of it)."""
    flags = [a for a in argv if a in MULTIRUN_FLAGS]
    return [*flags[:1], *(a for a in argv if a not in MULTIRUN_FLAGS)] if flags else argv


def hydra_argv(argv: list[str]) -> list[str]:
    """ablate's command line as Hydra's: ``--confirm-test`` and ``-v`` as overrides, ``-m`` first."""
    return flags_first(verbose_flag(confirm_test_flag(argv)))


def wants_help(argv: Sequence[str]) -> bool:
    return any(a in HELP_FLAGS for a in argv)


def introspects(argv: Sequence[str]) -> bool:
    """Hydra prints the config or its state (``--cfg job``) instead of running: nothing is planned."""
    return any(a.startswith(INTROSPECT_PREFIXES) for a in argv)


def stage_overrides_where_they_run(argv: list[str], blocks: Sequence[str]) -> list[str]:
    """``bm25.k1=1.2`` -> ``++bm25.k1=1.2`` for every key inside a stage block (``blocks``: ``bm25``, ``dense``,
    ``rrf``, ``rerank``, ...): Hydra then sets it where the stage runs and adds an orphan block elsewhere, which the
    job ignores with a note. So ``-m variant=A,B,C bm25.k1=1.2`` sets k1 for A and C and leaves B alone, instead of
    failing B's composition because B has no ``bm25`` block."""
    out = []
    for arg in argv:
        key, eq, _ = arg.partition("=")
        if eq and not arg.startswith(("-", "+", "~")) and "." in key and key.split(".", 1)[0] in blocks:
            arg = "++" + arg
        out.append(arg)
    return out
