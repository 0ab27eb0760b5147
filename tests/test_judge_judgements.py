"""The judgement cache: keyed by judge + template + exact messages, committed per judgement, shared by processes."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from cheems.errors import InputError
from cheems.judge.judgements import CachedJudgement, JudgeCache
from cheems.runtime import content_hash

MSGS = [{"role": "system", "content": "评审"}, {"role": "user", "content": "[回答A开始]\n甲\n[回答A结束]"}]


def test_key_parts_change_the_key():
    base = {"backend": "openai", "base_url": "http://x/v1", "model": "m", "template": "v1"}
    keys = {content_hash(base, keyed=True)} | {content_hash({**base, k: "other"}, keyed=True) for k in base}
    assert len(keys) == 1 + len(base)
    reordered = dict(reversed(list(base.items())))
    assert content_hash(reordered, keyed=True) == content_hash(base, keyed=True)  # order of keys does not matter
    swapped = [MSGS[0], {"role": "user", "content": MSGS[1]["content"].replace("甲", "乙")}]
    assert content_hash(MSGS) != content_hash(swapped)
    assert content_hash(MSGS) == content_hash([dict(m) for m in MSGS])


def test_round_trip_and_misses(tmp_path):
    path = tmp_path / "deep" / "judge.sqlite"
    with JudgeCache(path) as cache:
        assert cache.get_many("j", ["x"]) == {}
        cache.put(
            "j", "x", CachedJudgement("A", None, "**A**", 100, 3, 1), judge_model="m", pair=("p", "r1", "r2", "ab")
        )
        cache.put("j", "y", CachedJudgement(None, "no_label", "不好说", 90, 5, 5))
        got = cache.get_many("j", ["x", "y", "z"])
        assert got == {
            "x": CachedJudgement("A", None, "**A**", 100, 3, 1),
            "y": CachedJudgement(None, "no_label", "不好说", 90, 5, 5),
        }
        assert cache.get_many("other-judge", ["x"]) == {}
        assert cache.count() == 2 and cache.count("j") == 2
    # Written through: another connection (another process in real life) sees it at once.
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT prompt_id, a, b, shown, judge_model FROM judgements WHERE item='x'").fetchone() == (
        "p",
        "r1",
        "r2",
        "ab",
        "m",
    )


def test_each_put_is_committed_before_a_kill(tmp_path):
    # A child process writes one judgement and dies without closing anything.
    path = tmp_path / "c.sqlite"
    code = (
        "import os\nfrom cheems.judge.judgements import JudgeCache, CachedJudgement\n"
        f"c = JudgeCache({str(path)!r})\nc.put('j', 'x', CachedJudgement('B', None, 'B', 1, 1, 1))\n"
        "os.kill(os.getpid(), 9)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert proc.returncode == -9
    with JudgeCache(path) as cache:
        assert cache.get_many("j", ["x"])["x"].label == "B"


def test_many_items_in_one_lookup(tmp_path):
    with JudgeCache(tmp_path / "c.sqlite") as cache:
        for i in range(2000):
            cache.put("j", f"i{i}", CachedJudgement("C", None, "C", 0, 0, 1))
        assert len(cache.get_many("j", [f"i{i}" for i in range(2500)])) == 2000  # more than SQLite's variable limit


def test_unopenable_cache_is_a_user_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InputError, match="cannot open the judge cache"):
        JudgeCache(blocker / "judge.sqlite").connect()
