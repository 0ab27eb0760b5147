"""cheems.data.stream: records read a chunk at a time, on a pool of processes, give exactly what one process gives."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cheems.data import stream
from cheems.data.io import ReadResult, jsonl_lines, record_line
from cheems.data.keytable import KeyLog
from cheems.data.stream import read_records
from cheems.errors import InputError
from helpers import assert_user_error, run_cheems, run_main


def _record(i: int, n: int, labels: list[str], rank_cut: int, pid: str | None = None) -> dict:
    rids = [f"r{j}" for j in range(n)]
    pairs = [(a, b) for k, a in enumerate(rids) for b in rids[k + 1 :]]
    obj = {
        "id": pid or f"p{i}",
        "input": f"问题{i}：" + "长" * (i % 7),
        "category": ["数学"],
        "responses": [{"id": r, "content": f"回答{i}-{r}" * (1 + j % 3)} for j, r in enumerate(rids)],
        "comparisons": [{"a": a, "b": b, "label": lab} for (a, b), lab in zip(pairs, labels)],
    }
    if rank_cut:
        obj["rank"] = {r: 1 + j for j, r in enumerate(rids[: max(1, n - rank_cut)])}
    return obj


LINE_KINDS = st.sampled_from(["record", "record", "record", "dup", "bad_json", "no_input", "pair", "official", "blank"])


@st.composite
def files(draw: st.DrawFn) -> list[str]:
    """Lines of a JSONL file mixing good records with every kind of line the reader treats specially."""
    lines = []
    for i, kind in enumerate(draw(st.lists(LINE_KINDS, min_size=1, max_size=25))):
        n = draw(st.integers(2, 4))
        labels = draw(st.lists(st.sampled_from("ab") | st.just("tie"), min_size=n * (n - 1) // 2, max_size=6))
        if kind == "record":
            lines.append(json.dumps(_record(i, n, labels, draw(st.integers(0, 1))), ensure_ascii=False))
        elif kind == "dup":
            lines.append(json.dumps(_record(i, n, labels, 0, pid="p0"), ensure_ascii=False))
        elif kind == "bad_json":
            lines.append('{"id": "x", "input": ')
        elif kind == "no_input":
            lines.append(json.dumps({"id": f"q{i}", "responses": []}))
        elif kind == "pair":
            group = draw(st.integers(0, 2))
            pref = draw(st.sampled_from([1, 2, "tie"]))
            lines.append(
                json.dumps({"input": f"成对{group}", "answer1": f"甲{i}", "answer2": f"乙{i}", "preference": pref})
            )
        elif kind == "official":
            lines.append(
                json.dumps(
                    {
                        "id": f"o{i}",
                        "input": "官方",
                        "responses": [{"id": "x", "content": "一"}, {"id": "y", "content": "二"}],
                        "annotations": [["x", "y", 1]],
                    }
                )
            )
        else:
            lines.append("   ")
    return lines  # fmt: skip


def _read(path: Path, skip_invalid: bool, workers: int) -> tuple[list[str], list[str], list[str]] | str:
    """(output lines, skipped, warnings), or the error message."""
    issues = ReadResult()
    try:
        lines = list(
            stream.stream_records(path, record_line, skip_invalid=skip_invalid, issues=issues, workers=workers)
        )
    except InputError as e:
        return str(e)
    return lines, [str(e) for e in issues.skipped], [str(e) for e in issues.warnings]


@pytest.fixture
def pooled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file goes through the worker pool, in chunks of a few lines."""
    monkeypatch.setattr(stream, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(stream, "CHUNK_BYTES", 300)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=files(), skip_invalid=st.booleans())
def test_two_workers_give_exactly_what_one_process_gives(lines, skip_invalid, tmp_path, pooled) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    one = _read(path, skip_invalid, workers=1)
    assert _read(path, skip_invalid, workers=2) == one
    if isinstance(one, tuple):
        assert [record_line(r) for r in read_records(path, skip_invalid=skip_invalid).records] == one[0]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=files())
def test_a_jsonl_file_reads_as_its_json_array_does(lines, tmp_path) -> None:
    """The streamed JSON Lines path and the whole-file .json path give the same records, skips and warnings."""
    good = [line for line in lines if line.strip() and not line.startswith('{"id": "x", "input": ')]
    if not good:
        return
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text("\n".join(good) + "\n", encoding="utf-8")
    array = tmp_path / "in.json"
    array.write_text("[\n" + ",\n".join(good) + "\n]\n", encoding="utf-8")
    lines, skipped, warnings = _read(jsonl, True, 1)
    whole = _read(array, True, 1)

    def what(messages: list[str]) -> list[str]:  # the lines differ (the array opens with '['), the messages not
        return [m.split(": ", 1)[1].split(" (first at")[0] for m in messages]

    assert (lines, what(skipped), what(warnings)) == (whole[0], what(whole[1]), what(whole[2]))


def test_duplicate_and_skips_are_reported_in_line_order(tmp_path, pooled, monkeypatch) -> None:
    monkeypatch.setattr(KeyLog, "BATCH", 1)  # the first id is found in the sorted table, not the newest keys
    path = tmp_path / "in.jsonl"
    rows = [_record(0, 2, ["a"], 0), "{broken", _record(1, 2, ["b"], 0), _record(2, 2, ["a"], 0, pid="p0")]
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    lines, skipped, _ = _read(path, True, 2)
    assert [json.loads(line)["id"] for line in lines] == ["p0", "p1"]
    assert [s.split(": ")[0] for s in skipped] == [f"{path}:2", f"{path}:4"]
    assert "duplicate prompt id 'p0' (first at " + f"{path}:1)" in skipped[1]
    assert _read(path, False, 2) == skipped[0]


def test_lines_are_checked_as_the_whole_file_was(tmp_path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes('{"a": 1}\n\n{"b": "\xe4\xb8"}\n'.encode("latin-1"))
    with pytest.raises(InputError, match=r"bad.jsonl:3: not UTF-8 text \(invalid continuation byte at byte 8"):
        list(jsonl_lines(bad))
    utf16 = tmp_path / "u16.jsonl"
    utf16.write_bytes('{"a": 1}\n'.encode("utf-16"))
    with pytest.raises(InputError, match="u16.jsonl:1: UTF-16 text"):
        list(jsonl_lines(utf16))
    nul = tmp_path / "nul.jsonl"
    nul.write_bytes(b'{"a": 1}\n{"b"\x00: 2}\n')
    with pytest.raises(InputError, match="nul.jsonl:2: holds a NUL byte"):
        list(jsonl_lines(nul))
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\ufeff\n  \n\n", encoding="utf-8")
    with pytest.raises(InputError, match="blank.jsonl:1: file is empty"):
        list(jsonl_lines(blank))
    joined = tmp_path / "joined.jsonl"
    joined.write_text('\ufeff{"a": 1}\n\ufeff{"b": 2}\r\n', encoding="utf-8")
    assert list(jsonl_lines(joined)) == [(1, '{"a": 1}'), (2, '{"b": 2}\r')]


def test_workers_come_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("CHEEMS_WORKERS", "3")
    assert stream.default_workers() == 3
    for bad in ("many", "0", "-1"):
        monkeypatch.setenv("CHEEMS_WORKERS", bad)
        with pytest.raises(InputError, match=f"^CHEEMS_WORKERS: '{bad}' is not a number of worker processes"):
            stream.default_workers()


def test_a_bad_worker_count_in_the_environment_is_one_line(tmp_path, monkeypatch, capsys) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(_record(0, 2, ["a"], 0)) + "\n", encoding="utf-8")
    for bad in ("0", "-1"):
        proc = run_main("validate", path, env={"CHEEMS_WORKERS": bad}, monkeypatch=monkeypatch, capsys=capsys)
        assert_user_error(proc, f"CHEEMS_WORKERS: '{bad}' is not a number of worker processes — set it to 1")


# ---------------------------------------------------------------- the worker pool: its end, and its parent's


def _workers_of(pid: int) -> list[psutil.Process]:
    """The pool's worker processes under ``pid`` (multiprocessing's resource tracker is not one)."""
    return [p for p in psutil.Process(pid).children(recursive=True) if "spawn_main" in " ".join(p.cmdline())]


def _gone(procs: list[psutil.Process], within_s: float) -> list[psutil.Process]:
    """Wait up to ``within_s`` for the processes to end (a zombie has ended); those still running."""
    deadline = time.monotonic() + within_s
    while True:
        alive = []
        for p in procs:
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
            except psutil.NoSuchProcess:
                pass
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


@pytest.fixture(scope="module")
def big_file(tmp_path_factory) -> Path:
    """A record file large enough for the worker pool (over ``POOL_MIN_BYTES``) with one bad line deep in it,
    past the chunks first in flight."""
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    row = json.dumps(_record(0, 2, ["a"], 0), ensure_ascii=False).replace('"p0"', '"p{}"').replace("回答", "回答" * 40)
    n = stream.POOL_MIN_BYTES // len(row.encode("utf-8")) * 5 // 4
    bad = n * 3 // 4
    lines = ['{"id": "x", "input": ' if i == bad else row.replace("{}", str(i)) for i in range(n)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert path.stat().st_size > stream.POOL_MIN_BYTES
    return path


def test_a_bad_line_stops_the_pool_with_one_error_line(big_file) -> None:
    """The error is the only line, every time: the pool is not shut down from a thread of its own (which
    printed "RuntimeError: cannot join current thread" after the error)."""
    for _ in range(3):
        proc = run_cheems("validate", big_file, env={"CHEEMS_WORKERS": "2"})
        assert_user_error(proc, f"{big_file}:", "invalid JSON")
        assert proc.stderr.strip().count("\n") == 0, proc.stderr


def test_the_workers_end_where_the_error_surfaces(tmp_path, pooled) -> None:
    """Not when the garbage collector gets to the stream (then in whatever thread it runs)."""
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join([json.dumps(_record(i, 2, ["a"], 0)) for i in range(40)] + ["{broken"]) + "\n")
    gc.disable()
    try:
        with pytest.raises(InputError, match="in.jsonl:41: invalid JSON"):
            list(stream.stream_records(path, workers=2))
        assert _workers_of(os.getpid()) == []
    finally:
        gc.enable()


def test_what_goes_wrong_in_a_worker_comes_back() -> None:
    """An exception a task raises is raised here; a result that does not pickle is an error naming why; a
    worker that dies is an error naming its exit code (not a hang)."""
    with pytest.raises(ValueError, match="invalid literal for int"):
        list(stream._in_order(iter([(int, ("1",)), (int, ("x",))]), 2))
    with pytest.raises(RuntimeError, match="TypeError in a data worker: cannot pickle '_thread.lock' object"):
        list(stream._in_order(iter([(threading.Lock, ())]), 2))
    with pytest.raises(ChildProcessError, match=r"ended unexpectedly \(exit code 3\)"):
        list(stream._in_order(iter([(os._exit, (3,))]), 2))
    assert _workers_of(os.getpid()) == []


def test_workers_end_when_their_parent_is_killed(big_file, tmp_path) -> None:
    """SIGKILL of a process streaming on workers leaves no process behind: not the workers, not
    multiprocessing's resource tracker."""
    script = (
        "import sys\n"
        "from cheems.data.stream import stream_records\n"
        "records = stream_records(sys.argv[1], workers=2, skip_invalid=True)\n"
        "next(records)\n"
        "print('streaming', flush=True)\n"
        "sys.stdin.read()\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script, str(big_file)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    children: list[psutil.Process] = []
    try:
        assert parent.stdout.readline() == "streaming\n"
        children = psutil.Process(parent.pid).children(recursive=True)
        assert len(_workers_of(parent.pid)) == 2
        assert any("resource_tracker" in " ".join(p.cmdline()) for p in children)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    assert _gone(children, within_s=30) == []
