"""Quiet by default (issue 8, class 9): no library load reports, progress bars or warnings in normal output.

Real runs of the commands a user starts with. transformers would print a "LOAD REPORT" table
(the fresh head of m3e-small is "MISSING"), "Loading weights" and "Writing model shards" bars and
Python warnings; cheems says what matters in one line of its own, and ``--verbose`` shows the rest.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import run_cheems, write_jsonl

NOISE = (
    "LOAD REPORT",
    "MISSING",
    "Loading weights",
    "Writing model shards",
    "[transformers]",
    "Warning:",
    "warnings.warn",
    "huggingface",
    "Traceback",
)
ENV = {"OMP_NUM_THREADS": "1"}
QUESTION = {
    "id": "q1",
    "input": "什么是奖励模型？",
    "category": ["知识"],
    "sys_prompt": "你是一位耐心的老师。",
    "responses": [
        {"id": "r1", "content": "奖励模型给回答打分。"},
        {"id": "r2", "content": "不知道。"},
        {"id": "r3", "content": "是一种模型。"},
    ],
    "rank": {"r1": 1, "r2": 3, "r3": 2},
}


def noise(text: str) -> list[str]:
    return [line for line in text.splitlines() if any(marker in line for marker in NOISE)]


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "bench.jsonl", [QUESTION])


def test_eval_with_a_headless_backbone_says_one_line_and_verbose_shows_the_library(bench: Path):
    run = run_cheems("eval", "--model", "m3e-small", "--bench", bench, "--no-cache", env=ENV)
    assert run.returncode == 0, run.stderr
    assert noise(run.stdout + run.stderr) == []
    warnings = [line for line in run.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "new reward head initialised" in warnings[0], run.stderr
    verbose = run_cheems("--verbose", "eval", "--model", "m3e-small", "--bench", bench, "--no-cache", env=ENV)
    assert verbose.returncode == 0 and "LOAD REPORT" in verbose.stderr  # the library's own words, when asked


def test_demo_without_training_prints_no_library_output(tmp_path: Path):
    run = run_cheems("demo", "--no-train", "-o", tmp_path / "demo", env=ENV, timeout=300)
    assert run.returncode == 0, run.stderr
    assert noise(run.stdout + run.stderr) == [] and "warning" not in run.stderr


def test_train_is_quiet_says_new_head_and_merges_a_prompt_found_in_two_files(tmp_path: Path):
    other = {
        **QUESTION,
        "responses": [{"id": "a", "content": "不知道。"}, {"id": "b", "content": "模型给回答打分的办法。"}],
        "rank": {"b": 1, "a": 2},
    }
    first = write_jsonl(tmp_path / "a.jsonl", [QUESTION])
    second = write_jsonl(tmp_path / "b.jsonl", [other, {**other, "id": "q2", "input": "另一个问题"}])
    run = run_cheems(
        "train",
        "--data",
        first,
        "--data",
        second,
        "--output",
        tmp_path / "rm",
        "--epochs",
        "1",
        "--max-length",
        "64",
        "--no-progress",
        env=ENV,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert noise(run.stdout + run.stderr) == []
    assert "new reward head initialised on m3e-small" in run.stderr
    assert "merged 1 prompts found in several --data files (3 records -> 2;" in run.stderr
    assert "1 responses with the same text" in run.stderr and "ranks of 1 prompts resolved again" in run.stderr
    assert (tmp_path / "rm" / "model.safetensors").is_file()
