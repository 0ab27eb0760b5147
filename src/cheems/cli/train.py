"""``cheems train``: train a reward model (listwise Bradley–Terry, greedy prompt-grouped batches).

Registered in :mod:`cheems.cli.main` as ``app.command()(train)``. Also runs on its own as
``python -m cheems.cli.train ...`` (and under ``accelerate launch -m cheems train ...``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from cheems.cli.options import finite
from cheems.errors import InputError


def train(
    data: Annotated[
        Optional[list[Path]],
        typer.Option("--data", "-d", help="Training records (JSONL with rank or comparisons); repeat for more files."),
    ] = None,
    output: Annotated[
        Optional[Path],
        typer.Option("--output", "-o", help="Folder for the model (a Hugging Face folder), logs and checkpoints."),
    ] = None,
    model: Annotated[
        Optional[str],
        typer.Option("--model", "-m", help="Backbone: a local folder or 'm3e-small' (the packaged one, default)."),
    ] = None,
    config: Annotated[
        Optional[Path], typer.Option("--config", "-c", help="YAML config; command-line options override it.")
    ] = None,
    epochs: Annotated[Optional[int], typer.Option(help="Epochs (paper: 2).")] = None,
    max_length: Annotated[Optional[int], typer.Option(help="Max tokens per (prompt, response).")] = None,
    lr: Annotated[
        Optional[float], typer.Option(help="Peak learning rate (paper: 5e-6; small preset: 5e-5).", callback=finite())
    ] = None,
    batch_size: Annotated[Optional[int], typer.Option(help="Responses per micro-batch per process.")] = None,
    grad_accum: Annotated[Optional[int], typer.Option(help="Micro-batches per optimizer step.")] = None,
    warmup_ratio: Annotated[
        Optional[float], typer.Option(help="Share of steps for linear warm-up.", callback=finite())
    ] = None,
    reg_coef: Annotated[
        Optional[float], typer.Option(help="Gaussian prior weight on rewards (paper: 0.1).", callback=finite())
    ] = None,
    truncation: Annotated[
        Optional[str],
        typer.Option(help="left_prompt (cut the prompt's start) or drop (leave out over-long responses)."),
    ] = None,
    pooling: Annotated[Optional[str], typer.Option(help="auto, last (causal LMs), cls or mean (encoders).")] = None,
    preset: Annotated[Optional[str], typer.Option(help="Defaults: auto, paper or small.")] = None,
    eval_bench: Annotated[
        Optional[list[Path]],
        typer.Option("--eval-bench", help="Bench file(s) to evaluate on during training; repeat for more."),
    ] = None,
    eval_every: Annotated[Optional[int], typer.Option(help="Evaluate every N steps (0: each epoch end).")] = None,
    save_every: Annotated[Optional[int], typer.Option(help="Checkpoint every N steps (0: never).")] = None,
    seed: Annotated[Optional[int], typer.Option(help="Random seed.")] = None,
    bf16: Annotated[Optional[bool], typer.Option("--bf16/--no-bf16", help="bf16 autocast (default: auto).")] = None,
    lora: Annotated[Optional[bool], typer.Option("--lora/--no-lora", help="Train LoRA adapters (needs peft).")] = None,
    gradient_checkpointing: Annotated[
        Optional[bool],
        typer.Option("--gradient-checkpointing/--no-gradient-checkpointing", help="Trade compute for memory."),
    ] = None,
    cpu: Annotated[Optional[bool], typer.Option("--cpu", help="Train on the CPU even when a GPU is present.")] = None,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bar.")] = False,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue from the latest checkpoint in OUTPUT/checkpoints.")
    ] = False,
) -> None:
    """Train a reward model on ranked preference records; save a Hugging Face folder to --output."""
    from cheems.data.outputs import claim_outputs
    from cheems.train.config import load_config

    overrides = {
        "data": [str(p) for p in data] if data else None,
        "output": str(output) if output else None,
        "model": model,
        "epochs": epochs,
        "max_length": max_length,
        "lr": lr,
        "batch_size": batch_size,
        "grad_accum": grad_accum,
        "warmup_ratio": warmup_ratio,
        "reg_coef": reg_coef,
        "truncation": truncation,
        "pooling": pooling,
        "preset": preset,
        "eval_bench": [str(p) for p in eval_bench] if eval_bench else None,
        "eval_every": eval_every,
        "save_every": save_every,
        "seed": seed,
        "bf16": bf16,
        "gradient_checkpointing": gradient_checkpointing,
        "cpu": cpu,
        "progress": False if no_progress else None,
        "resume": True if resume else None,
    }
    cfg = load_config(config, overrides)
    if lora is not None:
        cfg.lora.enabled = lora
    if not cfg.data:
        raise InputError(
            "cheems train needs training data",
            field="data",
            hint="e.g. cheems train --data train.jsonl --output rm/ (or 'data:' in --config)",
        )
    claim_outputs(
        folders=[("--output", cfg.output, ())],
        note="--resume continues from the latest checkpoint, if one was saved (--save-every)",
    )
    from cheems.train.trainer import train as run_training  # torch: only once the config is known to be good

    run_training(cfg)


def _main() -> None:
    """``python -m cheems.cli.train``: the command alone, with the CLI's one-line errors and clean interrupts."""
    from cheems.cli.console import run

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(train)
    run(app)


if __name__ == "__main__":
    _main()
