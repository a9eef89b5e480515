"""benchmarks/decode_hoid.py: what a hoid slice brings back from the GPU machine."""

import sqlite3
import tarfile

import pytest

pytest.importorskip("transformers")


def test_the_archive_holds_the_rows_of_a_database_still_open_in_write_ahead_mode(tmp_path):
    from decode_hoid import archive_databases

    folder = tmp_path / "run"
    folder.mkdir()
    writer = sqlite3.connect(folder / "warm_journal.sqlite", isolation_level=None)
    writer.execute("pragma journal_mode=wal")
    writer.execute("create table attempts (kernel text)")
    writer.execute("insert into attempts values ('cute.linear')")  # in the -wal file while `writer` is open
    try:
        archive = archive_databases(folder, tmp_path / "hoid-run.tar.gz")
    finally:
        writer.close()
    with tarfile.open(archive) as tar:
        assert tar.getnames() == ["warm_journal.sqlite"]  # the database only: no -wal, no -shm beside it
        tar.extractall(tmp_path / "back", filter="data")
    back = sqlite3.connect(tmp_path / "back" / "warm_journal.sqlite")
    assert back.execute("select kernel from attempts").fetchall() == [("cute.linear",)]
