"""Training speed: ``cheems train`` (listwise, prompt-grouped) vs TRL's ``RewardTrainer`` (pairwise).

Same run, same machine, same data, backbone, max length, learning-rate schedule and inputs:

- data: the oasst1_zh training split (``cheems.data.split``, 20% of prompts held out, seed 0),
  by default only prompts with 4+ ranked replies (``--min-responses``);
- cheems: :func:`cheems.train.trainer.train_reward_model` (what ``cheems train`` runs): every response
  forwarded once per epoch, all pairs of a prompt from one batch of ``--batch-size`` responses,
  each batch forwarded in length-sorted chunks (``chunk_tokens``, auto on a CPU) with one loss;
- TRL: ``RewardTrainer`` on the pairwise expansion of the same rankings (every pair the ranks
  imply), ``--batch-size / 2`` pairs per step so both forward the same number of sequences per
  step. Its inputs are cheems' own token ids (the same (prompt, response) text pair, cut the
  same way), with token type ids padded by a small collator subclass, so both models see
  identical tokens and the held-out evaluation scores both the same way.

Both train from m3e-small with lr 5e-5, 10% linear warm-up then cosine, weight decay 0.01,
clipping 1.0, fp32 on a CPU (this one has no bf16 units), each tool's defaults otherwise
(TRL turns dropout off; cheems keeps the backbone's). Reported: wall and CPU seconds per
epoch, forward passes per epoch, and accuracy / exact match on the held-out split.

    pip install -e '.[bench]'   # TRL and datasets
    python benchmarks/train_speed.py [--min-responses 4] [--epochs 2] [--max-length 512]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from cheems.data.importers import import_file
from cheems.data.io import write_records
from cheems.data.schema import Record
from cheems.data.split import split_records
from cheems.evaluate import evaluate_scores
from cheems.models import load_scorer, score_records
from cheems.models.backbones import locate_model
from cheems.models.encoding import RewardEncoder
from cheems.ranking.pairs import training_pairs
from cheems.train.config import load_config
from cheems.train.trainer import train_reward_model

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "oasst1_zh" / "oaast_rm_zh.json"
MODEL = "m3e-small"


@dataclass
class Run:
    name: str
    epoch_wall: list[float]
    """Seconds per epoch of the training loop alone."""
    total_wall: float
    total_cpu: float
    """The whole job from records in memory to a trained model: tokenizing, loading, training."""
    forward_passes: int
    folder: Path


def load_split(path: Path, min_responses: int) -> tuple[list[Record], list[Record]]:
    """(train prompts with at least ``min_responses`` replies, the whole held-out split)."""
    if not path.exists():
        raise SystemExit(f"oasst1_zh not found at {path}: this benchmark reads ../shared/data beside the repository")
    train_split, test_split = split_records(import_file(path, "ranked", skip_invalid=True).records, 0.2, seed=0)
    return [r for r in train_split if len(r.responses) >= min_responses], test_split


def run_cheems(records: list[Record], args: argparse.Namespace, folder: Path) -> Run:
    """``cheems train`` on the records; per-epoch times from the step log (the loop alone)."""
    data = folder / "train.jsonl"
    write_records(data, records)
    config = load_config(
        None,
        {
            "model": MODEL,
            "data": [str(data)],
            "output": str(folder / "model"),
            "epochs": args.epochs,
            "batch_size": args.batch_size,
            "max_length": args.max_length,
            "lr": args.lr,
            "warmup_ratio": 0.1,
            "weight_decay": 0.01,
            "seed": args.seed,
            "progress": False,
            "cpu": True,
            "bf16": False,
            "save_every": 0,
            "chunk_tokens": args.chunk_tokens,
        },
    )
    wall0, cpu0 = time.perf_counter(), time.process_time()
    result = train_reward_model(config)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    ends = [row["seconds"] for row in result.history if float(row["epoch"]).is_integer()]
    walls = [b - a for a, b in zip([0.0] + ends, ends)]
    return Run(
        "cheems train (listwise, prompt-grouped)",
        walls,
        wall,
        cpu,
        result.epoch_plans[0]["forward_passes"],
        folder / "model",
    )


def pairwise_dataset(records: list[Record], max_length: int) -> "datasets.Dataset":  # noqa: F821
    """Every (chosen, rejected) pair the ranks imply, as cheems' token ids and token type ids."""
    import datasets

    encoder = RewardEncoder(locate_model(MODEL), max_length)
    rows = []
    for record in records:
        pairs = training_pairs(record)
        ids = sorted({rid for pair in pairs for rid in pair})
        encoded = dict(zip(ids, encoder.features([(record.input, record.response(rid).content) for rid in ids])))
        for chosen, rejected in pairs:
            (c_ids, c_types), (r_ids, r_types) = encoded[chosen], encoded[rejected]
            rows.append(
                {
                    "chosen_ids": c_ids,
                    "rejected_ids": r_ids,
                    "chosen_token_type_ids": c_types,
                    "rejected_token_type_ids": r_types,
                }
            )
    return datasets.Dataset.from_list(rows)


def epoch_timer() -> Any:
    """A TRL/transformers callback whose ``wall`` lists the seconds of each epoch."""
    from transformers import TrainerCallback

    class EpochTimer(TrainerCallback):
        def __init__(self) -> None:
            self.wall: list[float] = []

        def on_epoch_begin(self, *_, **__):
            self._start = time.perf_counter()

        def on_epoch_end(self, *_, **__):
            self.wall.append(time.perf_counter() - self._start)

    return EpochTimer()


def trl_config(folder: Path, args: argparse.Namespace, **settings: Any) -> Any:
    """TRL's ``RewardConfig`` as these benchmarks run it: ``args.batch_size / 2`` pairs per step, cheems' schedule
    (lr, 10% warm-up, cosine, clipping 1.0), fp32 on the CPU, no saving or reporting; ``settings`` on top."""
    from trl import RewardConfig

    return RewardConfig(
        **{
            "output_dir": str(folder / "trl-out"),
            "per_device_train_batch_size": max(1, args.batch_size // 2),
            "learning_rate": args.lr,
            "lr_scheduler_type": "cosine",
            "warmup_steps": 0.1,
            "max_grad_norm": 1.0,
            "max_length": args.max_length,
            "seed": args.seed,
            "use_cpu": True,
            "bf16": False,
            "save_strategy": "no",
            "report_to": "none",
            "disable_tqdm": True,
            "remove_unused_columns": False,
            "dataloader_num_workers": 0,
            **settings,
        }
    )


def run_trl(records: list[Record], args: argparse.Namespace, folder: Path) -> Run:
    """TRL ``RewardTrainer`` on the pairwise expansion; per-epoch times from a callback."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.trainer_utils import set_seed
    from trl import RewardTrainer
    from trl.trainer.reward_trainer import DataCollatorForPreference

    from cheems.models import resolve_backbone

    class WithTokenTypes(DataCollatorForPreference):
        """TRL's collator plus BERT's token type ids (chosen rows first, as TRL stacks them)."""

        def torch_call(self, examples):
            batch = super().torch_call(examples)
            types = [torch.tensor(e["chosen_token_type_ids"]) for e in examples] + [
                torch.tensor(e["rejected_token_type_ids"]) for e in examples
            ]
            batch["token_type_ids"] = torch.nn.utils.rnn.pad_sequence(types, batch_first=True)
            return batch

    wall0, cpu0 = time.perf_counter(), time.process_time()
    dataset = pairwise_dataset(records, args.max_length)
    path = resolve_backbone(MODEL)
    tokenizer = AutoTokenizer.from_pretrained(path)
    set_seed(args.seed)
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1)
    timer = epoch_timer()
    config = trl_config(folder, args, num_train_epochs=args.epochs, weight_decay=0.01, logging_steps=10_000)
    trainer = RewardTrainer(
        model=model,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        data_collator=WithTokenTypes(pad_token_id=tokenizer.pad_token_id),
        callbacks=[timer],
    )
    trainer.train()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    trainer.save_model(str(folder / "model"))
    return Run("TRL RewardTrainer (pairwise)", timer.wall, wall, cpu, 2 * len(dataset), folder / "model")


def held_out(folder: Path, test: list[Record], max_length: int) -> tuple[float, float]:
    """(accuracy, exact match) of a saved reward model on the held-out split."""
    scores = score_records(test, load_scorer(str(folder), max_length=max_length), progress=False)
    sub = evaluate_scores({"test": test}, scores, str(folder)).subsets["test"]
    return sub.accuracy, sub.exact_match


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--min-responses", type=int, default=4, help="train on prompts with at least N replies")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16, help="sequences per step (TRL: half as many pairs)")
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--order", choices=("trl-first", "cheems-first"), default="trl-first")
    parser.add_argument("--chunk-tokens", type=int, default=-1, help="cheems' chunk_tokens (-1 auto, 0 one pass)")
    args = parser.parse_args()

    train_records, test = load_split(args.data, args.min_responses)
    n_pairs = sum(len(training_pairs(r)) for r in train_records)
    n_resp = sum(len(r.responses) for r in train_records)
    runners = [("trl", run_trl), ("cheems", run_cheems)]
    if args.order == "cheems-first":
        runners.reverse()
    runs, loads = [], []
    with tempfile.TemporaryDirectory(prefix="cheems-train-bench-") as tmp:
        for name, runner in runners:
            before = os.getloadavg()[0]
            runs.append(runner(train_records, args, Path(tmp) / name))
            loads.append((before, os.getloadavg()[0]))
        results = [(run, held_out(run.folder, test, args.max_length)) for run in runs]

    print(
        f"machine: {os.cpu_count()} cores, torch {torch.__version__}, {torch.get_num_threads()} threads; "
        f"load average (1 min) before/after each run: " + ", ".join(f"{a:.2f}/{b:.2f}" for a, b in loads)
    )
    print(
        f"data: oasst1_zh train split, prompts with >= {args.min_responses} replies: {len(train_records)} prompts, "
        f"{n_resp} responses, {n_pairs} pairs; held-out split {len(test)} prompts; "
        f"{MODEL}, max_length {args.max_length}, {args.batch_size} sequences per step, {args.epochs} epochs\n"
    )
    print(
        "| trainer | forward passes / epoch | wall s / epoch (each epoch) | whole job wall s | whole job CPU s "
        "| held-out accuracy | held-out exact match |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for run, (acc, em) in results:
        epochs = " / ".join(f"{w:.1f}" for w in run.epoch_wall)
        print(
            f"| {run.name} | {run.forward_passes} | {sum(run.epoch_wall) / len(run.epoch_wall):.1f} ({epochs}) | "
            f"{run.total_wall:.1f} | {run.total_cpu:.1f} | {acc:.3f} | {em:.3f} |"
        )
    by_name = {run.name.split()[0]: run for run, _ in results}
    trl, ours = by_name["TRL"], by_name["cheems"]
    print(
        f"\n- speedup per epoch (TRL / cheems, loop wall time): **{sum(trl.epoch_wall) / sum(ours.epoch_wall):.2f}x** "
        f"(target >= 2x); whole job: {trl.total_wall / ours.total_wall:.2f}x wall, "
        f"{trl.total_cpu / ours.total_cpu:.2f}x CPU"
    )
    print(
        f"- forward passes: {by_name['TRL'].forward_passes} vs {by_name['cheems'].forward_passes} "
        f"({by_name['TRL'].forward_passes / by_name['cheems'].forward_passes:.2f}x)"
    )


if __name__ == "__main__":
    main()
