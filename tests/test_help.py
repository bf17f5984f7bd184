"""``python -m ablate --help`` through the real entry point: no config group without options, and every key's
description and default shown whole (read here from the config files' own text, independently of the help's code)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"
KEY = re.compile(r"^(\s*)([A-Za-z_]\w*):\s*(.*?)\s*#\s*(.*)$")


@pytest.fixture(scope="module")
def help_text(tmp_path_factory) -> str:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    p = subprocess.run(
        [sys.executable, "-m", "ablate", "--help"],
        cwd=tmp_path_factory.mktemp("help"),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    return p.stdout


def documented(path: Path) -> list[tuple[str, str]]:
    """``(default, whole comment)`` of every key line with a comment; a comment continued on comment-only lines
    starting in the same column is part of it."""
    out: list[tuple[str, str]] = []
    column = -1
    for line in path.read_text(encoding="utf-8").splitlines():
        body = line.lstrip()
        if body.startswith("#") and out and len(line) - len(body) == column:
            out[-1] = (out[-1][0], out[-1][1] + " " + body.lstrip("#").strip())
            continue
        column = -1
        m = KEY.match(line)
        if m and not m.group(2).startswith("_") and m.group(2) not in ("hydra", "run", "dir"):
            out.append((m.group(3), m.group(4).strip()))
            column = line.rfind("#", 0, m.start(4))
    return out


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_no_group_without_options(help_text):
    block = help_text.split("Choices (config groups", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    groups = {}
    for line in block:
        if line.startswith("  "):
            name, _, options = line.strip().partition(" ")
            groups[name] = options.strip()
    assert "variant" in groups and all(groups.values()), groups
    assert "prompts" not in groups
    # the templates are listed as what they are: files a setting names
    assert "grounded.txt" in help_text and "not a group" in help_text


FILES = [CONF / "config.yaml", CONF / "corpus" / "demo.yaml"] + sorted(
    f for g in ("retrievers", "fusion", "reranker", "generator") for f in (CONF / g).glob("*.yaml")
)


@pytest.mark.parametrize("path", FILES, ids=[str(f.relative_to(CONF)) for f in FILES])
def test_every_description_and_default_is_shown_whole(help_text, path):
    flat = _flat(help_text)
    rows = documented(path)
    for default, comment in rows:
        assert _flat(comment) in flat, f"{path.name}: description cut: {comment!r}"
        if default:
            assert _flat(default) in flat, f"{path.name}: default cut: {default!r}"
    assert "..." not in help_text.split("Settings (key", 1)[1]


def test_a_continued_comment_is_not_cut_mid_sentence(help_text):
    flat = _flat(help_text)
    assert (
        "in_force = documents out of force on the question's date (corpus.as_of) are filtered inside retrieval"
        in flat
    )
    assert (
        "false = run it anew. Never on the held-out split, with a generator, or with cache.enabled=false"
        in flat
    )
    # wrapped lines end at a word: no line of the key sections is over the help's width
    keys = help_text.split("Settings (key", 1)[1]
    assert max(len(line) for line in keys.splitlines()) <= 118
