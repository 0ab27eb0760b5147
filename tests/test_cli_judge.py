"""``cheems judge`` end to end: summary, failures file, budget, user errors, and SIGKILL + resume."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fault_server import FakeJudgeServer
from helpers import run_main

KEY_ENV = {"OPENAI_API_KEY": "test-key"}
REMOTE = "http://judge.invalid/v1"  # not this machine: it needs a key (and is never reached)


def write_records(path: Path, n_records: int = 3, n_responses: int = 4, extra: str = "") -> Path:
    rows = [
        {
            "id": f"q{k}",
            "input": f"第{k}个问题",
            "category": ["数学"],
            "responses": [
                {"id": f"r{i}", "content": f"q{k}的回答" + "对" * i + (extra if i == n_responses else "")}
                for i in range(1, n_responses + 1)
            ],
        }
        for k in range(n_records)
    ]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def run_cli(args: list[str], monkeypatch, capsys, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """The real entry point in this process (``helpers.run_main``): exit code, stdout, stderr."""
    proc = run_main(*args, monkeypatch=monkeypatch, capsys=capsys, env=KEY_ENV if env is None else env)
    return proc.returncode, proc.stdout, proc.stderr


def judge_args(src: Path, out: Path, server: FakeJudgeServer, cache: Path, *more: str) -> list[str]:
    return [
        "judge",
        str(src),
        "-o",
        str(out),
        "--base-url",
        server.url,
        "--judge-model",
        "fake-judge",
        "--cache",
        str(cache),
        "--no-progress",
        *more,
    ]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_judge_writes_comparisons_summary_and_stats(tmp_path, monkeypatch, capsys):
    src = write_records(tmp_path / "in.jsonl")
    out, stats = tmp_path / "out.jsonl", tmp_path / "stats.json"
    with FakeJudgeServer() as server:
        code, stdout, stderr = run_cli(
            judge_args(
                src,
                out,
                server,
                tmp_path / "c.sqlite",
                "--both-orders",
                "--seed",
                "3",
                "--concurrency",
                "4",
                "--stats-json",
                str(stats),
                "--price-in",
                "1",
                "--price-out",
                "2",
            ),
            monkeypatch,
            capsys,
        )
    assert code == 0, stderr
    rows = read_jsonl(out)
    assert [len(r["comparisons"]) for r in rows] == [12, 12, 12]
    c = rows[0]["comparisons"][0]
    assert (
        c["source"] == "judge" and c["annotator"] == "fake-judge" and c["label"] == "b" and c["shown"] in ("ab", "ba")
    )
    assert "raw" in c
    summary = json.loads(stats.read_text(encoding="utf-8"))
    assert summary["judged"] == 36 and summary["consistency"]["rate"] == 1.0 and summary["cost"] > 0
    assert "judged now" in stdout and "consistent pairs" in stdout and "36 / 36" not in stdout
    assert "18 / 18 (1.000)" in stdout
    assert not (tmp_path / "out.failures.jsonl").exists()


def test_failed_verdicts_exit_0_with_a_failures_file(tmp_path, monkeypatch, capsys):
    src = write_records(tmp_path / "in.jsonl", n_records=1, n_responses=3)
    out = tmp_path / "out.jsonl"
    with FakeJudgeServer() as server:
        server.faults = lambda body, attempt: "bad"  # the judge never answers A/B/C
        args = judge_args(src, out, server, tmp_path / "c.sqlite", "--max-retries", "1")
        code, stdout, _ = run_cli(args, monkeypatch, capsys)
        assert code == 0
        failures = read_jsonl(tmp_path / "out.failures.jsonl")
        assert len(failures) == 3 and {f["reason"] for f in failures} == {"no_label"}
        assert failures[0]["raw"] == "两个回答各有千秋，难以取舍。"
        assert read_jsonl(out)[0].get("comparisons", []) == []  # never guessed
        assert "no_label" in stdout and "without a verdict" in stdout
        server.faults = None  # the judge is fixed: --retry-failed asks again, the stale list goes
        code, stdout, _ = run_cli(args + ["--retry-failed"], monkeypatch, capsys)
    assert code == 0 and len(read_jsonl(out)[0]["comparisons"]) == 3
    assert not (tmp_path / "out.failures.jsonl").exists()


def test_budget_message_and_resume(tmp_path, monkeypatch, capsys):
    src = write_records(tmp_path / "in.jsonl", n_records=2, n_responses=3)
    out, cache = tmp_path / "out.jsonl", tmp_path / "c.sqlite"
    with FakeJudgeServer() as server:
        code, stdout, _ = run_cli(judge_args(src, out, server, cache, "--max-requests", "2"), monkeypatch, capsys)
        assert code == 0 and "request budget reached" in stdout and "4 question(s) not asked" in stdout
        assert sum(len(r.get("comparisons", [])) for r in read_jsonl(out)) == 2
        code, stdout, _ = run_cli(judge_args(src, out, server, cache), monkeypatch, capsys)
        assert code == 0 and "request budget reached" not in stdout
        assert server.total == 6
    assert sum(len(r["comparisons"]) for r in read_jsonl(out)) == 6


def test_skip_invalid_lists_bad_lines_and_judges_the_rest(tmp_path, monkeypatch, capsys):
    src = write_records(tmp_path / "in.jsonl", n_records=2, n_responses=2)
    src.write_text(src.read_text(encoding="utf-8") + '{"input": "x", "responses": []}\n', encoding="utf-8")
    with FakeJudgeServer() as server:
        code, _, stderr = run_cli(
            judge_args(src, tmp_path / "o.jsonl", server, tmp_path / "c.sqlite"), monkeypatch, capsys
        )
        assert code == 2 and f"{src}:3:" in stderr
        code, _, stderr = run_cli(
            judge_args(src, tmp_path / "o.jsonl", server, tmp_path / "c.sqlite", "--skip-invalid"), monkeypatch, capsys
        )
    assert code == 0 and f"skipped {src}:3:" in stderr.replace("\n", "")
    assert len(read_jsonl(tmp_path / "o.jsonl")) == 2


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"env": {}, "url": REMOTE}, "--api-key-env: environment variable OPENAI_API_KEY is not set"),
        ({"args": ["--api-key-env", "NOPE_KEY"], "url": REMOTE}, "--api-key-env: environment variable NOPE_KEY is not"),
        ({"url": "127.0.0.1:9/v1"}, "is not an http(s) URL"),
        ({"src": "missing.jsonl"}, "missing.jsonl: no such file"),
        ({"args": ["--criteria", "CRIT"]}, "crit.yaml:2: field '数学': unknown criterion group 'algebra'"),
        ({"args": ["--concurrency", "0"]}, "must be at least 1"),
        (
            {"args": ["--backend", "hf", "--judge-model", "/no/such/model"]},
            "model folder '/no/such/model' does not exist",
        ),
    ],
)
def test_user_errors_exit_2_with_one_line(tmp_path, monkeypatch, capsys, change, words):
    src = write_records(tmp_path / "in.jsonl", n_records=1, n_responses=2)
    crit = tmp_path / "crit.yaml"
    crit.write_text("代码: [code]\n数学: [algebra]\n", encoding="utf-8")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeJudgeServer() as server:
        args = judge_args(tmp_path / change.get("src", "in.jsonl"), tmp_path / "o.jsonl", server, tmp_path / "c.sqlite")
        if "url" in change:
            args[args.index("--base-url") + 1] = change["url"]
        args += [str(crit) if a == "CRIT" else a for a in change.get("args", [])]
        code, out, err = run_cli(args, monkeypatch, capsys, env=change.get("env"))
        assert server.total == 0
    assert code == 2
    assert words in err.replace("\n", "")
    assert err.startswith("error: ") and "Traceback" not in err + out
    assert src.exists()


def test_a_judge_on_this_machine_needs_no_key(tmp_path, monkeypatch, capsys):
    src = write_records(tmp_path / "in.jsonl", n_records=1, n_responses=3)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeJudgeServer() as server:
        args = judge_args(src, tmp_path / "o.jsonl", server, tmp_path / "c.sqlite")
        args[args.index(server.url)] = server.url.replace("127.0.0.1", "localhost")
        code, _, stderr = run_cli(args, monkeypatch, capsys, env={})
        assert code == 0, stderr
        assert server.total == 3 and server.authorizations == [None] * 3  # no key, no Authorization header
    assert len(read_jsonl(tmp_path / "o.jsonl")[0]["comparisons"]) == 3


# ---------------------------------------------------------------- kill and resume


def _cached(db: Path) -> dict[str, str]:
    """item -> label of the judgements in the cache (read while another process writes)."""
    if not db.exists():
        return {}
    conn = sqlite3.connect(db, timeout=5)
    try:
        return dict(conn.execute("SELECT item, label FROM judgements"))
    except sqlite3.OperationalError:  # the table is not created yet
        return {}
    finally:
        conn.close()


def test_sigkill_mid_run_then_restart_gives_the_same_file(tmp_path, monkeypatch, capsys):
    src = write_records(tmp_path / "in.jsonl", n_records=4, n_responses=4)  # 24 questions
    # The uninterrupted run.
    with FakeJudgeServer() as ref_server:
        code, _, err = run_cli(
            judge_args(src, tmp_path / "ref.jsonl", ref_server, tmp_path / "ref.sqlite"), monkeypatch, capsys
        )
        assert code == 0, err
    expected = (tmp_path / "ref.jsonl").read_bytes()

    out, db = tmp_path / "out.jsonl", tmp_path / "run.sqlite"
    with FakeJudgeServer(latency=0.25) as server:
        cmd = [sys.executable, "-m", "cheems", *judge_args(src, out, server, db, "--concurrency", "2")]
        env = {**os.environ, **KEY_ENV}
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while len(_cached(db)) < 4:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no judgement reached the cache"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        before_kill = _cached(db)
        assert 4 <= len(before_kill) < 24 and not out.exists()  # killed mid-run

        server.latency = 0.0
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "from cache" in done.stdout

    assert out.read_bytes() == expected  # the same final file, byte for byte
    after = _cached(db)
    assert len(after) == 24  # every question once: the key is unique, nothing lost
    assert all(after[item] == label for item, label in before_kill.items())
    # Judgements finished before the kill were never asked again; at most the 2 in flight were re-asked.
    assert all(server.counts[item] == 1 for item in before_kill)
    assert set(server.counts) == set(after)
    assert server.total <= 24 + 2
