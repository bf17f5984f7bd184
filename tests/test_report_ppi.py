"""Prediction-powered figures in ``python -m ablate.report --parent SWEEP --labels V``: a real demo sweep (variant=A,C
through the entry point, a real MLflow sqlite store) whose generator and LLM answer judge (``answer.judge=llm``) is an
OpenAI-compatible server on 127.0.0.1 (a fake model: nothing to download), pooled with ``python -m ablate.label
pool``, a random human sample drawn with ``python -m ablate.label sample`` (relevance and answers), an ``llm:``
assessor's judgements of every pooled pair (biased toward relevant) and people's checks of the sampled questions
written to the journals, committed with ``python -m ablate.label commit``.

Every PPI figure the report prints and puts in ``--json`` equals ``ppi_py.ppi_mean_pointestimate`` /
``ppi_py.ppi_mean_ci`` (default power tuning) on Y, Ŷ, Ŷu rebuilt here independently, to 1e-6: per question with
pytrec_eval from each run's run.trec and the version's two qrels files (headline and ``assessor/``), the checked
questions from ``version.json`` and ``judged.csv``, answer correctness from the runs' answers.csv and the grades this
test wrote. A version without a random sample and one whose sample was picked by hand get no figure (``"ppi":
null``), exit 0 and one line each; re-scores are reused only for a version's whole content (an edited assessor view
is re-scored)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import pytrec_eval
from werkzeug.wrappers import Request, Response

from ablate.data.labelsets import read_label_version
from ablate.evaluation.stats.ppi import _ppi_py
from ablate.labels import journal, poolfile
from ablate.labels.kind import ANSWERS, RELEVANCE, answer_sha256
from ablate.labels.workspace import Workspace
from ablate.runner.relabel import labels_sha
from ablate.tracking import Tracker
from conftest import serving
from inprocess import run_module
from labels_loop import SWEEP, cli, read_beir

EXP = "ppi"
LLM = "llm:fake-assessor@0123456789ab+cafebabe+f00d00"
METRICS = ("ndcg@10", "recall@10", "mrr@10")
TOL = 1e-6


def _h(*parts: str) -> int:
    return int(hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest(), 16)


def _fake_openai():
    """A chat-completions endpoint: a short answer to a generation prompt, a grade to the answer judge's."""

    @Request.application
    def app(request: Request) -> Response:
        text = "\n".join(m["content"] for m in json.loads(request.get_data())["messages"])
        if "Answer to grade:" in text:  # the answer judge's template
            out = f"Conclusion: x\nGrade: {'correct' if _h(text) % 3 else 'wrong'}\nRationale: a fake judge."
        else:
            out = f"The passages say so [1].\nAnswer: thing {_h(text) % 4}"
        body = {
            "choices": [{"message": {"role": "assistant", "content": out}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
        }
        return Response(json.dumps(body), mimetype="application/json")

    return app


def _label(args: list[str], cwd: Path) -> str:
    p = run_module("ablate.label", args, cwd=cwd, env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


def _human_grade(q: str, u: str) -> int:
    return 1 if _h(q, u) % 4 == 0 else 0


def _llm_grade(q: str, u: str) -> int:
    """Every pair people call relevant, and a third of the others: an assessor biased toward relevant."""
    return 1 if _h(q, u) % 4 in (0, 1) else 0


def _report(ppi: dict, version: str, labels_dir: Path, *extra: str) -> tuple[list[dict] | None, object]:
    cwd = ppi["cwd"]
    out = cwd / f"out-{version}-{len(list(cwd.glob('out-*')))}"
    args = ["--parent", ppi["parent"], "--labels", version, "--labels-dir", str(labels_dir)]
    args += [
        "--tracking-uri",
        ppi["uri"],
        "--out",
        str(out),
        "--resamples",
        "200",
        "--metrics",
        ",".join(METRICS),
    ]
    p = cli("ablate.report", [*args, *extra], cwd)
    assert p.returncode == 0, p.stderr[-3000:]
    return (json.loads(p.stdout) if "--json" in extra else None), p


@pytest.fixture(scope="module")
def ppi(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("ppi")
    uri = f"sqlite:///{cwd}/m.db"
    with serving(_fake_openai()) as url:
        gen = ["generator=openai", f"generator.base_url={url}/v1", "answer.judge=llm"]
        p = cli(
            "ablate",
            ["-m", "variant=A,C", *SWEEP, *gen, f"tracking.uri={uri}", f"tracking.experiment={EXP}"],
            cwd,
        )
    assert p.returncode == 0, p.stderr[-3000:]
    t = Tracker(uri)
    (parent,) = [r for r in t.find_runs([t.experiment_id(EXP, create=False)]) if r.tags.get("ablate.role")]
    labels = cwd / "labels"
    ws = Workspace(labels, "demo")

    # relevance: pool, draw 10 questions, an LLM judges every pooled pair, people check the sampled ones
    _label(["pool", "--parent", parent.run_id, "--tracking-uri", uri], cwd)
    (pool,) = sorted((ws.dir / RELEVANCE.pools).glob("*.tsv"))
    _label(["sample", "--pool", str(pool), "--questions", "10", "--seed", "0"], cwd)
    sample = json.loads((ws.dir / RELEVANCE.sample).read_text(encoding="utf-8"))["questions"]
    pairs = poolfile.read(pool).pairs
    lines = [journal.judgement(q, u, _llm_grade(q, u), LLM, pool.stem) for q, u in pairs]
    sampled = [(q, u) for q, u in pairs if q in sample]
    half = sorted({q for q, _ in sampled})[0]  # one sampled question people check only in part: not checked
    half_pairs = [pair for pair in sampled if pair[0] == half]
    assert len(half_pairs) >= 2
    checks = [pair for pair in sampled if pair != half_pairs[0]]
    lines += [journal.judgement(q, u, _human_grade(q, u), "human:alice", pool.stem) for q, u in checks]
    journal.append(ws.journal, lines)
    report = ws.validation(LLM) / "validation.json"
    report.parent.mkdir(parents=True)
    report.write_text(json.dumps({"assessor": LLM, "corpus": "demo"}), encoding="utf-8")

    # answers: pool the runs' answers, draw 8 questions, people grade every answer to them but one
    _label(["pool", "--kind", "answers", "--parent", parent.run_id, "--tracking-uri", uri], cwd)
    (answer_pool,) = sorted((ws.dir / ANSWERS.pools).glob("*.jsonl"))
    _label(["sample", "--pool", str(answer_pool), "--questions", "8", "--seed", "1"], cwd)
    answer_sample = json.loads((ws.dir / ANSWERS.sample).read_text(encoding="utf-8"))["questions"]
    to_grade = [e for e in poolfile.read_answers(answer_pool).entries if e.qid in answer_sample]
    graded = to_grade[
        1:
    ]  # the first answer stays ungraded: its question is not checked for the run that wrote it
    human = {e.key: ("correct", "partly", "wrong")[_h(e.qid, e.answer) % 3] for e in graded}
    journal.append(
        ws.journal_of(ANSWERS), [journal.grade(e.qid, e.answer, human[e.key], "human:bob") for e in graded]
    )

    out = _label(["commit", "--version", "v1"], cwd)
    assert "assessor view" in out
    rows, p = _report({"cwd": cwd, "parent": parent.run_id, "uri": uri}, "v1", labels, "--json")
    new_parent = [
        r for r in t.find_runs([parent.experiment_id]) if r.tags.get("ablate.rescored_from") == parent.run_id
    ]
    assert len(new_parent) == 1
    return {
        "cwd": cwd,
        "uri": uri,
        "parent": parent.run_id,
        "labels": labels,
        "ws": ws,
        "sample": sample,
        "answer_sample": answer_sample,
        "human_answers": human,
        "rows": rows,
        "stdout": p.stdout,
        "stderr": p.stderr,
        "new": {r.name: r.run_id for r in t.children(new_parent[0].run_id)},
        "out": sorted(cwd.glob("out-v1-*"))[0],
    }


# ------------------------------------------------------------------------------------------ the independent side
def _nested(path: Path) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (q, u), g in read_beir(path).items():
        out.setdefault(q, {})[u] = g
    return out


def _ranking(path: Path) -> dict[str, dict[str, float]]:
    """run.trec as ablate reads it (score descending, ties by id ascending), as distinct decreasing scores."""
    by_q: dict[str, list[tuple[float, str]]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            q, _, doc, _, score, _ = line.split()
            by_q.setdefault(q, []).append((float(score), doc))
    out = {}
    for q, hits in by_q.items():
        ordered = sorted(hits, key=lambda h: (-h[0], h[1]))
        out[q] = {doc: float(len(ordered) - i) for i, (_, doc) in enumerate(ordered)}
    return out


def _per_question(
    run: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]]
) -> dict[str, dict[str, float]]:
    """metric -> qid -> value by pytrec_eval (linear gain; relevant: grade >= 1); a question with no relevant unit
    scores 0."""
    judged = {q: d for q, d in qrels.items() if any(g >= 1 for g in d.values())}
    ranked = {q: run.get(q, {}) for q in judged}
    top10 = {q: dict(sorted(d.items(), key=lambda x: -x[1])[:10]) for q, d in ranked.items()}
    ref = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut.10", "recall.10"}).evaluate(ranked)
    rr = pytrec_eval.RelevanceEvaluator(judged, {"recip_rank"}).evaluate(top10)
    return {
        "ndcg@10": {q: ref.get(q, {}).get("ndcg_cut_10", 0.0) for q in judged},
        "recall@10": {q: ref.get(q, {}).get("recall_10", 0.0) for q in judged},
        "mrr@10": {q: rr.get(q, {}).get("recip_rank", 0.0) for q in judged},
    }


def _reference(y: list[float], yhat: list[float], yhat_u: list[float]) -> tuple[float, float, float]:
    ppi_py = _ppi_py()
    y_, a, u = (np.asarray(v, dtype=float) for v in (y, yhat, yhat_u))
    est = float(np.asarray(ppi_py.ppi_mean_pointestimate(y_, a, u)).reshape(-1)[0])
    lo, hi = (float(np.asarray(v).reshape(-1)[0]) for v in ppi_py.ppi_mean_ci(y_, a, u, alpha=0.05))
    return est, lo, hi


def _checked(folder: Path) -> set[str]:
    """The sampled questions every pair of which the assessor judged has a human judgement (version.json and
    judged.csv read here)."""
    sample = json.loads((folder / "version.json").read_text(encoding="utf-8"))["human_sample"]
    assert sample["drawn_by"] == "sample"
    judged = pd.read_csv(folder / "judged.csv", dtype=str, keep_default_na=False)
    open_ = set(judged.loc[(judged["assessor"] != "") & (judged["human"] == ""), "qid"])
    return set(sample["questions"]) - open_


def _expect(y: dict[str, float], yhat: dict[str, float], population: list[str], checked: set[str]) -> tuple:
    on = [q for q in population if q in checked]
    rest = [q for q in population if q not in checked]
    assert len(on) >= 2 and rest
    assert (
        len({yhat[q] for q in population}) > 1
    )  # the assessor's values vary: ppi_py's own power tuning applies
    return (
        *_reference([y[q] for q in on], [yhat[q] for q in on], [yhat[q] for q in rest]),
        len(on),
        len(rest),
    )


def _assert_figure(got: dict | None, want: tuple) -> None:
    assert got is not None
    assert got["estimate"] == pytest.approx(want[0], abs=TOL)
    assert got["low"] == pytest.approx(want[1], abs=TOL)
    assert got["high"] == pytest.approx(want[2], abs=TOL)
    assert (got["n_checked"], got["n_unchecked"]) == (want[3], want[4])


def _row(rows: list[dict], kind: str, run_id: str, metric: str) -> dict:
    (row,) = [r for r in rows if r["kind"] == kind and r["run_id"] == run_id and r["metric"] == metric]
    return row


def _download(ppi: dict, run_id: str, name: str) -> Path:
    got = Tracker(ppi["uri"]).download_artifact(run_id, name, ppi["cwd"] / "dl" / run_id)
    assert got is not None
    return Path(got)


def _retrieval_values(ppi: dict) -> tuple[dict, dict, dict]:
    folder = ppi["ws"].version("v1")
    head, view = _nested(folder / "dev.tsv"), _nested(folder / "assessor" / "dev.tsv")
    values, population = {}, {}
    for name, rid in ppi["new"].items():
        run = _ranking(_download(ppi, rid, "run.trec"))
        asked = pd.read_csv(_download(ppi, rid, "per_query.csv"), dtype={"qid": str})["qid"].tolist()
        population[name] = [q for q in asked if any(g >= 1 for g in head.get(q, {}).values())]
        h, a = _per_question(run, head), _per_question(run, view)
        values[name] = {m: (h[m], {q: a[m].get(q, 0.0) for q in asked}) for m in METRICS}
    return values, population, {"checked": _checked(folder)}


# ------------------------------------------------------------------------------------------------------ the tests
def test_each_run_metric_ppi_equals_ppi_py_on_the_two_views(ppi):
    values, population, extra = _retrieval_values(ppi)
    checked = extra["checked"]
    assert set(ppi["sample"]) > checked and len(checked) >= 2  # the half-checked question is left out
    for name, rid in ppi["new"].items():
        for m in METRICS:
            y, yhat = values[name][m]
            want = _expect(y, yhat, population[name], checked)
            row = _row(ppi["rows"], "run", rid, m)
            _assert_figure(row["ppi"], want)
            assert want[3] + want[4] == len(population[name])
            assert row["value"] == pytest.approx(np.mean([y[q] for q in population[name]]), abs=1e-9)
    # the assessor's bias shows: the headline (people's grades where they judged) and the assessor view differ
    y, yhat = values["A"]["ndcg@10"]
    assert any(abs(y[q] - yhat[q]) > 1e-9 for q in population["A"])


def test_each_paired_difference_ppi_equals_ppi_py(ppi):
    values, population, extra = _retrieval_values(ppi)
    base, other = ppi["new"]["A"], ppi["new"]["C"]
    common = [q for q in population["C"] if q in set(population["A"])]
    for m in METRICS:
        (ya, aa), (yc, ac) = values["A"][m], values["C"][m]
        diff_y = {q: yc[q] - ya[q] for q in common}
        diff_a = {q: ac[q] - aa[q] for q in common}
        row = _row(ppi["rows"], "comparison", other, m)
        assert row["baseline_id"] == base
        _assert_figure(row["ppi"], _expect(diff_y, diff_a, common, extra["checked"]))
    assert _row(ppi["rows"], "run", base, "ndcg@10")["ppi"] is not None
    assert not [r for r in ppi["rows"] if r["kind"] == "comparison" and r["run_id"] == base]


def test_answer_correctness_ppi_equals_ppi_py_on_the_judge_and_peoples_grades(ppi):
    head = _nested(ppi["ws"].version("v1") / "dev.tsv")
    human, sample = ppi["human_answers"], set(ppi["answer_sample"])
    y, yhat, population, checked = {}, {}, {}, {}
    for name, rid in ppi["new"].items():
        df = pd.read_csv(_download(ppi, rid, "answers.csv"), dtype={"qid": str}, keep_default_na=False)
        df = df[(df["gold_answers"] != "") & (df["judge_grade"] != "")]
        df = df[[any(g >= 1 for g in head.get(q, {}).values()) for q in df["qid"]]]
        population[name] = df["qid"].tolist()
        yhat[name] = {q: float(g == "correct") for q, g in zip(df["qid"], df["judge_grade"], strict=True)}
        people = {q: human.get((q, answer_sha256(a))) for q, a in zip(df["qid"], df["answer"], strict=True)}
        checked[name] = {q for q, g in people.items() if q in sample and g is not None}
        y[name] = {q: float(g == "correct") for q, g in people.items() if g is not None}
        want = _expect(y[name], yhat[name], population[name], checked[name])
        row = _row(ppi["rows"], "run", rid, "answer_correct")
        _assert_figure(row["ppi"], want)
        assert row["value"] == pytest.approx(np.mean([yhat[name][q] for q in population[name]]), abs=1e-9)
    assert checked["A"] < sample  # the ungraded answer's question is not checked
    a, c = ppi["new"]["A"], ppi["new"]["C"]
    common = [q for q in population["C"] if q in set(population["A"])]
    both = checked["A"] & checked["C"]
    diff_y = {q: y["C"][q] - y["A"][q] for q in both}
    diff_a = {q: yhat["C"][q] - yhat["A"][q] for q in common}
    row = _row(ppi["rows"], "comparison", c, "answer_correct")
    assert row["baseline_id"] == a
    _assert_figure(row["ppi"], _expect(diff_y, diff_a, common, both))


def test_the_figures_are_printed_beside_the_headline_and_in_the_markdown(ppi):
    err, md = ppi["stderr"], (ppi["out"] / "ablation.md").read_text(encoding="utf-8")
    assert "PPI (n checked, N unchecked), label version v1:" in err  # --json: the console text is on stderr
    assert "## PPI (n checked, N unchecked)" in md and "seed 0" in md
    for row in ppi["rows"]:
        f = row["ppi"]
        assert f is not None, row
        sign = "+" if row["kind"] == "comparison" else ""
        shown = f"{f['estimate']:{sign}.3f} [{f['low']:{sign}.3f}, {f['high']:{sign}.3f}]"
        assert shown in md, (row, shown)
        if row["metric"] in ("ndcg@10", "answer_correct"):
            assert shown in err
        headline = row["value"] if row["kind"] == "run" else row["delta"]
        assert f"{headline:{sign}.3f}" in md
    assert "PPI: " not in err  # nothing missing


def _committed_without(ppi: dict, name: str, keep_humans: bool) -> Path:
    """The workspace's journals and validation in a labels folder of their own, without the sample files (and
    without people's lines unless ``keep_humans``), committed as version ``name``; the folder."""
    labels = ppi["cwd"] / f"labels-{name}"
    shutil.copytree(ppi["ws"].dir, labels / "demo", ignore=shutil.ignore_patterns("versions", "*sample.json"))
    if not keep_humans:
        for kind in (RELEVANCE, ANSWERS):
            path = labels / "demo" / kind.journal
            kept = [line for line in path.read_text(encoding="utf-8").splitlines() if '"human' not in line]
            if kept:
                path.write_text("\n".join(kept) + "\n", encoding="utf-8")
            else:
                path.unlink()
    _label(["commit", "--version", name, "--labels-dir", str(labels)], ppi["cwd"])
    return labels


def _ppi_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("PPI: ")]


def test_a_hand_picked_sample_gets_no_interval_and_says_so(ppi):
    labels = _committed_without(ppi, "hand", keep_humans=True)
    v = json.loads((labels / "demo" / "versions" / "hand" / "version.json").read_text(encoding="utf-8"))
    assert v["human_sample"]["drawn_by"] == "hand"
    rows, p = _report(ppi, "hand", labels, "--json")
    assert rows and all(r["ppi"] is None for r in rows)
    lines = _ppi_lines(p.stderr)
    (hand,) = [x for x in lines if "picked by hand" in x]
    assert "label version hand" in hand and "no PPI interval" in hand
    assert "python -m ablate.label sample --pool " in hand and "--questions N --seed S" in hand
    (answers,) = [x for x in lines if "answer grades" in x]  # no answer sample either
    assert len(lines) == 2 and "records no random human sample" in answers
    assert "Traceback" not in p.stderr


def test_a_version_without_a_sample_gets_no_figure_and_one_line(ppi):
    labels = _committed_without(ppi, "nosample", keep_humans=False)
    v = json.loads((labels / "demo" / "versions" / "nosample" / "version.json").read_text(encoding="utf-8"))
    assert "human_sample" not in v and v["views"] == {"assessor": "assessor"}
    rows, p = _report(ppi, "nosample", labels, "--json")
    assert rows and all(r["ppi"] is None for r in rows)
    (line,) = [x for x in _ppi_lines(p.stderr) if "relevance labels" in x]
    pool = sorted((labels / "demo" / RELEVANCE.pools).glob("*.tsv"))[0].name
    assert "label version nosample records no random human sample" in line and "no PPI figure" in line
    assert (
        f"fix: python -m ablate.label sample --pool labels-nosample/demo/pools/{pool} --questions N --seed S"
        in line
    )
    assert "python -m ablate.label commit" in line
    md = sorted(ppi["cwd"].glob("out-nosample-*"))[0] / "ablation.md"
    assert line in md.read_text(encoding="utf-8")


def test_the_reuse_key_covers_the_whole_version(ppi, tmp_path):
    """labels_sha: the assessor view, judged.csv and version.json each change it; the headline alone did before."""
    copy = tmp_path / "v1"
    shutil.copytree(ppi["ws"].version("v1"), copy)
    version = read_label_version(copy)
    first = labels_sha(version)
    for name in ("assessor/dev.tsv", "judged.csv", "version.json", "answer_grades.csv"):
        was = (copy / name).read_bytes()
        (copy / name).write_bytes(was + b"\n")
        assert labels_sha(version) != first, name
        (copy / name).write_bytes(was)
    assert labels_sha(version) == first


def test_an_edited_assessor_view_is_rescored_not_reused(ppi):
    """v1 reported again: reused. Its assessor view alone changed (one grade, version.json's digest updated so the
    version reads): every run is re-scored, and the PPI figures follow the new view."""
    folder = ppi["ws"].version("v1")
    _, p = _report(ppi, "v1", ppi["labels"])
    assert "0 re-scored, 2 already re-scored (reused)" in p.stdout
    tsv, sub, vf = (
        folder / "assessor" / "dev.tsv",
        folder / "assessor" / "version.json",
        folder / "version.json",
    )
    saved = {path: path.read_bytes() for path in (tsv, sub, vf)}

    def sha(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    try:
        lines = saved[tsv].decode("utf-8").splitlines(keepends=True)
        i = next(i for i, line in enumerate(lines[1:], 1) if line.rstrip("\n").endswith("\t0"))
        lines[i] = lines[i].rstrip("\n")[:-1] + "2\n"
        tsv.write_text("".join(lines), encoding="utf-8")
        # the change recorded as a commit would record it: the assessor view's digests, then the version's
        v = json.loads(saved[sub])
        v["files"]["dev.tsv"] = sha(tsv)
        sub.write_text(json.dumps(v, indent=2), encoding="utf-8")
        v = json.loads(saved[vf])
        v["files"].update({"assessor/dev.tsv": sha(tsv), "assessor/version.json": sha(sub)})
        vf.write_text(json.dumps(v, indent=2), encoding="utf-8")
        rows, p = _report(ppi, "v1", ppi["labels"], "--json")
        assert "2 re-scored" in p.stderr and "already re-scored" not in p.stderr
        assert rows is not None and all(r["ppi"] is not None for r in rows)
    finally:
        for path, data in saved.items():
            path.write_bytes(data)
