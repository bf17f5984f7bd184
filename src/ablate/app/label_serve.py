"""``python -m ablate.label serve --pool FILE``: judge a pool in the browser, on a page served at 127.0.0.1; a
relevance pool (``pools/<name>.tsv``) or an answers pool (``answer_pools/<name>.jsonl``): the page follows the pool's
kind (:mod:`ablate.labels.kind`).

The pool says which corpus it was made on (its ``.json``: ``corpus_config``); that corpus is loaded as a run loads
it, the pool's items and every line of the kind's journal are checked against it (and, for relevance, its grade
legend) before the page is served (a bad line is one error line, exit 2), then :mod:`ablate.labels.page` serves the
items through werkzeug's threaded server on the loopback interface only. Every judgement goes to
``<labels-dir>/<corpus>/journal.jsonl`` (relevance) or ``answer_journal.jsonl`` (answers) as it is made, as
``human:<--assessor>``.
"""

from __future__ import annotations

import argparse
import getpass
import logging
import socket
from typing import Any, NoReturn

from ablate.app import label_common
from ablate.data.snapshot import Snapshot
from ablate.errors import ConfigError
from ablate.labels import journal
from ablate.labels.kind import RELEVANCE
from ablate.labels.page import PageData, PassageText, QuestionText
from ablate.labels.repeats import flipped_items
from ablate.labels.sample import read_sample
from ablate.labels.workspace import check_name

HOST = "127.0.0.1"  # a local tool: never listen beyond this machine
DEFAULT_PORT = 8765
#: How many connections may wait to be accepted (the page is one person's; the system's usual backlog).
BACKLOG = 128


#: the options of ``serve``: (flag, argparse keywords), help last
_OPTIONS: tuple[tuple[str, dict[str, object]], ...] = (
    (
        "--pool",
        {
            "required": True,
            "help": "the pool to judge: a relevance pool, labels/<corpus>/pools/<name>.tsv, or an answers pool, "
            "labels/<corpus>/answer_pools/<name>.jsonl (graded correct / partly / wrong): the page follows its kind",
        },
    ),
    ("--assessor", {"help": "your name; judgements are recorded as human:<name> (default: your login name)"}),
    (
        "--port",
        {
            "type": int,
            "default": DEFAULT_PORT,
            "help": f"the port on {HOST} (default {DEFAULT_PORT}; 0 = any free port)",
        },
    ),
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    for flag, keywords in _OPTIONS:
        p.add_argument(flag, **keywords)  # type: ignore[arg-type]
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


def _read_passage(snapshot: Snapshot, chunk_id: str) -> PassageText | None:
    """A passage an answer's run read (its chunk's text, its document's title), if the corpus has it."""
    text = snapshot.chunk_text.get(chunk_id)
    if text is None:
        return None
    doc = snapshot.documents.get(snapshot.chunk_to_doc.get(chunk_id, ""))
    return PassageText(chunk_id, doc.title if doc is not None else "", text)


def page_data(loaded: label_common.Loaded, assessor: str) -> PageData:
    """The page's data for a loaded pool; every line of the kind's journal checked first (a bad line is one error,
    not a page that fails later). The questions of the kind's random human sample come first, then the items whose
    LLM repeats flipped."""
    from ablate.labels.page import answer_grades, relevance_grades

    snapshot, kind, entries = loaded.snapshot, loaded.kind, loaded.pool.entries
    path = loaded.workspace.journal_of(kind)
    sample = read_sample(loaded.workspace.sample_of(kind))
    check = label_common.pair_check(snapshot, kind)
    queries = {e.qid: snapshot.queries[e.qid] for e in entries}
    if kind is RELEVANCE:
        legend = label_common.grade_legend(snapshot)
        flipped = flipped_items(journal.read(path, check, legend.values))
        grades = relevance_grades(legend)
        passages = {e.unit: passage(snapshot, e.unit) for e in entries}
    else:
        journal.read_grades(path, check)
        flipped = frozenset()
        grades = answer_grades(snapshot.language)
        found = {c: _read_passage(snapshot, c) for e in entries for c in e.context}
        passages = {c: p for c, p in found.items() if p is not None}
    return PageData(
        kind=kind,
        pool=loaded.path.stem,
        entries=entries,
        questions={qid: QuestionText(qid, q.text, q.persona, q.as_of) for qid, q in queries.items()},
        passages=passages,
        grades=grades,
        journal=path,
        assessor=assessor,
        language=snapshot.language,
        sample=frozenset(sample.questions) if sample is not None else frozenset(),
        flipped=flipped,
    )


def listen(port: int) -> socket.socket:
    """A socket listening on ``HOST:port`` (werkzeug serves on it); a port in use is a one-line error."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port))
        sock.listen(BACKLOG)
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
    loaded = label_common.load_pool(args, args.pool)
    data = page_data(loaded, assessor)
    app = create_app(data)
    sock = listen(args.port)
    order = ordered(data.entries, data.sample, data.flipped)
    progress = Progress(data, order)
    left = sum(not progress.done(e) for e in order)
    what = "pairs" if data.kind is RELEVANCE else "answers"
    print(
        f"{'' if data.kind is RELEVANCE else 'answers '}pool {data.pool} of {loaded.snapshot.name}: {len(order)} "
        f"{what}, {left} left for {assessor}; judgements go to {data.journal}",
        flush=True,
    )
    first = [e for e in order if e.qid in data.sample or e.key in data.flipped]
    if first:
        print(
            f"first: {sum(e.qid in data.sample for e in order)} {what} of the random human sample's questions "
            f"(judge every one: they are the check), then {sum(e.qid not in data.sample for e in first)} whose LLM "
            "repeats disagree",
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
