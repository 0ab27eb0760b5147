"""Small builders for records used across tests."""

from __future__ import annotations

import socket
import subprocess

from cheems.data.schema import Record


def record(
    n: int, comparisons: list[tuple[str, str, str]] = (), rank: dict | None = None, pid: str = "p", category: str = "c"
) -> Record:
    """A record with responses r1..rn and comparisons given as (a, b, label)."""
    return Record.model_validate(
        {
            "id": pid,
            "input": "问题",
            "category": [category],
            "responses": [{"id": f"r{i}", "content": f"回答{i}"} for i in range(1, n + 1)],
            "comparisons": [{"a": a, "b": b, "label": lab} for a, b, lab in comparisons],
            "rank": rank,
        }
    )


def bench_row(pid: str, category: str, contents: list[str], rank: list[int], **more: object) -> dict:
    """A ranked bench record as a JSON row: responses r1..rn with ``contents`` and ``rank``, the input ``PID的问题``."""
    return {
        "id": pid,
        "input": f"{pid}的问题",
        "category": [category],
        "responses": [{"id": f"r{i}", "content": c} for i, c in enumerate(contents, start=1)],
        "rank": {f"r{i}": k for i, k in enumerate(rank, start=1)},
        **more,
    }


# ---------------------------------------------------------------- the CLI as a user runs it

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402


def run_cheems(
    *args: object,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    stdin: str | None = None,
) -> subprocess.CompletedProcess:
    """``python -m cheems ARGS`` as a real subprocess (wide terminal, so messages stay on one line)."""
    return subprocess.run(
        [sys.executable, "-m", "cheems", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        timeout=timeout,
        input=stdin,
    )


def write_jsonl(path: Path, rows: list) -> Path:
    """Rows as JSONL; a str row is written as it is (for broken lines)."""
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows), encoding="utf-8"
    )
    return path


def assert_user_error(proc: subprocess.CompletedProcess, *contains: str, code: int = 2) -> str:
    """A user error as CONTRIBUTING.md wants it: exit ``code``, no traceback, one ``error:`` line holding ``contains``.

    Other stderr lines may only be warnings or skip reports that come before it. Returns the line.
    """
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert proc.returncode == code, f"exit {proc.returncode}, stderr: {proc.stderr}"
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, f"expected one 'error:' line, stderr: {proc.stderr}"
    line = errors[0]
    for text in contains:
        assert text in line, f"{text!r} not in {line!r}"
    return line


def run_main(*args: object, monkeypatch, capsys, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``cheems ARGS`` through the real entry point in this process (no start-up cost); the result has
    ``run_cheems``'s shape, so ``assert_user_error`` reads it the same way."""
    from cheems.cli.main import main

    for key, value in {"COLUMNS": "200", **(env or {})}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(sys, "argv", ["cheems", *map(str, args)])
    try:
        main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["cheems", *map(str, args)], code, out, err)


def shown(group: dict, key: str, value: float) -> str:
    """How a report or leaderboard shows ``group[key]`` of an eval JSON: ``value`` (worked out by hand, checked
    against the JSON) with the interval ``cheems eval`` computed when the JSON has one (``0.812 [0.780, 0.845]``)."""
    import pytest

    assert group[key] == pytest.approx(value)
    ci = group.get(f"{key}_ci")
    return f"{value:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def free_port() -> int:
    """A port nothing listens on now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_process(proc: subprocess.Popen | None) -> None:
    """SIGTERM a server subprocess still running; SIGKILL when it has not exited 10 s later."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
