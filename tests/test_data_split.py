"""The fixed train / test split: exact size, disjoint, stable under reordering, and the CLI."""

from __future__ import annotations

import json
import random
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from cheems.data.split import split_records
from cheems.data.stream import read_records
from helpers import record


def records(n: int):
    return [record(2, rank={"r1": 1, "r2": 2}, pid=f"p{i}") for i in range(n)]


@given(n=st.integers(0, 60), fraction=st.floats(0, 1), seed=st.integers(0, 5), shuffle_seed=st.integers(0, 100))
@settings(max_examples=60, deadline=None)
def test_split_is_exact_disjoint_and_order_free(n, fraction, seed, shuffle_seed):
    recs = records(n)
    train, test = split_records(recs, fraction, seed)
    assert len(test) == round(fraction * n)
    assert {r.id for r in train}.isdisjoint(r.id for r in test)
    assert sorted(r.id for r in train + test) == sorted(r.id for r in recs)
    assert [r.id for r in train] == [r.id for r in recs if r.id not in {t.id for t in test}]  # input order kept
    shuffled = recs[:]
    random.Random(shuffle_seed).shuffle(shuffled)
    assert {r.id for r in split_records(shuffled, fraction, seed)[1]} == {r.id for r in test}


def test_seed_changes_the_held_out_prompts_and_duplicates_stay_together():
    recs = records(50)
    a = {r.id for r in split_records(recs, 0.2, 0)[1]}
    b = {r.id for r in split_records(recs, 0.2, 1)[1]}
    assert a != b
    twice = recs + [recs[0]]
    train, test = split_records(twice, 0.5, 0)
    sides = {("train" if r in train else "test") for r in twice if r.id == recs[0].id}
    assert len(sides) == 1


def test_cli_writes_both_splits(tmp_path):
    src = tmp_path / "all.jsonl"
    src.write_text("".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in records(10)), encoding="utf-8")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "cheems",
            "split",
            str(src),
            "--train",
            str(tmp_path / "tr.jsonl"),
            "--test",
            str(tmp_path / "te.jsonl"),
            "--test-fraction",
            "0.3",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert len(read_records(tmp_path / "te.jsonl").records) == 3
    assert len(read_records(tmp_path / "tr.jsonl").records) == 7
    bad = subprocess.run(
        [sys.executable, "-m", "cheems", "split", str(tmp_path / "missing.jsonl"), "--train", "a", "--test", "b"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "missing.jsonl" in bad.stderr and "Traceback" not in bad.stderr
