"""Who asks, and when: the identity and the date each question runs under, and what follows from them.

An :class:`Access` says three things (config ``corpus.identity``, ``corpus.as_of``, ``versions.policy``):

* **identity**: ``None`` (no permission filter), the name of one identity of the corpus (every question runs as it),
  or ``"per_query"`` (every question runs as its own ``persona``; groups from ``corpus.yaml``'s ``identities``).
* **as_of**: ``None`` (dates ignored), a date ``YYYY-MM-DD`` (every question is asked on it) or ``"per_query"``
  (every question's own ``as_of``; a question without one is undated: no version rule for it, counted).
* **policy** for out-of-force versions (:mod:`ablate.data.versions`): ``all`` keeps them in the index (the ranking
  may put a superseded clause first, which ``superseded_first@K`` counts); ``in_force`` filters them inside retrieval
  for the question's date, like a permission.

What follows, per question (rules logged with the run):

* **Retrieval** runs inside the question's visibility: the chunks its identity may see, minus (``in_force``) the
  documents out of force on its date. Questions with the same visibility form a :class:`Cohort` and are searched
  together, so every retriever returns a full top-K of what the asker may see.
* **Labels** are restricted per question: judgements of units its identity may not see are dropped (they cannot be
  retrieved for it); a question whose only evidence is hidden becomes no-answer for it. With a date, a judgement of a
  unit whose document is out of force on that date is re-graded to 0 (judged, not relevant: superseded or
  not-yet-effective evidence is wrong evidence for that date). The raw grades are kept for ``superseded_first@K``.
* **Leaks**: a result the question's identity may not see is a permission leak (must be 0).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ablate.data.snapshot import Snapshot
from ablate.data.types import Qrels, Query, Run
from ablate.data.versions import IN_FORCE_RULE, VersionIndex, check_config_date, parse_date
from ablate.errors import ConfigError, InputError

PER_QUERY = "per_query"
POLICIES: tuple[str, ...] = ("all", "in_force")

RULES: dict[str, str] = {
    "identity": "retrieval runs inside the asker's visibility; judgements of units the asker may not see are "
    "dropped; a question whose only evidence is hidden from its asker is no-answer for it",
    "as_of": "with a date, a judgement of a unit whose document is out of force on the question's date is re-graded "
    "to 0 (judged, not relevant); an undated question keeps its labels",
    "in_force": IN_FORCE_RULE,
    "policy_all": "versions.policy=all: out-of-force versions stay retrievable",
    "policy_in_force": "versions.policy=in_force: documents out of force on the question's date are filtered inside "
    "retrieval, like a permission",
}


@dataclass(frozen=True)
class Access:
    """See the module docstring. Invalid values raise :class:`ConfigError` naming the config key."""

    identity: str | None = None
    as_of: str | None = None
    policy: str = "all"

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ConfigError("versions.policy", self.policy, f"valid options: {', '.join(POLICIES)}")
        if self.as_of is not None and self.as_of != PER_QUERY:
            object.__setattr__(self, "as_of", check_config_date("corpus.as_of", self.as_of))
        if self.policy == "in_force" and self.as_of is None:
            raise ConfigError(
                "versions.policy",
                self.policy,
                "in_force needs a date to decide what is in force: set corpus.as_of=per_query (each question's "
                "date) or corpus.as_of=YYYY-MM-DD, or use versions.policy=all",
            )

    @property
    def per_query_identity(self) -> bool:
        return self.identity == PER_QUERY

    def as_dict(self) -> dict[str, Any]:
        return {"identity": self.identity, "as_of": self.as_of, "versions_policy": self.policy}


@dataclass(frozen=True)
class Cohort:
    """Questions that share one visibility: the same identity groups and the same out-of-force documents filtered."""

    groups: tuple[str, ...] | None
    filtered_versions: tuple[
        str, ...
    ]  # documents out of force on the cohort's dates (policy in_force), sorted
    qids: tuple[str, ...]

    @property
    def key(self) -> Any:
        """What keys a cohort's candidate lists besides the queries: the groups as before (so fixed-identity caches
        stay valid), plus the filtered versions when there are any."""
        groups = list(self.groups) if self.groups is not None else None
        if not self.filtered_versions:
            return groups
        return {"groups": groups, "out_of_force": list(self.filtered_versions)}


@dataclass
class Resolver:
    """An :class:`Access` applied to one snapshot: each question's groups and date, cohorts, labels, leaks."""

    snapshot: Snapshot
    access: Access
    _masks: dict[Any, np.ndarray | None] = field(default_factory=dict, repr=False)

    # -- per question ---------------------------------------------------------------------------------------------
    def groups(self, qid: str) -> tuple[str, ...] | None:
        ident = self.access.identity
        if ident is None:
            return None
        if ident == PER_QUERY:
            persona = self.snapshot.queries[qid].persona
            ids = self.snapshot.identities
            if persona is None or persona not in ids:
                raise self._persona_error(qid, persona)
            return tuple(sorted(str(g) for g in ids[persona]))
        return tuple(fixed_groups(self.snapshot, ident))

    def persona(self, qid: str) -> str | None:
        if self.access.identity == PER_QUERY:
            return self.snapshot.queries[qid].persona
        return self.access.identity

    def date(self, qid: str) -> dt.date | None:
        a = self.access.as_of
        if a is None:
            return None
        if a == PER_QUERY:
            q = self.snapshot.queries[qid]
            return (
                parse_date(q.as_of, f"{self.snapshot.root / 'queries.jsonl'} (query {qid})")
                if q.as_of
                else None
            )
        return dt.date.fromisoformat(a)

    def out_of_force(self, qid: str) -> frozenset[str]:
        d = self.date(qid)
        return self.versions.out_of_force(d) if d is not None else frozenset()

    @cached_property
    def versions(self) -> VersionIndex:
        return VersionIndex(self.snapshot.documents)

    def _persona_error(self, qid: str, persona: str | None) -> InputError:
        ids = ", ".join(sorted(self.snapshot.identities)) or "none"
        where = f"{self.snapshot.root / 'queries.jsonl'} (query {qid})"
        if persona is None:
            return InputError(
                where,
                "has no persona, and corpus.identity=per_query runs every question as its persona",
                f'add "persona" (one of: {ids}) to the question, or run a fixed identity (corpus.identity=<name>)',
            )
        return InputError(
            where,
            f"persona {persona!r} is not an identity of the corpus (corpus.yaml identities: {ids})",
            "declare it under identities in corpus.yaml with its groups, or fix the question's persona",
        )

    def check(self, qids: Iterable[str]) -> None:
        """Raise the first problem of any question: a missing or unknown persona, an unreadable date."""
        if self.access.identity is not None and self.access.identity != PER_QUERY:
            fixed_groups(self.snapshot, self.access.identity)
        for q in qids:
            self.groups(q)
            self.date(q)
        if self.access.as_of is not None:
            _ = self.versions

    # -- cohorts and masks --------------------------------------------------------------------------------------
    def cohorts(self, queries: Sequence[Query]) -> list[Cohort]:
        """Questions grouped by visibility, in order of their first question (one cohort when nothing varies)."""
        by: dict[tuple[Any, ...], list[str]] = {}
        for q in queries:
            g = self.groups(q.qid)
            filtered = tuple(sorted(self.out_of_force(q.qid))) if self.access.policy == "in_force" else ()
            by.setdefault((g, filtered), []).append(q.qid)
        return [Cohort(g, f, tuple(qs)) for (g, f), qs in by.items()]

    def mask(self, cohort: Cohort) -> np.ndarray | None:
        """Boolean mask over the snapshot's chunks for ``cohort`` (``None`` = everything visible)."""
        key = (cohort.groups, cohort.filtered_versions)
        if key in self._masks:
            return self._masks[key]
        mask = self.snapshot.allowed_mask(cohort.groups)
        if cohort.filtered_versions:
            drop = set(cohort.filtered_versions)
            keep = np.fromiter((c.doc_id not in drop for c in self.snapshot.chunks), dtype=bool)
            mask = keep if mask is None else (mask & keep)
        self._masks[key] = mask
        return mask

    # -- labels ---------------------------------------------------------------------------------------------------
    def labels(self, qrels: Qrels, qids: Iterable[str]) -> tuple[Qrels, dict[str, Any]]:
        """The judgements as each question's asker, on its date, sees them (see the module docstring), and counts."""
        snap = self.snapshot
        doc_of = (lambda u: u) if qrels.unit == "doc" else snap.chunk_to_doc.__getitem__
        qset = set(qids)
        out: dict[str, dict[str, int]] = {}
        hidden = regraded = dated = 0
        unanswerable: list[str] = []
        out_of_date: list[str] = []
        visible_cache: dict[tuple[str, ...] | None, set[str] | None] = {}
        for qid, judged in qrels.judgements.items():
            if qid not in qset:
                out[qid] = judged
                continue
            groups = self.groups(qid)
            if groups not in visible_cache:
                visible_cache[groups] = self._visible_units(qrels, groups)
            visible = visible_cache[groups]
            keep = dict(judged) if visible is None else {u: g for u, g in judged.items() if u in visible}
            hidden += len(judged) - len(keep)
            had = any(g >= 1 for g in judged.values())
            if had and not any(g >= 1 for g in keep.values()):
                unanswerable.append(qid)
            if self.date(qid) is not None:
                dated += 1
                off = self.out_of_force(qid)
                if off:
                    before = any(g >= 1 for g in keep.values())
                    for u, g in keep.items():
                        if g > 0 and doc_of(u) in off:
                            keep[u] = 0
                            regraded += 1
                    if before and not any(g >= 1 for g in keep.values()):
                        out_of_date.append(qid)
            out[qid] = keep
        info: dict[str, Any] = {
            "identity": self.access.identity,
            "identity_groups": self.groups_record(),
            "hidden_judgements": hidden,
            "queries_made_unanswerable": len(unanswerable),
            "unanswerable_qids": unanswerable,
            "as_of": self.access.as_of,
            "versions_policy": self.access.policy,
            "queries_dated": dated,
            "regraded_out_of_force": regraded,
            "queries_without_evidence_in_force": len(out_of_date),
            "without_evidence_in_force_qids": out_of_date,
        }
        return Qrels(out, unit=qrels.unit, name=qrels.name, source_sha256=qrels.source_sha256), info

    def _visible_units(self, qrels: Qrels, groups: tuple[str, ...] | None) -> set[str] | None:
        if groups is None:
            return None
        snap = self.snapshot
        if qrels.unit == "doc":
            return {d for d, doc in snap.documents.items() if doc.visible_to(groups)}
        return {c.chunk_id for c in snap.chunks if c.visible_to(groups)}

    def groups_record(self) -> Any:
        ident = self.access.identity
        if ident is None:
            return None
        if ident == PER_QUERY:
            return {p: sorted(str(g) for g in gs) for p, gs in sorted(self.snapshot.identities.items())}
        return fixed_groups(self.snapshot, ident)

    # -- leaks ----------------------------------------------------------------------------------------------------
    def leaks(self, run: Run) -> int:
        """Results a question's identity may not see (must be 0: filtering happens inside retrieval)."""
        if self.access.identity is None:
            return 0
        idx = self.snapshot.chunk_index
        n = 0
        for qid, hits in run.results.items():
            if qid not in self.snapshot.queries:
                continue
            mask = self.snapshot_mask(self.groups(qid))
            if mask is None:
                continue
            n += sum(1 for h in hits if not mask[idx[h.chunk_id]])
        return n

    def snapshot_mask(self, groups: tuple[str, ...] | None) -> np.ndarray | None:
        key = (groups, ())
        if key not in self._masks:
            self._masks[key] = self.snapshot.allowed_mask(groups)
        return self._masks[key]


def access_rules(access: Access) -> dict[str, str]:
    """The rule texts that apply to a run under ``access`` (they join the evaluation's ``accounting["rules"]``)."""
    from ablate.evaluation.conflicts import RULE as SUPERSEDED_FIRST

    out: dict[str, str] = {}
    if access.identity is not None:
        who = "each question's persona" if access.per_query_identity else f"identity {access.identity!r}"
        out["identity"] = f"asker: {who}; " + RULES["identity"]
    if access.as_of is not None:
        when = "each question's as_of" if access.as_of == PER_QUERY else access.as_of
        out["as_of"] = f"date: {when}; " + RULES["as_of"]
        out["in_force"] = RULES["in_force"]
        out["versions_policy"] = RULES[f"policy_{access.policy}"]
        out["superseded_first"] = SUPERSEDED_FIRST
    return out


def fixed_groups(snapshot: Snapshot, identity: str) -> list[str]:
    """The groups of one named identity of ``snapshot`` (``ConfigError`` naming ``corpus.identity`` if unknown)."""
    ids = snapshot.identities
    if identity not in ids:
        opts = ", ".join(sorted(ids)) if ids else "none (this corpus declares no identities; use null)"
        raise ConfigError(
            "corpus.identity",
            identity,
            f"identities of corpus {snapshot.name!r}: {opts}, or per_query (each question as its persona); "
            "choose one (null: no filter)",
        )
    return sorted(str(g) for g in ids[identity])


def check_answerable(snapshot: Snapshot, access: Access, split: str, relevance_level: int = 1) -> None:
    """Refuse, before anything runs, an identity and date under which no question of ``split`` keeps any gold
    evidence (every labelled question's evidence hidden from its asker or out of force on its date): every retrieval
    metric would be blank and the run would finish having measured nothing. The message names the setting that
    empties the split. A split without any usable label is refused earlier (``check_labels``), so a split that is
    legitimately all no-answer never reaches this check."""
    if access.identity is None and access.as_of is None:
        return
    qids = snapshot.split_qids(split)
    raw = snapshot.split_qrels(split)
    labelled = sum(1 for q in qids if raw.positives(q, relevance_level))

    def answerable(acc: Access) -> int:
        labels, _ = Resolver(snapshot, acc).labels(raw, qids)
        return sum(1 for q in qids if labels.positives(q, relevance_level))

    if not labelled or answerable(access):
        return
    by_identity = answerable(Access(access.identity)) if access.identity is not None else labelled
    by_date = answerable(Access(None, access.as_of)) if access.as_of is not None else labelled
    what = f"no question of split {split!r} ({labelled} with gold evidence) keeps any"
    if not by_identity:
        ident = access.identity
        who = "its persona" if ident == PER_QUERY else f"identity {ident!r}"
        raise ConfigError(
            "corpus.identity",
            ident,
            f"{what} evidence {who} may see, so every retrieval metric would be blank; "
            + (
                "give the questions personas whose groups see their evidence (corpus.yaml identities), or "
                if ident == PER_QUERY
                else f"choose an identity that sees the evidence ({', '.join(sorted(snapshot.identities))}), "
                "per_query, or "
            )
            + "null (no permission filter)",
        )
    if not by_date:
        raise ConfigError("corpus.as_of", access.as_of, f"{what} {_date_problem(snapshot, access.as_of)}")
    raise ConfigError(
        "corpus.identity",
        access.identity,
        f"with corpus.as_of={access.as_of}, {what} evidence its asker may see that is in force on its date "
        f"({by_identity} would under the identity alone, {by_date} under the date alone), so every retrieval metric "
        "would be blank; change the identity or the date (null turns either rule off)",
    )


def _date_problem(snapshot: Snapshot, as_of: str | None) -> str:
    """Why no evidence is in force under ``as_of`` and the fix (for :func:`check_answerable`)."""
    if as_of == PER_QUERY:
        return (
            "evidence in force on its own as_of date, so every retrieval metric would be blank; check the questions' "
            "as_of in queries.jsonl, or give one date (corpus.as_of=YYYY-MM-DD) or null (dates ignored)"
        )
    earliest = min(
        (
            parse_date(d.effective_date, f"corpus.jsonl ({d.doc_id})", "effective_date")
            for d in snapshot.documents.values()
            if d.effective_date
        ),
        default=None,
    )
    if earliest is not None and str(as_of) < earliest.isoformat():
        why = f"it is before every document's effective date (earliest {earliest.isoformat()})"
        later = f"a date on or after {earliest.isoformat()}"
    else:
        why, later = "every piece of it is superseded or not yet effective then", "another date"
    return (
        f"evidence in force on it: {why}, so every retrieval metric would be blank; give {later}, per_query (each "
        "question's own date) or null (dates ignored)"
    )
