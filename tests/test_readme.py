"""The README cannot drift from the code, nor the pages it links to: every key and default the settings table
(docs/settings.md) names is what the config has; the README's commands run as written and its demo table's retrieval
figures are what a fresh run prints; the demo figures of docs/labels.md, docs/decisions.md, docs/planning.md and
docs/answers.md are what their commands print; the guide's minimal files run; every relative link of README.md and
docs/*.md resolves."""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from ablate.app.paths import CONF_DIR, register_resolvers
from ablate.study.sweep_summary import ANSWER_COLS

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
SETTINGS = REPO / "docs" / "settings.md"
register_resolvers()


def _table() -> list[list[str]]:
    text = SETTINGS.read_text(encoding="utf-8")
    section = text.split("## Settings users rely on", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [[c.strip() for c in line.strip("|").split("|")] for line in rows]


def _compose(overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=overrides, return_hydra_config=True)


DEFAULT = _compose([])
GENERIC = _compose(
    ["corpus=beir", "corpus.path=/x", "variant=D", "retrievers=[bm25,dense,rm3]", "generator=llama_cpp"]
)
DEMO = _compose(["variant=D"])
ROWS = _table()
_ABSENT = object()


def _value(cfg, key: str) -> object:
    if key in ("variant", "corpus", "generator"):
        return DEFAULT.hydra.runtime.choices[key]
    value = OmegaConf.select(cfg, key, default=_ABSENT, throw_on_missing=False)
    return OmegaConf.to_container(value) if OmegaConf.is_config(value) else value


def _same(readme: str, actual: object) -> bool:
    readme = readme.replace(" ", "")
    if isinstance(actual, list):
        return readme == "[" + ",".join(str(a) for a in actual) + "]"
    if isinstance(actual, bool):
        return readme.lower() == str(actual).lower()
    if actual is None:
        return readme in ("null", "none")
    return readme == str(actual)


def test_the_table_has_rows():
    assert len(ROWS) >= 10


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_every_key_and_default_in_the_readme_is_the_config(row):
    key = row[0].strip("`")
    default = row[1]
    block = key[:-2] if key.endswith(".*") else None
    if block:
        assert OmegaConf.select(GENERIC, block) is not None, f"README names {key}, the config has no {block}"
    else:
        assert _value(GENERIC, key) is not _ABSENT or _value(DEMO, key) is not _ABSENT, (
            f"README names {key}: not in config"
        )
        first = re.match(r"^`([^`]+)`", default)
        if first and "$" not in first.group(1) and "=" not in first.group(1):
            cfg = DEMO if default.startswith("demo:") else GENERIC
            assert _same(first.group(1), _value(cfg, key)), (
                f"{key}: README says {first.group(1)}, config {_value(cfg, key)}"
            )
        demo = re.search(r"demo: `([^`]+)`", default)
        if demo:
            assert _same(demo.group(1), _value(DEMO, key)), f"{key} on the demo: README says {demo.group(1)}"
    # every `name=value` the row quotes is the config's default too
    for name, value in re.findall(r"`([\w.]+)=([^`\s]+)`", " ".join(row[1:])):
        if name in ("retrievers", "fusion", "reranker", "variant", "corpus", "generator"):
            continue  # choosing a group option, not a default
        full = name if "." in name else f"{block or key.split('.')[0]}.{name}"
        if full.startswith(("corpus.path", "corpus.split")):
            continue  # examples of what to set, not defaults
        assert _same(value, _value(GENERIC, full)), (
            f"{full}: README says {value}, config {_value(GENERIC, full)}"
        )


# --- The README's commands run as written, and its demo table is what they print ------------------------------------

_PLACEHOLDER_RUN_ID = "RUN_ID"
# Every command line of the README's bash blocks is either run by test_the_readmes_commands_run_as_written (in the
# README's order, in a fresh folder holding `corpora/` as a clone does) or named here with the reason it is not.
HEAVY: dict[str, str] = {
    "make setup demo": "installs a venv and generates 100 answers with the shipped GGUF (`make demo` by hand)",
    "make test": "this test suite",
    ". .venv/bin/activate": "the test runs the commands with its own interpreter",
    "python -m ablate.ingest DOCS --out policies": (
        "needs the user's folder of documents: tests/test_ingest.py ingests one of every format"
    ),
    "python -m ablate -m variant=oracle generator=llama_cpp generator.prompt=strict,grounded": (
        "40 answers with the shipped GGUF: tests/test_prompt_names.py sweeps prompts, experiments/demo_prompts.md"
    ),
    "make ui": "a server until it is stopped: tests/test_mlflow_ui.py checks the URL it prints and opens it in Chromium",
}
FIRST_MINUTE = "python -m ablate -m variant=A,B,C,oracle"


def _readme_commands() -> list[str]:
    """Every command line of the README's ```bash blocks, without its trailing comment, in the README's order."""
    text = README.read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            line = re.sub(r"\s+#\s.*$", "", line).strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return env


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` as a user types it, ``python`` being this interpreter (the venv's, as after activating it). The
    README's first-minute sweep runs in a new interpreter, as typed; the other ``python -m`` commands run in this
    process (tests/inprocess.py: what a new interpreter would see, without its seconds of imports each)."""
    argv = shlex.split(command)
    assert argv[0] == "python", command
    if command != FIRST_MINUTE and argv[1] == "-m":
        from inprocess import run_module

        return run_module(argv[2], argv[3:], cwd=cwd, env=_env())
    return subprocess.run(
        [sys.executable, *argv[1:]], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=900
    )


def _clone(tmp_path: Path) -> Path:
    """A folder laid out as a fresh clone is for the README's relative paths (``corpora/demo``)."""
    root = tmp_path / "clone"
    root.mkdir()
    (root / "corpora").symlink_to(REPO / "corpora", target_is_directory=True)
    return root


def _table_rows(text: str) -> dict[str, dict[str, str]]:
    """The rows of the first markdown/console table in ``text`` whose header starts with ``run``, by the run label's
    first word (``A``, ``B``, ``C``, ``D``, ``oracle``)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"^\|\s*run\s*\|", line))
    header = [c.strip() for c in lines[start].strip().strip("|").split("|")]
    rows: dict[str, dict[str, str]] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|") or re.match(r"^\|\s*run\s*\|", line):
            break  # the table ends (the ablation report's own table may follow at once)
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0].split()[0]] = dict(zip(header, cells, strict=True))
    return rows


def _readme_demo_table() -> dict[str, dict[str, str]]:
    text = README.read_text(encoding="utf-8")
    return _table_rows(text.split("## The demo table", 1)[1].split("\n## ", 1)[0])


ANSWER_COLUMNS = {
    "run",
    "status",
    "correct",
    "correct (rule)",
    "citations support",
    "wrong: gen/retr",
    "refused n/a",
}
#: make demo runs one judge (the rule): its correctness column names it
DEMO_ANSWER_COLS = [c if c != "correct" else "correct (rule)" for c in ANSWER_COLS]


def _compare_retrieval_columns(printed: dict[str, dict[str, str]], variants: list[str]) -> None:
    readme = _readme_demo_table()
    for v in variants:
        assert v in printed, f"the console printed no {v} row: {sorted(printed)}"
        assert v in readme, f"the README's demo table has no {v} row"
        shared = [c for c in printed[v] if c not in ANSWER_COLUMNS]
        columns = [
            "run",
            *shared,
            *DEMO_ANSWER_COLS,
            "status",
        ]  # what make demo's console prints, in its order
        assert list(readme[v]) == columns, (
            f"the console prints {columns}, the README's table has {list(readme[v])}"
        )
        for c in shared:
            assert readme[v][c] == printed[v][c], (
                f"{v} {c}: README says {readme[v][c]}, the demo prints {printed[v][c]}"
            )


def test_every_readme_command_is_run_or_named_as_heavy():
    commands = _readme_commands()
    assert FIRST_MINUTE in commands
    for command in commands:
        runs = command.startswith("python -m ablate") and command not in HEAVY
        assert runs or command in HEAVY, (
            f"README command {command!r} is neither run by this test nor named in HEAVY"
        )
    assert not set(HEAVY) - set(commands), (
        f"HEAVY names commands the README no longer has: {set(HEAVY) - set(commands)}"
    )


def test_the_readmes_commands_run_as_written(tmp_path):
    """The cheap commands of the README, in its order, in a fresh folder: each exits 0 and says what it should. The
    first-minute sweep prints the README demo table's retrieval figures."""
    root = _clone(tmp_path)
    (root / "run.trec").write_text("q1 Q0 d1 1 2.0 r\nq1 Q0 d2 2 1.0 r\nq2 Q0 d3 1 1.0 r\nq2 Q0 d4 2 0.5 r\n")
    (root / "qrels.tsv").write_text("q1\t0\td1\t1\nq2\t0\td4\t1\n")
    run_id = None
    for command in [c for c in _readme_commands() if c not in HEAVY]:
        if _PLACEHOLDER_RUN_ID in command:
            assert run_id, f"{command}: no run before it printed its id"
            command = command.replace(_PLACEHOLDER_RUN_ID, run_id)
        out = _run(command, root)
        assert out.returncode == 0, f"{command} exited {out.returncode}:\n{out.stderr[-3000:]}"
        found = re.search(r"mlflow run ([0-9a-f]{32})", out.stdout)
        run_id = found.group(1) if found else run_id
        if command == FIRST_MINUTE:
            _compare_retrieval_columns(
                _table_rows(out.stdout.split("runs on split", 1)[1]), ["A", "B", "C", "oracle"]
            )
        elif command.startswith("python -m ablate.evaluate run.trec"):
            scores = json.loads(out.stdout)
            assert scores["mrr@10"] == 0.75 and abs(scores["ndcg@10"] - (1 + 1 / math.log2(3)) / 2) < 1e-12
        elif "--from-run" in command:
            assert "re-scored equal the logged ones" in out.stdout + out.stderr
        elif command.startswith("python -m ablate.split"):
            counts = re.search(r"-> (dev \d+ / test \d+)", out.stdout + out.stderr)
            assert counts and "verification: no leakage found" in out.stdout + out.stderr, (
                out.stdout + out.stderr
            )
            metrics_page = (REPO / "docs" / "metrics.md").read_text(encoding="utf-8")
            assert f"on the demo: {counts.group(1)} by document" in metrics_page, counts.group(1)
        elif command.startswith("python -m ablate.label pool"):
            assert re.search(r"^pool: \d+ \(question, chunk\) pairs over \d+ questions", out.stdout, re.M), (
                out.stdout
            )
        elif command.startswith("python -m ablate.plan"):
            assert re.search(r"^\| B vs A ", out.stdout, re.M), out.stdout
        elif command.endswith("--help"):
            assert "ablate" in out.stdout and "variant" in out.stdout
    assert run_id is not None


def _bash_commands(page: Path) -> list[str]:
    """The command lines of ``page``'s ```bash blocks, without their trailing comments."""
    blocks = re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)
    lines = (re.sub(r"\s+#\s.*$", "", line).strip() for block in blocks for line in block.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def test_the_docs_demo_figures_are_what_the_commands_print(tmp_path):
    """The demo figures the README links to, as the pages show them: docs/labels.md's A, B, C sweep and its pool
    (the pairs it finds, the pool file), then docs/decisions.md's commands in its order (the planner's rows, the 2x2
    grid, the factorial analysis); docs/planning.md prints the same rows."""
    labels, decisions = REPO / "docs" / "labels.md", REPO / "docs" / "decisions.md"
    sweep, pool = _bash_commands(labels)[:2]
    assert (sweep, pool) == ("python -m ablate -m variant=A,B,C", "python -m ablate.label pool --depth 10")
    plan, grid, factorial = _bash_commands(decisions)[:3]
    assert plan.startswith("python -m ablate.plan") and "-m variant=C" in grid and "--factorial" in factorial
    root = _clone(tmp_path)
    outs = {}
    for command in (sweep, pool, plan, grid, factorial):
        out = _run(command, root)
        assert out.returncode == 0, f"{command} exited {out.returncode}:\n{out.stderr[-3000:]}"
        outs[command] = out.stdout + out.stderr
    labels_page = " ".join(labels.read_text(encoding="utf-8").split())
    pooled = re.search(
        r"^pool: (\d+) \(question, chunk\) pairs over (\d+) questions -> .*$", outs[pool], re.M
    )
    assert pooled, outs[pool]
    assert pooled.group(0) in labels.read_text(encoding="utf-8"), pooled.group(0)
    assert (
        f"`pool` finds {pooled.group(1)} unjudged (question, chunk) pairs over the {pooled.group(2)}"
        in labels_page
    )
    rows = [line for line in outs[plan].splitlines() if re.match(r"^\| [A-Z] vs A ", line)]
    assert len(rows) == 2, outs[plan]
    for page in (decisions, REPO / "docs" / "planning.md"):
        assert all(row in page.read_text(encoding="utf-8") for row in rows), (page.name, rows)
    assert "factorial" in outs[factorial].lower(), outs[factorial]


@pytest.mark.slow
def test_the_readmes_d_row_is_what_the_demo_prints(tmp_path):
    """D's retrieval figures (the trained demo reranker: a few minutes on a cold cache)."""
    out = _run("python -m ablate -m variant=D", _clone(tmp_path))
    assert out.returncode == 0, out.stderr[-3000:]
    _compare_retrieval_columns(_table_rows(out.stdout.split("runs on split", 1)[1]), ["D"])


def test_the_one_page_guides_minimal_files_run(tmp_path):
    """docs/your-data.md's first bash block (the minimal files and a run on them), as a user pastes it."""
    text = (REPO / "docs" / "your-data.md").read_text(encoding="utf-8")
    block = re.findall(r"```bash\n(.*?)```", text, flags=re.S)[0]
    script = block.replace("python -m ablate", f"{shlex.quote(sys.executable)} -m ablate")
    out = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    row = next(line for line in out.stdout.splitlines() if line.startswith("| C "))
    assert float(row.split("|")[2]) > 0, out.stdout  # a scored nDCG@10 for C
    assert "no held-out split: exploratory" in out.stdout, out.stdout  # one labels file: a pilot, said so


# --- Every relative link of README.md and docs/*.md leads somewhere --------------------------------------------------


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation other than ``-`` and ``_`` dropped, spaces to ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {_anchor(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}


PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_relative_link_resolves(page):
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # http:, mailto:, ...
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target} (no file {dest})")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target} (no heading #{anchor} in {dest.name})")
    assert not broken, f"{page.name}: " + "; ".join(broken)


@pytest.mark.parametrize("corpus", ["demo", "demo_zh"])
def test_the_answer_pages_rule_agreement_is_what_validate_answers_prints(corpus, tmp_path):
    """docs/answers.md's κ of the answer rule against the committed human grades is what `validate-answers` (the rule
    alone, no model) computes from them today: a change to the rule that moves the figure must move the page."""
    import shutil

    grades = REPO / "experiments" / "answer_grades" / corpus
    for name in ("pool.jsonl", "pool.json", "answer_journal.jsonl"):
        shutil.copy(grades / name, tmp_path / name)
    (tmp_path / "corpora").symlink_to(REPO / "corpora")  # the pool names its corpus as a clone's root does
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ablate.label",
            "validate",
            "--kind",
            "answers",
            "--pool",
            "pool.jsonl",
            "--grades",
            "answer_journal.jsonl",
        ],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    m = re.search(
        r"rule: kappa binary ([\d.]+) \[([\d.]+), ([\d.]+)\]; false positives [\d.]+ \((\d+/\d+)\)",
        out.stdout + out.stderr,
    )
    assert m, out.stdout + out.stderr
    kappa, lo, hi, fp = m.groups()
    n = sum(1 for _ in (grades / "answer_journal.jsonl").open(encoding="utf-8"))
    row = f"| {corpus} ({n}) | rule | {kappa} [{lo}, {hi}] | – | "
    text = (REPO / "docs" / "answers.md").read_text(encoding="utf-8")
    assert row in text and f"({fp})" in text.split(row, 1)[1].splitlines()[0], (row, fp)
