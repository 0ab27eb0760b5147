"""Scoring under a launcher: 2 CPU processes (gloo) write the same bytes as 1, for ``score`` and
``eval --model``; a user error on one process ends both with one error line; the shard arithmetic."""

from __future__ import annotations

import json
import os
import random
import socket
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from cheems.models.base import length_batches
from cheems.models.sharding import place_shares, shard

tiny_models = pytest.importorskip("tiny_models")
REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1", "CHEEMS_CACHE_DIR": ""}


# ---------------------------------------------------------------- the shard arithmetic
@pytest.mark.parametrize("world", [1, 2, 3, 5])
def test_every_item_is_scored_once_and_put_back_in_order(world):
    rng = random.Random(world)
    lengths = [rng.randint(1, 300) for _ in range(47)]
    batches = length_batches(lengths, 4, 512)
    shares = [shard(batches, rank, world) for rank in range(world)]
    # every batch on exactly one process, round-robin: process r has batches r, r + world, ...
    assert sorted(i for share in shares for b in share for i in b) == list(range(47))
    assert [len(s) for s in shares] == [len(range(r, len(batches), world)) for r in range(world)]
    # each process's values (here: the item's own index, times 10) land on their items
    values = [[10 * i for b in share for i in b] for share in shares]
    assert place_shares(batches, world, values, 47) == [10 * i for i in range(47)]


def test_a_share_of_the_wrong_length_is_refused():
    with pytest.raises(RuntimeError, match="process 1 returned 1 values for 2 items"):
        place_shares([[0], [1, 2]], 2, [[0.5], [0.1]], 3)


# ---------------------------------------------------------------- 2 processes vs 1
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_bench(path: Path, n_prompts: int) -> Path:
    """Prompts of varied length with 3 responses each (varied too: several length batches), ranked."""
    rows = []
    for i in range(n_prompts):
        responses = [{"id": f"r{j}", "content": "回答" * (1 + (7 * i + 5 * j) % 23) + f"第{j}种。"} for j in range(3)]
        rank = {"r0": 1, "r1": 2, "r2": 2 + i % 2}
        rows.append(
            {"id": f"p{i}", "input": "请回答问题" * (1 + i % 5) + f"{i}？", "responses": responses, "rank": rank}
        )
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def cheems(args: list[str], processes: int) -> tuple[int, str, str]:
    """Run ``cheems ARGS``: in this process for 1 (saves a torch import on a shared box), else under torchrun."""
    if processes == 1:
        from typer.testing import CliRunner

        from cheems.cli.main import app

        one = CliRunner().invoke(app, args)
        return one.exit_code, one.stdout, ""
    launch = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(processes)]
    launch += ["--master_port", str(free_port()), "-m", "cheems"]
    run = subprocess.run([*launch, *args], capture_output=True, text=True, env=ENV, cwd=REPO, timeout=120)
    return run.returncode, run.stdout, run.stderr


@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory, qwen2_tokenizer_dir) -> Path:
    return tiny_models.build_tiny_qwen2(tmp_path_factory.mktemp("qwen"), qwen2_tokenizer_dir)


@pytest.fixture
def one_thread():
    """One thread here as in each launched process (OMP_NUM_THREADS=1): the same kernels, the same bits."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_two_processes_write_the_scores_file_and_eval_report_of_one(tiny_qwen, tmp_path, one_thread):
    bench = write_bench(tmp_path / "open.jsonl", 14)  # 42 responses: 14 batches of at most 3
    # fp32: under bf16 (auto on a CPU with bf16 units) some of the 42 scores round to the same number
    common = ["--model", str(tiny_qwen), "--bench", str(bench), "--batch-size", "3", "--dtype", "fp32"]
    outputs = {}
    for n in (1, 2):
        code, out, err = cheems(
            ["score", *common, "--cache", str(tmp_path / f"c{n}.sqlite"), "-o", str(tmp_path / f"s{n}")], n
        )
        assert code == 0, (out, err[-3000:])
        assert out.count("wrote 42 scores") == 1  # rank 0 alone prints
        report = tmp_path / f"e{n}.json"
        code, out, err = cheems(["eval", *common, "--no-cache", "--resamples", "50", "--output-json", str(report)], n)
        assert code == 0, (out, err[-3000:])
        assert out.count("CheemsBench metrics") == 1
        outputs[n] = ((tmp_path / f"s{n}").read_bytes(), report.read_bytes())
    assert outputs[2] == outputs[1]
    scores = [json.loads(line)["score"] for line in outputs[1][0].splitlines()]
    assert len(scores) == 42 and len(set(scores)) == 42  # every response scored, none left at a placeholder
    # rank 0 wrote every score to the cache, once
    with closing(sqlite3.connect(tmp_path / "c2.sqlite")) as db:
        assert sorted(v for (v,) in db.execute("SELECT score FROM scores")) == sorted(scores)


def test_a_user_error_on_rank_0_ends_both_processes_with_one_error_line(tmp_path):
    """Only rank 0 reads the cache: its error must reach rank 1, not leave it waiting in a collective."""
    bench = write_bench(tmp_path / "open.jsonl", 3)
    bad = tmp_path / "cache.sqlite"
    bad.write_text("not a database, just text that is long enough to be read as a header" * 20)
    args = ["score", "--model", "length", "--bench", str(bench), "--cache", str(bad), "-o", str(tmp_path / "s")]
    code, _, err = cheems(args, 2)
    assert code != 0
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "not a score cache" in errors[0], err[-3000:]
    assert not (tmp_path / "s").exists()


# ---------------------------------------------------------------- the per-process device and voice
def test_each_launched_process_takes_its_own_gpu_and_only_rank_0_speaks(monkeypatch):
    from cheems.runtime import ProgressBar, is_main_process, pick_device

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    assert pick_device("cuda") == "cuda" and is_main_process()
    monkeypatch.setenv("WORLD_SIZE", "16")
    monkeypatch.setenv("RANK", "11")  # the fourth process of the second machine
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert pick_device("cuda") == "cuda:3"
    assert pick_device("cuda:0") == "cuda:0" and pick_device("cpu") == "cpu"  # asked for: kept
    assert pick_device(cpu=True) == "cpu"
    assert not is_main_process()
    assert not ProgressBar(10, "scoring").enabled
