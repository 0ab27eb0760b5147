"""Shared-prefix scoring vs the plain path: the same causal RM, the same rows, scored both ways in one run.

A random-weight Qwen2 (speed does not depend on the weights) is built with the real Qwen2 tokenizer
and chat template from ``../shared/models/qwen2-tokenizer`` and scored through ``load_scorer`` (length-
grouped batches, inference mode, the CPU token budget) with ``shared_prefix`` on and off, on:

- ``cheemsbench``: CheemsBench-shaped records, a ~190-character prompt and 5 responses of ~440;
- ``multi-turn``: a system turn and a 6-turn dialogue (~1,500 characters) before the last question,
  then 5 short responses (~60 characters).

Text comes from ``synth_preference.py``'s sentence pool. The two paths run interleaved in rounds (a shard of
prompts each, alternating which goes first) so load from other processes hits both alike; CPU
seconds (this process, all threads) are reported beside wall seconds, being less sensitive to other
processes on a shared machine. tokens/s counts the tokens of the full rows (what the plain path
runs) for both; "computed" is what each path actually ran through the model (the shared path runs
each prompt once). The scores of the two paths are compared (max |difference|).

    python benchmarks/shared_prefix.py [--prompts 6] [--hidden 256] [--layers 4] [--rounds 3] [--threads N]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

import torch
from synth_preference import prompt, sentence_pool, text
from transformers import AutoTokenizer, Qwen2Config, Qwen2ForSequenceClassification

from cheems.models import load_scorer
from cheems.models.base import ScoreItem

TOKENIZER = Path(__file__).resolve().parents[2] / "shared" / "models" / "qwen2-tokenizer"


def build_qwen2(folder: Path, hidden: int, layers: int) -> Path:
    """A random Qwen2ForSequenceClassification (num_labels=1, head dim 64, 2 KV heads) with the real tokenizer."""
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
    config = Qwen2Config(
        vocab_size=151936,
        hidden_size=hidden,
        intermediate_size=hidden * 11 // 4,
        num_hidden_layers=layers,
        num_attention_heads=hidden // 64,
        num_key_value_heads=2,
        num_labels=1,
        tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    Qwen2ForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def cheemsbench_prompts(rng: random.Random, pool: list[str], n: int) -> list[list[ScoreItem]]:
    """``n`` prompts of ~190 characters, each with 5 responses of ~440."""
    return [[(p, text(rng, pool, 440)) for _ in range(5)] for p, _ in (prompt(rng, pool, i) for i in range(n))]


def multi_turn_prompts(rng: random.Random, pool: list[str], n: int) -> list[list[ScoreItem]]:
    """``n`` dialogues: a system turn, 6 turns of ~250 characters, a last question; 5 responses of ~60."""
    out = []
    for i in range(n):
        turns = [{"role": "system", "content": "你是一位知识渊博、回答严谨的中文助手。"}]
        turns += [{"role": ("user", "assistant")[t % 2], "content": text(rng, pool, 250)} for t in range(6)]
        turns.append({"role": "user", "content": prompt(rng, pool, i)[0][-60:]})
        out.append([(turns, text(rng, pool, 60)) for _ in range(5)])
    return out


def run(scorer, items: list[ScoreItem], shared: bool) -> tuple[list[float], float, float]:
    """Scores, wall seconds and CPU seconds (this process, all threads) of one path."""
    scorer.shared_prefix = shared
    start, cpu = time.perf_counter(), time.process_time()
    scores = scorer.score(items)
    return scores, time.perf_counter() - start, time.process_time() - cpu


def measure(scorer, prompts: list[list[ScoreItem]], rounds: int) -> dict:
    """Both paths over ``rounds`` interleaved shards of ``prompts``: wall, CPU, tokens and the largest score gap."""
    wall, cpu = {True: 0.0, False: 0.0}, {True: 0.0, False: 0.0}
    scores: dict[bool, list[float]] = {True: [], False: []}
    for r in range(rounds):
        shard = [item for items in prompts[r::rounds] for item in items]
        for shared in (True, False) if r % 2 == 0 else (False, True):
            values, seconds, cpu_seconds = run(scorer, shard, shared)
            scores[shared] += values
            wall[shared] += seconds
            cpu[shared] += cpu_seconds
    items = [item for r in range(rounds) for items in prompts[r::rounds] for item in items]
    rows = scorer.encode(items)
    scorer.shared_prefix = True
    groups, plain = scorer.prefix_plan(items, rows)
    full = sum(len(ids) for ids, _ in rows)
    computed = full - sum(g.length * (len(g.rows) - 1) for g in groups)
    return {
        "responses": len(items),
        "prompt_tokens": sum(g.length for g in groups) / max(1, len(groups)),
        "row_tokens": full / len(items),
        "full": full,
        "computed": computed,
        "plain_rows": len(plain),
        "wall": wall,
        "cpu": cpu,
        "gap": max(abs(a - b) for a, b in zip(scores[True], scores[False])),
    }


def table(results: dict[str, dict]) -> str:
    """The markdown table of both data sets."""
    lines = [
        "| data | responses | shared tokens / prompt | tokens / row | path | tokens computed | wall s | CPU s "
        "| tokens/s | speed-up (wall) | speed-up (CPU) | max abs score gap |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, m in results.items():
        for shared in (False, True):
            computed = m["computed"] if shared else m["full"]
            speedup = f"{m['wall'][False] / m['wall'][True]:.2f}x" if shared else ""
            cpu_speedup = f"{m['cpu'][False] / m['cpu'][True]:.2f}x" if shared else ""
            gap = f"{m['gap']:.1e}" if shared else ""
            lines.append(
                f"| {name} | {m['responses']} | {m['prompt_tokens']:.0f} | {m['row_tokens']:.0f} "
                f"| {'shared prefix' if shared else 'plain'} | {computed:,} "
                f"| {m['wall'][shared]:.1f} | {m['cpu'][shared]:.1f} "
                f"| {m['full'] / m['wall'][shared]:,.0f} | {speedup} | {cpu_speedup} | {gap} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=6, help="prompts per data set (5 responses each)")
    parser.add_argument("--hidden", type=int, default=256, help="hidden size of the random Qwen2")
    parser.add_argument("--layers", type=int, default=4, help="layers of the random Qwen2")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=2048)
    parser.add_argument("--dtype", default="fp32", choices=["auto", "fp32", "bf16"])
    parser.add_argument("--device", default=None)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    rng = random.Random(0)
    pool = sentence_pool(rng)
    data = {
        "cheemsbench": cheemsbench_prompts(rng, pool, args.prompts),
        "multi-turn": multi_turn_prompts(rng, pool, args.prompts),
    }
    with tempfile.TemporaryDirectory() as tmp:
        folder = build_qwen2(Path(tmp) / "qwen2", args.hidden, args.layers)
        scorer = load_scorer(
            str(folder), batch_size=args.batch_size, max_length=args.max_length, device=args.device, dtype=args.dtype
        )
        for prompts in data.values():  # warm-up: load the weights, first-call costs of each path and shape
            for shared in (True, False):
                run(scorer, prompts[0], shared)
        results = {name: measure(scorer, prompts, args.rounds) for name, prompts in data.items()}
    print(
        f"random Qwen2: hidden {args.hidden}, {args.layers} layers, dtype {args.dtype}, device {scorer.model.device}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch size {args.batch_size}"
    )
    print(table(results))


if __name__ == "__main__":
    main()
