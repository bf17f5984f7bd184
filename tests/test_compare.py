"""One-factor discipline: which differences between two runs are the studied factor, which are flagged, which refused."""

from __future__ import annotations

import json

import pytest

from ablate.study.compare import (
    ComparisonRefused,
    RunInfo,
    check_comparison,
    describe_change,
    differing_components,
    norm_value,
    parse_factor,
)
from ablate.errors import AblateError

STACKS = {
    "A": (["bm25"], "none", False),
    "B": (["dense"], "none", False),
    "C": (["bm25", "dense"], "rrf", False),
    "D": (["bm25", "dense"], "rrf", True),
    "oracle": (["oracle"], "none", False),
}


def params_for(variant: str, **over: object) -> dict[str, str]:
    """Flattened params as MLflow stores them (strings), like ``run_job`` logs them."""
    retrievers, fusion, rerank = STACKS[variant]
    p = {
        "variant": variant,
        "variant.name": variant,
        "variant.description": f"variant {variant}",
        "retrieval.retrievers": json.dumps(retrievers),
        "retrieval.window": "100",
        "retrieval.cache_depth": "100",
        "fusion.method": fusion,
        "rrf.k": "60",
        "rerank.enabled": str(rerank),
        "rerank.depth": "20",
        "rerank.model": "cross-encoder/ms-marco-MiniLM-L-6-v2",
        "rerank.train.epochs": "1",
        "bm25.k1": "0.9",
        "bm25.b": "0.4",
        "dense.model": "all-MiniLM-L6-v2",
        "eval.ks": "[1, 10]",
        "eval.gain": "exponential",
        "corpus.name": "demo",
        "corpus.path": "/somewhere/demo",
        "corpus.split": "dev",
        "corpus.identity": "employee",
        "stats.bootstrap": "1000",
        "tracking.uri": "null",
        "progress": "True",
    }
    p.update({k.replace("__", "."): str(v) for k, v in over.items()})
    return p


def fingerprints(params: dict[str, str]) -> dict[str, str]:
    """Component fingerprints the way ``cli.component_tags`` derives them: one per active component."""
    retr = json.loads(params["retrieval.retrievers"])
    comps = {
        "snapshot": {"split": params["corpus.split"]},
        "identity": {"name": params["corpus.identity"]},
        "eval": {k: v for k, v in params.items() if k.startswith("eval.")},
    }
    for r in retr:
        comps[r] = {k: v for k, v in params.items() if k.startswith(f"{r}.")}
    comps["fusion"] = (
        {"method": "rrf", "k": params["rrf.k"], "window": params["retrieval.window"]}
        if params["fusion.method"] == "rrf"
        else {"method": "none"}
    )
    if params["rerank.enabled"] == "True":
        comps["reranker"] = {k: v for k, v in params.items() if k.startswith("rerank.")}
    return {k: json.dumps(v, sort_keys=True) for k, v in comps.items()}


def info(
    variant: str,
    name: str | None = None,
    qrels: str = "q" * 64,
    snapshot: str = "s" * 64,
    fp: dict[str, str] | None = None,
    **over: object,
) -> RunInfo:
    params = params_for(variant, **over)
    return RunInfo(
        run_id=(name or variant).ljust(32, "0"),
        name=name or variant,
        variant=variant,
        params=params,
        components={**fingerprints(params), **(fp or {})},
        snapshot=snapshot,
        qrels_hash=qrels,
        split=params["corpus.split"],
        corpus_files="f" * 64,
    )


def test_differing_components_missing_is_absent():
    assert differing_components({"bm25": "x", "eval": "e"}, {"bm25": "x", "eval": "e"}) == []
    assert differing_components({"bm25": "x", "eval": "e"}, {"dense": "y", "eval": "e"}) == ["bm25", "dense"]
    assert differing_components({"bm25": "x"}, {"bm25": "z"}) == ["bm25"]


def test_norm_value_and_parse_factor():
    assert norm_value("60") == norm_value("60.0") == norm_value(60)
    assert norm_value("null") is None and norm_value("True") is True and norm_value("false") is False
    assert norm_value('["bm25", "dense"]') == ("bm25", "dense")
    assert parse_factor("rrf.k, retrieval.window,rrf.k") == ["rrf.k", "retrieval.window"]
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
    assert check_comparison(base, info("C", rrf__k=30, retrieval__window=50), "rrf.k,retrieval.window").ok
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
    a = info("C")
    b = RunInfo(
        **{
            **a.__dict__,
            "run_id": "x" * 32,
            "params": {**a.params, "corpus.chunker.kind": "paragraph"},
            "corpus_files": "g" * 64,
        }
    )
    a2 = RunInfo(**{**a.__dict__, "params": {**a.params, "corpus.chunker.kind": "clause"}})
    chk = check_comparison(a2, b, None)
    assert chk.ok and chk.factors == ["corpus.chunker.kind"]
    # same params but other corpus files (e.g. queries.jsonl edited): flagged
    c = RunInfo(**{**a.__dict__, "run_id": "y" * 32, "corpus_files": "h" * 64})
    chk = check_comparison(a, c, "variant")
    assert chk.factors == ["corpus files (fingerprint changed, same parameters)"]


def test_run_info_from_tags():
    tags = {
        "ablate.variant": "C",
        "ablate.snapshot": "full",
        "ablate.index_snapshot": "docs",
        "ablate.qrels_hash": "qh",
        "ablate.split": "dev",
        "ablate.fp.bm25": "b",
        "ablate.fp.fusion": "f",
    }
    ri = RunInfo.from_run("r1", "C", {"rrf.k": "60"}, tags)
    assert ri.components == {"bm25": "b", "fusion": "f"}
    assert (ri.snapshot, ri.corpus_files, ri.qrels_hash, ri.split, ri.variant) == (
        "docs",
        "full",
        "qh",
        "dev",
        "C",
    )
    legacy = RunInfo.from_run("r2", "A", {"corpus.split": "dev"}, {"ablate.snapshot": "full"})
    assert (
        legacy.snapshot == "full"
        and legacy.split == "dev"
        and legacy.variant == "A"
        and legacy.components == {}
    )
