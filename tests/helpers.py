"""Small builders for records, benchmark rows and judged outcomes used across tests, and the CLI as a user runs it."""

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


# ---------------------------------------------------------------- benchmarks in their upstream layouts
# Small files under tests/data written by hand in each benchmark's public layout, and rows built here in the
# upstream columns. Their responses have chosen lengths and the scorer is the length baseline (score = characters),
# so each tests/test_metrics_NAME.py works its numbers out by hand from the lengths.

DATA = Path(__file__).parent / "data"
RMBENCH, RMB = DATA / "rmbench", DATA / "rmb"
RB2, JUDGEBENCH = DATA / "rewardbench2.jsonl", DATA / "judgebench.jsonl"


def records_by_id(path: Path, fmt: str) -> dict:
    """The records ``cheems import FMT PATH`` makes, by id."""
    from cheems.data.importers import import_file

    return {r.id: r for r in import_file(path, fmt).records}


def length_report(metric: str, *files: Path) -> dict:
    """The eval JSON of ``--metric METRIC`` on the bench ``files``, scored by the length baseline."""
    from cheems.evaluate import evaluate_scores, load_bench, score
    from cheems.evaluate.benchmark_report import benchmark_report
    from cheems.models import load_scorer

    bench = load_bench(list(files))
    result = evaluate_scores(bench, score(bench, load_scorer("length")), "length")
    return benchmark_report(metric, bench, result).to_dict()


def T(n: int, c: str = "a") -> str:
    """A text of n characters."""
    return c * n


def rb_row(i: int, subset: str, chosen: int, rejected: int) -> dict:
    return {
        "prompt": f"question {i}",
        "chosen": T(chosen, "c"),
        "chosen_model": "GPT-4",
        "rejected": T(rejected, "r"),
        "rejected_model": "Llama-2-7b-chat",
        "subset": subset,
        "id": i,
    }


REWARDBENCH = [
    rb_row(1, "alpacaeval-easy", 20, 10),
    rb_row(2, "alpacaeval-easy", 5, 15),
    rb_row(3, "mt-bench-med", 12, 12),
    rb_row(4, "llmbar-natural", 30, 8),
    rb_row(5, "donotanswer", 9, 18),
    rb_row(6, "math-prm", 25, 11),
    rb_row(7, "hep-python", 6, 14),
    rb_row(8, "anthropic_helpful", 10, 4),
]


def bok_row(qid: str, lengths: list[int], correct: list[bool], category: str, sampled: list[list[int]]) -> dict:
    row = {"question_id": qid, "category": category, "model_name": "gpt-4o-mini-2024-07-18", "prompt": f"Q {qid}"}
    row |= {f"response_{i}": T(n, "abcdefgh"[i]) for i, n in enumerate(lengths, start=1)}
    return row | {"scores": correct, "mean_score": sum(correct) / len(correct), "sampled_conflict_pairs": sampled}


PPE_CORRECTNESS = [
    bok_row("q1", [10, 30, 20, 5], [True, False, True, False], "law", [[0, 1], [3, 2]]),
    bok_row("q2", [40, 8, 8], [True, False, False], "law", [[1, 0]]),
    bok_row("q3", [7, 9], [True, True], "math", []),
    bok_row("q4", [3, 6], [False, False], "math", []),
    bok_row("q5", [12, 12, 4], [True, False, False], "math", [[0, 1]]),
    bok_row("q6", [5, 5], [True, False], "math", [[0, 1]]),
]


def hp_row(qid: str, first: int, second: int, winner: str, language: str) -> dict:
    return {
        "question_id": qid,
        "model_a": "gpt-4o-2024-05-13",
        "model_b": "llama-3-70b-instruct",
        "winner": winner,
        "language": language,
        "prompt": f"prompt {qid}",
        "response_1": T(first, "x"),
        "response_2": T(second, "y"),
    }


PPE_PREFERENCE = [
    hp_row("p1", 20, 10, "model_a", "English"),
    hp_row("p2", 15, 7, "model_b", "English"),
    hp_row("p3", 6, 6, "tie", "Chinese"),
    hp_row("p4", 3, 9, "model_b", "Chinese"),
]


def ranked(pid: str, category: str, lengths: dict[str, int], rank: dict[str, int]) -> dict:
    responses = [{"id": rid, "content": T(n, rid)} for rid, n in lengths.items()]
    return {"id": pid, "input": f"问题 {pid}", "category": [category], "responses": responses, "rank": rank}


KENDALL = [
    ranked("k1", "写作", {"a": 4, "b": 3, "c": 1, "d": 2}, {"a": 1, "b": 2, "c": 2, "d": 3}),
    ranked("k2", "写作", {"x": 2, "y": 2}, {"x": 1, "y": 2}),
    ranked("k3", "数学", {"a": 1, "b": 2}, {"a": 1, "b": 1}),
    ranked("k4", "数学", {"a": 1, "b": 2, "c": 3}, {"a": 1, "b": 2, "c": 3}),
]


def bench_file(tmp_path: Path, name: str, rows: list[dict], fmt: str | None) -> Path:
    """``rows`` in the upstream layout imported with ``fmt`` (None: already canonical) as the bench file NAME.jsonl."""
    from cheems.data.importers import import_file

    records = import_file(write_jsonl(tmp_path / f"{name}-upstream.jsonl", rows), fmt).records if fmt else None
    out = tmp_path / f"{name}.jsonl"
    return write_jsonl(out, [r.to_json() for r in records] if records else rows)


# ---------------------------------------------------------------- judged outcomes (the bootstrap, cheems compare)

import random  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

if TYPE_CHECKING:
    from cheems.metrics.outcomes import PromptOutcome


def prompt(pid: str, category: str, *correct: bool) -> PromptOutcome:
    """A prompt's outcome in ``category``: one pair a ``correct`` flag, right where it is True."""
    from cheems.metrics.outcomes import PairOutcome, PromptOutcome

    return PromptOutcome(pid, category, [PairOutcome(f"a{i}", f"b{i}", c, 1, 1) for i, c in enumerate(correct)])


def random_bench(seed: int, flip: float = 0.0) -> dict[str, list[PromptOutcome]]:
    """Two subsets, several categories, 1-4 pairs a prompt, some prompts without pairs; ``flip`` changes answers."""
    rng = random.Random(seed)
    bench = {}
    for name, n in (("open", 23), ("human", 17)):
        prompts = []
        for i in range(n):
            pairs = 0 if i % 9 == 4 else rng.randint(1, 4)
            correct = [random.Random(f"{name}{i}{j}").random() < 0.6 for j in range(pairs)]
            correct = [c != (rng.random() < flip) for c in correct]
            prompts.append(prompt(f"{name}{i}", f"cat{i % 3 if name == 'open' else i % 2}", *correct))
        bench[name] = prompts
    return bench


def percentile(values: list[float], level: float) -> tuple[float, float]:
    """The percentile interval of ``values`` at ``level`` (0.95: the 2.5th and 97.5th percentiles)."""
    import numpy as np

    low, high = np.percentile(values, [50 * (1 - level), 50 * (1 + level)])
    return float(low), float(high)


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


# ------------------------------------------------------------------------ RL trainers, as they call reward functions

import importlib.util  # noqa: E402


def trl_keywords(n: int) -> dict:
    """Everything TRL's GRPOTrainer passes a reward function besides prompts and completions (1.16's
    ``_calculate_rewards``): the completions' ids, its state, its two logging hooks, the dataset's other columns."""
    from transformers import TrainerState

    return {
        "completion_ids": [[1, 2, 3]] * n,
        "trainer_state": TrainerState(),
        "log_extra": lambda column, values: None,
        "log_metric": lambda name, value: None,
        "category": ["历史"] * n,
        "id": [f"p{i}" for i in range(n)],
    }


def load_as_verl_does(path: str, name: str = "compute_score"):
    """verl's ``get_custom_reward_fn``: the file at ``custom_reward_function.path`` executed as ``custom_module``,
    its function ``name`` (``custom_reward_function.name``) wrapped so that ``reward_kwargs`` win over the call's
    keywords."""
    spec = importlib.util.spec_from_file_location("custom_module", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    raw = getattr(module, name)

    def with_kwargs(reward_kwargs: dict):
        return lambda *args, **kwargs: raw(*args, **{**kwargs, **reward_kwargs})

    return with_kwargs


def grpo_step(policy: Path, reward_funcs: list, columns: dict[str, list], tmp_path: Path, **config: object):
    """One real GRPOTrainer step on the CPU (fp32: TRL defaults to bf16) over a dataset of ``columns`` (``prompt``
    and any others, which TRL hands the reward functions); ``config``: GRPOConfig options over these. The trainer."""
    import pytest

    trl = pytest.importorskip("trl")
    datasets = pytest.importorskip("datasets")
    from transformers import AutoTokenizer

    options: dict = {
        "output_dir": str(tmp_path / "out"),
        "max_steps": 1,
        "per_device_train_batch_size": 4,
        "num_generations": 4,
        "max_completion_length": 8,
        "logging_steps": 1,
        "report_to": [],
        "use_cpu": True,
        "save_strategy": "no",
        "seed": 0,
        "bf16": False,
    }
    args = trl.GRPOConfig(**{**options, **config})
    tokenizer = AutoTokenizer.from_pretrained(policy)
    trainer = trl.GRPOTrainer(
        model=str(policy),
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=datasets.Dataset.from_dict(columns),
        processing_class=tokenizer,
    )
    trainer.train()
    return trainer
