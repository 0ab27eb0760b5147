"""Scoring under a launcher: 2 CPU processes (gloo) write the same bytes as 1, for ``score`` and
``eval --model``; a user error on one process ends both with one error line; the shard arithmetic."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
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
        rows.append({"id": f"p{i}", "input": "请回答问题" * (1 + i % 5) + f"{i}？", "responses": responses, "rank": rank})
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def cheems(args: list[str], processes: int = 1) -> subprocess.CompletedProcess:
    launch = [sys.executable]
    if processes > 1:
        launch += ["-m", "torch.distributed.run", "--nproc_per_node", str(processes), "--master_port", str(free_port())]
    return subprocess.run(
        [*launch, "-m", "cheems", *args], capture_output=True, text=True, env=ENV, cwd=REPO, timeout=120
    )


@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory, qwen2_tokenizer_dir) -> Path:
    return tiny_models.build_tiny_qwen2(tmp_path_factory.mktemp("qwen"), qwen2_tokenizer_dir)


def test_two_processes_write_the_scores_file_and_eval_report_of_one(tiny_qwen, tmp_path):
    bench = write_bench(tmp_path / "open.jsonl", 14)  # 42 responses: 14 batches of at most 3
    common = ["--model", str(tiny_qwen), "--bench", str(bench), "--batch-size", "3"]
    outputs = {}
    for n in (1, 2):
        score = cheems(["score", *common, "--cache", str(tmp_path / f"c{n}.sqlite"), "-o", str(tmp_path / f"s{n}")], n)
        assert score.returncode == 0, score.stderr[-3000:]
        assert score.stdout.count("wrote 42 scores") == 1  # rank 0 alone prints
        report = tmp_path / f"e{n}.json"
        ev = cheems(["eval", *common, "--no-cache", "--resamples", "50", "--output-json", str(report)], n)
        assert ev.returncode == 0, ev.stderr[-3000:]
        assert ev.stdout.count("CheemsBench metrics") == 1
        outputs[n] = ((tmp_path / f"s{n}").read_bytes(), report.read_bytes())
    assert outputs[2] == outputs[1]
    assert len(outputs[1][0].splitlines()) == 42 and len(set(outputs[1][0].splitlines())) == 42
    # rank 0 wrote every score to the cache: a 1-process run on the 2-process cache reads them all back
    again = cheems(["score", *common, "--cache", str(tmp_path / "c2.sqlite"), "-o", str(tmp_path / "again")])
    assert again.returncode == 0 and (tmp_path / "again").read_bytes() == outputs[1][0]


def test_a_user_error_on_rank_0_ends_both_processes_with_one_error_line(tmp_path):
    """Only rank 0 reads the cache: its error must reach rank 1, not leave it waiting in a collective."""
    bench = write_bench(tmp_path / "open.jsonl", 3)
    bad = tmp_path / "cache.sqlite"
    bad.write_text("not a database, just text that is long enough to be read as a header" * 20)
    run = cheems(["score", "--model", "length", "--bench", str(bench), "--cache", str(bad), "-o", str(tmp_path / "s")], 2)
    assert run.returncode != 0
    errors = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "not a score cache" in errors[0], run.stderr[-3000:]
    assert not (tmp_path / "s").exists()
