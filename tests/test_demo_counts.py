"""The counts table of corpora/demo/README.md is what the files say (this test is the validation script it cites)."""

from __future__ import annotations

import re
from pathlib import Path

from ablate.data.corpus import load_corpus
from ablate.runner.access import Access, Resolver

DEMO = Path(__file__).resolve().parents[1] / "corpora" / "demo"
SPLITS = ("train", "dev", "test")
TAGS = (
    "exact-id",
    "paraphrase",
    "multi-hop",
    "multi-condition",
    "no-answer",
    "conflict",
    "table",
    "permission",
    "numeric",
)


def _counts() -> dict[str, list[int]]:
    s = load_corpus(DEMO)
    q = s.queries
    dated = Resolver(s, Access("per_query", "per_query"))
    rows: dict[str, list[int]] = {}

    def row(name, f):
        vals = [f(sp) for sp in SPLITS]
        rows[name] = [*vals, sum(vals)]

    def answerable_on_date(sp):
        labels, _ = dated.labels(s.split_qrels(sp), s.split_qids(sp))
        return sum(1 for x in s.split_qids(sp) if labels.positives(x))

    def grades(sp, g):
        return sum(1 for j in s.split_qrels(sp).judgements.values() for gg in j.values() if gg == g)

    def stale(sp):
        return sum(
            1
            for x, j in s.split_qrels(sp).judgements.items()
            for u, g in j.items()
            if g >= 1 and s.chunk_to_doc[u] in dated.out_of_force(x)
        )

    row("questions", lambda sp: len(s.split_qids(sp)))
    row(
        "answerable (not `no-answer`)",
        lambda sp: sum(1 for x in s.split_qids(sp) if "no-answer" not in q[x].tags),
    )
    row("answerable for the question's persona on its date", answerable_on_date)
    row("groups", lambda sp: len({q[x].group for x in s.split_qids(sp)}))
    for t in TAGS:
        row(f"tag `{t}`", lambda sp, t=t: sum(1 for x in s.split_qids(sp) if t in q[x].tags))
    row("with `subquestions`", lambda sp: sum(1 for x in s.split_qids(sp) if q[x].subquestions))
    for p in ("employee", "finance"):
        row(f"persona `{p}`", lambda sp, p=p: sum(1 for x in s.split_qids(sp) if q[x].persona == p))
    for g in (2, 1, 0):
        row(f"qrels lines, grade {g}", lambda sp, g=g: grades(sp, g))
    row("grade ≥ 1 on a version out of force on the question's date", stale)
    return rows


def test_demo_readme_counts_match_the_files():
    text = (DEMO / "README.md").read_text(encoding="utf-8")
    table = text[text.index("| | train | dev | test | total |") :].split("\n\n")[0]
    written = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        written[cells[0]] = [int(c) for c in cells[1:]]
    assert written == _counts()
    s = load_corpus(DEMO)
    m = re.search(r"queries: (\d+); groups: (\d+)", text)
    assert (
        m
        and int(m.group(1)) == len(s.queries)
        and int(m.group(2)) == len({x.group for x in s.queries.values()})
    )
