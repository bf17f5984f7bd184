"""Tracked runs as the study tools read them: the runs of a sweep or an experiment, each with its per-query table.

Reads through :class:`ablate.tracking.Tracker` and the names of :mod:`ablate.record`; never re-runs a stage. A param
or tag MLflow could only hold cut (a long ``ablate.overrides``) is read whole from its artifact
(:meth:`ablate.tracking.Tracker.whole`) before anything parses it. A run's ``per_query.csv`` (and
``funnel_per_query.csv``) is read through :class:`ablate.record_digest.RunFiles`: one edited after the run finished
is refused with one line naming it, never reported.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ablate import record as R
from ablate.errors import AblateError, InputError
from ablate.record import RecordedRun
from ablate.record_digest import RunFiles
from ablate.safenames import inside
from ablate.study.latest import latest_parent as latest_parent  # the sweep no --parent names
from ablate.tracking import Tracker, sqlite_path


class ReportError(AblateError):
    """Nothing to report, or the runs cannot be read as asked."""


@dataclass(frozen=True, eq=False)
class RunRecord(RecordedRun):
    """A tracked run with its ``per_query`` table: index ``qid`` (or a ``qid`` column), a ``category`` column and
    per-query metric columns (``ndcg@10``, ``rr@10``, ...); optional ``tags`` (``;``-separated question types)."""

    per_query: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: the run's ``funnel_per_query.csv`` (one row per answerable question and stage); None for a run that did not
    #: log it (logged before ablate recorded it)
    funnel_per_query: pd.DataFrame | None = None


@dataclass
class Source:
    """Where the runs came from: the parent run (if any), the experiment, the declared sweep and what was left out."""

    parent_run_id: str | None
    experiment: str
    title: str
    swept: list[str] | None
    sweep_dir: str | None
    skipped: list[str]
    #: each swept param -> its key as the sweep's overrides typed it (:func:`typed_names`)
    names: dict[str, str] = field(default_factory=dict)


def check_store(uri: str) -> None:
    db = sqlite_path(uri)
    if db is not None and not db.exists():
        raise ReportError(
            f"no MLflow store at {db}; fix: run from the directory you launched ablate from, or pass "
            "--tracking-uri (or set MLFLOW_TRACKING_URI)"
        )


def read_per_query(tracker: Tracker, run: RecordedRun, tmp: str) -> pd.DataFrame:
    try:  # a run id is data read from the store: its folder stays inside the temp folder
        dst = inside(Path(tmp), run.run_id)
    except ValueError:
        raise InputError(
            f"run {run.name} ({run.run_id!r})",
            "has an id that would name a folder outside the temp folder: not an id MLflow writes",
            "check the tracking store (--tracking-uri), or leave the run out of the report",
        ) from None
    path = RunFiles(tracker, run, dst).get(R.A_PER_QUERY)  # checked against the run's sealed record
    if path is None:
        raise InputError(
            f"run {run.name} ({run.run_id})",
            f"has no {R.A_PER_QUERY} artifact",
            "re-run it with this version of ablate (every run logs per_query.csv), or leave it out of the report",
        )
    text = {c: str for c in ("qid", "tags", "category", "status", R.PQ_CLUSTER, R.PQ_GROUP)}
    pq = pd.read_csv(path, dtype=text)
    if "qid" not in pq.columns:
        pq = pq.rename(columns={pq.columns[0]: "qid"})
    for col in ("tags", R.PQ_GROUP):  # an empty cell is no tag, no declared group
        if col in pq.columns:
            pq[col] = pq[col].fillna("")
    return pq.set_index("qid")


def read_funnel_per_query(tracker: Tracker, run: RecordedRun, tmp: str) -> pd.DataFrame | None:
    """The run's ``funnel_per_query.csv``, None when it has none (a run logged before ablate recorded it)."""
    path = RunFiles(tracker, run, inside(Path(tmp), run.run_id)).get(R.A_FUNNEL_PER_QUERY)
    if path is None:
        return None
    return pd.read_csv(path, dtype={"qid": str, "stage": str})


def swept_from_overrides(overrides: str, sources: dict[str, str] | None = None) -> list[str]:
    """Params a Hydra ``-m`` sweep varies, in order, from the parent's ``ablate.overrides`` tag:
    ``"variant=A,B rrf.k=10,60 bm25.k1=1.2"`` -> ``["variant", "rrf.k"]``. Config groups of stages map to the
    pipeline param they set (``retrievers`` -> ``pipeline.retrievers``), and keys that feed a stage parameter map to
    it through ``sources`` (``retrieval.window`` -> ``rrf.window``, from the runs' ``ablate.param_sources``)."""
    return list(typed_names(overrides, sources))


def typed_names(overrides: str, sources: dict[str, str] | None = None) -> dict[str, str]:
    """Each param a sweep varies (:func:`swept_from_overrides`, in order) -> its key as the user typed it
    (``rrf.window`` -> ``retrieval.window``, ``pipeline.retrievers`` -> ``retrievers``): what a reader looks for."""
    groups = {
        "variant": R.P_VARIANT,
        "retrievers": R.P_RETRIEVERS,
        "fusion": R.P_FUSER,
        "reranker": R.P_RERANKER,
    }
    sources = sources or {}
    out: dict[str, str] = {}
    for tok in overrides.split():
        if "=" not in tok:
            continue
        key, _, value = tok.partition("=")
        key = key.lstrip("+~").removeprefix("override ")
        if not is_sweep_value(value):
            continue
        out.setdefault(groups.get(key) or sources.get(key, key), key)
    return out


def is_sweep_value(value: str) -> bool:
    """True for a Hydra sweep value: ``a,b``, ``range(...)``, ``choice(...)``, ``glob(...)``, ``interval(...)``."""
    if value.startswith(("range(", "choice(", "glob(", "interval(")):
        return True
    depth, quote = 0, ""
    for ch in value:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            return True
    return False


def fetch_runs(
    tracker: Tracker, parent: str | None = None, experiment: str | None = None
) -> tuple[list[RunRecord], Source]:
    """The finished runs to report (children of ``parent``, or the runs of ``experiment``, or the children of the
    latest sweep parent) with their ``per_query.csv``; unfinished runs are listed in ``Source.skipped``."""
    if experiment is not None:
        exp_id = tracker.experiment_id(experiment, create=False)
        if exp_id is None:
            names = tracker.experiment_names()[:15]
            raise ReportError(f"no experiment {experiment!r} in {tracker.uri}; fix: choose one of {names}")
        runs = [
            tracker.whole(r)
            for r in tracker.find_runs([exp_id])
            if r.tags.get(R.T_ROLE) != R.ROLE_SWEEP_PARENT
        ]
        source = Source(None, experiment, experiment, None, None, [])
    else:
        pid = parent or latest_parent(tracker)
        prun = tracker.get_run(pid)
        if prun is None:
            raise ReportError(
                f"no run {pid!r} in {tracker.uri}; fix: pass the sweep's parent run id (printed by the sweep, tag "
                f"{R.T_ROLE}={R.ROLE_SWEEP_PARENT}), or --experiment NAME"
            )
        prun = tracker.whole(prun)  # its overrides whole, also when MLflow could only hold them cut
        runs = [tracker.whole(r) for r in tracker.children(pid)]
        if not runs:
            raise ReportError(
                f"run {pid} ({prun.name}) has no child runs; fix: pass a sweep's parent run id "
                f"(tag {R.T_ROLE}={R.ROLE_SWEEP_PARENT}), or --experiment NAME"
            )
        overrides = prun.tags.get(R.T_OVERRIDES)
        sources: dict[str, str] = {}
        for r in runs:
            sources.update(r.param_sources)
        typed = typed_names(overrides, sources) if overrides is not None else {}
        swept = list(typed) if overrides is not None else None
        exp_name = tracker.experiment_name(prun.experiment_id)
        title = f"{exp_name} / {prun.name}"
        source = Source(pid, exp_name, title, swept, prun.tags.get(R.T_SWEEP), [], typed)
    records = _with_tables(tracker, runs, source.skipped)
    if not records:
        raise ReportError(
            f"no finished runs to report in {source.title} ({len(source.skipped)} unfinished: "
            f"{'; '.join(source.skipped[:3])}); fix: re-run the failed jobs"
        )
    return records, source


def _with_tables(tracker: Tracker, runs: list[RecordedRun], skipped: list[str]) -> list[RunRecord]:
    """The finished ``runs`` with their ``per_query.csv`` (and funnel table); the others appended to ``skipped``."""
    records: list[RunRecord] = []
    with tempfile.TemporaryDirectory(prefix="ablate-report-") as tmp:
        for r in runs:
            if r.status != "FINISHED":
                why = r.failure
                skipped.append(f"{r.name} ({r.run_id}): {r.status}{': ' + why if why else ''}")
                continue
            records.append(
                RunRecord(
                    run_id=r.run_id,
                    name=r.name,
                    experiment_id=r.experiment_id,
                    status=r.status,
                    start_time=r.start_time,
                    end_time=r.end_time,
                    params=r.params,
                    metrics=r.metrics,
                    tags=r.tags,
                    per_query=read_per_query(tracker, r, tmp),
                    funnel_per_query=read_funnel_per_query(tracker, r, tmp),
                )
            )
    return records


def fetch_run_ids(tracker: Tracker, run_ids: list[str], option: str = "--runs") -> list[RunRecord]:
    """The named finished runs, in the order given, with their ``per_query.csv``; an unknown or unfinished run
    is refused (``option`` names the setting that named it)."""
    runs = []
    for rid in run_ids:
        run = tracker.get_run(rid)
        if run is None:
            raise InputError(
                f"{option} {rid!r}",
                f"no such run in {tracker.uri}",
                "pass run ids from the MLflow UI or the sweep",
            )
        runs.append(tracker.whole(run))
    skipped: list[str] = []
    records = _with_tables(tracker, runs, skipped)
    if skipped:
        raise InputError(option, f"not finished: {skipped[0]}", "pass finished runs")
    return records
