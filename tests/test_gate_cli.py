"""``python -m ablate.gate`` on real runs of the demo in a real MLflow sqlite store: its interval is the decision's on
the per-question values each run logged (read here independently from the runs' per_query.csv), its exit codes follow
the outcome, a run against itself passes, a TREC run file written from a run's ranking scores the per-question values
the run logged (the one scoring function), a run file and a run gate as the two runs do, the console names what
changed and where a broken question's evidence went, the summary is Markdown, and bad input is one line with exit 2.
The answer metrics of runs with a generator (SmolLM2) are gated the same way (slow)."""

from __future__ import annotations

import json
import math
import random
import re
import sqlite3

import mlflow
import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from ablate.app import gate as G
from ablate.app.gate_sides import load_corpus, score_file
from conftest import TINY_DOCS, TINY_MANIFEST, TINY_QRELS, TINY_QUERIES, write_corpus
from demo_cli import demo_folder, run_module


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Two runs of C: the default and rrf.k=1 with a 5-result fusion window."""
    root = demo_folder(tmp_path_factory.mktemp("gate"))
    for extra in ([], ["rrf.k=1", "retrieval.window=5"]):
        p = run_module(["ablate", "variant=C", "tracking.experiment=gate", *extra], root)
        assert p.returncode == 0, p.stderr
    con = sqlite3.connect(root / "mlflow.db")
    (base,), (cand,) = con.execute("select run_uuid from runs order by start_time").fetchall()
    return root, base, cand


def _artifact(root, run_id: str, name: str):
    mlflow.set_tracking_uri(f"sqlite:///{root / 'mlflow.db'}")
    return mlflow.artifacts.download_artifacts(
        run_id=run_id, artifact_path=name, dst_path=str(root / "dl" / run_id)
    )


def _logged(root, run_id: str) -> pd.DataFrame:
    path = _artifact(root, run_id, "per_query.csv")
    return pd.read_csv(path, dtype={"qid": str, "tags": str, "persona": str, "as_of": str}).set_index("qid")


def _answerable(root, run_id: str, metric: str) -> pd.Series:
    pq = _logged(root, run_id)
    return pq.loc[pq["category"] == "answerable", metric].dropna()


def _trec_of(root, run_id: str, out) -> None:
    """The run's ranking written as a TREC file of our own: its lines shuffled, ranks renumbered, another tag (the
    rank column and the line order carry nothing: results are ordered by score)."""
    rows = [
        line.split() for line in open(_artifact(root, run_id, "run.trec"), encoding="utf-8") if line.strip()
    ]
    random.Random(7).shuffle(rows)
    out.write_text(
        "".join(f"{q}\tQ0\t{d}\t{i}\t{s}\tmine\n" for i, (q, _, d, _, s, _) in enumerate(rows, 1)),
        encoding="utf-8",
    )


def test_the_verdict_is_the_paired_interval_of_the_runs_logged_values(store):
    root, base, cand = store
    p = run_module(
        ["ablate.gate", "--baseline", base, "--candidate", cand, "--metric", "ndcg@10", "--margin", "0.02",
         "--cluster", "none", "--json", "--summary", "summary.md"],
        root,
    )  # fmt: skip
    got = json.loads(p.stdout)
    b, c = _answerable(root, base, "ndcg@10"), _answerable(root, cand, "ndcg@10")
    assert sorted(b.index) == sorted(c.index) and got["n_questions"] == len(b) == got["n_clusters"]
    ci = stats.ttest_rel(c.sort_index(), b.sort_index()).confidence_interval(0.90)
    assert math.isclose(got["low"], ci.low, abs_tol=1e-9) and math.isclose(got["high"], ci.high, abs_tol=1e-9)
    want = "pass" if got["low"] > -0.02 else ("regression" if got["high"] < 0 else "inconclusive")
    assert got["outcome"] == want and p.returncode == {"pass": 0, "regression": 1, "inconclusive": 3}[want]
    assert (got["baseline"], got["candidate"], got["metric"]) == (base, cand, "ndcg@10")
    assert got["level_noninferior"] == got["level_regression"] == got["alpha"] == 0.05
    # the summary is Markdown: a heading with the status word, the verdict line, a table row per metric
    summary = (root / "summary.md").read_text(encoding="utf-8").splitlines()
    assert summary[0] == f"### Regression gate: {want.upper()}" and "```" not in "\n".join(summary)
    assert summary[2].startswith(f"**{want.upper()}**") and "ndcg@10" in summary[2]
    header = summary.index(
        "| metric | outcome | Δ | interval | margin | n | G | level (non-inferior / regression) |"
    )
    row = summary[header + 2].split(" | ")
    assert row[0] == "| ndcg@10" and row[2] == f"{got['delta']:+.3f}" and row[5:7] == [str(len(b))] * 2


def test_evidence_clusters_are_the_split_tools_and_a_run_against_itself_passes(store):
    root, base, cand = store
    p = run_module(["ablate.gate", "--baseline", base, "--candidate", cand, "--metric", "ndcg@10", "--margin", "0.02",
                    "--json"], root)  # fmt: skip
    got = json.loads(p.stdout)
    assert got["n_clusters"] < got["n_questions"] and len(set(got["groups"].values())) == got["n_clusters"]
    same = run_module(["ablate.gate", "--baseline", base, "--candidate", base, "--metric", "ndcg@10",
                       "--margin", "0.02"], root)  # fmt: skip
    assert same.returncode == 0, same.stderr
    first = same.stdout.splitlines()[0]
    assert first.startswith("PASS ndcg@10 Δ +0.000 [+0.000, +0.000] margin 0.02, 17 questions in "), first


def test_the_console_names_what_changed_and_where_broken_questions_went(store, monkeypatch, capsys):
    root, base, cand = store
    argv = ["--baseline", base, "--candidate", cand, "--metric", "ndcg@10", "--margin", "0.02"]
    _, stdout = _gate(root, monkeypatch, capsys, argv, out=True)
    lines = stdout.splitlines()
    assert lines[0].startswith(("PASS", "REGRESSION", "INCONCLUSIVE")) and " ndcg@10 Δ " in lines[0]
    assert lines[1] == "  run C against run C: rrf.k 60->1, rrf.window 100->5", lines[1]
    (broke,) = [x for x in lines if x.startswith("  broke most: ")]
    b, c = _logged(root, base), _logged(root, cand)
    items = re.findall(r"(\S+) ([+-]\d\.\d{3}) \[([^\]]+)\]", broke)
    assert len(items) == broke.count(", ") + 1 > 0  # every broken question named with its stage
    for qid, delta, where in items:
        assert math.isclose(float(delta), c.loc[qid, "ndcg@10"] - b.loc[qid, "ndcg@10"], abs_tol=5e-4)
        if c.loc[qid, "hit@10"] == 1:  # the evidence is still in the first 10: the stage whose list got worse
            assert where.startswith(("fewer relevant from ", "ranked lower from ", "evidence still in")), (
                where
            )
        else:  # lost: the stage after the last list holding it (the report's per-question rule)
            assert b.loc[qid, "hit@10"] == 1
            assert where.startswith(("lost at ", "candidates below ")) or where == "not retrieved", where


def test_a_run_file_scores_the_values_the_run_logged(store, tmp_path, monkeypatch):
    """The run's own ranking as a TREC file, scored on --corpus demo, gives back every per-question value the run
    logged (the one scoring function and the run's per-question table)."""
    root, base, _ = store
    path = tmp_path / "base.trec"
    _trec_of(root, base, path)
    monkeypatch.chdir(root)
    mine = score_file(path, load_corpus("demo", []))
    logged = _logged(root, base)
    assert list(mine.index) == list(logged.index) and list(mine.columns) == list(logged.columns)
    for col in logged.columns:
        if pd.api.types.is_numeric_dtype(logged[col]):
            assert np.allclose(mine[col].astype(float), logged[col], rtol=0, atol=1e-12, equal_nan=True), col
        else:
            assert mine[col].fillna("").astype(str).tolist() == logged[col].fillna("").astype(str).tolist(), (
                col
            )


def test_run_files_gate_as_their_runs_and_holm_levels_are_printed(store, tmp_path, monkeypatch, capsys):
    """A file against a run and a file against a file decide as the two runs do (the same values, the same clusters
    from the corpus); two metrics are held to the levels Holm's step-down gives them."""
    root, base, cand = store
    b_file, c_file = str(tmp_path / "base.trec"), str(tmp_path / "cand.trec")
    _trec_of(root, base, tmp_path / "base.trec")
    _trec_of(root, cand, tmp_path / "cand.trec")
    common = ["--metric", "ndcg@10", "--metric", "recall@5", "--margin", "0.02", "--json"]
    got = [
        _gate(root, monkeypatch, capsys, [*sides, *common], out=True)
        for sides in (
            ["--baseline", base, "--candidate", cand],
            ["--baseline", b_file, "--candidate", cand, "--corpus", "demo"],
            ["--baseline", b_file, "--candidate", c_file, "--corpus", "demo"],
        )
    ]
    assert len({code for code, _ in got}) == 1
    by_runs, by_mixed, by_files = (json.loads(out) for _, out in got)
    keys = ("outcome", "n_questions", "n_clusters", "groups", "level_noninferior", "level_regression")
    for a, m, f in zip(by_runs, by_mixed, by_files, strict=True):
        assert all(a[k] == m[k] == f[k] for k in keys)
        for k in ("delta", "low", "high", "p_noninferior", "p_regression"):
            assert math.isclose(a[k], m[k], abs_tol=1e-12) and math.isclose(a[k], f[k], abs_tol=1e-12)
    assert (by_mixed[0]["baseline"], by_mixed[0]["candidate"]) == (str(tmp_path / "base.trec"), cand)
    p_ni = [r["p_noninferior"] for r in by_runs]
    reject, adjusted, _, _ = multipletests(p_ni, alpha=0.05, method="holm")
    assert [r["outcome"] == "pass" for r in by_runs] == list(reject)
    assert np.allclose([r["p_noninferior_holm"] for r in by_runs], adjusted, rtol=0, atol=1e-12)
    assert sorted(r["level_noninferior"] for r in by_runs)[0] == 0.025


@pytest.fixture(scope="module")
def own(tmp_path_factory):
    """A corpus of one's own (a folder with one labels file: an exploratory pilot) and a BM25 run on it."""
    root = tmp_path_factory.mktemp("gate-own")
    queries = [{k: v for k, v in q.items() if k != "split"} for q in TINY_QUERIES]
    labels = [row for rows in TINY_QRELS.values() for row in rows]
    corpus = write_corpus(root / "mine", TINY_DOCS, queries, {"labels": labels}, TINY_MANIFEST)
    p = run_module(
        ["ablate", "corpus=beir", f"corpus.path={corpus}", "variant=A", "tracking.experiment=own"], root
    )
    assert p.returncode == 0, p.stderr[-3000:]
    (run,) = sqlite3.connect(root / "mlflow.db").execute("select run_uuid from runs").fetchall()
    return root, corpus, run[0]


def test_a_run_file_on_a_corpus_folder_of_ones_own_scores_as_its_run(own, tmp_path, monkeypatch, capsys):
    root, corpus, run = own
    path = tmp_path / "mine.trec"
    _trec_of(root, run, path)
    argv = ["--baseline", str(path), "--candidate", run, "--corpus", str(corpus), "--metric", "ndcg@10"]
    code, out = _gate(
        root, monkeypatch, capsys, [*argv, "--margin", "0", "--cluster", "none", "--json"], out=True
    )
    got = json.loads(out)
    logged = _answerable(root, run, "ndcg@10")
    assert got["n_questions"] == len(logged) == 4 and sorted(got["groups"]) == sorted(logged.index)
    assert (got["delta"], got["low"], got["high"]) == (0.0, 0.0, 0.0) and got["label_version"] == "tiny-v1"
    assert code == 3 and got["outcome"] == "inconclusive"  # no drop at all, and none accepted: not a pass
    mine = score_file(path, load_corpus(str(corpus), []))
    assert np.allclose(mine.loc[logged.index, "ndcg@10"], logged, rtol=0, atol=1e-12)


def _gate(root, monkeypatch, capsys, argv: list[str], out: bool = False) -> tuple[int, str]:
    """The command's own entry point in this process (the same code as python -m ablate.gate, without a new
    interpreter per call): its exit code and its stderr (``out``: its stdout)."""
    monkeypatch.chdir(root)
    capsys.readouterr()  # what the test printed before (MLflow's download progress)
    code = G.main([*argv, "--tracking-uri", f"sqlite:///{root / 'mlflow.db'}"])
    got = capsys.readouterr()
    return code, got.out if out else got.err


def _with_line(src, dst, line: int, text: str) -> None:
    rows = src.read_text(encoding="utf-8").splitlines(keepends=True)
    rows.insert(line - 1, text + "\n")
    dst.write_text("".join(rows), encoding="utf-8")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--baseline", "{file}", "--candidate", "{base}"], "--baseline '{file}' is a run file: it is scored on a "),
        (["--baseline", "{file}", "--candidate", "{base}", "--corpus", "nope"], "--corpus 'nope': no corpus config"),
        (["--baseline", "{file}", "--candidate", "{base}", "--corpus", "demo", "corpus.identity=null"],
         "was scored with corpus.identity=per_query, --corpus demo corpus.identity=null scores with "
         "corpus.identity=null. Fix: add corpus.identity=per_query after --corpus"),
        (["--baseline", "{file}", "--candidate", "{base}", "--corpus", "demo", "eval.relevance_level=2"],
         "was scored with eval.relevance_level=1"),
        (["--baseline", "{file}", "--candidate", "{base}", "--corpus", "demo", "corpus.chunker.kind=tokens"],
         "stands on corpus snapshot"),
        (["--baseline", "{file}", "--candidate", "{base}", "--corpus", "demo", "--metric", "answer_f1"],
         "--metric 'answer_f1': file {file} has no such per-question value (a run file holds a ranking"),
        (["--baseline", "{base}", "--candidate", "{base}", "corpus.split=test"], "settings go with --corpus NAME"),
        (["--baseline", "{base}", "--candidate", "{base}", "--metric", "rr@10", "--metric", "rr@10"],
         "--metric 'rr@10' is given twice"),
        (["--baseline", "runs/none.trec", "--candidate", "{base}"], "--baseline 'runs/none.trec': no such file"),
        (["--baseline", "{bad:40:q030 Q0 X 1}", "--candidate", "{base}", "--corpus", "demo"],
         "{bad}:40: expected 6 fields"),
        (["--baseline", "{bad:40:q999 Q0 INV-120#header 1 3.0 x}", "--candidate", "{base}", "--corpus", "demo"],
         "{bad}:40: question 'q999' is not a question of demo"),
        (["--baseline", "{bad:40:q001 Q0 INV-120#header 1 3.0 x}", "--candidate", "{base}", "--corpus", "demo"],
         "{bad}:40: question 'q001' is not in split 'dev' of demo (it is in 'train'). Fix: name the split the file "
         "ranks: add corpus.split=train after --corpus"),
        (["--baseline", "{bad:40:q030 Q0 NOPE#1 1 3.0 x}", "--candidate", "{base}", "--corpus", "demo"],
         "{bad}:40: result 'NOPE#1' is not a chunk of demo"),
        (["--baseline", "{file}", "--candidate", "{base}", "--corpus", "demo", "corpus.split=test"],
         "ran split 'dev', --corpus demo corpus.split=test scores split 'test'. Fix: add corpus.split=dev after"),
        (["--baseline", "{file}", "--candidate", "{file}", "--corpus", "demo", "corpus.split=test"],
         "{file}:1: question '…' is not in split 'test' of demo (it is in 'dev'). Fix: name the split the file ranks: "
         "add corpus.split=dev after --corpus"),
        (["--baseline", "{base}", "--candidate", "{base}", "--summary", "/nonexistent/s.md"],
         "--summary /nonexistent/s.md: cannot be written"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(store, tmp_path, monkeypatch, capsys, args, needle):
    root, base, _ = store
    good = tmp_path / "base.trec"
    _trec_of(root, base, good)
    full, bad = [], None
    for a in args:
        if a.startswith("{bad:"):
            line, text = a[5:-1].split(":", 1)
            bad = tmp_path / "bad.trec"
            _with_line(good, bad, int(line), text)
            a = str(bad)
        full.append(a.replace("{base}", base).replace("{file}", str(good)))
    for flag, value in (("--metric", "ndcg@10"), ("--margin", "0.02")):
        if flag not in full:
            full += [flag, value]
    code, err = _gate(root, monkeypatch, capsys, full)
    want = needle.replace("{file}", str(good)).replace("{bad}", str(bad))
    assert code == 2 and err.count("\n") == 1 and all(part in err for part in want.split("…")), err


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--baseline", "nope", "--candidate", "{base}"], "--baseline 'nope': no run with this id or name"),
        (
            ["--baseline", "{base}", "--candidate", "{base}", "--metric", "ndcg@7"],
            "--metric 'ndcg@7': run C has no",
        ),
        (["--baseline", "{base}", "--candidate", "{base}", "--margin", "-1"], "--margin -1.0 is not valid"),
    ],
)
def test_bad_input_through_the_interpreter_is_one_line_and_exit_2(store, args, needle):
    root, base, _ = store
    full = [a.replace("{base}", base) for a in args]
    if "--metric" not in full:
        full += ["--metric", "ndcg@10"]
    if "--margin" not in full:
        full += ["--margin", "0.02"]
    p = run_module(["ablate.gate", *full], root)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and needle in p.stderr, p.stderr


# -- answer metrics: runs with a generator ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def answering(tmp_path_factory):
    """A and C answering with the small shipped llama.cpp model (SmolLM2), three passages, short answers."""
    root = demo_folder(tmp_path_factory.mktemp("gate-answers"))
    p = run_module(
        ["ablate", "-m", "variant=A,C", "generator=llama_cpp", "generator.model=smollm2-135m-instruct",
         "generator.max_tokens=32", "generator.context_k=3", "tracking.experiment=gate-answers", "progress=false"],
        root,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    con = sqlite3.connect(root / "mlflow.db")
    ids = dict(con.execute("select name, run_uuid from runs where name in ('A', 'C')").fetchall())
    return root, ids["A"], ids["C"]


@pytest.mark.slow  # two demo runs answering 20 questions each with SmolLM2 (~3-4 min): make test-slow
def test_answer_metrics_are_gated_on_the_questions_both_sides_score(answering):
    """answer_correct and answer_f1 beside ndcg@10: each on the answerable questions with a value on both sides
    (the no-answer questions, NaN in per_query.csv, are left out of both), paired t intervals at the levels Holm's
    step-down over the three metrics gives, as scipy's one-sided paired t tests and statsmodels' Holm decide."""
    root, base, cand = answering
    metrics = ["ndcg@10", "answer_correct", "answer_f1"]
    p = run_module(["ablate.gate", "--baseline", base, "--candidate", cand, "--margin", "0.02", "--cluster", "none",
                    "--json", *(x for m in metrics for x in ("--metric", m))], root)  # fmt: skip
    got = {r["metric"]: r for r in json.loads(p.stdout)}
    b_all, c_all = _logged(root, base), _logged(root, cand)
    p_ni, p_reg = [], []
    for m in metrics:
        b, c = _answerable(root, base, m), _answerable(root, cand, m)
        assert sorted(b.index) == sorted(c.index) == sorted(got[m]["groups"])
        nan = b_all.index[b_all[m].isna()]
        assert len(nan) > 0 and not set(nan) & set(got[m]["groups"])  # no-answer questions: on neither side
        assert set(nan) == set(c_all.index[c_all[m].isna()])
        b, c = b.sort_index(), c.sort_index()
        r = got[m]
        assert r["n_questions"] == len(b) and r["questions_left_out"] == 0
        if (c - b).nunique() == 1:  # no spread: scipy's t is undefined; the gate's interval is the one value
            assert r["low"] == r["high"] == r["delta"] == (c - b).iloc[0]
            p_ni.append(r["p_noninferior"]), p_reg.append(r["p_regression"])
            continue
        p_ni.append(stats.ttest_rel(c + 0.02, b, alternative="greater").pvalue)
        p_reg.append(stats.ttest_rel(c, b, alternative="less").pvalue)
        low = stats.ttest_rel(c, b).confidence_interval(1 - 2 * r["level_noninferior"]).low
        high = stats.ttest_rel(c, b).confidence_interval(1 - 2 * r["level_regression"]).high
        assert math.isclose(r["low"], low, abs_tol=1e-9) and math.isclose(r["high"], high, abs_tol=1e-9)
        assert math.isclose(r["p_noninferior"], p_ni[-1], abs_tol=1e-12)
        assert math.isclose(r["p_regression"], p_reg[-1], abs_tol=1e-12)
    ni, _, _, _ = multipletests(p_ni, alpha=0.05, method="holm")
    reg, _, _, _ = multipletests(p_reg, alpha=0.05, method="holm")
    for i, m in enumerate(metrics):
        assert got[m]["outcome"] == ("pass" if ni[i] else ("regression" if reg[i] else "inconclusive"))
    codes = {got[m]["exit_code"] for m in metrics}
    assert p.returncode == (1 if 1 in codes else (3 if 3 in codes else 0))


def test_the_summary_is_appended_to_as_a_job_summary_is(store, tmp_path, capsys):
    """Two gates in one CI step write one job summary: the second appends, the first stays."""
    root, base, cand = store
    summary = tmp_path / "step_summary.md"
    summary.write_text("## earlier step\n", encoding="utf-8")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    for pair in ((base, cand), (base, base)):
        code = G.main(["--baseline", pair[0], "--candidate", pair[1], "--metric", "ndcg@10", "--margin", "0.02",
                       "--tracking-uri", uri, "--summary", str(summary)])  # fmt: skip
        assert code in (0, 1, 3)
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("## earlier step\n") and text.count("### Regression gate: ") == 2
    assert text.rsplit("### Regression gate: ", 1)[1].startswith("PASS")  # the run against itself, last
    capsys.readouterr()


def test_a_failure_of_the_gate_itself_is_never_exit_1(monkeypatch, capsys):
    """Exit 1 fails a build as a regression; the gate's own failure is 4, in one line without a traceback."""

    def broken(args):
        raise RuntimeError("boom")

    monkeypatch.setattr(G, "_run", broken)
    code = G.main(["--baseline", "a", "--candidate", "b", "--metric", "ndcg@10", "--margin", "0.02"])
    err = capsys.readouterr().err
    assert code == 4 and "boom" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
