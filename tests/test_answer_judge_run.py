"""``answer.judge=llm`` with real models: the shipped Qwen judges hand-written answers (cached: a second call generates
nothing and loads no model), a pipeline's answers carry the judge's grades (SmolLM2, the small shipped model, as
generator and judge), and a sweep ``answer.judge=rule,llm`` through the entry point logs the judge as one factor,
names it in the report, re-scores from answers.csv without the model and, run again, judges nothing anew."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from ablate import record as R
from ablate.app.paths import CONF_DIR
from ablate.cache import Cache
from ablate.data.corpus import load_corpus
from ablate.evaluation import EvalSettings
from ablate.runner.pipeline import Pipeline, run_pipeline
from ablate.runner.settings import RunSettings
from ablate.stages.base import StageContext
from ablate.stages.generate.gguf import QWEN, SMOLLM2
from ablate.stages.generate.judge import GRADES, UNPARSED, AnswerJudge, JudgeItem
from ablate.stages.generate.llama_cpp import LlamaCppGenerator
from ablate.stages.generate.prompt import PromptTemplate
from ablate.stages.retrievers.bm25 import BM25Retriever
from conftest import TINY_DOCS, TINY_MANIFEST, TINY_QRELS, TINY_QUERIES, write_corpus

pytest.importorskip("llama_cpp")
PROMPTS = CONF_DIR / "prompts"
GROUNDED = str(PROMPTS / "grounded.txt")
JUDGE = str(PROMPTS / "answer_judge.txt")


@pytest.fixture
def models_cache(tmp_path: Path) -> Path:
    """A fresh cache holding only the models: the shipped Qwen's joined GGUF hard-linked from ``$ABLATE_CACHE_DIR``
    when that has it (else it is joined here once), so every judgement starts uncached."""
    root = tmp_path / "cache"
    seed = os.environ.get("ABLATE_CACHE_DIR")
    for kind in ("gguf", "file-sha256"):
        src = Path(seed) / kind if seed else None
        if src is not None and src.is_dir():
            shutil.copytree(src, root / kind, copy_function=os.link)
    return root


def _corpus(root: Path) -> Path:
    queries = [dict(q) for q in TINY_QUERIES]
    for q in queries:
        q["answers"] = {"q1": ["1,250 yuan"], "q2": ["supervisor approval"], "q4": ["3"]}.get(q["_id"], [])
    return write_corpus(root, TINY_DOCS, queries, TINY_QRELS, TINY_MANIFEST)


ITEMS = [
    JudgeItem(
        "A Shanghai taxi cost 118.50 yuan and the standard is 80 yuan per trip. How much is above the standard?",
        ("38.5 yuan",),
        "The fare exceeds the 80 yuan standard by 38.50 yuan [1].\nAnswer: 38.5 yuan",
    ),
    JudgeItem(  # both candidates named, the wrong one concluded: the rule's substring match scores it correct
        "Which film came out earlier, This Night Is Still Ours or Huma Gun Anmogaldi?",
        ("Huma Gun Anmogaldi",),
        "This Night Is Still Ours came out earlier, in 2008, compared to Huma Gun Anmogaldi, which was released "
        "in 1942.",
    ),
    JudgeItem(  # reasoning cut off before a conclusion
        "Which film was released more recently, Dil Deke Dekho or Huma Gun Anmogaldi?",
        ("Dil Deke Dekho",),
        "To determine which film was released more recently, we need to compare the release years of Dil Deke "
        "Dekho and",
    ),
]


@pytest.mark.slow  # three judgements by the shipped Qwen (~30 s each on a busy 2-core machine)
def test_qwen_judges_answers_once_and_a_second_judge_reads_the_cache(
    tmp_path: Path, models_cache: Path
) -> None:
    snap = load_corpus(_corpus(tmp_path / "corpus"))
    cache = Cache(models_cache)

    def judge() -> AnswerJudge:
        gen = LlamaCppGenerator(model=QWEN, prompt=GROUNDED, n_ctx=2048, n_threads=2)
        j = AnswerJudge(gen, JUDGE)
        j.prepare(StageContext(snap, cache))
        return j

    first_judge = judge()
    first = first_judge.judge(ITEMS, cache)
    assert first_judge.stats == {"judge_generated": 3, "judge_cached": 0}
    assert [v.cached for v in first] == [False] * 3
    assert all(v.grade in GRADES and v.rationale and "\n" not in v.rationale for v in first), first
    # the short final answer is the gold one (how often the 1.5B judge is right on harder answers is what
    # python -m ablate.label validate --kind answers measures, against human grades; not asserted here)
    assert first[0].grade == "correct", first[0]
    second_judge = judge()
    second = second_judge.judge(ITEMS, cache)
    assert second_judge.stats == {"judge_generated": 0, "judge_cached": 3}
    assert second_judge.generator._llm is None  # nothing generated: the model was never loaded
    assert [(v.grade, v.rationale, v.output) for v in second] == [
        (v.grade, v.rationale, v.output) for v in first
    ]
    assert all(v.cached for v in second)
    # another template is another judge: it judges anew
    other = tmp_path / "judge.txt"
    other.write_text(
        Path(JUDGE).read_text(encoding="utf-8").replace("one short sentence", "a sentence"), "utf-8"
    )
    gen = LlamaCppGenerator(model=QWEN, prompt=GROUNDED, n_ctx=2048, n_threads=2)
    assert AnswerJudge(gen, str(other)).fingerprint().key != second_judge.fingerprint().key


def test_a_pipeline_s_answers_carry_the_judge_s_grades_and_a_rerun_judges_nothing(
    tmp_path: Path, models_cache: Path
) -> None:
    """SmolLM2 answers and judges (its own loaded model): every answered question with gold answers gets a grade,
    parsed or counted as unparsed, and a rationale; ``correct`` follows the grades, ``correct_rule`` the rule."""
    snap = load_corpus(_corpus(tmp_path / "corpus"))
    settings = RunSettings(eval=EvalSettings(ks=(1, 5, 10)), bootstrap=0)
    cache = Cache(models_cache)

    def run():
        gen = LlamaCppGenerator(model=SMOLLM2, prompt=GROUNDED, max_tokens=24, n_threads=1, context_k=3)
        judge = AnswerJudge(gen, prompts_dir=PROMPTS)
        pipe = Pipeline((BM25Retriever(),), generator=gen, judge=judge)
        return run_pipeline(snap, "dev", pipe, settings, cache, identity="employee")

    first = run()
    a = first.answers
    assert a is not None and first.counters["answer.judge_generated"] == 3  # q1, q2, q4 have gold answers
    judged = a[a["judge_grade"].fillna("") != ""]
    assert sorted(judged.index) == ["q1", "q2", "q4"]
    assert set(judged["judge_grade"]) <= {*GRADES, UNPARSED}
    assert (a["correct"] == (a["judge_grade"] == "correct").astype(float)).loc[judged.index].all()
    assert "correct_rule" in a and "judge_rationale" in a
    assert Path(first.pipeline.judge.template.path).name == "answer_judge.txt"  # an English corpus
    again = run()
    assert again.counters["answer.judge_generated"] == 0 and again.counters["answer.judge_cached"] == 3
    assert again.counters["generator.generated"] == 0
    cols = ["judge_grade", "judge_rationale", "correct", "correct_rule"]
    assert again.answers[cols].fillna("").equals(a[cols].fillna(""))


def _cli(args: list[str], cwd: Path, cache: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_WAIT_POLICY": "PASSIVE",
        "ABLATE_CACHE_DIR": str(cache),
    }
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [sys.executable, "-m", "ablate", *args, "progress=false", "stats.bootstrap=100"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.slow  # the shipped Qwen answers 4 questions and judges 3, twice, through the entry point (~2 min)
def test_a_judge_sweep_is_one_factor_named_in_the_report_rescored_without_the_model_and_cached(
    tmp_path: Path, models_cache: Path, mlflow_uri: str
) -> None:
    from ablate.runner.rescore import compare, rescore
    from ablate.study.compare import check_comparison
    from ablate.tracking import Tracker

    corpus = _corpus(tmp_path / "corpus")
    args = [
        "-m",
        "corpus=beir",
        f"corpus.path={corpus}",
        "corpus.split=dev",
        "corpus.identity=employee",
        "variant=A",
        "generator=llama_cpp",
        "generator.max_tokens=32",
        "generator.n_ctx=2048",
        "answer.judge=rule,llm",
        f"tracking.uri={mlflow_uri}",
        "tracking.experiment=judge-sweep",
    ]
    p = _cli(args, tmp_path, models_cache)
    assert p.returncode == 0, p.stderr[-3000:]
    t = Tracker(mlflow_uri)
    exp = t.experiment_id("judge-sweep", create=False)
    runs = [r for r in t.find_runs([exp]) if r.tags.get(R.T_ROLE) != R.ROLE_SWEEP_PARENT]
    by = {r.params["answer.judge"]: r for r in runs}
    rule, llm = by["rule"], by["llm"]
    assert rule.status == llm.status == "FINISHED"
    assert llm.params["answer.judge_model"] == QWEN
    sha = PromptTemplate.load(JUDGE, "x", ("{question}", "{golds}", "{answer}")).sha256
    assert llm.params["answer.judge_prompt_sha256"] == sha and "answer.judge_model" not in rule.params
    assert rule.fingerprints["answer"] != llm.fingerprints["answer"]
    assert rule.fingerprints["generator"] == llm.fingerprints["generator"]
    assert rule.tags[R.T_CELL] != llm.tags[R.T_CELL]
    check = check_comparison(rule, llm, None)
    assert check.ok and check.factors == ["answer.judge"], check
    m = llm.metrics
    # q4 has a gold answer, so it is judged, but its evidence is finance-only: not scored for the employee
    assert m["answer_judge_generated"] == 3 and m["answer_judged"] == 2
    assert m["answer_judge_unparsed"] >= 0 and "answer_correct_rule" in m
    assert rule.metrics["answer_correct_rule"] == rule.metrics["answer_correct"]
    assert m["answer_correct_rule"] == rule.metrics["answer_correct"]  # the same answers, the same rule
    assert m["generator_cached"] == 4  # the second cell's answers were the first's
    # answers.csv carries each answer's grade and rationale beside the rule's verdict
    got = t.download_artifact(llm.run_id, R.A_ANSWERS, str(tmp_path / "dl"))
    assert got is not None
    answers = pd.read_csv(got, dtype={"qid": str}, keep_default_na=False).set_index("qid")
    assert {"judge_grade", "judge_rationale", "correct_rule"} <= set(answers.columns)
    assert all(answers.loc[q, "judge_grade"] in (*GRADES, UNPARSED) for q in ("q1", "q2", "q4"))
    assert answers.loc["q3", "judge_grade"] == ""  # no gold answer: not judged
    # the report names the judge of every correctness figure
    assert "correct (rule)" in p.stdout and f"correct (llm: {QWEN})" in p.stdout, p.stdout[-3000:]
    # re-scored from answers.csv: the same numbers, no model asked
    rescored = rescore(t, llm.run_id)
    cmp = compare(rescored.metrics, t.get_run(llm.run_id).metrics)
    assert cmp.ok and "answer_correct" in cmp.equal and "answer_judge_unparsed" in cmp.equal, cmp.different
    # the same sweep again: every answer and every judgement from the cache
    again = _cli(args, tmp_path, models_cache)
    assert again.returncode == 0, again.stderr[-3000:]
    newest = t.find_runs([exp], "params.`answer.judge` = 'llm'", max_results=1, newest_first=True)[0]
    assert newest.run_id != llm.run_id
    assert newest.metrics["answer_judge_generated"] == 0 and newest.metrics["answer_judge_cached"] == 3
    assert newest.metrics["answer_correct"] == m["answer_correct"]
    assert json.dumps(newest.params, sort_keys=True) == json.dumps(llm.params, sort_keys=True)
