"""The tracking store's file, checked before MLflow opens it (issue 37): a ``sqlite:///`` path to something that is
no MLflow database is refused in one line and left byte-identical; MLflow's own database and a new file pass."""

from __future__ import annotations

import os
import sqlite3
import sys
from contextlib import closing
from pathlib import Path

import pytest

from ablate.errors import ConfigError
from ablate.tracking import check_uri

PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489") + b"\0" * 64


def _state(p: Path) -> tuple[bytes, int]:
    return p.read_bytes(), p.stat().st_mtime_ns


@pytest.mark.parametrize(
    ("name", "content", "needle"),
    [
        ("notes.txt", b"my notes\n", "is not a SQLite database (it is another kind of file, left as it is)"),
        ("photo.png", PNG, "is not a SQLite database"),
        ("half.db", b"SQLite format 3\0" + b"\xff" * 20, "cannot be read as a SQLite database"),
    ],
    ids=["text", "png", "sqlite-header-only"],
)
def test_a_file_that_is_no_database_is_refused_and_left_as_it_is(tmp_path, name, content, needle):
    p = tmp_path / name
    p.write_bytes(content)
    before = _state(p)
    for writes in (True, False):  # python -m ablate, and the entry points that only read
        with pytest.raises(ConfigError) as e:
            check_uri(f"sqlite:///{p}", writes=writes)
        assert needle in str(e.value) and str(p) in str(e.value)
        assert f"e.g. {tmp_path / 'mlflow.db'}" in str(e.value)
    assert _state(p) == before
    assert sorted(os.listdir(tmp_path)) == [name]  # no journal, no -wal or -shm beside it


def test_another_applications_database_is_refused_and_left_as_it_is(tmp_path):
    p = tmp_path / "app.db"
    with closing(sqlite3.connect(p)) as db:
        db.execute("CREATE TABLE experiments (id INTEGER)")  # a name MLflow uses too: not enough
        db.execute("CREATE TABLE notes (body TEXT)")
        db.execute("INSERT INTO notes VALUES ('keep')")
        db.commit()
    before = _state(p)
    with pytest.raises(ConfigError, match=r"another application \(tables experiments, notes; not MLflow's "):
        check_uri(f"sqlite:///{p}", "--tracking-uri", writes=False)
    assert _state(p) == before and sorted(os.listdir(tmp_path)) == ["app.db"]


def test_mlflows_database_an_empty_file_and_a_new_path_pass(tmp_path, mlflow_uri):
    store = Path(mlflow_uri[len("sqlite:///") :])
    before = _state(store)
    check_uri(mlflow_uri)
    assert _state(store) == before
    empty = tmp_path / "empty.db"
    empty.touch()
    check_uri(f"sqlite:///{empty}")  # SQLite makes an empty file a new database
    blank = tmp_path / "blank.db"
    with closing(sqlite3.connect(blank)) as db:  # a database without tables
        db.execute("PRAGMA user_version=1")
        db.commit()
    check_uri(f"sqlite:///{blank}")
    check_uri(f"sqlite:///{tmp_path / 'new.db'}")


def test_a_folder_a_pipe_and_an_unreadable_file_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="is a folder; name the database file"):
        check_uri(f"sqlite:///{tmp_path}", writes=False)  # a reader too (it was MLflow's OperationalError)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="is not a regular file"):  # never opened: reading it would block
        check_uri(f"sqlite:///{fifo}")
    if sys.platform.startswith("linux"):  # exists, is a regular file, and cannot be read even by root
        with pytest.raises(ConfigError, match=r"/proc/self/mem cannot be read \("):
            check_uri("sqlite:////proc/self/mem")
