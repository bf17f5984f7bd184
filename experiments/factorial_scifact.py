"""Which factors matter in a grid on SciFact: a C sweep over rrf.k x retrieval.window and its factorial analysis
(:mod:`ablate.study.factorial`), written to experiments/factorial_scifact.md.

    python experiments/factorial_scifact.py                       # train split, rrf.k=1,10,60,100 x window=20,50,100
    python experiments/factorial_scifact.py --k 1,60 --window 20,100 --tracking-uri sqlite:///$PWD/mlflow.db

The grid runs on the tuning split (``train``, 809 claims): these are the settings experiments/scifact.md chooses
there, and the held-out split is run once, never swept. The sweep goes through the real entry point
(``python -m ablate -m ...``), its end report carries the Factorial analysis section; the page repeats it with the
command, the wall time, the date and the machine. ``--split test`` runs the grid on the held-out split (with
``--confirm-test``; its report marks the runs test-tuned).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import dataset_path

from ablate import record as R
from ablate.tracking import Tracker

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
EXPERIMENT = "factorial-scifact"


def run(cmd: list[str]) -> float:
    print("+", " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=REPO, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
    return time.perf_counter() - t0


def newest_parent(uri: str) -> str:
    t = Tracker(uri)
    exp = t.experiment_id(EXPERIMENT, create=False)
    found = (
        []
        if exp is None
        else t.find_runs(
            [exp], f"tags.`{R.T_ROLE}` = '{R.ROLE_SWEEP_PARENT}'", max_results=1, newest_first=True
        )
    )
    if not found:
        raise SystemExit(f"error: no sweep parent run in experiment {EXPERIMENT!r} of {uri}")
    return found[0].run_id


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="scifact", help="BEIR folder or name under $ABLATE_DATASETS")
    ap.add_argument("--split", default="train")
    ap.add_argument("--k", default="1,10,60,100", help="rrf.k levels")
    ap.add_argument("--window", default="20,50,100", help="retrieval.window levels")
    ap.add_argument("--tracking-uri", default=f"sqlite:///{REPO / 'mlflow.db'}")
    ap.add_argument("--page", default=str(HERE / "factorial_scifact.md"))
    args = ap.parse_args()
    path = dataset_path(args.dataset)
    sweep = [
        sys.executable, "-m", "ablate", "-m", "corpus=beir", f"corpus.path={path}", f"corpus.split={args.split}",
        "variant=C", f"rrf.k={args.k}", f"retrieval.window={args.window}", "stats.bootstrap=200",
        f"tracking.experiment={EXPERIMENT}", f"tracking.uri={args.tracking_uri}", "progress=false",
        *(["--confirm-test"] if args.split == "test" else []),
    ]  # fmt: skip
    seconds = run(sweep)
    parent = newest_parent(args.tracking_uri)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report"
        report = [
            sys.executable, "-m", "ablate.report", "--tracking-uri", args.tracking_uri, "--parent", parent,
            "--factorial", "--no-log", "--out", str(out),
        ]  # fmt: skip
        run(report)
        md = (out / "ablation.md").read_text(encoding="utf-8")
        csv = (out / "factorial.csv").read_text(encoding="utf-8") if (out / "factorial.csv").exists() else ""
    section = md.split("## Factorial analysis", 1)[1].strip() if "## Factorial analysis" in md else "(none)"
    shown = " ".join(["python", *(a for a in sweep[1:] if not a.startswith("tracking.uri="))])
    shown = shown.replace(str(REPO.parent) + "/", "../")  # a path as a user beside the checkout types it
    page = [
        f"# SciFact: which factors matter in the rrf.k x retrieval.window grid ({args.split})",
        "",
        "Variant C (BM25 + dense, RRF) on SciFact's tuning split; the factorial analysis of the sweep's report",
        "(Type II ANOVA of OLS `ndcg@10 ~ C(rrf.k) * C(rrf.window) + C(question)`, the claim as block; docs/sweeps.md).",
        "",
        "## Factorial analysis (as the report prints it)",
        "",
        section,
        "",
        "## factorial.csv",
        "",
        "```csv",
        csv.strip(),
        "```",
        "",
        "## Reproduce",
        "",
        "```bash",
        f"python experiments/factorial_scifact.py --split {args.split} --k {args.k} --window {args.window}",
        "```",
        "",
        f"The sweep `{shown}` took {seconds:.0f} s wall (MLflow parent run `{parent}`, experiment `{EXPERIMENT}`).",
        f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}; measured "
        f"{datetime.date.today().isoformat()} on a machine shared with other jobs.",
        "",
    ]
    Path(args.page).write_text("\n".join(page), encoding="utf-8")
    print(f"wrote {args.page}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
