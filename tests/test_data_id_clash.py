"""An id that two different prompts of different files share: every command that reads several files names both
places, file:line (issue 31: dedup's said only ``IN``)."""

from __future__ import annotations

import pytest

from cheems.errors import InputError
from cheems.prompts.dedup import dedup_files
from cheems.prompts.minhash import NearSettings
from helpers import assert_user_error, bench_row, run_main, write_jsonl


@pytest.fixture
def clashing(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", [bench_row("x", "c", ["长一点的回答", "短"], [1, 2])])
    other = bench_row("x", "c", ["长一点的回答", "短"], [1, 2]) | {"input": "另一个问题"}
    b = write_jsonl(tmp_path / "b.jsonl", [bench_row("y", "c", ["甲乙", "丙"], [1, 2]), other])
    return a, b


def test_dedup_names_both_files_and_lines(clashing, tmp_path):
    a, b = clashing
    with pytest.raises(InputError) as e:
        dedup_files([a, b], tmp_path / "out.jsonl", settings=NearSettings())
    assert str(e.value).startswith(f"{b}:2: field 'id': two different prompts have the id 'x' (first at {a}:1)")
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("command", [["dedup"], ["eval", "--model", "length", "--no-cache", "--resamples", "0"]])
def test_cli_id_clash_across_files_names_both(clashing, tmp_path, monkeypatch, capsys, command):
    a, b = clashing
    files = [a, b] if command[0] == "dedup" else ["--bench", a, "--bench", b]
    out = ["-o", tmp_path / "out.jsonl"] if command[0] == "dedup" else []
    proc = run_main(command[0], *files, *command[1:], *out, monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, f"{b}:2: field 'id': ", f"(first at {a}:1)")
