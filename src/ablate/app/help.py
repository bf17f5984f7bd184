"""``python -m ablate --help``: what the tool does, the common commands, and one line per key users set.

The key lines come from the config files themselves (each key's default and its ``# comment`` in ``conf/``), so the
help cannot drift from what the config accepts.
"""

from __future__ import annotations

import re
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
  python -m ablate --cfg job variant=D                           print the composed config
  python -m ablate.report                                        the report of the latest sweep
  python -m ablate.evaluate --from-run RUN_ID                    re-score a tracked run from its run.trec
  python -m ablate.runs clean                                    close runs a killed process left RUNNING
  mlflow ui --backend-store-uri sqlite:///$PWD/mlflow.db         compare runs in the browser
"""

_LINE = re.compile(r"^(\s*)([A-Za-z_][\w]*):\s*(.*?)\s*(?:#\s*(.*))?$")


def key_docs(path: Path, prefix: str = "") -> list[tuple[str, str, str]]:
    """``(dotted key, default, comment)`` for every leaf key of a YAML file, read line by line (comments kept)."""
    out: list[tuple[str, str, str]] = []
    stack: list[tuple[int, str]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip().startswith(("#", "-")):
            continue
        m = _LINE.match(line)
        if not m:
            continue
        indent, key, value, comment = len(m.group(1)), m.group(2), m.group(3), m.group(4) or ""
        while stack and stack[-1][0] >= indent:
            stack.pop()
        dotted = ".".join([*(k for _, k in stack), key])
        if value == "" or value.startswith("#"):
            stack.append((indent, key))
            continue
        if key.startswith("_") or dotted.startswith(("defaults", "hydra")):
            continue
        out.append((prefix + dotted, value, comment))
    return out


def _section(title: str, rows: list[tuple[str, str, str]]) -> list[str]:
    width = max((len(k) for k, _, _ in rows), default=10)
    lines = [title]
    for key, value, comment in rows:
        shown = value if len(value) <= 38 else value[:35] + "..."
        lines.append(f"  {key.ljust(width)}  {shown.ljust(12)}  {comment}".rstrip())
    return lines


def help_text() -> str:
    groups = group_options()
    lines = [INTRO, "Choices (config groups; conf/<group>/<option>.yaml):"]
    for g, opts in groups.items():
        lines.append(f"  {g.ljust(11)} {', '.join(opts)}")
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
