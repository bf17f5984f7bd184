"""What a documents folder (or a YAML file, or a prompt template) cannot make ablate do (issue 37): expand a YAML
alias bomb, read a file through a link out of the folder, write outputs only their owner can read, give two names
that print alike one confusing message, or send a template's unknown placeholder to the model as it is written.

Every test here runs ``python -m ablate.ingest``'s ``main`` in-process on real files (or the loader / template on a
real file) and fails on the code before these checks."""

from __future__ import annotations

import contextlib
import json
import os
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from ablate.app.ingest import main
from ablate.errors import InputError

#: The "billion laughs": six lines whose aliases each repeat the line above nine times, 9**6 = 531,441 values.
BOMB = "".join(
    f"{x}: &{x} [{', '.join([f'*{p}' for _ in range(9)] if p else ['lol'] * 9)}]\n"
    for p, x in zip(["", *"abcde"], "abcdef", strict=True)
)
TEXT = "# Policy\n\nTaxis are reimbursed up to 80 yuan per trip.\n"


def _ingest(capsys: pytest.CaptureFixture[str], docs: Path, out: Path) -> tuple[int, str]:
    """``python -m ablate.ingest DOCS --out OUT --quiet`` in-process: ``(exit code, stderr)``."""
    code = main([str(docs), "--out", str(out), "--quiet"])
    return code, capsys.readouterr().err


def _one_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    d = tmp_path / "docs"
    d.mkdir()
    (d / "a.md").write_text(TEXT, encoding="utf-8")
    return d


# -- 1. YAML: alias bombs, values containing themselves, size ----------------------------------------------------------
def test_an_alias_bomb_in_front_matter_is_refused_naming_the_line_and_nothing_is_written(
    capsys, docs, tmp_path
):
    (docs / "a.md").write_text(  # anchors used as people use them still work
        "---\nacl: &groups [finance, hr]\nmetadata: {readers: *groups}\n---\n" + TEXT, encoding="utf-8"
    )
    code, err = _ingest(capsys, docs, tmp_path / "ok")
    assert code == 0, err
    rec = json.loads((tmp_path / "ok" / "corpus.jsonl").read_text(encoding="utf-8"))
    assert rec["acl"] == ["finance", "hr"] and rec["metadata"]["readers"] == ["finance", "hr"]
    (docs / "bomb.md").write_text(f"---\n{BOMB}---\n# Bomb\n\ntext\n", encoding="utf-8")
    code, err = _ingest(capsys, docs, tmp_path / "out")
    line = _one_error(err)
    assert code == 2 and not (tmp_path / "out").exists()
    # the front matter starts on line 2; its fifth line (e: ...) is where the aliases pass 64 KiB
    assert (
        "bomb.md (front matter):6: its aliases repeat more than 65,536 characters of values (at *d)" in line
    )
    assert "Fix: write the values out instead of repeating them with anchors and aliases" in line


def test_an_alias_bomb_in_a_sidecar_and_a_value_that_contains_itself_are_refused(capsys, docs, tmp_path):
    (docs / "a.md.meta.yaml").write_text(BOMB, encoding="utf-8")
    code, err = _ingest(capsys, docs, tmp_path / "out")
    assert code == 2 and "a.md.meta.yaml:5: its aliases repeat more than 65,536" in _one_error(err)
    (docs / "a.md.meta.yaml").write_text("title: T\nmetadata:\n  loop: &x [1, *x]\n", encoding="utf-8")
    code, err = _ingest(capsys, docs, tmp_path / "out")
    assert code == 2 and "a.md.meta.yaml:3: the alias *x is inside the value it names" in _one_error(err)
    assert not (tmp_path / "out").exists()


def test_front_matter_and_sidecars_longer_than_64_kib_are_refused(capsys, docs, tmp_path):
    from ablate.ingest.metadata import META_MAX

    assert META_MAX == 64 * 1024
    (docs / "long.md").write_text(f"---\ntitle: {'x' * META_MAX}\n---\n# L\n\ntext\n", encoding="utf-8")
    code, err = _ingest(capsys, docs, tmp_path / "out")
    line = _one_error(err)
    assert code == 2 and f"long.md (front matter): is {META_MAX + 7:,} bytes long" in line
    assert "may hold at most 65,536 bytes" in line and not (tmp_path / "out").exists()


def test_the_shared_loader_bounds_aliases_cycles_and_depth():
    from ablate.safeyaml import MAX_EXPANSION, YamlLimitError, safe_load

    assert safe_load("a: &x {k: 1}\nb: *x\nc: {<<: *x, z: 2}\n") == {
        "a": {"k": 1},
        "b": {"k": 1},
        "c": {"k": 1, "z": 2},
    }
    with pytest.raises(YamlLimitError) as bomb:
        safe_load(BOMB)
    assert (
        bomb.value.problem_mark.line == 5 and f"more than {MAX_EXPANSION:,} characters" in bomb.value.problem
    )
    assert isinstance(bomb.value, yaml.YAMLError)  # callers that report YAML errors by line report it too
    with pytest.raises(YamlLimitError, match="inside the value it names"):
        safe_load("a: &x [1, *x]\n")
    with pytest.raises(YamlLimitError, match="deeper than"):
        safe_load("a: " + "[" * 5000 + "]" * 5000)


def test_an_alias_bomb_in_corpus_yaml_is_refused_naming_its_line(tiny_corpus):
    from ablate.data.corpus import read_manifest

    manifest = tiny_corpus / "corpus.yaml"
    head = manifest.read_text(encoding="utf-8").rstrip("\n") + "\n"
    manifest.write_text(head + BOMB.replace("&", "&l").replace("*", "*l"), encoding="utf-8")
    with pytest.raises(InputError) as e:
        read_manifest(tiny_corpus)
    line = head.count("\n") + 6  # the bomb's last line passes 1 MiB
    assert str(e.value).startswith(f"{manifest}:{line}: its aliases repeat more than 1,048,576 characters")


# -- 2. links never lead out of the documents folder -------------------------------------------------------------------
def test_a_link_to_a_file_outside_is_refused_naming_link_and_target(capsys, docs, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the admin password is hunter2\n", encoding="utf-8")
    (docs / "notes.txt").symlink_to(secret)
    code, err = _ingest(capsys, docs, tmp_path / "out")
    line = _one_error(err)
    assert code == 2 and not (tmp_path / "out").exists()
    assert f"{docs / 'notes.txt'}: is a link to {secret}, outside the documents folder {docs}" in line
    assert "Fix: copy the file into the documents folder" in line


@pytest.mark.parametrize("via", ["folder", "sidecar", "relative"])
def test_links_out_through_a_folder_a_sidecar_or_dot_dot_are_refused(capsys, docs, tmp_path, via):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "b.md").write_text(TEXT, encoding="utf-8")
    (outside / "meta.yaml").write_text("title: Stolen\n", encoding="utf-8")
    if via == "folder":
        (docs / "shared").symlink_to(outside, target_is_directory=True)
    elif via == "sidecar":
        (docs / "a.md.meta.yaml").symlink_to(outside / "meta.yaml")
    else:
        (docs / "sub").mkdir()
        (docs / "sub" / "b.md").symlink_to(Path("..") / ".." / "outside" / "b.md")
    code, err = _ingest(capsys, docs, tmp_path / "out")
    assert code == 2 and "outside the documents folder" in _one_error(err)
    assert not (tmp_path / "out").exists()


def test_links_inside_the_folder_are_read_once_and_loops_end(capsys, docs, tmp_path):
    (docs / "sub").mkdir()
    (docs / "sub" / "b.md").write_text("# B\n\nHotels up to 650 yuan a night.\n", encoding="utf-8")
    (docs / "alias.md").symlink_to("sub/b.md")  # a file link inside: read under its own name
    (docs / "again").symlink_to("sub", target_is_directory=True)  # a folder link inside: not walked twice
    (docs / "sub" / "up").symlink_to("..", target_is_directory=True)  # a loop through a folder link
    (docs / "x.md").symlink_to("y.md")  # a loop of file links
    (docs / "y.md").symlink_to("x.md")
    code, err = _ingest(capsys, docs, tmp_path / "out")
    assert code == 0, err
    out = tmp_path / "out"
    ids = [
        json.loads(line)["_id"] for line in (out / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert ids == ["a", "alias", "sub__b"]
    report = (out / "ingest_report.md").read_text(encoding="utf-8")
    assert "again: a link to a folder inside the documents folder, not walked" in report
    assert "| x.md | a link that leads nowhere (its target is missing, or a loop) |" in report


# -- 3. outputs get the mode of any new file ----------------------------------------------------------------------------
@contextlib.contextmanager
def _umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002])
def test_ingest_outputs_have_the_mode_of_any_new_file(capsys, docs, tmp_path, mask):
    out = tmp_path / "out"
    with _umask(mask):
        code, err = _ingest(capsys, docs, out)
        assert code == 0, err
        code, err = _ingest(capsys, docs, out)  # written again over an earlier ingest: the same
        assert code == 0, err
    modes = {p.name: p.stat().st_mode & 0o777 for p in out.iterdir()}
    assert modes == dict.fromkeys(
        ["corpus.jsonl", "corpus.yaml", "chunks.tsv", "ingest_report.md"], 0o666 & ~mask
    )


def test_the_atomic_writer_and_renamed_folders_respect_the_umask(tmp_path):
    from ablate.cache import Cache, atomic_write_bytes, process_umask
    from ablate.labels.commit import write_version

    with _umask(0o027):
        assert process_umask() == 0o027
        atomic_write_bytes(tmp_path / "a.txt", b"x")
        Cache(tmp_path / "cache").save_json("kind", "ab" * 16, {"v": 1})
        write_version(tmp_path / "labels" / "v1", {"qrels.tsv": b"q\tc\t1\n"})
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o640
    assert {p.stat().st_mode & 0o777 for p in (tmp_path / "cache").rglob("*") if p.is_file()} == {0o640}
    assert (tmp_path / "labels" / "v1").stat().st_mode & 0o777 == 0o750
    assert (tmp_path / "labels" / "v1" / "qrels.tsv").stat().st_mode & 0o777 == 0o640


# -- 4. names and ids equal after Unicode normalisation -------------------------------------------------------------------
def test_names_that_differ_only_in_normalisation_are_refused_saying_so(capsys, docs, tmp_path):
    nfc, nfd = (unicodedata.normalize(form, "café.md") for form in ("NFC", "NFD"))
    assert nfc != nfd
    for name in (nfc, nfd):
        (docs / name).write_text(TEXT, encoding="utf-8")
    code, err = _ingest(capsys, docs, tmp_path / "out")
    line = _one_error(err)
    assert code == 2 and not (tmp_path / "out").exists()
    assert line.startswith(
        "error: 'cafe\\u0301.md' and 'caf\\xe9.md': these two file names differ only in their Unicode"
    )
    assert "so both get the document id 'café'. Fix: rename or delete one of them" in line


def test_ids_from_metadata_are_compared_and_written_in_nfc(capsys, docs, tmp_path):
    nfc, nfd = (unicodedata.normalize(form, "POL-Café") for form in ("NFC", "NFD"))
    (docs / "a.md").write_text(f"---\nid: {nfd}\n---\n{TEXT}", encoding="utf-8")
    code, err = _ingest(capsys, docs, tmp_path / "out")
    assert code == 0, err
    rec = json.loads((tmp_path / "out" / "corpus.jsonl").read_text(encoding="utf-8"))
    assert rec["_id"] == nfc  # as a qrels file typed on any system names it
    (docs / "b.md").write_text(f"---\nid: {nfc}\n---\n{TEXT}", encoding="utf-8")
    code, err = _ingest(capsys, docs, tmp_path / "out2")
    assert code == 2 and f"both get the document id {nfc!r}" in _one_error(err)


# -- 5. prompt templates: every placeholder is one its kind fills ----------------------------------------------------------
def _kinds() -> dict[str, tuple[str, ...]]:
    from ablate.labels import assessor
    from ablate.stages.generate import judge
    from ablate.stages.rerank import llm

    return {
        "answer": ("{passages}", "{question}"),
        "rerank": llm.FIELDS,
        "judge": judge.FIELDS,
        "assessor": assessor.FIELDS,
    }


@pytest.mark.parametrize(
    ("kind", "user", "needle"),
    [
        (
            "answer",
            "{passages}\nQuestion: {question}\nQuote {passage}.",
            ":6: unknown placeholder {passage} (it would "
            "reach the model as it is written). Fix: did you mean {passages}? (this template's placeholders: "
            "{passages}, {question})",
        ),
        (
            "rerank",
            "{passage}\n{question}\nIn {langauge}.",
            ":6: unknown placeholder {langauge} (it would reach the "
            "model as it is written). Fix: use this template's placeholders: {passage}, {question}",
        ),
        ("judge", "{question}\n{golds}\n{answer}\n{gold}", ":7: unknown placeholder {gold}"),
        ("assessor", "{question}\n{pasage}\n{passage}", ":5: unknown placeholder {pasage}"),
    ],
)
def test_an_unknown_placeholder_is_refused_naming_file_line_and_the_known_ones(tmp_path, kind, user, needle):
    from ablate.stages.generate.prompt import PromptTemplate

    path = tmp_path / "t.txt"
    path.write_text(f"### system\nBe brief.\n### user\n{user}\n", encoding="utf-8")
    with pytest.raises(InputError) as e:
        PromptTemplate.load(str(path), fields=_kinds()[kind])
    assert str(e.value).startswith(f"{path}{needle}"), str(e.value)


def test_a_placeholder_in_the_system_section_is_refused(tmp_path):
    from ablate.stages.generate.prompt import PROMPTS_DIR, PromptTemplate

    path = tmp_path / "t.txt"
    path.write_text("### system\nAnswer {question}.\n### user\n{passages} {question}\n", encoding="utf-8")
    with pytest.raises(
        InputError, match=r"t.txt:2: \{question\} is in the system section, where no placeholder"
    ):
        PromptTemplate.load(str(path))
    from ablate.labels.relevance_prompt import OPTIONAL

    kind_of = {
        "answer_judge": "judge",
        "relevance_umbrela": "assessor",
        "relevance_policy": "assessor",
        "rerank_yes_no": "rerank",
    }
    for p in sorted(PROMPTS_DIR.glob("*.txt")):  # the shipped templates use only their kind's placeholders
        kind = kind_of.get(p.stem.removesuffix("_zh"), "answer")
        optional = OPTIONAL if kind == "assessor" else ()
        assert PromptTemplate.load(str(p), fields=_kinds()[kind], optional=optional).user
