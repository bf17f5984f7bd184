"""The catalogue of bad input (docs/errors.md): every case through the real entry point ends with one line naming the
key, value or file (and line) and the fix, a non-zero exit, no traceback, and nothing left in the MLflow store."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import inprocess
from conftest import TINY_DOCS, TINY_MANIFEST, TINY_QRELS, TINY_QUERIES, serving, write_corpus

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs" / "errors.md"


@dataclass
class Case:
    id: str
    args: list[str]  # after the module; {corpus}, {store}, {file}, {dir} are filled in
    needle: str  # must appear in the error line
    setup: Callable[[Path], None] | None = None  # breaks the case's own copy of the tiny corpus
    module: str = "ablate"
    base: bool = True  # add the tiny-corpus / store arguments
    code: int | None = None  # the exit code, where the case pins it (else any non-zero)
    absent: str | None = None  # a path (in the case's folder) the refusal must not create
    runs: Callable[[str], dict[str, str]] | None = None  # logs runs the case needs in the store; more {names}
    process: str = ""  # why the case runs as a process of its own (else in this process: tests/inprocess.py)


#: A YAML alias bomb (the "billion laughs"): six lines whose aliases repeat nine times over, 9**6 values in all.
BOMB = "".join(
    f"{x}: &{x} [{', '.join([f'*{p}' for _ in range(9)] if p else ['lol'] * 9)}]\n"
    for p, x in zip(["", *"abcde"], "abcdef", strict=True)
)


def _link(name: str, target: str = "../secret.txt") -> Callable[[Path], None]:
    """A symbolic link ``name`` (in the case's corpus folder) to ``target`` (relative to the link's folder)."""

    def apply(root: Path) -> None:
        (root / name).symlink_to(target)

    return apply


def _edit(name: str, text: str | bytes) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))

    return apply


def _qrels(lines: str) -> Callable[[Path], None]:
    return _edit("qrels/dev.tsv", "query-id\tcorpus-id\tscore\n" + lines)


def _remove(name: str) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        p = root / name
        shutil.rmtree(p) if p.is_dir() else p.unlink()

    return apply


def _judge_pool(root: Path) -> None:
    """A pool of two pairs of the tiny corpus, as python -m ablate.label pool records one."""
    from ablate.labels import poolfile

    block = {"name": "tiny", "path": str(root), "split": "dev", "identity": None, "as_of": None}
    meta = poolfile.PoolMeta("tiny", str(root), "chunk", "tiny-v1", "", 10, "dev", corpus_config=block)
    entries = [
        poolfile.PoolEntry("q1", "INV-102#p0", ("A",), 1),
        poolfile.PoolEntry("q2", "POL-1#4.2-a", ("A",), 2),
    ]
    poolfile.write(root / "pool.tsv", poolfile.Pool(meta, entries))


def _half_gguf(target: Path) -> None:
    """The first half of the shipped SmolLM2 GGUF: a download cut short."""
    from ablate.cache import Cache
    from ablate.stages.generate.gguf import SMOLLM2, resolve_gguf

    data = Path(resolve_gguf(SMOLLM2, Cache(enabled=False)).path).read_bytes()
    target.write_bytes(data[: len(data) // 2])


def _all(*steps: Callable[[Path], None]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        for step in steps:
            step(root)

    return apply


def _journal(pair: str, assessor: str = "human:a") -> Callable[[Path], None]:
    """A journal of one judgement (``'"qid", "unit", grade'``) in the case's ./labels/tiny/."""
    qid, unit, grade = (x.strip().strip('"') for x in pair.split(","))
    line = {"qid": qid, "unit": unit, "grade": int(grade), "assessor": assessor, "time": "t", "pool": ""}
    return _edit("../labels/tiny/journal.jsonl", json.dumps(line) + "\n")


# -- issue 37: files the record holds a sha256 of, edited after they were written ------------------------------------
def _label_version(edited: bool) -> Callable[[Path], None]:
    """Label version v2 of tiny in the case's ./labels/tiny/versions/ (dev.tsv and version.json with its sha256, as
    python -m ablate.label commit writes them); ``edited``: dev.tsv changed after the commit."""
    import hashlib

    def apply(root: Path) -> None:
        body = "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{u}\t{g}\n" for q, u, g in TINY_QRELS["dev"])
        sha = hashlib.sha256(body.encode()).hexdigest()
        record = {"name": "v2", "corpus": "tiny", "parent": "tiny-v1", "files": {"dev.tsv": sha}}
        folder = "../labels/tiny/versions/v2/"
        _edit(folder + "version.json", json.dumps(record))(root)
        _edit(folder + "dev.tsv", body.replace("INV-120#p0\t0", "INV-120#p0\t2") if edited else body)(root)

    return apply


def _a_real_sweep_edited(store: str) -> dict[str, str]:
    """A real one-cell sweep of the tiny corpus (python -m ablate -m variant=A, in this process) whose run.trec is
    then edited in the store (two results swapped): ``{parent}``."""
    import tempfile

    from ablate.tracking import Tracker

    where = Path(tempfile.mkdtemp(prefix="catalogue-sweep-"))
    corpus = write_corpus(where / "tiny", TINY_DOCS, TINY_QUERIES, TINY_QRELS, TINY_MANIFEST)
    exp = f"catalogue-edited-trec-{where.name}"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}  # the session's cache
    env.pop("MLFLOW_TRACKING_URI", None)
    args = [
        "corpus=beir",
        f"corpus.path={corpus}",
        "corpus.split=dev",
        "corpus.identity=employee",
        "progress=false",
    ]
    args += [
        "stats.bootstrap=50",
        f"tracking.uri=sqlite:///{store}",
        f"tracking.experiment={exp}",
        "-m",
        "variant=A",
    ]
    p = inprocess.run_module("ablate", args, cwd=where, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    t = Tracker(f"sqlite:///{store}")
    (parent,) = [r for r in t.find_runs([t.experiment_id(exp, create=False)]) if r.tags.get("ablate.role")]
    (child,) = t.children(parent.run_id)
    trec = t.local_artifact_root(child.run_id) / "run.trec"
    lines = trec.read_text(encoding="utf-8").splitlines(keepends=True)
    trec.write_text("".join([lines[1], lines[0], *lines[2:]]), encoding="utf-8")
    return {"parent": parent.run_id}


def _a_sweep_of(corpus: str) -> Callable[[str], dict[str, str]]:
    """A finished sweep parent with one finished child run on ``corpus`` in the store: ``{parent}``."""

    def log(store: str) -> dict[str, str]:
        from ablate.tracking import Tracker

        t = Tracker(f"sqlite:///{store}")
        exp = f"catalogue-sweep-{corpus}"
        parent = t.start(exp, "sweep", tags={"ablate.role": "sweep-parent"})
        with t.run(exp, "A", parent_run_id=parent) as rid:
            t.log_params(rid, {"corpus.name": corpus})
        t.end(parent)
        return {"parent": parent}

    return log


def _two_scored_runs(store: str) -> dict[str, str]:
    """Two finished runs whose per_query.csv scores ndcg@10 only: ``{runs}`` (``A_ID,B_ID``)."""
    from ablate.tracking import Tracker

    t = Tracker(f"sqlite:///{store}")
    ids = []
    for name, shift in (("A", 0.0), ("B", 0.1)):
        with t.run("catalogue-plan-runs", name) as rid:
            rows = "".join(f"q{i},answerable,{min(1.0, i / 10 + shift):.2f}\n" for i in range(8))
            t.log_files(rid, {"per_query.csv": "qid,category,ndcg@10\n" + rows})
        ids.append(rid)
    return {"runs": ",".join(ids)}


# -- issue 37: the store's file, Hydra's own node, plan's degenerate runs, a split not asked for (helpers) ----------
def _other_app_db(root: Path) -> None:
    """A SQLite database of another application beside the case's corpus: ``{dir}/notes.db`` (one table)."""
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(root.parent / "notes.db")) as db:
        db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        db.execute("INSERT INTO notes (body) VALUES ('keep me')")
        db.commit()


def _test_labels_only(root: Path) -> None:
    """The tiny corpus as an own corpus's pilot: one labels file, qrels/test.tsv, and no question declaring a
    split."""
    (root / "qrels" / "dev.tsv").rename(root / "qrels" / "test.tsv")
    (root / "qrels" / "train.tsv").unlink()
    queries = [{k: v for k, v in q.items() if k != "split"} for q in TINY_QUERIES]
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")


def _one_run_twice(store: str) -> dict[str, str]:
    """A finished scored run named twice: ``{twice}`` (``A_ID,A_ID``)."""
    first = _two_scored_runs(store)["runs"].split(",")[0]
    return {"twice": f"{first},{first}"}


def _one_cell_sweep(store: str) -> dict[str, str]:
    """A finished sweep of one cell with its per_query.csv: ``{parent}``."""
    from ablate.tracking import Tracker

    t = Tracker(f"sqlite:///{store}")
    parent = t.start("catalogue-plan-one-cell", "sweep", tags={"ablate.role": "sweep-parent"})
    with t.run("catalogue-plan-one-cell", "A", parent_run_id=parent) as rid:
        rows = "".join(f"q{i},answerable,{i / 10:.2f}\n" for i in range(8))
        t.log_files(rid, {"per_query.csv": "qid,category,ndcg@10\n" + rows})
    t.end(parent)
    return {"parent": parent}


GOOD_QUERIES = "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in TINY_QUERIES)

SERVE = ["serve", "--labels-dir", "{dir}/labels", "--port", "0", "--pool"]


def _serve_pool(journal_line: dict | None) -> Callable[[Path], None]:
    """A pool of the tiny corpus in ``<case>/labels/tiny/pools/p.tsv``; with ``journal_line``, a journal whose one
    line is a good judgement with those fields changed."""

    def apply(root: Path) -> None:
        from ablate.labels import poolfile

        block = {"name": None, "path": str(root), "split": "dev", "identity": "employee", "as_of": None,
                 "chunker": None, "language": None, "split_file": None, "labels": None}  # fmt: skip
        meta = poolfile.PoolMeta("tiny", str(root), "chunk", "tiny-v1", "0" * 64, 10, corpus_config=block)
        labels = root.parent / "labels" / "tiny"
        entries = [poolfile.PoolEntry("q2", "INV-102#p0", ("C",), 1)]
        poolfile.write(labels / "pools" / "p.tsv", poolfile.Pool(meta, entries))
        if journal_line is not None:
            line = {
                "qid": "q2",
                "unit": "INV-102#p0",
                "grade": 1,
                "assessor": "human:a",
                "time": "t",
                "pool": "p",
            }
            _edit("../labels/tiny/journal.jsonl", json.dumps(line | journal_line) + "\n")(root)

    return apply


def _answers_pool(journal_line: dict | None) -> Callable[[Path], None]:
    """An answers pool of the tiny corpus in ``<case>/labels/tiny/answer_pools/a.jsonl``; with ``journal_line``, an
    answer journal whose one line is a good human grade of its answer with those fields changed."""

    def apply(root: Path) -> None:
        from ablate.labels import poolfile

        block = {"name": None, "path": str(root), "split": "dev", "identity": "employee", "as_of": None,
                 "chunker": None, "language": None, "split_file": None, "labels": None}  # fmt: skip
        meta = poolfile.PoolMeta("tiny", str(root), split="dev", corpus_config=block)
        text = "Answer: 76.00 yuan"
        sha = poolfile.answer_sha256(text)
        entries = [poolfile.AnswerEntry("q1", "How much is INV-102?", ("76.00 yuan",), text, sha, ("A",))]
        labels = root.parent / "labels" / "tiny"
        poolfile.write(labels / "answer_pools" / "a.jsonl", poolfile.Pool(meta, entries))
        if journal_line is not None:
            line = {"qid": "q1", "answer_sha256": sha, "answer": text, "grade": "correct", "assessor": "human",
                    "time": "t"}  # fmt: skip
            _edit("../labels/tiny/answer_journal.jsonl", json.dumps(line | journal_line) + "\n")(root)

    return apply


VALIDATE_ANSWERS = [
    "validate",
    "--kind",
    "answers",
    "--labels-dir",
    "{dir}/labels",
    "--pool",
    "{dir}/labels/tiny/answer_pools/a.jsonl",
]


CASES = [
    # -- config: groups, keys, values --------------------------------------------------------------------------------
    Case(
        "unknown-variant",
        ["variant=E"],
        "variant='E' is not valid; valid options: A, B, C, D, oracle",
        process="python -m ablate under its supervisor: a fork; the parent passes the exit code on by os._exit",
    ),
    Case("unknown-corpus", ["corpus=nope"], "corpus='nope' is not valid"),
    Case("unknown-reranker", ["reranker=colbert"], "reranker='colbert'"),
    Case("unknown-retriever", ["retrievers=[bm25,splade]"], "retrievers='splade'"),
    Case(
        "prompts-not-a-group",
        ["prompts=grounded"],
        "conf/prompts/ holds files, not options to choose",
        code=2,
    ),
    Case("misspelled-key", ["eval.kss=1"], "did you mean eval.ks?"),
    Case("unknown-new-key", ["+unknown.key=1"], "unknown="),
    Case(
        "setting-in-a-null-block",
        ["corpus.chunker.kind=tokens"],
        "the chosen config has no corpus.chunker block to set it in (null or absent there); "
        "write ++corpus.chunker.kind=tokens to add it",
    ),
    Case("misspelled-stage-param", ["rrf.kk=2"], "did you mean rrf.k?"),
    Case(
        "misspelled-inherited-param",
        ["retrievers=[rm3]", "++rm3.k=1.2"],
        "rm3.k=1.2 is not valid; did you mean rm3.k1?",
    ),
    Case(
        "misspelled-generator-param",
        ["generator=llama_cpp", "++generator.max_token=5"],
        "did you mean generator.max_tokens?",
    ),
    Case("sweep-interval", ["-m", "rrf.k=interval(1,100)"], "only lists of values can be swept", code=2),
    Case(
        "sweep-without-m",
        ["rrf.k=1,60"],
        "rrf.k='1,60' is not valid; several values are a sweep: add -m; or write a list (KEY=[a,b]) or a quoted string",
        code=2,
    ),
    Case("rrf-k-nan", ["rrf.k=nan"], "rrf.k=nan is not valid; it must be a finite number"),
    Case("rrf-k-inf", ["rrf.k=inf"], "rrf.k=inf is not valid"),
    Case("rrf-k-negative", ["rrf.k=-1"], "rrf.k=-1 is not valid"),
    Case("rrf-k-text", ["rrf.k=abc"], "rrf.k='abc'"),
    Case("window-zero", ["retrieval.window=0"], "retrieval.window=0"),
    Case("ks-zero", ["eval.ks=[0,10]"], "eval.ks="),
    Case("projection-overlap", ["eval.projection.min_overlap=0"], "eval.projection.min_overlap=0"),
    Case("gain", ["eval.gain=cubic"], "eval.gain='cubic' is not valid; valid options: exponential, linear"),
    Case("budget", ["eval.budget=tokens"], "eval.budget='tokens'"),
    Case("unit", ["eval.unit=page"], "eval.unit='page'"),
    Case("relevance-level", ["eval.relevance_level=0"], "eval.relevance_level=0"),
    Case("bm25-b", ["bm25.b=1.5"], "bm25.b=1.5 is not valid; it must be a finite number in [0, 1]"),
    Case("bm25-k1", ["bm25.k1=-0.5"], "bm25.k1=-0.5"),
    Case("bm25-stemmer", ["bm25.stemmer=klingon"], "bm25.stemmer='klingon'"),
    Case("bm25-impl", ["bm25.impl=lucene_java"], "bm25.impl='lucene_java'"),
    Case("dense-batch", ["dense.batch_size=0"], "dense.batch_size=0"),
    Case(
        "dense-model-hub", ["dense.model=no-such-org/no-such-model"], "huggingface-cli download no-such-org"
    ),
    Case("dense-model-path", ["dense.model=./missing/model/dir"], "does not exist. Fix: check the path"),
    Case(
        "reranker-offline",
        ["variant=D", "rerank.model=cross-encoder/ms-marco-MiniLM-L-6-v2"],
        "rerank.model=trained",
    ),
    Case("rerank-depth", ["variant=D", "rerank.model=trained", "rerank.depth=0"], "rerank.depth=0"),
    Case("abstain", ["abstain.threshold=maybe"], "abstain.threshold='maybe'"),
    Case("bootstrap", ["stats.bootstrap=-5"], "stats.bootstrap=-5"),
    Case(
        "correction",
        ["stats.correction=bonferroni"],
        "stats.correction='bonferroni' is not valid; valid options: holm, bh, none",
    ),
    Case("two-retrievers-no-fusion", ["fusion=none"], "need a fuser"),
    Case("variant-name-path", ["variant.name=../../x"], "variant.name='../../x'"),
    Case(
        "callback-override",
        ["+hydra.callbacks.x._target_=os.system"],
        "callbacks may only be ablate. classes",
    ),
    Case("stage-target", ["rrf._target_=os.system"], "only classes under ablate."),
    Case(  # a name an ablate module imports resolves to another package's class: refused before it is built
        "stage-target-reexport",
        ["rrf._target_=ablate.runner.job.subprocess.Popen"],
        "resolves to class subprocess.Popen, which is not defined in ablate",
    ),
    Case(
        "stage-target-reexport-pandas",
        ["rrf._target_=ablate.evaluation.conflicts.pd.HDFStore"],
        "resolves to class pandas.HDFStore, which is not defined in ablate",
    ),
    Case("stage-target-function", ["rrf._target_=ablate.runner.job.git_commit"], "not a stage class"),
    Case(
        "callback-reexport",
        ["+hydra.callbacks.x._target_=ablate.runner.job.subprocess.Popen"],
        "callbacks may only be ablate. classes",
    ),
    Case(
        "hydra-plugin-nested-target",
        [
            "+hydra.sweeper.foo._target_=ablate.app.cli.logging.FileHandler",
            "+hydra.sweeper.foo.filename=x.log",
        ],
        "hydra.sweeper.foo=",
    ),
    Case(
        "corpus-name-path", ["corpus.name=../../x"], "corpus.name='../../x' is not valid; it contains a path"
    ),
    Case("corpus-path-missing", ["corpus=beir"], "corpus.path='???'", base=False),
    Case("split", ["corpus.split=nope"], "corpus.split='nope'"),
    Case(  # refused before the corpus is read (this corpus has no test split at all)
        "test-sweep-unconfirmed",
        ["-m", "corpus.split=test", "variant=A", "bm25.k1=0.9,1.2"],
        "this sweep would run 2 cells on the held-out split 'test'",
    ),
    Case(  # clause chunks do not depend on size: the two cells would be one run
        "chunker-window-sweep",
        ["-m", "variant=A", "++corpus.chunker.kind=clause", "++corpus.chunker.size=100,200"],
        "corpus.chunker.size='100,200' is not valid; under corpus.chunker.kind=clause it changes no chunk",
        code=2,
    ),
    Case(
        "identity", ["corpus.identity=ceo"], "corpus.identity='ceo' is not valid; identities of corpus 'tiny'"
    ),
    Case("identity-per-query-no-persona", ["corpus.identity=per_query"], "has no persona"),
    Case("as-of-date", ["corpus.as_of=15/04/2026"], "corpus.as_of='15/04/2026' is not valid"),
    Case("in-force-without-date", ["versions.policy=in_force"], "in_force needs a date"),
    Case(  # every document takes effect in 2025: on 1900-01-01 no question keeps any evidence
        "as-of-before-every-version",
        ["corpus.as_of=1900-01-01"],
        "before every document's effective date (earliest 2025-01-01)",
        _edit(
            "corpus.jsonl",
            "".join(json.dumps({**d, "effective_date": "2025-01-01"}) + "\n" for d in TINY_DOCS),
        ),
    ),
    Case(  # an identity whose groups see no document
        "identity-sees-no-evidence",
        ["corpus.identity=nobody"],
        "corpus.identity='nobody' is not valid; no question of split 'dev'",
        _all(
            _edit("corpus.yaml", TINY_MANIFEST + "  nobody: [visitors]\n"),
            _edit(
                "corpus.jsonl",
                "".join(json.dumps({**d, "acl": d.get("acl") or ["staff"]}) + "\n" for d in TINY_DOCS),
            ),
        ),
    ),
    Case(
        "query-as-of-date",
        ["corpus.as_of=per_query"],
        "as_of '2026-13-45' is not a date",
        setup=_edit(
            "queries.jsonl",
            GOOD_QUERIES
            + json.dumps({"_id": "q9", "text": "late", "split": "dev", "as_of": "2026-13-45"})
            + "\n",
        ),
    ),
    # -- the answer stage: refused when the generator is built, or once the corpus is loaded -------------------------
    Case(
        "generator-key-unset",
        ["variant=A", "generator=openai", "generator.api_key_env=ABLATE_CATALOGUE_NO_SUCH_KEY"],
        "generator.api_key_env='ABLATE_CATALOGUE_NO_SUCH_KEY' is not valid; the environment variable",
    ),
    Case(
        "generator-url-credentials",
        ["variant=A", "generator=openai", "generator.base_url=https://me:hunter2@api.example.org/v1"],
        "it carries credentials, which would be logged",
    ),
    Case(
        "generator-prompt-unknown",
        ["variant=A", "generator=llama_cpp", "generator.prompt=grounded_qa"],
        "generator.prompt='grounded_qa' is not valid; give a shipped answer template (grounded, grounded_zh, strict",
        code=2,
    ),
    Case(
        "generator-not-gguf",
        ["variant=A", "generator=llama_cpp", "generator.model={file}"],
        "(generator.model): is not a GGUF file (it starts with b'x'",
    ),
    Case(
        "generator-gguf-truncated",
        ["variant=A", "generator=llama_cpp", "generator.model={corpus}/half.gguf"],
        "half.gguf (generator.model): is truncated: tensor ",
        setup=lambda root: _half_gguf(root / "half.gguf"),
    ),
    Case(  # a sweep: its first cell fits, its second does not (each cell's generator is checked)
        "generator-context-overflow",
        [
            "-m",
            "variant=A",
            "generator=llama_cpp",
            "generator.model=smollm2-135m-instruct",
            "generator.max_tokens=16,240",
            "generator.n_ctx=256",
        ],
        "generator.n_ctx=256 is not valid; question ",
        process="llama.cpp reads a real model in native code: a crash there ends a process, not pytest",
    ),
    # -- the answer judge: checked when the cell's job is built ---------------------------------------------------------
    Case(
        "answer-judge",
        ["variant=A", "generator=llama_cpp", "answer.judge=gpt"],
        "answer.judge='gpt' is not valid; valid options: rule, llm",
        code=2,
    ),
    Case(
        "answer-judge-no-generator",
        ["variant=A", "answer.judge=llm"],
        "answer.judge='llm' is not valid; an LLM judge grades a generator's answers and this pipeline has none",
        code=2,
    ),
    Case(
        "answer-judge-model",
        ["variant=A", "generator=llama_cpp", "answer.judge=llm", "answer.judge_model={file}"],
        "(answer.judge_model): is not a GGUF file",
        code=2,
    ),
    # -- where results and caches go ---------------------------------------------------------------------------------
    Case(
        "store-folder-missing",
        ["tracking.uri=sqlite:////nonexistent/dir/m.db"],
        "/nonexistent/dir: it does not exist",
    ),
    Case("store-scheme", ["tracking.uri=ftp://example.org/x"], "unknown scheme 'ftp'"),
    Case("store-under-a-file", ["tracking.uri=sqlite:///{file}/m.db"], "it is a file"),
    Case(
        "store-plain-path",
        ["tracking.uri={dir}/plain.db"],
        "no longer opens file stores (a plain path or file://). Fix: use a sqlite database, e.g. sqlite:////",
        code=2,
        absent="plain.db",
    ),
    Case(
        "store-file-scheme",
        ["tracking.uri=file://{dir}/fs"],
        "/fs' is not valid; the installed MLflow no longer opens file stores",
        code=2,
        absent="fs",
    ),
    Case(  # nothing listens on port 9: refused at once, not after MLflow's ~4 minutes of retries
        "store-http-down",
        ["tracking.uri=http://127.0.0.1:9"],
        "tracking.uri='http://127.0.0.1:9' is not valid; no MLflow server answers there (the connection was "
        "refused). Fix: start the server (make mlflow-server",
        code=2,
    ),
    Case(
        "store-http-not-mlflow",
        ["tracking.uri={http}/other"],
        "is not an MLflow tracking server (HTTP 404 to an MLflow request)",
        code=2,
    ),
    Case(
        "store-http-credentials",
        ["tracking.uri={http}/private"],
        "the server refused the credentials (HTTP 401). Fix: set MLFLOW_TRACKING_USERNAME",
        code=2,
    ),
    Case("cache-is-a-file", ["cache.dir={file}"], "cache.dir="),
    Case("cache-under-a-file", ["cache.dir={file}/sub"], "cannot be written"),
    # -- input files ---------------------------------------------------------------------------------------------------
    Case(
        "corpus-json",
        [],
        "corpus.jsonl:2: invalid JSON",
        _edit("corpus.jsonl", '{"_id": "a", "text": "x"}\n{"_id": "b", "text": \n'),
    ),
    Case(
        "corpus-duplicate-id",
        [],
        "duplicate document id 'a'",
        _edit("corpus.jsonl", '{"_id": "a", "text": "x"}\n{"_id": "a", "text": "y"}\n'),
    ),
    Case(
        "corpus-gbk",
        [],
        "is not UTF-8 (it looks like GBK)",
        _edit("corpus.jsonl", '{"_id": "a", "text": "差旅费管理办法"}\n'.encode("gbk")),
    ),
    Case(
        "queries-utf16",
        [],
        "queries.jsonl:1: is not UTF-8 (it looks like UTF-16)",
        _edit("queries.jsonl", GOOD_QUERIES.encode("utf-16")),
    ),
    Case(
        "qrels-latin1",
        [],
        "dev.tsv:2: is not UTF-8",
        _edit("qrels/dev.tsv", "query-id\tcorpus-id\tscore\nq1\tcaf\xe9\t2\n".encode("latin-1")),
    ),
    Case("grade-huge", [], "dev.tsv:2: grade 1000000 is outside -2..10", _qrels("q1\tINV-102#p0\t1000000\n")),
    Case("grade-inf", [], "dev.tsv:2: grade 'inf' is not an integer", _qrels("q1\tINV-102#p0\tinf\n")),
    Case("grade-fraction", [], "grade '2.5' is not an integer", _qrels("q1\tINV-102#p0\t2.5\n")),
    Case(
        "qrels-unknown-chunk", [], "chunk id 'INV-999#p0' is not in the corpus", _qrels("q1\tINV-999#p0\t2\n")
    ),
    Case("qrels-unknown-query", [], "query id 'q99' is not in queries.jsonl", _qrels("q99\tINV-102#p0\t2\n")),
    Case("qrels-empty", [], "dev.tsv: holds no judgement", _edit("qrels/dev.tsv", "")),
    Case("qrels-header-only", [], "dev.tsv: holds no judgement", _qrels("")),
    Case("qrels-no-positive", [], "none with a grade >= 1", _qrels("q1\tINV-102#p0\t0\n")),
    Case("qrels-folder-missing", [], "dev.tsv (missing): does not exist", _remove("qrels")),
    Case(
        "manifest-yaml",
        [],
        "corpus.yaml:2: invalid YAML",
        _edit("corpus.yaml", "name: tiny\nlanguage: [en\n"),
    ),
    Case("corpus-file-missing", [], "corpus.jsonl: is missing", _remove("corpus.jsonl")),
    Case("corpus-path-is-a-file", ["corpus.path={file}"], "is not a folder", base=True),
    Case(
        "manifest-name-path",
        [],
        "corpus.yaml:1: name '../../../../tmp/x' is not a plain name",
        _edit("corpus.yaml", TINY_MANIFEST.replace("name: tiny", "name: ../../../../tmp/x")),
    ),
    Case(
        "query-split-path",
        [],
        "queries.jsonl:6: query 'q9': split '../x' is not a plain name",
        _edit("queries.jsonl", GOOD_QUERIES + json.dumps({"_id": "q9", "text": "t", "split": "../x"}) + "\n"),
    ),
    Case(  # python -m ablate.init's template, not filled in: refused by every command until it is
        "query-template",
        [],
        "queries.jsonl:6: query 't01-single-hop' is a template question",
        _edit(
            "queries.jsonl",
            GOOD_QUERIES
            + json.dumps({"_id": "t01-single-hop", "text": "TEMPLATE", "tags": ["template"]})
            + "\n",
        ),
    ),
    Case(
        "extra-qrels-outside",
        [],
        "extra_qrels '../../secret.tsv': leads outside the corpus folder",
        _edit("corpus.yaml", TINY_MANIFEST + "extra_qrels: [../../secret.tsv]\n"),
    ),
    # -- the other entry points -----------------------------------------------------------------------------------------
    Case(
        "evaluate-run-missing",
        ["{dir}/nope.trec", "{corpus}/qrels/dev.tsv"],
        "nope.trec: file not found",
        module="ablate.evaluate",
        base=False,
    ),
    Case(
        "evaluate-duplicate-line",
        ["{corpus}/dup.trec", "{corpus}/qrels/dev.tsv"],
        "dup.trec:3: query 'q1' lists docid 'INV-102#p0' again (first at line 1)",
        _edit("dup.trec", "q1 Q0 INV-102#p0 1 2.0 r\nq1 Q0 INV-120#p0 2 1.0 r\nq1 Q0 INV-102#p0 3 0.5 r\n"),
        module="ablate.evaluate",
        base=False,
    ),
    Case(
        "evaluate-empty-run",
        ["{corpus}/empty.trec", "{corpus}/qrels/dev.tsv"],
        "empty.trec: holds no result line",
        _edit("empty.trec", "\n"),
        module="ablate.evaluate",
        base=False,
    ),
    Case(
        "split-name-path",
        ["{corpus}", "--no-embed"],
        "corpus.yaml:1: name '../../x' is not a plain name",
        _edit("corpus.yaml", TINY_MANIFEST.replace("name: tiny", "name: ../../x")),
        module="ablate.split",
        base=False,
    ),
    Case(
        "split-no-labels",
        ["{corpus}", "--no-embed"],
        "leakage cannot be checked",
        _remove("qrels"),
        module="ablate.split",
        base=False,
    ),
    Case(
        "ingest-docs-missing",
        ["{dir}/nowhere", "--out", "{dir}/out"],
        "nowhere: is not a folder",
        module="ablate.ingest",
        base=False,
        code=2,
        absent="out",
    ),
    Case(
        "ingest-bad-date",
        ["{corpus}/docs", "--out", "{dir}/out"],
        "a.txt.meta.yaml: effective_date '2026-13-45' is not a date",
        _all(_edit("docs/a.txt", "Text.\n"), _edit("docs/a.txt.meta.yaml", "effective_date: 2026-13-45\n")),
        module="ablate.ingest",
        base=False,
        code=2,
        absent="out",
    ),
    Case(
        "ingest-acl-not-list",
        ["{corpus}/docs", "--out", "{dir}/out"],
        "p.md (front matter): acl 'finance' is not a list of group names",
        _edit("docs/p.md", "---\nacl: finance\n---\n# P\n\ntext\n"),
        module="ablate.ingest",
        base=False,
        code=2,
        absent="out",
    ),
    Case(
        "ingest-id-clash",
        ["{corpus}/docs", "--out", "{dir}/out"],
        "both get the document id 'a'",
        _all(_edit("docs/a.md", "# A\n\ntext\n"), _edit("docs/a.txt", "text\n")),
        module="ablate.ingest",
        base=False,
        code=2,
        absent="out",
    ),
    Case(
        "ingest-nothing-read",
        ["{corpus}/docs", "--out", "{dir}/out"],
        "no document could be read (2 file(s) skipped",
        _all(_edit("docs/blank.txt", "  \n"), _edit("docs/scan.png", b"\x89PNG")),
        module="ablate.ingest",
        base=False,
        code=2,
        absent="out",
    ),
    Case(
        "ingest-out-not-ours",
        ["{corpus}/docs", "--out", "{corpus}"],
        "is not valid; it is not empty and not an earlier ablate.ingest output",
        _edit("docs/a.md", "# A\n\ntext\n"),
        module="ablate.ingest",
        base=False,
        code=2,
    ),
    Case(
        "init-no-corpus",
        ["{corpus}"],
        "corpus.jsonl: is missing",
        _remove("corpus.jsonl"),
        module="ablate.init",
        base=False,
        code=2,
        absent="tiny/NEXT.md",
    ),
    Case(
        "evaluate-ks",
        ["{dir}/x.trec", "{corpus}/qrels/dev.tsv", "--ks", "a,b"],
        "--ks='a,b'",
        module="ablate.evaluate",
        base=False,
    ),
    Case(
        "evaluate-unknown-run-id",
        ["--from-run", "0" * 32, "--tracking-uri", "sqlite:///{store}"],
        "not found",
        module="ablate.evaluate",
        base=False,
    ),
    Case(
        "report-no-store",
        ["--tracking-uri", "sqlite:///{dir}/none/mlflow.db"],
        "no MLflow store",
        module="ablate.report",
        base=False,
        process="python -m ablate.report under its supervisor (a fork; the exit code passed on by os._exit)",
    ),
    Case(
        "runs-scheme",
        ["clean", "--tracking-uri", "ftp://x/y"],
        "unknown scheme 'ftp'",
        module="ablate.runs",
        base=False,
    ),
    Case(
        "runs-file-store",
        ["clean", "--tracking-uri", "{dir}/plain.db"],
        "--tracking-uri='",
        module="ablate.runs",
        base=False,
        code=2,
        absent="plain.db",
    ),
    Case(
        "evaluate-file-store",
        ["--from-run", "0" * 32, "--tracking-uri", "file://{dir}/fs"],
        "no longer opens file stores",
        module="ablate.evaluate",
        base=False,
        code=2,
        absent="fs",
    ),
    Case(
        "report-file-store",
        ["--tracking-uri", "{dir}/plain.db"],
        "plain.db' is not valid; the installed MLflow no longer opens file stores",
        module="ablate.report",
        base=False,
        code=2,
        absent="plain.db",
    ),
    Case(
        "report-http-down",
        ["--tracking-uri", "http://127.0.0.1:9"],
        "--tracking-uri='http://127.0.0.1:9' is not valid; no MLflow server answers there",
        module="ablate.report",
        base=False,
        code=2,
    ),
    # -- python -m ablate.plan: how many questions a comparison needs ------------------------------------------------
    Case(
        "plan-delta",
        ["--delta", "0", "--tracking-uri", "sqlite:///{store}"],
        "--delta=0.0 is not valid; give a positive effect",
        module="ablate.plan",
        base=False,
        code=2,
    ),
    Case(
        "plan-power",
        ["--power", "1.5", "--tracking-uri", "sqlite:///{store}"],
        "--power=1.5 is not valid; give a power strictly between 0 and 1",
        module="ablate.plan",
        base=False,
        code=2,
    ),
    Case(
        "plan-unknown-run",
        ["--runs", "0" * 32 + "," + "1" * 32, "--tracking-uri", "sqlite:///{store}"],
        "--runs '" + "0" * 32 + "': no such run",
        module="ablate.plan",
        base=False,
        code=2,
    ),
    Case(
        "plan-metric",
        ["--runs", "{runs}", "--metric", "recall@10", "--tracking-uri", "sqlite:///{store}"],
        "logged no per-question recall@10. Fix: choose one it logged, e.g. ndcg@{10}",
        module="ablate.plan",
        base=False,
        code=2,
        runs=_two_scored_runs,
    ),
    # -- python -m ablate.label commit, python -m ablate.report --labels ----------------------------------------------
    Case(
        "commit-version-exists",
        ["commit", "--version", "v2", "corpus=beir", "corpus.path={corpus}"],
        "--version='v2' is not valid; ",
        _all(_journal('"q1", "INV-120#p0", 1'), _edit("../labels/tiny/versions/v2/version.json", "{}")),
        module="ablate.label",
        base=False,
        code=2,
    ),
    Case(
        "commit-current-version",
        ["commit", "--version", "tiny-v1", "corpus=beir", "corpus.path={corpus}"],
        "it is the current label version of tiny",
        _journal('"q1", "INV-120#p0", 1'),
        module="ablate.label",
        base=False,
        code=2,
        absent="labels/tiny/versions",
    ),
    Case(
        "commit-unknown-qid",
        ["commit", "--version", "v2", "corpus=beir", "corpus.path={corpus}"],
        "journal.jsonl:1: question 'q99' is not in tiny's queries.jsonl",
        _journal('"q99", "INV-102#p0", 1'),
        module="ablate.label",
        base=False,
        code=2,
        absent="labels/tiny/versions",
    ),
    Case(
        "commit-unknown-unit",
        ["commit", "--version", "v2", "corpus=beir", "corpus.path={corpus}"],
        "journal.jsonl:1: 'NOPE#p0' is not a chunk of tiny",
        _journal('"q1", "NOPE#p0", 1'),
        module="ablate.label",
        base=False,
        code=2,
        absent="labels/tiny/versions",
    ),
    Case(
        "commit-grade-outside-legend",
        ["commit", "--version", "v2", "corpus=beir", "corpus.path={corpus}"],
        "journal.jsonl:1: grade 3 is not in the corpus's grade legend (2, 1, 0)",
        _journal('"q1", "INV-120#p0", 3'),
        module="ablate.label",
        base=False,
        code=2,
        absent="labels/tiny/versions",
    ),
    Case(
        "commit-llm-unvalidated",
        ["commit", "--version", "v2", "corpus=beir", "corpus.path={corpus}"],
        "1 standing judgement(s) by llm:m have no validation report for tiny",
        _journal('"q1", "INV-120#p0", 1', "llm:m"),
        module="ablate.label",
        base=False,
        code=2,
        absent="labels/tiny/versions",
    ),
    Case(
        "commit-empty-journal",
        ["commit", "--version", "v2", "corpus=beir", "corpus.path={corpus}"],
        "journal.jsonl: holds no judgement to commit",
        module="ablate.label",
        base=False,
        code=2,
        absent="labels/tiny/versions",
    ),
    Case(
        "commit-nothing-new",
        ["commit", "--version", "v2", "corpus=beir", "corpus.path={corpus}"],
        "adds nothing to tiny-v1",
        _journal('"q1", "INV-102#p0", 2'),
        module="ablate.label",
        base=False,
        code=2,
        absent="labels/tiny/versions",
        process="python -m ablate.label's interrupt handlers for real (interrupts.guarded, then _late's os._exit)",
    ),
    Case(
        "report-labels-no-parent",
        ["--labels", "v2", "--tracking-uri", "sqlite:///{store}"],
        "--labels='v2' is not valid; name the sweep to re-score with --parent",
        module="ablate.report",
        base=False,
        code=2,
    ),
    Case(
        "report-labels-unknown",
        ["--parent", "{parent}", "--labels", "nope", "--tracking-uri", "sqlite:///{store}"],
        "--labels='nope' is not valid; no label version 'nope'",
        module="ablate.report",
        base=False,
        code=2,
        runs=_a_sweep_of("tiny"),
    ),
    Case(
        "label-pool-depth",
        ["pool", "--depth", "0", "--tracking-uri", "sqlite:///{store}"],
        "--depth=0 is not valid; give the number of top units of each run to pool",
        module="ablate.label",
        base=False,
        code=2,
        absent="labels",
    ),
    Case(
        "label-pool-unknown-run",
        ["pool", "--runs", "0" * 32, "--tracking-uri", "sqlite:///{store}"],
        "--runs: no run '" + "0" * 32 + "' in sqlite:///",
        module="ablate.label",
        base=False,
        code=2,
        absent="labels",
    ),
    Case(
        "train-reranker-corpus",
        ["--corpus", "{dir}/nowhere", "--quiet"],
        "is not a folder",
        module="ablate.train_reranker",
        base=False,
    ),
    # python -m ablate.label serve: checked before the page is served
    Case(
        "serve-journal-grade",
        [*SERVE, "{dir}/labels/tiny/pools/p.tsv"],
        "journal.jsonl:1: grade 7 is not in the corpus's grade legend (2, 1, 0)",
        setup=_serve_pool({"grade": 7}),
        module="ablate.label",
        base=False,
        code=2,
    ),
    Case(
        "serve-journal-unknown-unit",
        [*SERVE, "{dir}/labels/tiny/pools/p.tsv"],
        "journal.jsonl:1: 'NOPE#p0' is not a chunk of tiny",
        setup=_serve_pool({"unit": "NOPE#p0"}),
        module="ablate.label",
        base=False,
        code=2,
    ),
    Case(
        "serve-pool-other-corpus",
        [*SERVE, "{dir}/labels/tiny/pools/p.tsv", "corpus=demo"],
        "p.tsv was made on corpus tiny (",
        setup=_serve_pool(None),
        module="ablate.label",
        base=False,
        code=2,
        absent="labels/tiny/journal.jsonl",
    ),
    Case(
        "serve-no-pool",
        [*SERVE, "{dir}/labels/tiny/pools/none.tsv"],
        "none.tsv: no such pool file",
        module="ablate.label",
        base=False,
        code=2,
    ),
    Case(
        "serve-assessor",
        [*SERVE, "{dir}/labels/tiny/pools/p.tsv", "--assessor", "../x"],
        "--assessor='../x' is not valid",
        setup=_serve_pool(None),
        module="ablate.label",
        base=False,
        code=2,
        absent="labels/tiny/journal.jsonl",
    ),
    # python -m ablate.label judge / validate (the LLM assessor)
    Case(
        "judge-no-generator",
        ["judge", "--pool", "{corpus}/pool.tsv"],
        "judge needs a generator to judge with: give generator=llama_cpp",
        setup=_judge_pool,
        module="ablate.label",
        base=False,
        code=2,
        absent="labels",
        process="python -m ablate.label judge under its supervisor (a fork; the exit code passed on by os._exit)",
    ),
    Case(
        "judge-map-malformed",
        ["judge", "--pool", "{corpus}/pool.tsv", "--map", "3:2,2:1", "generator=llama_cpp"],
        "--map='3:2,2:1' is not valid; score(s) 1, 0 not mapped",
        setup=_judge_pool,
        module="ablate.label",
        base=False,
        code=2,
        absent="labels",
    ),
    Case(
        "judge-prompt-unknown",
        ["judge", "--pool", "{corpus}/pool.tsv", "--prompt", "umbrela", "generator=llama_cpp"],
        "--prompt='umbrela' is not valid; give a shipped relevance template (relevance_policy, relevance_policy_zh, "
        "relevance_umbrela, relevance_umbrela_zh: conf/prompts/<name>.txt) or a template file's path",
        setup=_judge_pool,
        module="ablate.label",
        base=False,
        code=2,
        absent="labels",
    ),
    Case(
        "judge-pool-other-corpus",
        ["judge", "--pool", "{corpus}/pool.tsv", "generator=llama_cpp", "corpus=demo"],
        "pool.tsv was made on corpus tiny (",
        setup=_judge_pool,
        module="ablate.label",
        base=False,
        code=2,
        absent="labels",
    ),
    Case(
        "validate-no-generator",
        ["validate", "--holes", "0.2"],
        "validate needs a generator to judge with",
        module="ablate.label",
        base=False,
        code=2,
        absent="labels",
    ),
    Case(
        "validate-holes-range",
        ["validate", "--holes", "1.5", "generator=llama_cpp"],
        "--holes=1.5 is not valid; give the share of judged pairs to re-judge, in (0, 1]",
        module="ablate.label",
        base=False,
        code=2,
        absent="labels",
    ),
    Case(
        "validate-parent-unknown",
        ["validate", "generator=llama_cpp", "--parent", "0" * 32, "--tracking-uri", "sqlite:///{store}"],
        "no finished run of a sweep with that id",
        module="ablate.label",
        base=False,
        code=2,
        absent="labels",
    ),
    # python -m ablate.label pool --kind answers / serve --pool ANSWERS / validate --kind answers (grading answers)
    Case(
        "label-pool-answers-unknown-run",
        ["pool", "--kind", "answers", "--runs", "0" * 32, "--tracking-uri", "sqlite:///{store}"],
        "--runs: no run '" + "0" * 32 + "' in sqlite:///",
        module="ablate.label",
        base=False,
        code=2,
        absent="labels",
    ),
    Case(
        "serve-answers-no-pool",
        [
            "serve",
            "--labels-dir",
            "{dir}/labels",
            "--port",
            "0",
            "--pool",
            "{dir}/labels/tiny/answer_pools/n.jsonl",
        ],
        "n.jsonl: no such answers pool",
        module="ablate.label",
        base=False,
        code=2,
    ),
    Case(
        "validate-answers-other-corpus",
        [*VALIDATE_ANSWERS, "corpus=demo"],
        "a.jsonl was made on corpus tiny (",
        setup=_answers_pool({}),
        module="ablate.label",
        base=False,
        code=2,
        absent="labels/tiny/answer_pools/a.validation",
    ),
    Case(
        "validate-answers-unknown-qid",
        VALIDATE_ANSWERS,
        "answer_journal.jsonl:1: question 'q99' is not in tiny's queries.jsonl",
        setup=_answers_pool({"qid": "q99"}),
        module="ablate.label",
        base=False,
        code=2,
        absent="labels/tiny/answer_pools/a.validation",
    ),
    Case(
        "validate-answers-unknown-answer",
        VALIDATE_ANSWERS,
        "answer_journal.jsonl:1: answer_sha256 '000000000000' is not the SHA-256 of its answer",
        setup=_answers_pool({"answer_sha256": "0" * 64}),
        module="ablate.label",
        base=False,
        code=2,
        absent="labels/tiny/answer_pools/a.validation",
    ),
    Case(
        "validate-answers-no-grades",
        VALIDATE_ANSWERS,
        "holds no human grade of an answer of pool a.jsonl",
        setup=_answers_pool({"assessor": "llm:m"}),
        module="ablate.label",
        base=False,
        code=2,
        absent="labels/tiny/answer_pools/a.validation",
    ),
    # -- issue 37: documents and prompt templates (YAML alias bombs, links out of the folder, Unicode names, unknown
    # placeholders) -----------------------------------------------------------------------------------------------------
    Case(
        "ingest-alias-bomb",
        ["{corpus}/docs", "--out", "{dir}/out"],
        "bomb.md (front matter):6: its aliases repeat more than 65,536 characters of values (at *d): an alias bomb",
        _edit("docs/bomb.md", f"---\n{BOMB}---\n# Bomb\n\ntext\n"),
        module="ablate.ingest",
        base=False,
        code=2,
        absent="out",
    ),
    Case(
        "ingest-meta-too-long",
        ["{corpus}/docs", "--out", "{dir}/out"],
        "a.txt.meta.yaml: is 70,008 bytes long; front matter and sidecar files are metadata",
        _all(_edit("docs/a.txt", "Text.\n"), _edit("docs/a.txt.meta.yaml", f"title: {'x' * 70000}\n")),
        module="ablate.ingest",
        base=False,
        code=2,
        absent="out",
    ),
    Case(
        "corpus-yaml-alias-bomb",
        ["variant=A"],
        "corpus.yaml:14: its aliases repeat more than 1,048,576 characters of values (at *le): an alias bomb",
        _edit("corpus.yaml", TINY_MANIFEST.rstrip("\n") + "\n" + BOMB.replace("&", "&l").replace("*", "*l")),
        code=2,
    ),
    Case(
        "ingest-link-outside",
        ["{corpus}/docs", "--out", "{dir}/out"],
        "docs/leak.txt: is a link to ",
        _all(
            _edit("docs/a.txt", "Text.\n"),
            _edit("secret.txt", "Not for the corpus.\n"),
            _link("docs/leak.txt"),
        ),
        module="ablate.ingest",
        base=False,
        code=2,
        absent="out",
    ),
    Case(
        "ingest-nfc-nfd-names",
        ["{corpus}/docs", "--out", "{dir}/out"],
        "'cafe\\u0301.md' and 'caf\\xe9.md': these two file names differ only in their Unicode normalisation",
        _all(
            _edit("docs/caf\u00e9.md", "# Caf\u00e9\n\nCoffee.\n"),
            _edit("docs/cafe\u0301.md", "# Caf\u00e9\n\nCoffee.\n"),
        ),
        module="ablate.ingest",
        base=False,
        code=2,
        absent="out",
        process="the console: its line holds a non-ASCII id, written to a real pipe in the process's encoding",
    ),
    Case(
        "generator-prompt-placeholder",
        ["variant=A", "generator=llama_cpp", "generator.prompt={corpus}/typo.txt"],
        "typo.txt:6: unknown placeholder {passage} (it would reach the model as it is written). Fix: did you mean "
        "{passages}? (this template's placeholders: {passages}, {question})",
        _edit(
            "typo.txt", "### system\nAnswer.\n### user\n{passages}\nQuestion: {question}\nQuote {passage}.\n"
        ),
        code=2,
    ),
    Case(
        "rerank-prompt-placeholder",
        ["variant=A", "reranker=llm", "rerank.prompt={corpus}/typo.txt"],
        "typo.txt:5: unknown placeholder {quesiton} (it would reach the model as it is written). Fix: did you mean "
        "{question}? (this template's placeholders: {passage}, {question})",
        _edit(
            "typo.txt",
            "### system\nJudge.\n### user\n{passage}\nIs it about {quesiton}, that is {question}?\n",
        ),
        code=2,
    ),
    Case(
        "judge-prompt-placeholder",
        ["variant=A", "generator=llama_cpp", "answer.judge=llm", "answer.judge_prompt={corpus}/typo.txt"],
        "typo.txt:2: {question} is in the system section, where no placeholder is filled",
        _edit(
            "typo.txt", "### system\nGrade the answer to {question}.\n### user\n{question} {golds} {answer}\n"
        ),
        code=2,
    ),
    # -- issue 37: tracebacks that are now one line, and a split that was not asked for ----------------------------
    Case(  # a text file as the store: MLflow's 89-line traceback before; the file stays as it is
        "store-not-a-database",
        ["tracking.uri=sqlite:///{file}"],
        "a-file is not a SQLite database (it is another kind of file, left as it is); name a new file",
        code=2,
    ),
    Case(  # someone else's database: MLflow would add its tables to it
        "store-other-application",
        ["tracking.uri=sqlite:///{dir}/notes.db"],
        "notes.db is the SQLite database of another application (tables notes; not MLflow's",
        setup=_other_app_db,
        code=2,
    ),
    Case(  # a file that exists but cannot be read (even by root)
        "store-unreadable",
        ["tracking.uri=sqlite:////proc/self/mem"],
        "/proc/self/mem cannot be read (",
        code=2,
        process="/proc/self/mem is the memory of the process that opens it: the command's own",
    ),
    Case(
        "report-store-not-a-database",
        ["--tracking-uri", "sqlite:///{file}", "--no-log"],
        "a-file is not a SQLite database",
        module="ablate.report",
        base=False,
        code=2,
    ),
    Case(
        "label-pool-store-folder",
        ["pool", "--tracking-uri", "sqlite:///{dir}"],
        "is a folder; name the database file",
        module="ablate.label",
        base=False,
        code=2,
        absent="labels",
    ),
    Case(  # a traceback and a FAILED sweep parent before
        "hydra-launcher-target",
        ["-m", "hydra.launcher._target_=x"],
        "hydra.launcher._target_='x' is not valid; Hydra's launcher is chosen as a config group option, not set by "
        "its class or removed: hydra/launcher=basic|joblib|ray",
        code=2,
        process="Hydra's own multirun start, its error report and sys.exit, in a process of its own",
    ),
    Case(
        "hydra-sweeper-target",
        ["-m", "hydra.sweeper._target_=x"],
        "hydra.sweeper._target_='x' is not valid; Hydra's sweeper is chosen as a config group option",
        code=2,
    ),
    Case(
        "hydra-logging-bogus",
        ["hydra/job_logging=bogus"],
        "hydra/job_logging='bogus' is not valid; valid options: ablate, default, disabled, none, stdout",
        code=2,
    ),
    Case(
        "hydra-logging-null",
        ["hydra/hydra_logging=null"],
        "hydra/hydra_logging='null' is not valid; valid options: ablate, default, disabled",
        code=2,
    ),
    Case(
        "hydra-logging-removed",
        ["~hydra/job_logging"],
        "Hydra needs this config group; choose one of its options: hydra/job_logging=ablate|default",
        code=2,
    ),
    Case(
        "hydra-logging-level",
        ["hydra.job_logging.root.level=BOGUS"],
        "hydra.job_logging.root.level='BOGUS' is not valid; it must be a logging level: one of CRITICAL",
        code=2,
    ),
    Case(
        "hydra-logging-handler",
        ["hydra.job_logging.handlers.file.filename=/nonexistent/x.log"],
        "only the levels can be set here",
        code=2,
    ),
    Case(
        "hydra-verbose-number",
        ["hydra.verbose=1"],
        "hydra.verbose=1 is not valid; give true, false, a logger name (hydra.verbose=ablate)",
        code=2,
    ),
    Case(  # printed 0.05/0 and an empty table before
        "plan-run-twice",
        ["--runs", "{twice}", "--tracking-uri", "sqlite:///{store}"],
        "is named twice, and a run compared with itself has no difference to plan for; give two or more different",
        module="ablate.plan",
        base=False,
        code=2,
        runs=_one_run_twice,
    ),
    Case(
        "plan-one-cell-sweep",
        ["--parent", "{parent}", "--tracking-uri", "sqlite:///{store}"],
        "1 run(s), so no comparison to plan. Fix: give a sweep of two or more cells",
        module="ablate.plan",
        base=False,
        code=2,
        runs=_one_cell_sweep,
    ),
    Case(  # ran and scored the test questions before (exit 0, a note)
        "split-not-in-pilot",
        [],
        "has one labels file, qrels/test.tsv, so its only split is 'test'. Fix: make a dev and a test side with "
        "python -m ablate.split",
        setup=_test_labels_only,
        code=2,
    ),
    # -- issue 37: a file the record holds a sha256 of, edited after it was written: one line, exit 2, nothing scored
    Case(
        "report-labels-edited-run-trec",
        ["--parent", "{parent}", "--labels", "v2", "--tracking-uri", "sqlite:///{store}", "--no-log"],
        "its artifact run.trec was changed after the run finished (sha256 ",
        _label_version(edited=False),
        module="ablate.report",
        base=False,
        code=2,
        runs=_a_real_sweep_edited,
    ),
    Case(
        "labels-version-edited",
        ["corpus.labels=v2"],
        "dev.tsv: was changed after the label version was committed (sha256 ",
        _label_version(edited=True),
        code=2,
    ),
    Case(
        "report-labels-edited-version",
        ["--parent", "{parent}", "--labels", "v2", "--tracking-uri", "sqlite:///{store}", "--no-log"],
        "dev.tsv: was changed after the label version was committed (sha256 ",
        _label_version(edited=True),
        module="ablate.report",
        base=False,
        code=2,
        runs=_a_sweep_of("tiny"),
    ),
]


def _run(
    case: Case, tmp: Path, store: str, http: str, process: bool | None = None
) -> tuple[subprocess.CompletedProcess, Path]:
    """The case's command in a folder of its own: in this process (:func:`inprocess.run_module`) unless the case
    needs a process of its own (``case.process``) or ``process`` says which. The session's cache (tests/conftest.py):
    no case is about what the cache holds (``cache.dir`` cases name a folder of their own)."""
    root = write_corpus(tmp / case.id / "tiny", TINY_DOCS, TINY_QUERIES, TINY_QRELS, TINY_MANIFEST)
    if case.setup is not None:
        case.setup(root)
    afile = tmp / case.id / "a-file"
    afile.write_text("x")
    (tmp / case.id / "x.trec").write_text("q1 Q0 INV-102#p0 1 1.0 run\n")
    fill = {"corpus": str(root), "store": store, "file": str(afile), "dir": str(tmp / case.id), "http": http}
    if case.runs is not None:
        fill.update(case.runs(store))
    args = [a.format(**fill) for a in case.args]
    if case.module == "ablate" and case.base:
        args = [
            "corpus=beir",
            f"corpus.path={root}",
            "corpus.split=dev",
            "corpus.identity=employee",
            f"tracking.uri=sqlite:///{store}",
            f"tracking.experiment=catalogue-{case.id}",
            "progress=false",
            *args,
        ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    if not (bool(case.process) if process is None else process):
        return inprocess.run_module(case.module, args, cwd=tmp / case.id, env=env), tmp / case.id
    p = subprocess.run(
        [sys.executable, "-m", case.module, *args],
        cwd=tmp / case.id,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return p, tmp / case.id


@pytest.fixture(scope="module")
def not_mlflow() -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 that is not an MLflow tracking server: under ``/private`` it asks for
    credentials (401), elsewhere it has nothing (404)."""
    from werkzeug.wrappers import Request, Response

    @Request.application
    def app(request: Request) -> Response:
        if request.path.startswith("/private"):
            return Response("login first", status=401)
        return Response("no such page", status=404)

    with serving(app) as url:
        yield url


@pytest.fixture(scope="module")
def place(tmp_path_factory, mlflow_uri, not_mlflow) -> tuple[Path, str, str]:
    """(the folder the cases' folders go in, the store's path, the HTTP server that is not MLflow)."""
    tmp = tmp_path_factory.mktemp("catalogue")
    return tmp, mlflow_uri[len("sqlite:///") :], not_mlflow


def test_the_catalogue_is_large_and_documented():
    assert len(CASES) >= 40 and len({c.id for c in CASES}) == len(CASES)
    text = DOCS.read_text(encoding="utf-8")
    missing = [c.id for c in CASES if f"`{c.id}`" not in text]
    assert not missing, f"docs/errors.md does not list: {missing}"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_line_non_zero_and_leaves_nothing(case, place, mlflow_uri):
    p, cwd = _run(case, *place)
    assert p.returncode != 0, (p.stdout, p.stderr)
    assert case.code is None or p.returncode == case.code, (p.returncode, p.stderr)
    assert case.absent is None or not (cwd / case.absent).exists()
    assert "Traceback" not in p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, p.stderr
    assert case.needle in errors[0], errors[0]
    assert re.search(
        r"[Ff]ix|valid options|did you mean|it must be|use |choose|give|name |check|write|set |drop",
        errors[0],
    ), errors[0]
    # nothing left behind: no run, no experiment, no output folder
    if case.module == "ablate":
        from ablate.tracking import Tracker

        assert Tracker(mlflow_uri).experiment_id(f"catalogue-{case.id}", create=False) is None
        assert not (cwd / "outputs").exists() and not (cwd / "multirun").exists()


def test_a_bom_in_a_qrels_file_is_not_an_error(tiny_corpus):
    from ablate.data.corpus import load_corpus

    p = tiny_corpus / "qrels" / "dev.tsv"
    p.write_bytes("\ufeff".encode() + p.read_bytes())
    assert load_corpus(tiny_corpus).split_qrels("dev").judgements["q1"]["INV-102#p0"] == 2


# -- the in-process runner (tests/inprocess.py): what it reports is what a process of its own reports ----------------
BY_ID = {c.id: c for c in CASES}
#: Cases run both ways: python -m ablate (composed by Hydra), python -m ablate.label, python -m ablate.report.
AGREE = ("misspelled-key", "commit-unknown-qid", "report-labels-unknown")


@pytest.mark.parametrize("case_id", AGREE)
def test_in_this_process_and_in_its_own_a_case_ends_the_same(case_id, place):
    case = BY_ID[case_id]
    assert not case.process
    tmp, store, http = place
    inside, _ = _run(case, tmp / "inside", store, http, process=False)
    alone, _ = _run(case, tmp / "alone", store, http, process=True)

    def errors(p: subprocess.CompletedProcess, where: str) -> list[str]:
        return [
            line.replace(str(tmp / where), "<tmp>")
            for line in p.stderr.splitlines()
            if line.startswith("error:")
        ]

    assert inside.returncode == alone.returncode != 0, (inside.stderr, alone.stderr)
    assert errors(inside, "inside") == errors(alone, "alone") != [], (inside.stderr, alone.stderr)
    assert case.needle in errors(inside, "inside")[0]


def _process_state() -> dict[str, object]:
    """What a command run in this process could change in it, and tests/inprocess.py puts back."""
    import gc
    import logging
    import signal
    import threading
    import warnings

    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    loggers = {n: logging.getLogger(n) for n in ("", *inprocess.LOGGERS)}
    return {
        "signals": {s: signal.getsignal(s) for s in signal.valid_signals()},
        "mask": signal.pthread_sigmask(signal.SIG_BLOCK, []),
        "hooks": (sys.unraisablehook, sys.excepthook, threading.excepthook),
        "streams": (sys.stdin, sys.stdout, sys.stderr, os.fstat(1).st_ino, os.fstat(2).st_ino),
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "argv": (id(sys.argv), list(sys.argv)),
        "path": list(sys.path),
        "loggers": {n: (lg.level, list(lg.handlers), lg.propagate, lg.disabled) for n, lg in loggers.items()},
        "logging.disable": logging.root.manager.disable,
        "warnings": (list(warnings.filters), warnings.showwarning),
        "gc.freeze": gc.get_freeze_count(),
        "threads": {t for t in threading.enumerate() if not t.daemon},
        "hydra": (GlobalHydra.instance().is_initialized(), HydraConfig.initialized()),
        "interrupts": _interrupt_state(),
    }


def _interrupt_state() -> tuple[list[object], ...]:
    from ablate.app import interrupts

    return tuple(list(x) for x in (interrupts._SIGNALLED, interrupts._PENDING, interrupts._PREVIOUS_HOOK))


LEAKY = """
import gc, logging, os, signal, sys, threading, warnings
print("to stdout")
logging.getLogger("ablate").warning("a warning logged")
warnings.warn("a warning shown", UserWarning)
os.write(2, b"native to fd 2\\n")
signal.signal(signal.SIGTERM, lambda *a: None)
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
sys.unraisablehook = sys.excepthook = threading.excepthook = print
os.environ["CATALOGUE_LEAK"] = "1"
os.environ.pop("HOME", None)
sys.argv.append("more")
sys.path.insert(0, "/nowhere")
logging.getLogger().addHandler(logging.StreamHandler(sys.stderr))
logging.getLogger().setLevel(logging.DEBUG)
logging.getLogger("ablate").setLevel(logging.DEBUG)
logging.getLogger("ablate").propagate = False
logging.disable(logging.ERROR)
warnings.simplefilter("error")
gc.freeze()
os.chdir("/")
raise SystemExit("leaving with a text")
"""


def test_the_runner_leaves_this_process_as_it_found_it(place, tmp_path):
    """A module that changes everything the runner puts back, then a real sweep (Hydra's logging, a parent run, the
    interrupt handlers, gc.freeze) and a python -m ablate.label refusal: this process is as it was after each, and
    the runner saw what the process printed, as a process of its own would."""
    (tmp_path / "catalogue_leaky.py").write_text(LEAKY)
    _process_state()  # its imports (Hydra, ablate.app) add their warning filters before the state is taken
    before = _process_state()
    p = inprocess.run_module("catalogue_leaky", [], cwd=tmp_path)
    assert _process_state() == before
    assert (p.returncode, p.stdout) == (1, "to stdout\n")
    assert p.stderr.splitlines() == [
        "a warning logged",
        f"{tmp_path / 'catalogue_leaky.py'}:5: UserWarning: a warning shown",
        '  warnings.warn("a warning shown", UserWarning)',
        "native to fd 2",
        "leaving with a text",
    ], p.stderr
    tmp, store, http = place
    assert _a_real_sweep_edited(store)["parent"]
    assert _process_state() == before
    p, _ = _run(BY_ID["commit-unknown-qid"], tmp / "as-found", store, http, process=False)
    assert p.returncode == 2 and _process_state() == before


def test_the_runner_knows_every_process_wide_cache_of_ablate():
    """A module-level cache, set or list of ablate that a command fills is emptied between the commands the runner
    runs (inprocess.FRESH) or kept on purpose (inprocess.KEPT): a new one must be sorted into one of them."""
    src = REPO / "src"
    found = set()
    for path in sorted((src / "ablate").rglob("*.py")):
        module = ".".join(path.relative_to(src).with_suffix("").parts).removesuffix(".__init__")
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(
            r"^(\w+)(?:: [^=\n]+)? = (?:\{\}|\[\]|set\(\)|dict\(\)|None)\s*(?:#.*)?$", text, re.M
        ):
            found.add((module, m[1]))
        for m in re.finditer(
            r"^@functools\.(?:cache|lru_cache\b[^\n]*)\n(?:@[^\n]*\n)*def (\w+)", text, re.M
        ):
            found.add((module, m[1]))
        for m in re.finditer(r"^\s+global (\w+)", text, re.M):
            found.add((module, m[1]))
    known = {(m, n) for m, n, _ in inprocess.FRESH} | set(inprocess.KEPT)
    assert found == known, (sorted(found - known), sorted(known - found))
