"""Which questions move together, and by how much: the clusters the report's intervals and paired tests and the
plan's design effect resample (the regression gate's ``--cluster`` means the same).

``how`` (``--cluster``):

* ``evidence`` (the default): the cluster each run recorded in ``per_query.csv`` (:data:`ablate.record.PQ_CLUSTER`:
  questions sharing a gold document or series at the run's relevance level, a declared ``group`` in
  ``queries.jsonl``, or their text after normalisation; :func:`ablate.data.splitting.evidence_groups`);
* ``group``: the declared ``group`` only (:data:`ablate.record.PQ_GROUP`); a question without one is alone;
* ``none``: every question alone (the per-question statistics).

Over several runs the clusters are joined: two questions any run puts in one cluster are in one cluster for all
(runs on one label version record the same clusters). A run logged before ablate recorded clusters has no such
column: the command reading it may pass ``recompute`` (:mod:`ablate.app.recorded_clusters` loads the run's recorded
corpus); when no run's clusters can be had, the questions are treated as independent and one warning line says so.

The *design effect* of clustered questions (Kish 1965), ``1 + (m - 1) * ICC`` with ``m`` the mean cluster size and
ICC the within-cluster correlation of the per-question differences (:func:`ablate.study.gate.icc_of`), is how much
the clusters inflate the variance of a mean over questions: the planner's and the report's MDE grow by its square
root, the questions needed by it. Pure: plain tables and mappings in, no MLflow.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

import pandas as pd

from ablate import record as R
from ablate.errors import ConfigError
from ablate.record import RecordedRun
from ablate.study.gate import FEW_CLUSTERS, icc_of
from ablate.study.options import CLUSTERS

#: What each ``--cluster`` choice (:data:`ablate.study.options.CLUSTERS`) joins, as the report's header says it.
JOINED_BY = {
    "evidence": "questions sharing gold evidence, a declared group or their text",
    "group": "questions of one declared group",
}

#: A run's recorded clusters: question -> its evidence cluster, question -> its declared group ("" if none).
Recorded = tuple[dict[str, str], dict[str, str]]
#: Recomputes a run's :data:`Recorded` clusters for the given questions from its recorded corpus (None: impossible).
Recompute = Callable[[RecordedRun, list[str]], Recorded | None]

Run = TypeVar("Run", bound=RecordedRun)


def check_cluster(how: str) -> str:
    if how not in CLUSTERS:
        raise ConfigError("--cluster", how, "valid options: " + ", ".join(CLUSTERS))
    return how


def _ids(per_query: pd.DataFrame) -> list[str]:
    return [str(q) for q in (per_query["qid"] if "qid" in per_query.columns else per_query.index)]


def recorded(per_query: pd.DataFrame) -> Recorded | None:
    """The clusters a run's ``per_query.csv`` records, or None when it records none (a run logged before)."""
    if R.PQ_CLUSTER not in per_query.columns:
        return None
    ids = _ids(per_query)
    cluster = [str(c) for c in per_query[R.PQ_CLUSTER]]
    group = per_query[R.PQ_GROUP] if R.PQ_GROUP in per_query.columns else pd.Series([""] * len(ids))
    declared = ["" if pd.isna(g) else str(g) for g in group]
    return dict(zip(ids, cluster, strict=True)), dict(zip(ids, declared, strict=True))


def with_clusters(runs: Sequence[Run], recompute: Recompute | None) -> list[Run]:
    """``runs`` with the cluster columns added to the per-question table of each that recorded none, as
    ``recompute`` gives them again (unchanged where it cannot)."""
    out = []
    for r in runs:
        pq = getattr(r, "per_query", None)
        if recompute is None or pq is None or recorded(pq) is not None:
            out.append(r)
            continue
        got = recompute(r, _ids(pq))
        if got is None:
            out.append(r)
            continue
        pq = pq.copy()
        ids = _ids(pq)
        pq[R.PQ_CLUSTER] = [got[0].get(q, q) for q in ids]
        pq[R.PQ_GROUP] = [got[1].get(q, "") for q in ids]
        out.append(replace(r, per_query=pq))  # type: ignore[call-arg]
    return out


def labels_for(qids: Iterable[str], how: str, recorded_: Recorded) -> dict[str, str]:
    """Each question's cluster label under ``how``: its evidence cluster, its declared group, or itself. A question
    the clusters do not name (or, for ``group``, one without a group) is alone."""
    evidence, declared = recorded_
    out = {}
    for q in qids:
        if how == "evidence" and q in evidence:
            out[q] = f"cluster:{evidence[q]}"
        elif how == "group" and declared.get(q):
            out[q] = f"group:{declared[q]}"
        else:
            out[q] = f"question:{q}"
    return out


def join(labelings: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """One clustering from several (two questions in one cluster of any of them are in one cluster): question ->
    the smallest label of its joined cluster."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for lab in labelings:
        first: dict[str, str] = {}
        for q in sorted(lab):
            other = first.setdefault(lab[q], q)
            a, b = find(q), find(other)
            if a != b:
                parent[max(a, b)] = min(a, b)
    return {q: find(q) for q in sorted(parent)}


@dataclass(frozen=True)
class Clustering:
    """The clusters of a study's questions (``labels``: question -> cluster, None when every question is alone), the
    choice they come from and the warning line, if any (no run recorded clusters)."""

    how: str
    labels: dict[str, str] | None
    warnings: list[str] = field(default_factory=list)

    def of(self, qids: Sequence[str]) -> list[str] | None:
        """The cluster of each of ``qids`` (in order), or None when they are as many clusters as questions."""
        if self.labels is None:
            return None
        got = [self.labels.get(q, f"question:{q}") for q in qids]
        return got if len(set(got)) < len(got) else None

    def count(self, qids: Sequence[str]) -> int:
        """How many clusters ``qids`` fall in."""
        return len(set(self.of(qids) or qids))


def clustering(runs: Sequence[RecordedRun], how: str) -> Clustering:
    """The clusters of the questions of ``runs`` under ``how`` (:data:`CLUSTERS`), joined over the runs; each run's
    per-question table (``per_query``) read for what it recorded."""
    check_cluster(how)
    if how == "none":
        return Clustering(how, None)
    tables = [(r, getattr(r, "per_query", None)) for r in runs]
    found = [(r, got) for r, pq in tables if pq is not None and (got := recorded(pq)) is not None]
    if not found:
        names = ", ".join(r.name for r in runs[:3]) + (", ..." if len(runs) > 3 else "")
        return Clustering(
            how,
            None,
            [
                f"questions treated as independent: no run ({names}) recorded its question clusters and they "
                "could not be recomputed from its corpus; intervals and tests resample questions (re-run the "
                "runs with this version of ablate to resample clusters)"
            ],
        )
    labelings = [labels_for(list(got[0]), how, got) for _, got in found]
    return Clustering(how, join(labelings))


@dataclass(frozen=True)
class DesignEffect:
    """How ``g`` clusters of ``n`` questions inflate the variance of a mean of per-question differences: ``m`` the
    mean cluster size, ``icc`` their within-cluster correlation, ``deff = 1 + (m - 1) * icc``."""

    n: int
    g: int
    m: float
    icc: float
    deff: float

    @property
    def inflation(self) -> float:
        """The factor on a standard error, an interval's width or an MDE: ``sqrt(deff)``."""
        return math.sqrt(self.deff)


def design_effect(diffs: Sequence[float], labels: Sequence[str] | None) -> DesignEffect:
    """The design effect of ``diffs`` (per-question differences) in the clusters ``labels`` (one per difference; None:
    every question alone, design effect 1)."""
    n = len(diffs)
    if labels is None or n == 0:
        return DesignEffect(n, n, 1.0, 0.0, 1.0)
    d = [float(x) for x in diffs]
    g = len(set(labels))
    m = n / g
    if g < 2:  # one cluster: no correlation to estimate, no cluster-robust spread
        return DesignEffect(n, g, m, math.nan, math.nan)
    icc = icc_of(d, list(labels))
    return DesignEffect(n, g, m, icc, 1.0 + (m - 1.0) * icc)


def few_clusters(g: int) -> str | None:
    """The warning line for a study whose questions fall in fewer than :data:`ablate.study.gate.FEW_CLUSTERS`
    clusters (None otherwise)."""
    if g >= FEW_CLUSTERS:
        return None
    floor = 2 / 2**g if g >= 1 else 1.0
    return (
        f"only {g} clusters of questions: intervals and tests over so few clusters are coarse (a two-sided sign-flip "
        f"test over {g} clusters cannot give p below {floor:.3g}); questions from more distinct evidence narrow them "
        "more than more questions from the same"
    )
