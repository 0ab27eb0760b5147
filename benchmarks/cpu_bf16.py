"""bf16 autocast or fp32 on this CPU, for ``cheems score`` and ``cheems train`` (issue 31).

What ``--dtype auto`` should pick on a CPU (:func:`cheems.runtime.compute_dtype`) depends on whether bf16
runs faster than fp32 here, which depends on the CPU (AVX512-BF16, AMX) and on the model's shapes. This
script measures both on m3e-small, side by side in one run:

- score: :class:`cheems.models.hf.HFRewardScorer` with ``dtype="fp32"`` and ``dtype="bf16"`` (fp32 weights,
  bf16 autocast: what ``auto`` gives on a CPU) on the same responses, no cache;
- train: what one ``cheems train`` step does on a CPU (:func:`cheems.train.forward.forward_rewards` over
  length-sorted chunks, backward, fused AdamW), without and inside ``torch.autocast("cpu", bfloat16)``
  (what accelerate's ``mixed_precision="bf16"`` does on a CPU).

The two precisions alternate in rounds (which goes first alternates too), so load from other processes on a
shared machine hits both alike; the figure that counts is the ratio of their summed times. Also printed: the
CPU's bf16 capability as torch and /proc/cpuinfo see it, and bf16/fp32 1024x1024 matmul speed.

    PYTHONPATH=src python benchmarks/cpu_bf16.py [--responses 192] [--steps 6] [--rounds 4] [--max-length 256]
"""

from __future__ import annotations

import argparse
import os
import time
from contextlib import nullcontext
from pathlib import Path

import torch
from score_throughput import matmul_gflops  # beside this script: its own folder is on sys.path

from cheems.data.importers import import_file
from cheems.models.backbones import locate_model
from cheems.models.encoding import RewardEncoder
from cheems.models.hf import HFRewardScorer
from cheems.runtime import cpu_bf16_report
from cheems.train.forward import forward_rewards
from cheems.train.model import load_reward_model

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "oasst1_zh" / "oaast_rm_zh.json"
MODEL = "m3e-small"


def load_items(path: Path, limit: int) -> list[tuple[str, str]]:
    """(prompt, response) pairs of oasst1_zh (the first ``limit``); synthetic Chinese text when it is absent."""
    if not path.is_file():
        return [
            (f"第{i}个问题：长城的历史是什么？" * 3, "长城始建于春秋战国时期。" * (5 + i % 20)) for i in range(limit)
        ]
    records = import_file(path, "ranked", skip_invalid=True).records
    items = [(r.input if isinstance(r.input, str) else str(r.input), x.content) for r in records for x in r.responses]
    return items[:limit]


def time_score(scorer: HFRewardScorer, items: list[tuple[str, str]]) -> float:
    """Wall seconds to score ``items``."""
    start = time.perf_counter()
    scorer.score(items)
    return time.perf_counter() - start


def time_train(model, optimizer, batches, pad_id: int, bf16: bool) -> float:
    """Wall seconds for one optimizer step per batch, fp32 or inside bf16 autocast."""
    start = time.perf_counter()
    for rows in batches:
        with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else nullcontext():
            rewards = forward_rewards(model, rows, pad_id, "cpu", 512)
        loss = torch.nn.functional.logsigmoid(rewards[::2] - rewards[1::2]).neg().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--responses", type=int, default=192, help="responses scored per round")
    parser.add_argument("--steps", type=int, default=6, help="training steps (of --batch-size rows) per round")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the CPU is shared: 1 by default)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    print(f"CPU: {cpu_bf16_report()}; torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    fp32, bf16 = matmul_gflops(torch.float32, reps=5), matmul_gflops(torch.bfloat16, reps=5)
    print(f"matmul 1024x1024: fp32 {fp32:.1f} GFLOP/s, bf16 {bf16:.1f} GFLOP/s (bf16/fp32 {bf16 / fp32:.2f})")

    items = load_items(args.data, args.responses + args.steps * args.batch_size)
    score_items, train_items = items[: args.responses], items[args.responses :]
    source = locate_model(MODEL)
    scorers = {
        d: HFRewardScorer(source, dtype=d, max_length=args.max_length, device="cpu", batch_size=16)
        for d in ("fp32", "bf16")
    }
    for scorer in scorers.values():
        scorer.score(score_items[:8])  # load and warm up outside the timings

    encoder = RewardEncoder(source, args.max_length)
    rows = encoder.features(train_items)
    batches = [rows[i : i + args.batch_size] for i in range(0, len(rows), args.batch_size)]
    torch.manual_seed(0)
    model, tokenizer = load_reward_model(source.location)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, fused=True)
    time_train(model, optimizer, batches[:1], tokenizer.pad_token_id, False)  # warm-up
    time_train(model, optimizer, batches[:1], tokenizer.pad_token_id, True)

    tokens = sum(len(ids) for ids, _ in encoder.features(score_items))
    train_tokens = sum(len(ids) for ids, _ in rows)
    totals = {(what, d): 0.0 for what in ("score", "train") for d in ("fp32", "bf16")}
    for r in range(args.rounds):
        order = ("fp32", "bf16") if r % 2 == 0 else ("bf16", "fp32")
        for d in order:
            totals[("score", d)] += time_score(scorers[d], score_items)
        for d in order:
            totals[("train", d)] += time_train(model, optimizer, batches, tokenizer.pad_token_id, d == "bf16")
    print(f"\n{args.rounds} interleaved rounds, max_length {args.max_length}:")
    print("| work | fp32 s | bf16 s | fp32 tok/s | bf16 tok/s | bf16 time / fp32 time |")
    print("|---|---|---|---|---|---|")
    for what, n in (("score", tokens), ("train", train_tokens)):
        a, b = totals[(what, "fp32")], totals[(what, "bf16")]
        label = f"score {len(score_items)} responses" if what == "score" else f"train {len(batches)} steps"
        print(
            f"| {label} | {a:.1f} | {b:.1f} | {n * args.rounds / a:,.0f} | {n * args.rounds / b:,.0f} | {b / a:.2f} |"
        )
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
