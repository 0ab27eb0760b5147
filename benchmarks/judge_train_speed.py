"""The mechanics of ``cheems train-judge`` beside ``cheems train``: tokens per second on the same random Qwen2.

One run builds synthetic ranked records (a Chinese question, two answers, ranked), the judge rows ``cheems export
judge-sft`` makes of them (each pair in both orders, the judge prompt of ``cheems judge``), a Qwen2-style tokenizer
(the tests' byte-level BPE with Qwen's chat template) and one random Qwen2 (a causal LM for the judge, the same
weights under a one-label head for the reward model). Then, at the same ``--max-length`` and the same number of
optimizer steps (``--records`` records: 2 judge rows and 2 responses each; ``--batch-size`` rows or responses
per step), one epoch of:

- ``train-judge``, packed (``--packing auto``: rows side by side, each attending to itself);
- ``train-judge``, padded (``--packing none``);
- ``train``, the listwise reward model on the same records (``--packing auto``: the prompt once per batch).

Reported per run: optimizer steps, tokens forwarded without padding (the ``tokens`` column of ``train_log.csv``),
the loop's seconds (``seconds`` of the last log row: no loading, no saving) and tokens per second. The judge's rows
are longer than the reward model's (the judge prompt holds both answers and the criteria), so tokens per second,
not steps per second, is the comparable figure. Judge *quality* is not measured: that needs a pretrained Chinese
chat model, which this machine does not have.

    python benchmarks/judge_train_speed.py --quick   # hidden 64, 2 layers, 8 records, 2 rounds: a smoke run
    python benchmarks/judge_train_speed.py           # hidden 512, 8 layers, 64 records, fastest of 3 rounds
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from cheems.prompts.judge_sft import export_judge_sft
from cheems.train.config import load_config
from cheems.train.judge_config import load_judge_config
from cheems.train.judge_trainer import train_judge_model
from cheems.train.trainer import train_reward_model

SUBJECTS = [
    "长城",
    "故宫",
    "颐和园",
    "奖励模型",
    "深度学习",
    "人工智能",
    "这道数学题",
    "机器翻译",
    "代码助手",
    "北京的春天",
]
GOOD = "始建于春秋战国时期，后来不断修建。需要仔细思考才能回答，值得一去，建议早上出发。"
BAD = "不知道。"


def records(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` ranked records: a question and two answers, the longer one ranked first."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        subject = rng.choice(SUBJECTS)
        good = subject + GOOD * rng.randint(1, 3)
        responses = [{"id": "a", "content": good}, {"id": "b", "content": subject + BAD}]
        out.append({"id": f"p{i}", "input": f"{subject}的历史是什么？", "category": ["知识"], "responses": responses,
                    "rank": {"a": 1, "b": 2}})  # fmt: skip
    return out


def build_models(root: Path, hidden: int, layers: int) -> tuple[Path, Path]:
    """One random Qwen2, saved as a causal LM and as a one-label reward model (the same backbone weights)."""
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM, Qwen2ForSequenceClassification

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the tests' Qwen2-style tokenizer
    from tiny_models import build_tiny_tokenizer

    tokenizer = AutoTokenizer.from_pretrained(build_tiny_tokenizer(root / "tokenizer"))
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 64) * 2,
        num_key_value_heads=max(1, hidden // 64),
        num_labels=1,
        tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    lm = Qwen2ForCausalLM(config)
    rm = Qwen2ForSequenceClassification(config)
    rm.model.load_state_dict(lm.model.state_dict())
    for model, name in ((lm, "lm"), (rm, "rm")):
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
    return root / "lm", root / "rm"


def log_figures(folder: Path) -> dict[str, float]:
    """Steps, tokens and the loop's seconds from a run's ``train_log.csv``."""
    with (folder / "train_log.csv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    tokens = sum(int(r["tokens"]) for r in rows)
    seconds = float(rows[-1]["seconds"])
    return {"steps": len(rows), "tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds}


def one_round(root: Path, lm: Path, rm: Path, ranked: Path, common: dict[str, Any]) -> dict[str, dict[str, float]]:
    """One epoch of each run, in ``root``: the figures of each."""
    results = {}
    for packing in ("auto", "none"):
        out = root / f"judge-{packing}"
        data = str(ranked.parent / "judge.jsonl")
        config = {"data": [data], "model": str(lm), "output": str(out), "packing": packing}
        train_judge_model(load_judge_config(None, {**common, **config}))
        results[f"train-judge --packing {packing}"] = log_figures(out)
    config = {"data": [str(ranked)], "model": str(rm), "output": str(root / "rm-out"), "eval_every": 0}
    train_reward_model(load_config(None, {**common, **config, "preset": "paper", "reg_coef": 0.1}))
    results["train (listwise RM, --packing auto)"] = log_figures(root / "rm-out")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="hidden 64, 2 layers, 8 records: a smoke run")
    parser.add_argument("--records", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=8, help="judge rows or RM responses per step")
    parser.add_argument("--max-length", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each; the fastest is reported")
    args = parser.parse_args()
    if args.quick:
        args.records, args.hidden, args.layers, args.batch_size, args.rounds = 8, 64, 2, 4, 2
    torch.set_num_threads(args.threads)
    common = {"epochs": 1, "batch_size": args.batch_size, "max_length": args.max_length, "lr": 1e-4}
    common |= {"progress": False, "cpu": True, "bf16": False, "log_every": 1}
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        lm, rm = build_models(root, args.hidden, args.layers)
        ranked = root / "ranked.jsonl"
        ranked.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records(args.records)))
        export_judge_sft([ranked], root / "judge.jsonl")
        for n in range(args.rounds):  # the fastest round of each: the others met a busy machine
            for name, figures in one_round(root / f"round{n}", lm, rm, ranked, common).items():
                if name not in results or figures["seconds"] < results[name]["seconds"]:
                    results[name] = figures
    mode = "quick" if args.quick else "full"
    print(f"\n{mode}: random Qwen2 hidden {args.hidden}, {args.layers} layers, {args.records} records, "
          f"max length {args.max_length}, {args.threads} threads, fp32 on the CPU, "
          f"fastest of {args.rounds} rounds")  # fmt: skip
    print("| run | steps | tokens | seconds | tokens/s |\n|---|---:|---:|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['steps']} | {r['tokens']:,} | {r['seconds']:.2f} | {r['tokens_per_s']:,.0f} |")


if __name__ == "__main__":
    main()
