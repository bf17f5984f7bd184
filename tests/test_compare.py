"""One-factor discipline: which differences between two runs are the studied factor, which are flagged, which refused."""

from __future__ import annotations

import json

import pytest

from ablate.errors import AblateError
from ablate.record import RecordedRun
from ablate.study.compare import (
    ComparisonRefused,
    check_comparison,
    describe_change,
    differing_components,
    norm_value,
    parse_factor,
)

STACKS = {
    "A": (["bm25"], "none", "none"),
    "B": (["dense"], "none", "none"),
    "C": (["bm25", "dense"], "rrf", "none"),
    "D": (["bm25", "dense"], "rrf", "rerank"),
    "oracle": (["oracle"], "none", "none"),
}
STAGE_PARAMS = {
    "bm25": {"k1": "0.9", "b": "0.4"},
    "dense": {"model": "all-MiniLM-L6-v2", "batch_size": "32"},
    "oracle": {"min_grade": "1"},
    "rrf": {"k": "60.0", "window": "100"},
    "rerank": {"model": "cross-encoder/ms-marco-MiniLM-L-6-v2", "depth": "20", "batch_size": "32"},
}
TRAIN = {"train.epochs": "1", "train.split": "train"}


def params_for(variant: str, **over: object) -> dict[str, str]:
    """Params as a run logs them (strings): only the stages that ran, each under its name."""
    retrievers, fuser, reranker = STACKS[variant]
    stages = [*retrievers, *(s for s in (fuser, reranker) if s != "none")]
    p = {
        "variant": variant,
        "pipeline.retrievers": json.dumps(retrievers),
        "pipeline.fuser": fuser,
        "pipeline.reranker": reranker,
        "eval.ks": "[1, 10]",
        "eval.gain": "exponential",
        "corpus.name": "demo",
        "corpus.path": "/somewhere/demo",
        "corpus.split": "dev",
        "corpus.identity": "employee",
        "stats.bootstrap": "1000",
    }
    for st in stages:
        p.update({f"{st}.{k}": v for k, v in STAGE_PARAMS[st].items()})
    overrides = {k.replace("__", "."): str(v) for k, v in over.items()}
    if "rerank" in stages and overrides.get("rerank.model", p.get("rerank.model")) == "trained":
        p.update({f"rerank.{k}": v for k, v in TRAIN.items()})
    for k, v in overrides.items():
        head = k.split(".")[0]
        if head in STAGE_PARAMS and head not in stages:
            continue  # a stage that did not run logs nothing
        if (
            k.startswith("rerank.train.")
            and p.get("rerank.model") != "trained"
            and overrides.get("rerank.model") != "trained"
        ):
            continue
        p[k] = v
    return p


def fingerprints(params: dict[str, str]) -> dict[str, str]:
    """Component fingerprints: one per stage that ran (over its params), plus snapshot, identity and eval."""
    stages = {k.split(".")[0] for k in params if k.split(".")[0] in STAGE_PARAMS}
    comps = {
        "snapshot": {"split": params["corpus.split"]},
        "identity": {"name": params["corpus.identity"]},
        "eval": {k: v for k, v in params.items() if k.startswith("eval.")},
    }
    for st in stages:
        comps[st] = {k: v for k, v in params.items() if k.startswith(f"{st}.")}
    return {k: json.dumps(v, sort_keys=True) for k, v in comps.items()}


def info(
    variant: str,
    name: str | None = None,
    qrels: str = "q" * 64,
    snapshot: str = "s" * 64,
    fp: dict[str, str] | None = None,
    corpus_files: str = "f" * 64,
    **over: object,
) -> RecordedRun:
    params = params_for(variant, **over)
    fps = {**fingerprints(params), **(fp or {})}
    tags = {
        "ablate.variant": variant,
        "ablate.index_snapshot": snapshot,
        "ablate.snapshot": corpus_files,
        "ablate.qrels_hash": qrels,
        "ablate.split": params["corpus.split"],
        **{f"ablate.fp.{k}": v for k, v in fps.items()},
    }
    return RecordedRun(
        run_id=(name or variant).ljust(32, "0"), name=name or variant, params=params, tags=tags
    )


def test_differing_components_missing_is_absent():
    assert differing_components({"bm25": "x", "eval": "e"}, {"bm25": "x", "eval": "e"}) == []
    assert differing_components({"bm25": "x", "eval": "e"}, {"dense": "y", "eval": "e"}) == ["bm25", "dense"]
    assert differing_components({"bm25": "x"}, {"bm25": "z"}) == ["bm25"]


def test_norm_value_and_parse_factor():
    assert norm_value("60") == norm_value("60.0") == norm_value(60)
    assert norm_value("null") is None and norm_value("True") is True and norm_value("false") is False
    assert norm_value('["bm25", "dense"]') == ("bm25", "dense")
    assert parse_factor("rrf.k, rrf.window,rrf.k") == ["rrf.k", "rrf.window"]
    assert parse_factor(["variant"]) == ["variant"] and parse_factor(None) == []


def test_variant_rows_are_one_declared_change():
    a = info("A")
    for v in ("B", "C", "D", "oracle"):
        chk = check_comparison(a, info(v), "variant")
        assert chk.ok and chk.flags == [] and not chk.refused, (v, chk)
    assert describe_change(a, info("B")) == "-bm25 +dense"
    assert describe_change(a, info("C")) == "+dense +rrf(k=60, window=100)"
    assert describe_change(a, info("D")).startswith("+dense +rrf(k=60, window=100) +rerank(")
    assert describe_change(a, info("A")) == "(no change)"


def test_the_llama_cpp_build_is_named_when_it_differs_and_kept_out_of_a_stage_summary():
    avx2, avx512 = "CPU : AVX2 = 1 | FMA = 1 |", "CPU : AVX2 = 1 | AVX512 = 1 |"
    added = describe_change(info("C"), info("D", rerank__build=avx2))
    assert added == "+rerank(model=cross-encoder/ms-marco-MiniLM-L-6-v2, depth=20)"
    other = describe_change(info("D", rerank__build=avx2), info("D", rerank__build=avx512))
    assert other == f"rerank.build {avx2}->{avx512}"


def test_second_factor_beyond_the_variant_is_flagged():
    chk = check_comparison(info("A"), info("C", bm25__k1=1.2), "variant")
    assert not chk.ok
    assert chk.flags == ["two factors changed: retrievers/fusion and bm25.k1"]
    assert chk.factors == ["retrievers/fusion", "bm25.k1"]
    assert chk.change == "+dense +rrf(k=60, window=100); bm25.k1 0.9->1.2"


def test_params_of_inactive_components_do_not_count():
    # B has no BM25, A has no fusion and no reranker: those settings cannot change their rankings
    assert check_comparison(info("A"), info("B", bm25__k1=1.2), "variant").ok
    assert check_comparison(info("A"), info("A", rrf__k=10, rerank__depth=5), None).ok
    # ... but the reranker's own settings are part of D's addition, and train.* matters only for a trained model
    assert check_comparison(info("A"), info("D", rerank__depth=50), "variant").ok
    assert check_comparison(info("D"), info("D", rerank__train__epochs=3), None).ok
    # switching to a trained model brings its training settings along: one factor
    chk = check_comparison(info("D"), info("D", rerank__model="trained", rerank__train__epochs=3), None)
    assert chk.factors == ["rerank.model"] and chk.ok
    chk = check_comparison(
        info("D", rerank__model="trained"), info("D", rerank__model="trained", rerank__train__epochs=3), None
    )
    assert chk.factors == ["rerank.train.epochs"] and chk.ok


def test_sweep_factor_and_extra_change():
    base = info("C", rrf__k=10)
    assert check_comparison(base, info("C", rrf__k=30, rrf__window=50), "rrf.k,rrf.window").ok
    chk = check_comparison(base, info("C", rrf__k=30, bm25__b=0.75), ["rrf.k"])
    assert chk.flags == ["two factors changed: rrf.k and bm25.b"]
    # only an unstudied param changed
    chk = check_comparison(base, info("C", rrf__k=10, bm25__b=0.75), ["rrf.k"])
    assert chk.flags == ["changed outside the studied factor (rrf.k): bm25.b"]
    # a variant change in a sweep that did not declare it is a factor too
    chk = check_comparison(base, info("D", rrf__k=30), ["rrf.k"])
    assert chk.flags == ["two factors changed: rrf.k and reranker"]


def test_no_declared_factor_allows_one_change():
    assert check_comparison(info("C"), info("C", rrf__k=30), None).ok
    chk = check_comparison(info("C"), info("C", rrf__k=30, eval__gain="linear"), None)
    assert chk.flags == ["two factors changed: eval.gain and rrf.k"]


def test_fingerprint_change_without_parameter_change_is_flagged():
    chk = check_comparison(info("C"), info("C", fp={"dense": "a-new-model-file"}), "variant")
    assert chk.flags == [
        "changed outside the studied factor (the variant): dense (fingerprint changed, same parameters)"
    ]
    # a component that only one run has is the variant's addition, not a hidden change
    assert check_comparison(info("A"), info("C", fp={"dense": "whatever"}), "variant").ok


def test_different_labels_or_documents_are_refused_unless_forced():
    a = info("A", qrels="1" * 64)
    c = info("C", qrels="2" * 64)
    with pytest.raises(ComparisonRefused) as e:
        check_comparison(a, c, "variant")
    msg = str(e.value)
    assert "1" * 64 in msg and "2" * 64 in msg and "--force" in msg
    assert isinstance(e.value, AblateError)
    chk = check_comparison(a, c, "variant", force=True)
    assert chk.refused and not chk.ok and chk.flags[0].startswith("FORCED: labels differ")

    with pytest.raises(ComparisonRefused, match="documents differ"):
        check_comparison(info("A", snapshot="x" * 64), info("C", snapshot="y" * 64), "variant")


def test_split_mismatch_is_flagged_not_refused():
    dev = info("A")
    test = info("C", qrels="t" * 64, corpus__split="test")
    chk = check_comparison(dev, test, "variant")
    assert not chk.refused and len(chk.flags) == 1
    assert chk.flags[0].startswith("SPLIT MIX") and "'test'" in chk.flags[0]
    train = info("C", qrels="r" * 64, corpus__split="train")
    assert check_comparison(dev, train, "variant").flags == [
        "split differs: 'train' vs the baseline's 'dev' (different queries)"
    ]


def test_chunker_change_is_a_factor_not_a_refusal():
    # the documents are the same (index snapshot); the chunker changes the corpus files' fingerprint only
    a2 = info("C", corpus__chunker='{"kind": "clause"}')
    b = info("C", name="x", corpus_files="g" * 64, corpus__chunker='{"kind": "paragraph"}')
    chk = check_comparison(a2, b, None)
    assert chk.ok and chk.factors == ["chunker"]
    # same params but other corpus files (e.g. queries.jsonl edited): flagged
    chk = check_comparison(info("C"), info("C", name="y", corpus_files="h" * 64), "variant")
    assert chk.factors == ["corpus files (fingerprint changed, same parameters)"]


def test_recorded_run_reads_its_tags():
    tags = {
        "ablate.variant": "C",
        "ablate.snapshot": "full",
        "ablate.index_snapshot": "docs",
        "ablate.qrels_hash": "qh",
        "ablate.split": "dev",
        "ablate.fp.bm25": "b",
        "ablate.fp.rrf": "f",
        "ablate.variant_order": "3",
        "ablate.param_sources": '{"retrieval.window": "rrf.window"}',
    }
    ri = RecordedRun(
        "r1",
        "C",
        params={"rrf.k": "60", "pipeline.retrievers": '["bm25"]', "pipeline.fuser": "rrf"},
        tags=tags,
    )
    assert ri.fingerprints == {"bm25": "b", "rrf": "f"}
    assert (ri.snapshot, ri.corpus_files, ri.qrels_hash, ri.split, ri.variant) == (
        "docs",
        "full",
        "qh",
        "dev",
        "C",
    )
    assert ri.stages == ["bm25", "rrf"] and ri.variant_order == 3.0
    assert ri.param_sources == {"retrieval.window": "rrf.window"}
    legacy = RecordedRun("r2", "A", params={"corpus.split": "dev"}, tags={"ablate.snapshot": "full"})
    assert (legacy.snapshot, legacy.split, legacy.variant, legacy.fingerprints) == ("full", "dev", "A", {})
    assert legacy.variant_order == float("inf")


def _dated(variant: str, policy: str, as_of: str = "per_query", **over: object) -> RecordedRun:
    """A run on dated questions: it logs corpus.as_of and versions.policy, and records both in the ``dates``
    component, as runner.pipeline.components_of does."""
    dates = json.dumps({"as_of": as_of, "versions_policy": policy}, sort_keys=True)
    run = info(variant, fp={"dates": dates}, **over)
    run.params.update({"corpus.as_of": as_of, "versions.policy": policy})
    return run


def test_a_version_policy_change_is_one_factor_with_the_dates_component_it_feeds():
    base = _dated("A", "all")
    chk = check_comparison(base, _dated("A", "in_force"), ["versions.policy"])
    assert chk.ok and chk.factors == ["versions.policy"], chk.flags
    assert check_comparison(base, _dated("A", "in_force"), None).ok
    assert check_comparison(base, _dated("A", "all", as_of="2026-04-15"), ["corpus.as_of"]).ok
    # a real second change is still flagged
    chk = check_comparison(base, _dated("A", "in_force", bm25__k1=1.2), ["versions.policy"])
    assert chk.flags == ["two factors changed: versions.policy and bm25.k1"]
    chk = check_comparison(base, _dated("A", "in_force", as_of="2026-04-15"), ["versions.policy"])
    assert chk.flags == ["two factors changed: versions.policy and corpus.as_of"]
    # the dates component changing with no setting to explain it is still its own factor
    other = _dated("A", "all")
    other.tags["ablate.fp.dates"] = "changed"
    chk = check_comparison(base, other, None)
    assert chk.factors == ["dates (fingerprint changed, same parameters)"]
