"""``python -m ablate --help``: what the tool does, the common commands, and one line per key users set.

The key lines come from the config files themselves (each key's default and its ``# comment`` in ``conf/``), so the
help cannot drift from what the config accepts.
"""

from __future__ import annotations

import functools
import re
import textwrap
from pathlib import Path

from ablate.app.paths import CONF_DIR, STAGE_GROUPS, group_options

INTRO = """\
ablate: which part of a RAG retrieval stack helps, and by how much.

Runs an ablation table (A BM25 · B dense · C BM25+dense fused by RRF · D C+reranker · oracle the gold evidence) on a
frozen corpus snapshot, scores every run by declared rules and logs it to MLflow.

Common commands:
  python -m ablate variant=C rrf.k=60                            one variant
  python -m ablate -m variant=A,B,C,D,oracle                     the whole table (one sweep, one report)
  python -m ablate -m variant=C rrf.k=1,10,60 retrieval.window=20,50,100   a sweep
  python -m ablate corpus=scifact variant=A                      a shared dataset (or corpus=beir corpus.path=DIR)
  python -m ablate -m variant=A,B,C bm25.k1=1.2                  a stage parameter applies where that stage runs
  python -m ablate -m corpus=scifact variant=A,B --confirm-test  the one final sweep on a held-out test split
  python -m ablate -m variant=A,B -v                             -v: every query counter of each run, too
  python -m ablate --cfg job variant=D                           print the composed config
  python -m ablate.report                                        the report of the latest sweep
  python -m ablate.evaluate --from-run RUN_ID                    re-score a tracked run from its run.trec
  python -m ablate.runs clean                                    close runs a killed process left RUNNING
  mlflow ui --backend-store-uri sqlite:///$PWD/mlflow.db         compare runs in the browser
"""

_LINE = re.compile(r"^(\s*)([A-Za-z_][\w]*):\s*(.*?)\s*(?:#\s*(.*))?$")
#: Width of the help's key lines: a description longer than its column is wrapped at word boundaries, never cut.
WIDTH = 118


def key_docs(path: Path, prefix: str = "") -> list[tuple[str, str, str]]:
    """``(dotted key, default, comment)`` for every leaf key of a YAML file, read line by line (comments kept).

    A comment continued on the next lines (comment-only lines whose ``#`` is in the same column) is part of the
    key's comment; a block key's own comment is a row ``block.*`` with no default."""
    out: list[tuple[str, str, str]] = []
    stack: list[tuple[int, str]] = []
    column = -1  # the ``#`` column of the last row's comment, for its continuation lines
    for line in path.read_text(encoding="utf-8").splitlines():
        stripped = line.lstrip()
        if stripped.startswith("#") and out and column == len(line) - len(stripped):
            key, value, comment = out[-1]
            out[-1] = (key, value, f"{comment} {stripped.lstrip('#').strip()}".strip())
            continue
        column = -1
        if not line.strip() or stripped.startswith(("#", "-")):
            continue
        m = _LINE.match(line)
        if not m:
            continue
        indent, key, value, comment = len(m.group(1)), m.group(2), m.group(3), m.group(4) or ""
        while stack and stack[-1][0] >= indent:
            stack.pop()
        dotted = ".".join([*(k for _, k in stack), key])
        block = value == "" or value.startswith("#")
        if block:
            stack.append((indent, key))
        if key.startswith("_") or dotted.startswith(("defaults", "hydra")) or (block and not comment):
            continue
        out.append((prefix + dotted + (".*" if block else ""), "" if block else value, comment))
        if comment:
            column = line.rfind("#", 0, m.start(4))
    return out


def _section(title: str, rows: list[tuple[str, str, str]]) -> list[str]:
    """One line per key (key, default, description); a long default or description goes on and wraps at word
    boundaries under the description column, so every description is shown whole."""
    width = max((len(k) for k, _, _ in rows), default=10)
    indent = 2 + width + 2 + 12 + 2
    wrap = functools.partial(textwrap.wrap, break_long_words=False, break_on_hyphens=False)
    lines = [title]
    for key, value, comment in rows:
        head = f"  {key.ljust(width)}  {value.ljust(12)}  "
        if len(head) > WIDTH - 30:  # a long default: its description starts on the next line
            lines.append(head.rstrip())
            head = " " * indent
        first, *rest = wrap(comment, WIDTH - len(head)) or [""]
        lines.append((head + first).rstrip())
        lines += [" " * indent + part for part in wrap(" ".join(rest), WIDTH - indent)]
    return lines


def help_text() -> str:
    groups = {g: opts for g, opts in group_options().items() if opts}
    lines = [INTRO, "Choices (config groups; conf/<group>/<option>.yaml):"]
    for g, opts in groups.items():
        lines.append(f"  {g.ljust(11)} {', '.join(opts)}")
    prompts = sorted(p.name for p in (CONF_DIR / "prompts").glob("*.txt"))
    if prompts:  # files a setting names, not options to choose with prompts=...
        lines += [
            "Prompt templates (conf/prompts/; files, not a group: generator.prompt and rerank.prompt name one):",
            f"  {', '.join(prompts)}",
        ]
    lines.append("")
    lines += _section("Settings (key, default, meaning):", key_docs(CONF_DIR / "config.yaml"))
    lines.append("")
    lines += _section(
        "Corpus (corpus=demo; corpus.*):", key_docs(CONF_DIR / "corpus" / "demo.yaml", "corpus.")
    )
    for group in STAGE_GROUPS:
        for f in sorted((CONF_DIR / group).glob("*.yaml")):
            rows = key_docs(f)
            if rows:
                lines.append("")
                lines += _section(
                    f"Stage {rows[0][0].split('.')[0]} ({group}/{f.name}; used where it runs):", rows
                )
    lines += ["", "Settings: docs/settings.md; every page: README.md; what can go wrong: docs/errors.md"]
    return "\n".join(lines)


def print_help() -> None:
    import sys

    try:
        print(help_text())
    except BrokenPipeError:  # `python -m ablate --help | head`
        sys.stderr.close()
