"""Conformance tests every stage of a kind runs (in the spirit of PyTerrier's transformer tests).

Subclass the contract in a test module (pytest collects ``Test*`` classes), name the stage's YAML and say how to
build the stage:

.. code-block:: python

    from ablate.testing.contracts import RetrieverContract

    class TestMyRetriever(RetrieverContract):
        option = "retrievers/my"                 # conf/retrievers/my.yaml
        variations = {"k1": 1.5, "b": 0.9}      # per parameter, one other valid value
        invalid = {"k1": -1, "b": "high"}       # per parameter checked, one value the constructor refuses

        def make(self, **params):
            return MyRetriever(**params)

The contract builds a small corpus (:func:`ablate.testing.corpus.contract_corpus`: English and Chinese text, two documents with identical
text listed in the reverse of their id order, a finance-only document, graded clause-level labels) and checks, for
every stage of a kind:

* its YAML (``conf/<option>.yaml``) composes with Hydra's real composition inside ablate's config, selected as on the
  command line (``<group>=<name>``), and the command line's check builds this stage from it, named after its block,
  with the YAML's values (:meth:`_StageContract.yaml_overrides`: what the YAML needs here, e.g. a local server);
* ``params()`` round-trips: the stage built again from what ``params()`` reports (less the facts it records, such as a
  hash or a build, named in ``derived``) reports the same parameters and has the same fingerprint;
* a bad parameter is one :class:`~ablate.errors.ConfigError` on one line naming ``<stage>.<param>``, raised when the
  stage is built (from Python and from the command line), and an unknown parameter is refused by name;
* it satisfies the kind's protocol and is named;
* every hit maps to the snapshot: its chunk id exists, its doc id and version are the chunk's (retrievers);
* ties are broken by chunk id, exercised for real: the identical texts are both found with equal scores and ranked
  by id although the corpus lists them the other way round (retrievers); identical passages at the head of the
  candidates come out by id (rerankers); two candidates swapping places across two lists fuse to equal scores and
  come out by id (fusers);
* the permission mask is honoured inside the stage (a masked chunk never appears; an all-false mask returns nothing;
  a query still gets up to ``depth`` hits from what is allowed);
* ``depth`` is respected, and is rejected when it is not a positive integer;
* two fresh instances give the same results (deterministic);
* the fingerprint is stable for equal parameters and changes when any parameter in ``variations`` changes;
* a generator answers each prompt ``repeats`` times, serves the second call from its cache and is deterministic when
  greedy.

Plugins installed as separate packages can import this module the same way; their YAML reaches ablate's config
through ``yaml_overrides`` (``hydra.searchpath=[pkg://yourpkg.conf]``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from ablate.cache import Cache
from ablate.data.snapshot import Snapshot
from ablate.data.types import Hit, Query, Run, rank_hits
from ablate.errors import AblateError, ConfigError
from ablate.stages.base import Fuser, Reranker, Retriever, StageContext
from ablate.testing.compose import build_from_config, compose_option, hydra_value
from ablate.testing.corpus import TIED, contract_corpus

__all__ = [
    "FuserContract",
    "GeneratorContract",
    "RerankerContract",
    "RetrieverContract",
    "build_from_config",
    "compose_option",
    "contract_corpus",
]


def _hits(run: Run) -> dict[str, list[tuple[str, float]]]:
    return {q: [(h.chunk_id, h.score) for h in hits] for q, hits in run.results.items()}


def _without(params: Mapping[str, Any], derived: frozenset[str]) -> dict[str, Any]:
    """``params`` less the ``derived`` keys (dotted for a nested one: ``train.base_model_source``)."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        if key in derived:
            continue
        inner = frozenset(d.split(".", 1)[1] for d in derived if d.startswith(f"{key}."))
        out[key] = _without(value, inner) if inner and isinstance(value, Mapping) else value
    return out


def _unreported(reported: Mapping[str, Any], given: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The settings of ``given`` (a YAML block) that ``reported`` (``params()``) reports with another value. A setting
    it does not report (a block another choice uses, such as an unused index's) and a null one (the stage resolves it:
    a model or prefix by the corpus language or the model) are not compared."""
    bad = []
    for key, value in given.items():
        if key not in reported or value is None:
            continue
        got = reported[key]
        if isinstance(value, Mapping) and isinstance(got, Mapping):
            bad += _unreported(got, value, f"{prefix}{key}.")
        elif got != value:
            bad.append(f"{prefix}{key}: the YAML sets {value!r}, params() reports {got!r}")
    return bad


class _StageContract:
    """What every contract shares: the corpus, a cache, the stage's YAML, its parameters and its fingerprint."""

    #: the config group option whose YAML builds this stage: ``"<group>/<name>"`` (``conf/<group>/<name>.yaml``).
    option: ClassVar[str] = ""
    #: parameter -> another valid value; each must change the fingerprint.
    variations: ClassVar[Mapping[str, Any]] = {}
    #: parameter -> a value the constructor must refuse (a one-line ConfigError naming ``<stage>.<param>``).
    invalid: ClassVar[Mapping[str, Any]] = {}
    #: keys of ``params()`` that record a fact rather than a setting (a hash, a build, where a model came from):
    #: not constructor parameters. Dotted for a nested key (``train.base_model_source``).
    derived: ClassVar[frozenset[str]] = frozenset()
    #: parameter -> the key its refusal names when that is not ``<stage>.<param>`` (a parameter the config feeds from
    #: another setting: RRF's ``window`` is ``retrieval.window``).
    refusal_keys: ClassVar[Mapping[str, str]] = {}

    def make(self, **params: Any) -> Any:  # pragma: no cover - subclasses say how
        raise NotImplementedError

    def yaml_overrides(self) -> list[str]:
        """Command-line overrides the stage's YAML needs here (a model the tests ship, a local server's URL)."""
        return []

    @pytest.fixture(scope="class")
    def snapshot(self, tmp_path_factory: pytest.TempPathFactory) -> Snapshot:
        return contract_corpus(tmp_path_factory.mktemp("contract-corpus"))

    @pytest.fixture(scope="class")
    def cache(self, tmp_path_factory: pytest.TempPathFactory) -> Cache:
        return Cache(tmp_path_factory.mktemp("contract-cache"))

    def bound(self, snapshot: Snapshot, **params: Any) -> Any:
        stage = self.make(**params)
        binder = getattr(stage, "bind", None)
        return binder(snapshot, "dev") if binder is not None else stage

    def built_from_yaml(self, *overrides: str) -> tuple[Any, dict[str, Any]]:
        """The stage of this contract's class that the command line builds from its YAML (and ``overrides``), and
        its block as composed (values resolved)."""
        from omegaconf import OmegaConf

        assert self.option, "name the stage's YAML: option = '<group>/<name>' (conf/<group>/<name>.yaml)"
        cls = type(self.make())
        cfg = compose_option(self.option, [*self.yaml_overrides(), *overrides])
        built = [s for s in build_from_config(cfg) if type(s) is cls]
        assert len(built) == 1, f"{self.option} built {len(built)} stages of {cls.__qualname__}, not one"
        block = OmegaConf.to_container(cfg[built[0].name], resolve=True)
        assert isinstance(block, dict)
        return built[0], {str(k): v for k, v in block.items()}

    def test_the_yaml_composes_and_builds_this_stage(self) -> None:
        stage, block = self.built_from_yaml()
        cls = type(stage)
        assert block.pop("_target_") == f"{cls.__module__}.{cls.__qualname__}"
        bad = _unreported(stage.params(), block)
        assert not bad, f"{self.option}: the stage built from the YAML does not run with its values: {bad}"

    def test_params_round_trip_into_the_constructor(self, snapshot: Snapshot) -> None:
        """The stage built again from its recorded ``params()`` (at the defaults and at every variation) reports the
        same parameters and has the same fingerprint: a run's record is enough to rebuild what ran."""
        for variation in ({}, *({k: v} for k, v in self.variations.items())):
            stage = self.bound(snapshot, **variation)
            settings = _without(stage.params(), self.derived)
            try:
                again = self.bound(snapshot, **settings)
            except TypeError as e:
                raise AssertionError(
                    f"params() reports {sorted(settings)}, which do not build the stage ({e}); name each as the "
                    "constructor does, or declare a recorded fact in `derived`"
                ) from None
            assert _without(again.params(), self.derived) == settings, variation
            assert again.fingerprint().key == stage.fingerprint().key, variation

    def test_a_bad_parameter_is_one_line_naming_it(self) -> None:
        assert self.invalid, "declare `invalid`: one value the constructor must refuse, per parameter checked"
        name = self.make().name
        stage, in_yaml = self.built_from_yaml()
        block = stage.name
        for param, value in self.invalid.items():
            with pytest.raises(ConfigError) as e:
                self.make(**{param: value})
            key = self.refusal_keys.get(param, f"{name}.{param}")
            assert e.value.key == key and "\n" not in str(e.value), (param, str(e.value))
            written = hydra_value(value)
            if written is not None:  # the same value on the command line
                plus = "" if param in in_yaml else "++"  # a parameter the YAML leaves at its default is added
                with pytest.raises(ConfigError) as e:
                    self.built_from_yaml(f"{plus}{block}.{param}={written}")
                key = self.refusal_keys.get(param, f"{block}.{param}")
                assert e.value.key == key and "\n" not in str(e.value), (param, str(e.value))
        # an unknown parameter is named by its key, also where the constructor hands **params to its base class's
        with pytest.raises(ConfigError) as e:
            self.built_from_yaml(f"++{block}.no_such_parameter=1")
        assert e.value.key == f"{block}.no_such_parameter" and "has no such parameter" in str(e.value)
        assert "\n" not in str(e.value)

    def test_fingerprint_is_stable_and_changes_with_every_parameter(self, snapshot: Snapshot) -> None:
        base = self.bound(snapshot).fingerprint()
        assert base.key == self.bound(snapshot).fingerprint().key
        assert base.code_version and base.cls.startswith(type(self.make()).__module__)
        assert self.variations, "declare `variations`: one other value per parameter"
        for param, value in self.variations.items():
            other = self.bound(snapshot, **{param: value}).fingerprint()
            assert other.key != base.key, f"changing {param} to {value!r} did not change the fingerprint"


class RetrieverContract(_StageContract):
    """The contract of a retriever (see the module docstring)."""

    def prepared(self, snapshot: Snapshot, cache: Cache, **params: Any) -> Retriever:
        stage = self.bound(snapshot, **params)
        stage.prepare(StageContext(snapshot, cache))
        return stage

    def queries(self, snapshot: Snapshot) -> list[Query]:
        return [snapshot.queries[q] for q in snapshot.split_qids("dev")]

    def test_is_a_named_retriever(self) -> None:
        stage = self.make()
        assert isinstance(stage, Retriever) and type(stage).kind == "retriever" and stage.name

    def test_ids_map_to_the_snapshot(self, snapshot: Snapshot, cache: Cache) -> None:
        run = self.prepared(snapshot, cache).search(self.queries(snapshot), 5)
        assert set(run.results) == set(snapshot.split_qids("dev"))
        hits = [h for hs in run.results.values() for h in hs]
        assert hits, "the stage returned nothing at all on the contract corpus"
        for h in hits:
            assert h.chunk_id in snapshot.chunk_index, h
            assert (
                h.doc_id == snapshot.chunk_to_doc[h.chunk_id]
                and h.version == snapshot.chunk_version[h.chunk_id]
            )

    def test_ties_are_broken_by_chunk_id(self, snapshot: Snapshot, cache: Cache) -> None:
        run = self.prepared(snapshot, cache).search(self.queries(snapshot), 10)
        for qid, hits in run.results.items():
            assert hits == rank_hits(hits), f"query {qid}: not in (score desc, chunk id asc) order"
        tied = [h for h in run.get("q3") if h.chunk_id in TIED]
        assert [h.chunk_id for h in tied] == list(TIED), (
            f"query q3: the two identical texts {TIED} must both be found, by id: {_hits(run)['q3']}"
        )

    def test_permission_mask_is_honoured_inside(self, snapshot: Snapshot, cache: Cache) -> None:
        stage = self.prepared(snapshot, cache)
        queries = self.queries(snapshot)
        mask = snapshot.allowed_mask(["staff"])
        assert mask is not None and not mask.all()
        run = stage.search(queries, len(snapshot.chunks), mask)
        assert all(mask[snapshot.chunk_index[h.chunk_id]] for hs in run.results.values() for h in hs)
        unmasked = stage.search(queries, len(snapshot.chunks))
        for (
            qid
        ) in run.results:  # filtering inside: the allowed hits of an unmasked search are all still there
            allowed = [c for c, _ in _hits(unmasked)[qid] if mask[snapshot.chunk_index[c]]]
            assert [c for c, _ in _hits(run)[qid]] == allowed
        none = stage.search(queries, 5, np.zeros(len(snapshot.chunks), dtype=bool))
        assert all(hs == [] for hs in none.results.values())

    def test_depth_is_respected(self, snapshot: Snapshot, cache: Cache) -> None:
        stage = self.prepared(snapshot, cache)
        deep = _hits(stage.search(self.queries(snapshot), 10))
        for depth in (
            1,
            2,
            3,
        ):  # a shallower ranking is the prefix of a deeper one (scores equal up to float noise)
            run = _hits(stage.search(self.queries(snapshot), depth))
            for q, hs in deep.items():
                assert [c for c, _ in run[q]] == [c for c, _ in hs[:depth]], (q, depth)
                assert np.allclose([s for _, s in run[q]], [s for _, s in hs[:depth]], rtol=1e-6, atol=1e-7)
        for bad in (0, -1, 1.5, True):
            with pytest.raises(AblateError):
                stage.search(self.queries(snapshot), bad)  # type: ignore[arg-type]

    def test_deterministic(self, snapshot: Snapshot, cache: Cache, tmp_path: Path) -> None:
        a = self.prepared(snapshot, cache).search(self.queries(snapshot), 5)
        b = self.prepared(snapshot, Cache(tmp_path / "fresh")).search(self.queries(snapshot), 5)
        assert _hits(a) == _hits(b)


class RerankerContract(_StageContract):
    """The contract of a reranker: it reorders the first ``depth`` candidates and never adds or drops one."""

    def candidates(self, snapshot: Snapshot) -> Run:
        """Every allowed chunk for every query, in a fixed arbitrary order (descending fake scores)."""
        mask = snapshot.allowed_mask(["staff"])
        assert mask is not None
        chunks = [c for i, c in enumerate(snapshot.chunks) if mask[i]]
        return Run(
            "candidates",
            {
                q: [
                    Hit(c.chunk_id, c.doc_id, float(len(chunks) - i), c.version) for i, c in enumerate(chunks)
                ]
                for q in snapshot.split_qids("dev")
            },
        )

    def prepared(self, snapshot: Snapshot, cache: Cache, **params: Any) -> Reranker:
        stage = self.bound(snapshot, **params)
        stage.prepare(StageContext(snapshot, cache))
        return stage

    def rerank(self, stage: Reranker, snapshot: Snapshot) -> Run:
        run = self.candidates(snapshot)
        return stage.rerank(run, {q.qid: q.text for q in snapshot.queries.values()}, snapshot.chunk_text)

    def test_is_a_named_reranker(self) -> None:
        stage = self.make()
        assert isinstance(stage, Reranker) and type(stage).kind == "reranker" and stage.name
        assert isinstance(stage.depth, int) and stage.depth >= 1

    def test_reorders_only_the_head_and_keeps_every_candidate(self, snapshot: Snapshot, cache: Cache) -> None:
        stage = self.prepared(snapshot, cache)
        before = self.candidates(snapshot)
        after = self.rerank(stage, snapshot)
        d = stage.depth
        for qid, hits in before.results.items():
            out = after.get(qid)
            assert sorted(h.chunk_id for h in out) == sorted(h.chunk_id for h in hits)
            assert {h.chunk_id for h in out[:d]} == {h.chunk_id for h in hits[:d]}
            assert [h.chunk_id for h in out[d:]] == [h.chunk_id for h in hits[d:]]
            assert out == rank_hits(out), f"query {qid}: not in (score desc, chunk id asc) order"
            for h in out:  # the chunk -> document mapping survives reranking
                assert h.doc_id == snapshot.chunk_to_doc[h.chunk_id]

    def test_ties_are_broken_by_chunk_id(self, snapshot: Snapshot, cache: Cache) -> None:
        """The identical passages lead the candidates, the later id first: reranked, they come out by id."""
        stage = self.prepared(snapshot, cache)
        assert stage.depth >= 2, "make() must give a depth of at least 2 (two tied candidates in the head)"
        c2d, ver = snapshot.chunk_to_doc, snapshot.chunk_version
        order = [TIED[1], TIED[0], *(c.chunk_id for c in snapshot.chunks if c.chunk_id not in TIED)]
        run = Run(
            "candidates", {"q3": [Hit(c, c2d[c], float(len(order) - i), ver[c]) for i, c in enumerate(order)]}
        )
        out = stage.rerank(run, {"q3": snapshot.queries["q3"].text}, snapshot.chunk_text).get("q3")
        tied = [h for h in out if h.chunk_id in TIED]
        assert [h.chunk_id for h in tied] == list(TIED), [(h.chunk_id, h.score) for h in tied]
        assert out == rank_hits(out)

    def test_deterministic(self, snapshot: Snapshot, cache: Cache, tmp_path: Path) -> None:
        a = self.rerank(self.prepared(snapshot, cache), snapshot)
        b = self.rerank(self.prepared(snapshot, Cache(tmp_path / "fresh")), snapshot)
        assert [(h.chunk_id, round(h.score, 5)) for h in a.get("q2")] == [
            (h.chunk_id, round(h.score, 5)) for h in b.get("q2")
        ]
        assert _hits(a).keys() == _hits(b).keys()


class FuserContract(_StageContract):
    """The contract of a fuser: the fused list holds only candidates of the inputs, ranked by the tie rule."""

    def inputs(self, snapshot: Snapshot) -> list[Run]:
        ids = [c.chunk_id for c in snapshot.chunks]
        c2d, ver = snapshot.chunk_to_doc, snapshot.chunk_version
        forward = Run("a", {"q": [Hit(c, c2d[c], float(9 - i), ver[c]) for i, c in enumerate(ids[:6])]})
        backward = Run(
            "b", {"q": [Hit(c, c2d[c], float(9 - i), ver[c]) for i, c in enumerate(ids[::-1][:6])]}
        )
        return [forward, backward]

    def test_is_a_named_fuser(self) -> None:
        stage = self.make()
        assert isinstance(stage, Fuser) and type(stage).kind == "fuser" and stage.name and stage.window >= 1

    def test_fuses_only_candidates_within_the_window_and_depth(self, snapshot: Snapshot) -> None:
        stage = self.make()
        runs = self.inputs(snapshot)
        out = stage.fuse(runs, 4).get("q")
        window = {h.chunk_id for r in runs for h in r.get("q")[: stage.window]}
        assert len(out) <= 4 and {h.chunk_id for h in out} <= window
        assert out == rank_hits(out)
        assert stage.fuse(runs, 4).get("q") == out  # deterministic

    def test_ties_are_broken_by_chunk_id(self, snapshot: Snapshot) -> None:
        """Two candidates that swap places across two lists (same scores, same ranks) come out by id, whichever list
        comes first: a fuser treats its lists alike, so they tie."""
        stage = self.make()
        assert stage.window >= 2, "make() must give a window of at least 2"
        c2d, ver = snapshot.chunk_to_doc, snapshot.chunk_version
        a, b = TIED
        first = Run("first", {"q": [Hit(b, c2d[b], 2.0, ver[b]), Hit(a, c2d[a], 1.0, ver[a])]})
        second = Run("second", {"q": [Hit(a, c2d[a], 2.0, ver[a]), Hit(b, c2d[b], 1.0, ver[b])]})
        for runs in ([first, second], [second, first]):
            out = stage.fuse(runs, 2).get("q")
            assert [h.chunk_id for h in out] == list(TIED), [(h.chunk_id, h.score) for h in out]


class GeneratorContract(_StageContract):
    """The contract of a generator: one answer per prompt (per repeat), deterministic when greedy, served from the
    cache the second time, regenerated when the template changes."""

    def prompts(self, stage: Any, snapshot: Snapshot) -> list[Any]:
        q = snapshot.queries["q1"]
        return [
            stage.template.render(q.text, ["Invoice INV-102 from Acme Ltd, amount 1,250 yuan, paid."]),
            stage.template.render("What is 2 + 2?", ["Two plus two is four."]),
        ]

    def test_is_a_named_generator(self) -> None:
        from ablate.stages.base import Generator

        stage = self.make()
        assert isinstance(stage, Generator) and type(stage).kind == "generator" and stage.name
        assert stage.context_k >= 1 and stage.repeats >= 1

    def test_generates_once_and_then_serves_the_cache(self, snapshot: Snapshot, tmp_path: Path) -> None:
        cache = Cache(tmp_path / "gen")
        stage = self.bound(snapshot)
        stage.prepare(StageContext(snapshot, cache))
        first = stage.generate(self.prompts(stage, snapshot), cache)
        assert [len(row) for row in first] == [stage.repeats, stage.repeats]
        assert all(isinstance(g.text, str) and g.tokens_in > 0 and not g.cached for row in first for g in row)
        again = self.bound(snapshot)
        again.prepare(StageContext(snapshot, cache))
        second = again.generate(self.prompts(again, snapshot), cache)
        assert all(g.cached for row in second for g in row) and again.stats["generated"] == 0
        assert [g.text for row in second for g in row] == [g.text for row in first for g in row]

    def test_deterministic_when_greedy(self, snapshot: Snapshot, tmp_path: Path) -> None:
        a = self.bound(snapshot)
        a.prepare(StageContext(snapshot, Cache(tmp_path / "a")))
        b = self.bound(snapshot)
        b.prepare(StageContext(snapshot, Cache(tmp_path / "b")))
        pa = a.generate(self.prompts(a, snapshot), Cache(tmp_path / "a"))
        pb = b.generate(self.prompts(b, snapshot), Cache(tmp_path / "b"))
        assert [g.text for row in pa for g in row] == [g.text for row in pb for g in row]
