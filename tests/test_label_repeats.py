"""Judge noise: ``python -m ablate.label judge --repeats R`` asks the assessor R times per pair with sampling on and
the seeds generator.seed + 0..R-1, records every repeat's grade in the pair's journal line, keeps their majority (a
tie: the lower grade) and prints the flip rate; ``validate --repeats`` reports it beside kappa. ``judge`` on an
answers pool puts the LLM answer judge's grades beside a person's in the answer journal.

The fast tests ask a real HTTP server (the OpenAI-compatible generator against Flask on 127.0.0.1) whose output
depends on the seed it is sent; the slow one asks the shipped Qwen 3 pairs x 3 repeats."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from ablate.errors import InputError
from ablate.labels import journal
from ablate.labels.kind import ANSWERS
from ablate.labels.repeats import flip_rate, flipped, flipped_items, majority
from ablate.labels.workspace import Workspace
from conftest import TINY_DOCS, TINY_MANIFEST, TINY_QRELS, TINY_QUERIES, serving, write_corpus
from test_label_answers import make_pool as make_answer_pool
from test_label_judge import DEMO, _cli, _pool

flask = pytest.importorskip("flask")
PAIRS = [("q025", "INV-120#header"), ("q025", "INV-102#status"), ("q025", "POL-TRAVEL-2026#2.2")]


# ------------------------------------------------------------------------------------------ majority and flips
@pytest.mark.parametrize(
    "grades, grade, flips",
    [
        ((2, 2, 1), 2, True),
        ((1, 2, 2), 2, True),
        ((2, 1), 1, True),  # a tie: the lower grade
        ((0, 2, 1), 0, True),
        ((2, 1, 1, 2), 1, True),
        ((1, None, 1), 1, False),  # an unparseable repeat is no vote and no flip
        ((None, 2, None), 2, False),
        ((None, None), None, False),
        ((3, 3, 3), 3, False),
        ((1,), 1, False),
    ],
)
def test_majority_keeps_the_most_frequent_grade_and_a_tie_goes_lower(grades, grade, flips):
    assert majority(grades) == grade and flipped(grades) is flips


def test_the_flip_rate_counts_the_graded_items_whose_repeats_disagree():
    items = [(2, 2, 2), (2, 1, 2), (None, None, None), (0, None, 1), (1, 1, None)]
    assert flip_rate(items) == (0.5, 2, 4)
    assert flip_rate([]) == (None, 0, 0)


def test_a_repeated_judgement_round_trips_and_a_single_one_is_written_as_before(tmp_path: Path):
    path = tmp_path / "journal.jsonl"
    journal.append(path, journal.judgement("q1", "u1", 1, "llm:x", "p"))
    journal.append(path, journal.judgement("q1", "u2", 2, "llm:y", "p", repeats=(2, None, 2)))
    first, second = (json.loads(x) for x in path.read_text().splitlines())
    assert list(first) == list(journal.FIELDS)  # one judgement: the line it always was
    assert second["repeats"] == [2, None, 2]
    lines = journal.read(path, grades=[2, 1, 0])
    assert lines[0].repeats is None and lines[1].repeats == (2, None, 2)
    journal.append(path, journal.judgement("q1", "u3", 1, "llm:y", "p", repeats=(2, 1, 1)))
    assert flipped_items(journal.read(path)) == {("q1", "u3")}
    path.write_text(json.dumps({**second, "repeats": [2, 5]}) + "\n")
    with pytest.raises(InputError, match=r"journal\.jsonl:1: repeats holds 5"):
        journal.read(path, grades=[2, 1, 0])


# -------------------------------------------------------------------------------------- a server that samples
def _output(user: str, seed: int) -> str:
    """The fake assessor: an invoice header always scores 3, a passage naming TripDesk has no score with seed 1 and
    scores 1 otherwise, any other passage scores (3 x seed) mod 4 (its repeats disagree). An answer to grade is
    wrong when it says 12345, else correct."""
    if "Answer to grade:" in user:
        verdict = "wrong" if "12345" in user else "correct"
        return f"Conclusion: something\nGrade: {verdict}\nRationale: fake."
    if "Invoice number" in user:
        return "##final score: 3"
    if "TripDesk" in user:
        return "no idea" if seed == 1 else "##final score: 1"
    return f"##final score: {(3 * seed) % 4}"


@pytest.fixture(scope="module")
def sampler() -> Iterator[tuple[str, list[dict]]]:
    asked: list[dict] = []
    app = flask.Flask("fake-sampler")

    @app.post("/v1/chat/completions")
    def chat() -> dict:
        body = flask.request.get_json()
        user = body["messages"][-1]["content"]
        asked.append({"user": user, "seed": body.get("seed"), "temperature": body.get("temperature")})
        return {
            "choices": [
                {"message": {"role": "assistant", "content": _output(user, int(body.get("seed") or 0))}}
            ],
            "usage": {"prompt_tokens": 100, "completion_tokens": 6},
        }

    with serving(app) as url:
        yield url, asked


def _gen(url: str) -> list[str]:
    return ["generator=openai", f"generator.base_url={url}/v1", "generator.model=fake-sampler"]


def test_judge_repeats_asks_with_distinct_seeds_and_keeps_the_majority(tmp_path: Path, sampler):
    url, asked = sampler
    pool = _pool(tmp_path / "labels" / "demo" / "pools" / "p.tsv", DEMO, PAIRS)
    cache = tmp_path / "cache"
    path = tmp_path / "labels" / "demo" / "journal.jsonl"
    p = _cli(["ablate.label", "judge", "--pool", str(pool), "--repeats", "3", *_gen(url)], tmp_path, cache)
    assert p.returncode == 0, p.stderr
    assert "repeats 3 per pair: temperature 0.7, seeds 0 to 2" in p.stderr
    mine = asked[-9:]
    assert len(asked) == 9 and [a["seed"] for a in mine] == [0, 1, 2] * 3
    assert {a["temperature"] for a in mine} == {0.7}
    lines = {j.key: j for j in journal.read(path, grades=[2, 1, 0])}
    mapping = {3: 2, 2: 1, 1: 0, 0: 0}
    expected_repeats = {
        PAIRS[0]: (2, 2, 2),
        PAIRS[1]: tuple(mapping[(3 * s) % 4] for s in range(3)),  # 0, 2, 1: a three-way tie
        PAIRS[2]: (0, None, 0),
    }
    assert {k: j.repeats for k, j in lines.items()} == expected_repeats
    for k, reps in expected_repeats.items():  # the majority, counted here; a tie: the lowest of the tied
        counts = Counter(g for g in reps if g is not None)
        top = max(counts.values())
        assert lines[k].grade == min(g for g, n in counts.items() if n == top)
    assert lines[PAIRS[1]].grade == 0
    assert "flip rate 0.333 (1 of 3 pairs' repeats disagree, 3 repeats each)" in p.stdout
    repeated = lines[PAIRS[0]].assessor
    assert flipped_items(journal.read(path)) == {PAIRS[1]}  # offered to people first
    # resume: nothing asked again; one greedy judgement is another assessor, with the line it always had
    p = _cli(["ablate.label", "judge", "--pool", str(pool), "--repeats", "3", *_gen(url)], tmp_path, cache)
    assert p.returncode == 0 and "3 already judged by this assessor, 0 to judge" in p.stderr
    p = _cli(["ablate.label", "judge", "--pool", str(pool), *_gen(url)], tmp_path, cache)
    assert p.returncode == 0, p.stderr
    assert "flip rate" not in p.stdout and [a["temperature"] for a in asked[9:]] == [0.0] * 3
    single = [json.loads(x) for x in path.read_text().splitlines()][3:]
    assert single and all(list(x) == list(journal.FIELDS) for x in single)
    assert {x["assessor"] for x in single} != {repeated}
    # the latest LLM line stands (the assessor view's grade): a single judgement after the repeats has no flips
    assert flipped_items(journal.read(path)) == frozenset()


def test_repeats_with_greedy_decoding_are_refused(tmp_path: Path, sampler):
    url, _ = sampler
    pool = _pool(tmp_path / "labels" / "demo" / "pools" / "p.tsv", DEMO, PAIRS[:1])
    args = [
        "ablate.label",
        "judge",
        "--pool",
        str(pool),
        "--repeats",
        "3",
        *_gen(url),
        "generator.temperature=0",
    ]
    p = _cli(args, tmp_path, tmp_path / "cache")
    assert p.returncode == 2 and p.stderr.count("error:") == 1 and "Traceback" not in p.stderr
    assert "generator.temperature=0" in p.stderr and "greedy decoding gives the same output" in p.stderr
    p = _cli(
        ["ablate.label", "judge", "--pool", str(pool), "--repeats", "0", *_gen(url)], tmp_path, tmp_path / "c"
    )
    assert p.returncode == 2 and "--repeats=0 is not valid" in p.stderr
    assert not (tmp_path / "labels" / "demo" / "journal.jsonl").exists()


def test_validate_reports_the_flip_rate_beside_kappa(tmp_path: Path, sampler):
    url, _ = sampler
    corpus = write_corpus(tmp_path / "tiny", TINY_DOCS, TINY_QUERIES, TINY_QRELS, TINY_MANIFEST)
    args = ["ablate.label", "validate", "--holes", "1.0", "--split", "dev", "--repeats", "3"]
    p = _cli([*args, "corpus=beir", f"corpus.path={corpus}", *_gen(url)], tmp_path, tmp_path / "cache")
    assert p.returncode == 0, p.stderr
    data = json.loads(
        next((tmp_path / "labels" / "tiny" / "validation").glob("*/validation.json")).read_text()
    )
    assert data["repeats"] == 3 and data["details"]["repeats"] == 3
    assert data["flip_items"] == data["n"] and data["flipped"] == data["n"]  # every tiny passage flips here
    assert data["flip_rate"] == 1.0
    assert re.search(
        r"kappa graded .* on \d+ pairs \(0 unparseable\); flip rate 1\.000 over 3 repeats", p.stdout
    )
    md = next((tmp_path / "labels" / "tiny" / "validation").glob("*/validation.md")).read_text()
    assert "Judge noise: each pair asked 3 times (temperature 0.7, seeds 0 to 2)" in md


def test_judge_on_an_answers_pool_puts_the_llm_grade_beside_the_persons(tmp_path: Path, sampler):
    url, _ = sampler
    labels = tmp_path / "labels"
    pool = make_answer_pool(labels)
    path = Workspace(labels, "demo").journal_of(ANSWERS)
    entries = [json.loads(x) for x in pool.read_text().splitlines()]
    first = entries[0]
    journal.append(path, journal.grade(first["qid"], first["answer"], "partly", "human:alice"))
    p = _cli(["ablate.label", "judge", "--pool", str(pool), *_gen(url)], tmp_path, tmp_path / "cache")
    assert p.returncode == 0, p.stderr
    lines = journal.read_grades(path)
    llm = {g.key: g for g in lines if g.who == "llm"}
    assert len(llm) == len(entries) and all(g.assessor.startswith("llm:fake-sampler@") for g in llm.values())
    for e in entries:
        assert llm[(e["qid"], e["answer_sha256"])].grade == ("wrong" if "12345" in e["answer"] else "correct")
    human = journal.human(lines)
    assert {k: g.grade for k, g in human.items()} == {(first["qid"], first["answer_sha256"]): "partly"}
    assert f"graded {len(entries)} of {len(entries)} answers" in p.stdout
    p = _cli(["ablate.label", "judge", "--pool", str(pool), *_gen(url)], tmp_path, tmp_path / "cache")
    assert p.returncode == 0 and f"{len(entries)} already graded by this judge, 0 to grade" in p.stderr
    p = _cli(
        ["ablate.label", "judge", "--pool", str(pool), "--repeats", "3", *_gen(url)], tmp_path, tmp_path / "c"
    )
    assert (
        p.returncode == 2
        and "--repeats=3 is not valid; it is not an option of judge --kind answers" in p.stderr
    )


# ----------------------------------------------------------------------------------------------- the real model
@pytest.mark.slow
def test_qwen_judges_three_pairs_three_times_each(tmp_path: Path):
    """The shipped Qwen, 3 pairs x 3 sampled repeats: every repeat is recorded, the grade is their majority."""
    pool = _pool(tmp_path / "labels" / "demo" / "pools" / "q.tsv", DEMO, PAIRS)
    cache = Path(os.environ.get("ABLATE_CACHE_DIR") or tmp_path / "cache")
    p = _cli(
        ["ablate.label", "judge", "--pool", str(pool), "--repeats", "3", "generator=llama_cpp"],
        tmp_path,
        cache,
    )
    assert p.returncode == 0, p.stderr
    lines = journal.read(tmp_path / "labels" / "demo" / "journal.jsonl", grades=[2, 1, 0])
    bad = int(re.search(r"unparseable \(not judged\): (\d+)", p.stdout).group(1))
    assert len(lines) + bad == 3 and lines
    for j in lines:
        assert j.assessor.startswith("llm:qwen2.5-coder-1.5b-instruct@") and j.repeats is not None
        assert len(j.repeats) == 3 and j.grade == majority(j.repeats)
    rate, k, n = flip_rate(j.repeats for j in lines if j.repeats)
    assert f"flip rate {rate:.3f} ({k} of {n} pairs' repeats disagree, 3 repeats each)" in p.stdout
