"""``python -m ablate.init CORPUS_DIR``: start a study on a corpus folder that has documents but no questions yet.

Writes what is missing and never overwrites a file: ``queries.jsonl`` (one template question of each kind the spec
names, on the corpus's real documents or sections: :mod:`ablate.data.study_template`), ``qrels/labels.tsv`` (one
example row per template question, at the corpus's unit; only when the folder has no labels file yet),
``chunks.tsv`` (the ids a label may name: :mod:`ablate.data.chunk_list`) and ``NEXT.md`` (the commands to run next,
also printed). Template questions carry the tag ``template`` and every command
refuses them, naming their line, until they are filled in or deleted. With its one labels file the corpus is an
exploratory pilot (:func:`ablate.runner.heldout.pilot_corpus`) until ``python -m ablate.split`` gives it a held-out
split.
"""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Sequence
from pathlib import Path

from ablate.app.entry import run_command
from ablate.app.parser import command_parser
from ablate.app.paths import datasets_dir
from ablate.cache import atomic_write_bytes
from ablate.errors import InputError

NEXT_FILE = "NEXT.md"


def _parser() -> argparse.ArgumentParser:
    p = command_parser(
        "init",
        "Start a study on a corpus folder (corpus.jsonl): writes a queries.jsonl template with one "
        "question of each kind, a labels file to fill (qrels/labels.tsv) and NEXT.md with the commands to run next. "
        "Never overwrites a file.",
    )
    p.add_argument(
        "corpus", help="corpus folder holding corpus.jsonl (e.g. what python -m ablate.ingest wrote)"
    )
    return p


def next_steps(corpus: Path, name: str, labels: str, unit: str) -> str:
    """The commands to run next, as Markdown (``NEXT.md``; also printed). ``unit``: what a label's corpus-id names
    (the manifest's ``qrels_unit``)."""
    from ablate.data.chunk_list import CHUNKS_FILE
    from ablate.data.study_template import NO_ANSWER_RULE

    d = shlex.quote(str(corpus))
    ids = (
        f"a chunk id (qrels_unit: chunk in corpus.yaml): `{CHUNKS_FILE}` lists them with their first words"
        if unit == "chunk"
        else f"a document id (qrels_unit: doc in corpus.yaml): the doc-id column of `{CHUNKS_FILE}`"
    )
    split = f"outputs/splits/{name}-dev0.5-seed0/split.tsv"
    on = f"corpus=beir corpus.path={d}"
    return f"""# Next steps for {name}

1. Write your questions: replace each template question in `queries.jsonl` (tag `template`; keep or change its
   kind tag: single-hop, multi-hop, no-answer, conflict, table, permission) and give each one rows in `{labels}`
   (`query-id<TAB>corpus-id<TAB>score`: 2 answers it, 1 helps, 0 judged non-relevant; a corpus-id is {ids}).
   No answer in the documents: {NO_ANSWER_RULE}. Delete the templates you do not need, and their rows. Every
   command refuses a template question until it is filled in.
2. A first sweep, exploratory (one labels file: no held-out split, every labelled question is scored):

       python -m ablate -m {on} variant=A,B,C

3. A held-out split, once you have enough questions (a dozen or more), without leakage between its sides:

       python -m ablate.split {d}

4. Tune on dev (compare settings here; from the folder you ran ablate.split in, which wrote the split there):

       python -m ablate -m {on} corpus.split_file={split} corpus.split=dev variant=A,B,C

5. Run the settings chosen on dev once on test:

       python -m ablate {on} corpus.split_file={split} corpus.split=test variant=C

See docs/your-data.md for the format and what each error means.
"""


def _write_new(path: Path, text: str, written: list[Path], kept: list[Path]) -> None:
    if path.exists():
        kept.append(path)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, text.encode("utf-8"))
    written.append(path)


def run(args: argparse.Namespace) -> int:
    from ablate.data.chunk_list import CHUNKS_FILE, chunks_tsv
    from ablate.data.chunking import ChunkerSpec, chunk_corpus
    from ablate.data.corpus import corpus_name, read_manifest
    from ablate.data.corpus_files import load_documents
    from ablate.data.study_template import LABELS_FILE, build_template

    root = Path(args.corpus).expanduser()
    if not (root / "corpus.jsonl").is_file():
        raise InputError(
            str(root / "corpus.jsonl"),
            "is missing" if root.is_dir() else f"cannot be read: {root} is not a folder",
            "give the folder that holds your documents as corpus.jsonl (python -m ablate.ingest DOCS_DIR --out "
            "CORPUS_DIR writes it)",
        )
    root = root.resolve()
    shared = datasets_dir()
    if root == shared or shared in root.parents:
        raise InputError(
            str(root), "is inside the shared dataset folder, which is never written to", "copy it"
        )
    manifest = read_manifest(root)
    docs = load_documents(root / "corpus.jsonl")
    mc = manifest.get("chunker") or {}
    chunks = chunk_corpus(docs, ChunkerSpec(**({"kind": mc} if isinstance(mc, str) else mc)))
    unit = str(manifest.get("qrels_unit") or "doc")
    identities = manifest.get("identities") if isinstance(manifest.get("identities"), dict) else {}
    template = build_template(docs, chunks, unit, identities or {})
    written: list[Path] = []
    kept: list[Path] = []
    qdir = root / "qrels"
    existing = sorted(qdir.glob("*.tsv")) if qdir.is_dir() else []
    labels = str(existing[0].relative_to(root)) if len(existing) == 1 else LABELS_FILE
    if not (root / "queries.jsonl").exists():
        lines = "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in template.queries)
        _write_new(root / "queries.jsonl", lines, written, kept)
        if not existing:
            rows = "".join(f"{q}\t{u}\t{g}\n" for q, u, g in template.labels)
            _write_new(root / LABELS_FILE, "query-id\tcorpus-id\tscore\n" + rows, written, kept)
    else:
        kept.append(root / "queries.jsonl")
        kept.extend(existing)
    _write_new(root / CHUNKS_FILE, chunks_tsv(chunks), written, kept)
    name = corpus_name(root, manifest)
    steps = next_steps(root, name, labels, unit)
    _write_new(root / NEXT_FILE, steps, written, kept)
    for p in written:
        print(f"wrote {p}")
    for p in kept:
        print(f"kept {p} (exists; never overwritten)")
    print(steps.rstrip())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(_parser(), run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
