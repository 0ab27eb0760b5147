"""A write that runs out of room (issue 31): ``ulimit -f`` (EFBIG), a full disk (ENOSPC), a quota (EDQUOT).

The limit is real: each command runs in a subprocess whose RLIMIT_FSIZE is set before it starts
(with SIGXFSZ ignored, so the write fails with errno 27 instead of killing the process). What the
user must see: one line naming the path, exit 2, no traceback, and nothing that looks finished —
the old file under the final name unchanged, no new file, no temporary file left beside it.
"""

from __future__ import annotations

import errno
import json
import os
import re
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import cheems
from cheems.errors import InputError
from cheems.outputs import NO_ROOM, atomic_file, out_of_room
from helpers import assert_user_error, write_jsonl

LIMIT = 4096  # bytes any output of these tests passes
HERE = {
    "PYTHONPATH": os.pathsep.join([str(Path(cheems.__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])
}


def _limited() -> None:
    """In the child before exec: the file-size limit, and SIGXFSZ ignored so a write past it fails with EFBIG."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        args,
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", **HERE},
        preexec_fn=_limited,
        timeout=120,
    )


def _pool(path: Path, n: int = 60, same: bool = False) -> Path:
    """``n`` records; ``same``: all one prompt (dedup keeps one, its report lists the rest)."""
    return write_jsonl(
        path,
        [
            {
                "id": f"p{i}",
                "input": f"第{0 if same else i}个问题：请解释{'深度学习' * 8}的关系。",
                "category": ["知识"],
                "responses": [{"id": "a", "content": "回答" * 20}, {"id": "b", "content": "不知道"}],
                "comparisons": [{"a": "a", "b": "b", "label": "a"}],
            }
            for i in range(n)
        ],
    )


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.parametrize(
    "command",
    [
        ["dedup", "pool.jsonl", "-o", "out.jsonl"],
        ["dedup", "pool.jsonl", "-o", "small.jsonl", "--report", "out.jsonl"],
        ["decontaminate", "pool.jsonl", "--bench", "bench.jsonl", "-o", "out.jsonl"],
        ["score", "--bench", "pool.jsonl", "--model", "length", "--no-cache", "-o", "out.jsonl"],
    ],
    ids=["dedup", "dedup-report", "decontaminate", "score"],
)
def test_a_file_size_limit_is_one_line_and_leaves_the_old_file(tmp_path, command):
    _pool(tmp_path / "pool.jsonl", same="--report" in command)
    bench = {"id": "b0", "input": "天空为什么是蓝色的？", "responses": [{"id": "a", "content": "瑞利散射。"}]}
    write_jsonl(tmp_path / "bench.jsonl", [bench])
    (tmp_path / "out.jsonl").write_text("the old output\n", encoding="utf-8")
    before = _files(tmp_path)
    assert (tmp_path / "pool.jsonl").stat().st_size > LIMIT
    proc = _run([sys.executable, "-m", "cheems", *command], tmp_path)
    assert_user_error(proc, "out.jsonl", "file-size limit")
    after = _files(tmp_path)
    assert after.get("out.jsonl") == before["out.jsonl"]  # the old file, not a partial new one
    assert not [name for name in after if name.endswith(".tmp")]
    assert set(after) == set(before)  # dedup --report: the records file is not written without its report


def test_validate_plot_past_the_limit_is_one_line(tmp_path):
    _pool(tmp_path / "pool.jsonl", n=3)
    proc = _run([sys.executable, "-m", "cheems", "validate", "pool.jsonl", "--plot", "plot.png"], tmp_path)
    assert_user_error(proc, "plot.png", "file-size limit")
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith((".plot", "plot"))]


def test_evals_temporary_files_past_the_limit_are_one_line(tmp_path):
    """``eval --details`` spools the bench's fingerprint to a temporary file first: that one is named too."""
    _pool(tmp_path / "pool.jsonl")
    args = ["eval", "--bench", "pool.jsonl", "--model", "length", "--no-cache", "--details", "out.jsonl"]
    proc = _run([sys.executable, "-m", "cheems", *args], tmp_path)
    assert_user_error(proc, "temporary file", "file-size limit", "TMPDIR")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pool.jsonl"]


def test_the_library_writer_raises_an_input_error_naming_the_path(tmp_path):
    """From Python too: cheems.write_records under the limit raises InputError, not OSError."""
    script = (
        "import cheems, sys\n"
        "rows = list(cheems.read_records(['pool.jsonl']).records)\n"
        "try:\n"
        "    cheems.write_records('out.jsonl', rows)\n"
        "except cheems.InputError as e:\n"
        "    print('InputError', e)\n"
    )
    _pool(tmp_path / "pool.jsonl")
    proc = _run([sys.executable, "-c", script], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("InputError out.jsonl: cannot write: the file would pass the file-size limit")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pool.jsonl"]


@pytest.mark.parametrize("code", sorted(NO_ROOM))
def test_every_no_room_errno_is_one_line_and_others_pass(tmp_path, code):
    """ENOSPC and EDQUOT cannot be caused here without root: the rule is the same line for each errno."""
    target = tmp_path / "out.jsonl"
    with pytest.raises(InputError, match=re.escape(NO_ROOM[code])) as caught, atomic_file(target) as f:
        f.write("partial")
        raise OSError(code, os.strerror(code))
    assert caught.value.path == str(target)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(PermissionError), atomic_file(target):
        raise PermissionError(errno.EACCES, "denied")  # not for want of room: unchanged


def test_a_rust_librarys_errno_counts():
    """safetensors says ``I/O error: File too large (os error 27)``, with no errno attribute."""
    line = out_of_room(RuntimeError("Error while serializing: I/O error: File too large (os error 27)"), "m", "save")
    assert line is not None and "file-size limit" in str(line)
    assert out_of_room(RuntimeError("shape mismatch"), "m") is None
    assert json.dumps(str(line))  # one plain line


def test_a_score_cache_past_the_limit_is_one_line_not_a_foreign_file(tmp_path):
    """SQLite keeps no errno ("disk I/O error"): the line says the cache could not be written, not that the file
    is not a score cache (what it said before), and the scores file is not written."""
    _pool(tmp_path / "pool.jsonl")
    (tmp_path / "out.jsonl").write_text("the old output\n", encoding="utf-8")
    args = ["score", "--bench", "pool.jsonl", "--model", "length", "--cache", "c.sqlite", "-o", "out.jsonl"]
    proc = _run([sys.executable, "-m", "cheems", *args], tmp_path)
    line = assert_user_error(proc, "c.sqlite", "cannot write the score cache", "ulimit -f", "--no-cache")
    assert "not a score cache" not in line
    assert (tmp_path / "out.jsonl").read_text(encoding="utf-8") == "the old output\n"


def test_sqlites_full_disk_is_the_same_line():
    import sqlite3

    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = 13  # what sqlite3 sets on SQLITE_FULL
    line = out_of_room(full, "c.sqlite", "cannot write the score cache")
    assert line is not None and NO_ROOM[errno.ENOSPC] in str(line)
