"""Checkpoints of a training run: where they are, the newest complete one, pruning, and the trainer
state (the position in the run) saved with accelerate's model, optimizer, scheduler and RNG state.

A checkpoint is ``output/checkpoints/step-NNNNNNN``; its ``trainer_state.json`` is written last,
so a checkpoint without one (the run died while saving) is never resumed from.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cheems.data.io import write_json

CHECKPOINTS = "checkpoints"
STATE_FILE = "trainer_state.json"
CONFIG_FILE = "train_config.yaml"
METRICS_FILE = "metrics.json"
# Settings that change the trajectory: a resumed run warns when they differ from the checkpoint's.
TRAJECTORY_KEYS = (
    "model",
    "data",
    "epochs",
    "lr",
    "warmup_ratio",
    "weight_decay",
    "batch_size",
    "grad_accum",
    "max_grad_norm",
    "reg_coef",
    "max_length",
    "truncation",
    "pooling",
    "seed",
    "lora",
)


@dataclass
class Position:
    """Where a run stands: optimizer steps done and the next micro-step to run."""

    global_step: int = 0
    epoch: int = 0
    micro: int = 0
    """The next micro-batch (of this process's shard) to run in ``epoch``."""


def _complete(output: Path) -> list[Path]:
    """The checkpoints under ``output`` that were written to the end, oldest first."""
    root = output / CHECKPOINTS
    if not root.is_dir():
        return []
    done = [p for p in root.iterdir() if p.is_dir() and (p / STATE_FILE).is_file()]
    return sorted(done, key=lambda p: read_position(p).global_step)


def latest_checkpoint(output: str | Path) -> Path | None:
    """The newest complete checkpoint (one with ``trainer_state.json``) under ``output/checkpoints``."""
    done = _complete(Path(output))
    return done[-1] if done else None


def prune_checkpoints(output: Path, keep: int) -> None:
    """Delete all but the ``keep`` newest complete checkpoints (``keep`` 0: keep all)."""
    if keep <= 0:
        return
    for old in _complete(output)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def read_position(checkpoint: Path) -> Position:
    """The position saved in ``checkpoint``."""
    state = json.loads((checkpoint / STATE_FILE).read_text())
    return Position(state["global_step"], state["epoch"], state["micro"])


def changed_settings(checkpoint: Path, settings: dict[str, Any]) -> list[str]:
    """The trajectory settings (:data:`TRAJECTORY_KEYS`) whose value differs from the checkpoint's config."""
    saved = checkpoint / CONFIG_FILE
    if not saved.exists():
        return []
    import yaml

    old = yaml.safe_load(saved.read_text(encoding="utf-8")) or {}
    return [k for k in TRAJECTORY_KEYS if k in old and old[k] != settings.get(k)]


def save_checkpoint(accelerator: Any, output: Path, position: Position, config: Any, metrics: dict[str, Any]) -> None:
    """Save the state of every process, then (main process) the config, ``metrics``, the position; prune.

    Every process must call it (accelerate gathers and writes shards; ZeRO-3 needs every rank).
    """
    checkpoint = output / CHECKPOINTS / f"step-{position.global_step:07d}"
    accelerator.save_state(str(checkpoint))
    if accelerator.is_main_process:
        config.save_yaml(checkpoint / CONFIG_FILE)
        write_json(output / METRICS_FILE, metrics)
        state = {"global_step": position.global_step, "epoch": position.epoch, "micro": position.micro}
        (checkpoint / STATE_FILE).write_text(json.dumps(state) + "\n")  # written last: marks it complete
        prune_checkpoints(output, config.keep_checkpoints)
    accelerator.wait_for_everyone()


def resume(accelerator: Any, output: Path, config: Any, say: Callable[[str], None]) -> Position:
    """Load the newest checkpoint under ``output`` into the prepared objects and return its position.

    Says when there is none (the run starts from scratch) and when trajectory settings changed.
    """
    checkpoint = latest_checkpoint(output)
    if checkpoint is None:
        say(f"[yellow]resume[/]: no checkpoint in {output / CHECKPOINTS}; starting from scratch")
        return Position()
    accelerator.load_state(str(checkpoint))
    position = read_position(checkpoint)
    changed = changed_settings(checkpoint, config.to_dict())
    if changed:
        say(
            f"[yellow]warning[/] resuming with changed settings ({', '.join(changed)}): "
            "the result will differ from an uninterrupted run"
        )
    say(f"resumed from {checkpoint} (step {position.global_step}, epoch {position.epoch + 1}, batch {position.micro})")
    return position
