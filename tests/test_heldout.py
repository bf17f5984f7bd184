"""Held-out discipline: first test run registers, a changed configuration later warns and is tagged."""

from ablate.runner.heldout import PriorTestRun, config_fingerprint, judge_test_run


def test_config_fingerprint_ignores_the_split_only():
    comps = {"snapshot": {"fingerprint": "f", "split": "dev", "qrels": "h1"}, "bm25": {"k1": 0.9}}
    same = {"snapshot": {"fingerprint": "f", "split": "test", "qrels": "h2"}, "bm25": {"k1": 0.9}}
    other = {"snapshot": {"fingerprint": "f", "split": "test", "qrels": "h2"}, "bm25": {"k1": 1.2}}
    ev = {"ks": [10]}
    assert config_fingerprint(comps, ev) == config_fingerprint(same, ev)
    assert config_fingerprint(comps, ev) != config_fingerprint(other, ev)
    assert config_fingerprint(comps, ev) != config_fingerprint(comps, {"ks": [5]})


def test_verdicts():
    assert judge_test_run([], "c1", None).status == "first"
    sweep = [PriorTestRun("r1", "cA", "s1", 1), PriorTestRun("r2", "cB", "s1", 2)]
    # the rest of the first sweep is the same session
    assert judge_test_run(sweep[:1], "cB", "s1").status == "same-session"
    # later: a registered configuration is a repeat, a new one is reuse
    assert judge_test_run(sweep, "cB", None).status == "repeat"
    v = judge_test_run(sweep, "cC", "s2")
    assert v.status == "reuse" and v.previous == ["r1", "r2"] and "second dev set" in v.message
    assert v.tags()["ablate.test_reuse"] == "true"
    # a single first run registers only its own configuration
    single = [PriorTestRun("r1", "cA", None, 1)]
    assert judge_test_run(single, "cA", None).status == "repeat"
    assert judge_test_run(single, "cB", None).status == "reuse"
