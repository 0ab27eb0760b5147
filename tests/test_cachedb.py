"""Both on-disk caches refuse a file that is not theirs, in one line, and leave it untouched."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from cheems.errors import InputError
from cheems.judge.judgements import CachedJudgement, JudgeCache
from cheems.models.score_cache import ScoreCache


def _sqlite(path: Path, *statements: str) -> Path:
    with sqlite3.connect(path) as conn:
        for sql in statements:
            conn.execute(sql)
    conn.close()
    return path


FOREIGN = {
    "text file": lambda p: p.write_text("id,label\n1,A\n" * 50, encoding="utf-8"),
    "random bytes": lambda p: p.write_bytes(os.urandom(8192)),
    "SQLite header then garbage": lambda p: p.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4096),
    "another program's database": lambda p: _sqlite(
        p, "CREATE TABLE moz_places (id INTEGER, url TEXT)", "INSERT INTO moz_places VALUES (1, 'https://example.org')"
    ),
    "judgements table with other columns": lambda p: _sqlite(p, "CREATE TABLE judgements (id INTEGER, verdict TEXT)"),
    "scores table with other columns": lambda p: _sqlite(p, "CREATE TABLE scores (k TEXT, v REAL)"),
}


def _open(kind: str, path: Path) -> None:
    if kind == "judge":
        JudgeCache(path).connect()
    else:
        ScoreCache(path).put_many("fp", {"item": 1.0})


@pytest.mark.parametrize("kind", ["judge", "score"])
@pytest.mark.parametrize("name", list(FOREIGN))
def test_a_foreign_file_is_refused_and_left_as_it_was(tmp_path, kind, name):
    path = tmp_path / "cache.sqlite"
    FOREIGN[name](path)
    before = path.read_bytes()
    with pytest.raises(InputError) as e:
        _open(kind, path)
    assert f"not a {kind} cache" in str(e.value) and "\n" not in str(e.value) and str(path) in str(e.value)
    assert path.read_bytes() == before  # no table added, no WAL switch
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0


def test_each_cache_refuses_the_other_one(tmp_path):
    judge, score = tmp_path / "judge.sqlite", tmp_path / "scores.sqlite"
    with JudgeCache(judge) as cache:
        cache.put("j", "x", CachedJudgement("A", None, "A", 1, 1, 1))
    ScoreCache(score).put_many("fp", {"item": 0.5})
    with pytest.raises(InputError, match=r"not a judge cache: it holds other tables \(scores\)"):
        JudgeCache(score).connect()
    with pytest.raises(InputError, match=r"not a score cache: it holds other tables \(judgements\)"):
        ScoreCache(judge).put_many("fp", {"item": 1.0})
    assert ScoreCache(score).get_many("fp", ["item"]) == {"item": 0.5}  # both still work as themselves


def test_empty_file_and_a_folder(tmp_path):
    empty = tmp_path / "empty.sqlite"
    empty.touch()  # e.g. made by `touch` ahead of time: becomes a cache
    with JudgeCache(empty) as cache:
        assert cache.count() == 0
    with pytest.raises(InputError, match="is a folder, not a judge cache file"):
        JudgeCache(tmp_path).connect()


def test_a_corrupt_page_mid_file_is_one_line(tmp_path):
    path = tmp_path / "judge.sqlite"
    with JudgeCache(path) as cache:
        for i in range(3000):
            cache.put("j", f"i{i}", CachedJudgement("A", None, "x" * 200, 1, 1, 1))
    data = bytearray(path.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 20000] = b"\xa5" * 20000  # a disk error in the middle of the table
    path.write_bytes(bytes(data))
    with (
        pytest.raises(InputError, match="cannot use the judge cache: database disk image is malformed"),
        JudgeCache(path) as cache,
    ):
        cache.get_many("j", [f"i{i}" for i in range(3000)])
