"""``python -m ablate.label serve --pool FILE``: judge a pool in the browser, on a page served at 127.0.0.1
(``--answers FILE``: grade an answers pool instead, :mod:`ablate.app.label_answers`).

The pool says which corpus it was made on (its ``.json``: ``corpus_config``); that corpus is loaded as a run loads
it, the pool's pairs and every line of the journal are checked against it and its grade legend before the page
is served (a bad line is one error line, exit 2), then :mod:`ablate.labels.page` serves the pairs through werkzeug's
threaded server on the loopback interface only. Every judgement goes to ``<labels-dir>/<corpus>/journal.jsonl`` as
it is made, as ``human:<--assessor>``.
"""

from __future__ import annotations

import argparse
import getpass
import logging
import socket
from pathlib import Path
from typing import Any, NoReturn

from ablate.app import label_common
from ablate.app.label_common import pool_corpus
from ablate.data.snapshot import Snapshot
from ablate.errors import ConfigError, InputError
from ablate.labels import journal, poolfile
from ablate.labels.page import PageData, PassageText, QuestionText
from ablate.labels.workspace import check_name

HOST = "127.0.0.1"  # a local tool: never listen beyond this machine
DEFAULT_PORT = 8765


def add_arguments(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--pool", help="the pool to judge: labels/<corpus>/pools/<name>.tsv")
    which.add_argument(
        "--answers",
        help="an answers pool to grade (correct / partly / wrong): labels/<corpus>/answer_pools/<name>.jsonl",
    )
    p.add_argument(
        "--assessor",
        default=None,
        help="your name; judgements are recorded as human:<name> (default: your login name)",
    )
    p.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"the port on {HOST} (default {DEFAULT_PORT}; 0 = any free port)",
    )
    label_common.add_labels_dir(p)
    label_common.add_overrides(p, example="eval.projection=... (the corpus is the pool's)")


def assessor_name(given: str | None) -> str:
    """``human:<name>`` from ``--assessor`` (a plain name; default the login name)."""
    name = given if given is not None else _login()
    if name.startswith("human:"):
        name = name[len("human:") :]
    if name.startswith("llm:"):
        raise ConfigError(
            "--assessor", given, "serve records people: give your name (llm: is the judge command's)"
        )
    return "human:" + check_name("--assessor", name)


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "anonymous"


def check_pool(pool_path: Path, pool: poolfile.Pool, snapshot: Snapshot) -> None:
    """The pool belongs to ``snapshot``: its corpus, its labels' unit, and every pair (``file:line`` when not)."""
    meta = pool.meta
    if meta.corpus != snapshot.name:
        raise InputError(
            str(pool_path),
            f"pool {pool_path} was made on corpus {meta.corpus}, but its settings load {snapshot.name}",
            "make the pool again with python -m ablate.label pool",
        )
    if meta.unit != snapshot.qrels_unit:
        raise InputError(
            str(pool_path),
            f"its pairs are per {meta.unit}, {snapshot.name}'s labels per {snapshot.qrels_unit}",
            "make the pool again with python -m ablate.label pool",
        )
    check = label_common.pair_check(snapshot)
    for line, e in enumerate(pool.entries, 2):
        if problem := check(e.qid, e.unit):
            raise InputError(
                f"{pool_path}:{line}", problem, "make the pool again with python -m ablate.label pool"
            )


def passage(snapshot: Snapshot, unit: str) -> PassageText:
    """What a judge reads of ``unit``: the whole document (labels per document) or the chunk's clause."""
    doc = snapshot.documents.get(unit)
    if doc is not None:
        return PassageText(unit, doc.title, doc.text, doc.version, doc.effective_date)
    chunk = next(c for c in snapshot.chunks if c.chunk_id == unit)
    doc = snapshot.documents[chunk.doc_id]
    sid = unit.partition("#")[2]
    section = next((s for s in doc.sections if s.sid == sid), None)
    clause: str | None = sid or None
    clause_title: str | None = None
    if section is not None:
        text, clause_title = section.text, section.title or None
    else:
        text = doc.text[chunk.span[0] : chunk.span[1]] if chunk.span else chunk.text
    return PassageText(
        unit, doc.title, text, chunk.version or doc.version, doc.effective_date, clause, clause_title
    )


def page_data(
    pool_path: Path, pool: poolfile.Pool, snapshot: Snapshot, journal_path: Path, assessor: str
) -> PageData:
    queries = {e.qid: snapshot.queries[e.qid] for e in pool.entries}
    questions = {qid: QuestionText(qid, q.text, q.persona, q.as_of) for qid, q in queries.items()}
    wanted = {e.unit for e in pool.entries}
    return PageData(
        pool=pool_path.stem,
        entries=pool.entries,
        questions=questions,
        passages={u: passage(snapshot, u) for u in wanted},
        legend=label_common.grade_legend(snapshot),
        journal=journal_path,
        assessor=assessor,
        language=snapshot.language,
    )


def listen(port: int) -> socket.socket:
    """A socket listening on ``HOST:port`` (werkzeug serves on it); a port in use is a one-line error."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port))
        sock.listen(128)
    except OSError as e:
        sock.close()
        raise ConfigError(
            "--port",
            port,
            f"{HOST}:{port} cannot be served ({e.strerror}); give another, or 0 for any free one",
        ) from None
    return sock


def run(args: argparse.Namespace) -> int:
    from ablate.labels.page import Progress, create_app, ordered

    assessor = assessor_name(args.assessor)
    if args.answers is not None:
        from ablate.app.label_answers import answer_app

        app, said = answer_app(args, assessor)
        sock = listen(args.port)
        print(said, flush=True)
        return serve(app, sock, "each grade is saved as it is made")
    pool_path = Path(args.pool).expanduser().resolve()
    pool = poolfile.read(pool_path)
    cfg = pool_corpus(pool_path, pool.meta, list(args.overrides))
    snapshot = label_common.load(label_common.corpus_from_mapping(pool.meta.corpus_config, cfg))
    check_pool(pool_path, pool, snapshot)
    ws = label_common.workspace(args, snapshot)
    data = page_data(pool_path, pool, snapshot, ws.journal, assessor)
    # every line of the journal, before anything is served: a bad line is one error, not a page that fails later
    journal.read(ws.journal, label_common.pair_check(snapshot), data.legend.values)
    app = create_app(data)
    sock = listen(args.port)
    order = ordered(pool.entries)
    progress = Progress(data, order)
    left = sum(not progress.done(e) for e in order)
    print(
        f"pool {data.pool} of {snapshot.name}: {len(order)} pairs, {left} left for {assessor}; "
        f"judgements go to {ws.journal}",
        flush=True,
    )
    return serve(app, sock, "each judgement is saved as it is made")


def serve(app: Any, sock: socket.socket, saved: str) -> NoReturn:
    """Serve ``app`` on the listening ``sock`` (werkzeug's threaded server) until Ctrl-C or SIGTERM, which end the
    command as they end every other (:mod:`ablate.app.interrupts`: one line ``error: ...``, exit 130 or 143)."""
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request: the journal is the record
    server = make_server(HOST, 0, app, threaded=True, fd=sock.fileno())
    print(f"open http://{HOST}:{server.port}/ (Ctrl-C stops; {saved})", flush=True)
    try:
        server.serve_forever()  # SIGTERM's exception passes through; Ctrl-C's werkzeug swallows, and returns
    finally:
        server.server_close()
        sock.close()
    raise KeyboardInterrupt  # nothing else ends serve_forever: the Ctrl-C it swallowed, raised again
