"""Where a training run writes, its checkpoints (the newest complete one, pruning) and the trainer
state (the position in the run) saved with accelerate's model, optimizer, scheduler and RNG state.

A run is built in ``OUTPUT.partial`` beside ``OUTPUT`` (:func:`work_folder`): logs, checkpoints,
then the model; the whole folder takes the name ``OUTPUT`` only once the model is saved, so a crash
or a full disk never leaves a folder named ``OUTPUT`` that looks finished. A checkpoint is
``OUTPUT.partial/checkpoints/step-NNNNNNN``; its ``trainer_state.json`` is written last, so a
checkpoint without one (the run died while saving) is never resumed from.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from cheems.data.io import write_json
from cheems.errors import InputError
from cheems.outputs import disk_errors, follow_umask

CHECKPOINTS = "checkpoints"
STATE_FILE = "trainer_state.json"
CONFIG_FILE = "train_config.yaml"
METRICS_FILE = "metrics.json"
PARTIAL = ".partial"
MODEL_FILE = "config.json"  # in a folder: a Hugging Face model saved there (by cheems or not)
# Settings that change the trajectory: a resumed run warns when they differ from the checkpoint's,
# and refuses (unless --force) when the model or the data do: that is another run, not this one.
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
    "length_head",
    "length_corr_weight",
    "quality_corr_weight",
    "orthogonal_weight",
    "lm_weight",
    "lm_target",
)
REFUSED_KEYS = ("model", "data")


@dataclass
class Position:
    """Where a run stands: optimizer steps done and the next micro-step to run."""

    global_step: int = 0
    epoch: int = 0
    micro: int = 0
    """The next micro-batch (of this process's shard) to run in ``epoch``."""


def work_folder(output: str | Path) -> Path:
    """Where the run for ``output`` is built: ``OUTPUT.partial`` beside it (one file system: moved at the end)."""
    path = Path(os.path.realpath(output))  # beside the folder a link points to: the same file system
    return path.with_name(path.name + PARTIAL)


def check_output(output: str | Path, *, overwrite: bool, resume: bool) -> Path:
    """The folder to build the run in, once ``output`` may receive a model and no unfinished run is lost.

    ``output`` must be new, empty, or (``overwrite``) hold a model; an unfinished run's checkpoints
    in the work folder are continued (``resume``) or refused.
    """
    target = Path(output)
    if target.is_dir() and any(target.iterdir()):
        if not (target / MODEL_FILE).is_file():
            raise InputError(
                "is not empty and holds no model: training would replace what is in it",
                path=str(target),
                field="--output",
                hint="choose a new or empty folder",
            )
        if not overwrite:
            raise InputError(
                "holds a finished model",
                path=str(target),
                field="--output",
                hint="pass --overwrite to replace it, or choose another --output",
            )
    work = work_folder(target)
    if not resume and latest_checkpoint(work) is not None:
        raise InputError(
            "holds checkpoints of an unfinished run",
            path=str(work / CHECKPOINTS),
            hint="pass --resume to continue that run, or delete the folder to start again",
        )
    return work


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


def _state(checkpoint: Path) -> dict[str, Any]:
    """``trainer_state.json`` of ``checkpoint``; InputError when it is damaged."""
    path = checkpoint / STATE_FILE
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        if all(isinstance(state.get(key), int) for key in ("global_step", "epoch", "micro")):
            return cast("dict[str, Any]", state)
    except (ValueError, AttributeError):
        pass
    raise InputError(
        "is damaged (not a trainer state)",
        path=str(path),
        hint=f"delete the checkpoint {checkpoint} to resume from the one before",
    )


def read_position(checkpoint: Path) -> Position:
    """The position saved in ``checkpoint``."""
    state = _state(checkpoint)
    return Position(state["global_step"], state["epoch"], state["micro"])


def changed_settings(checkpoint: Path, settings: dict[str, Any]) -> list[str]:
    """The trajectory settings (:data:`TRAJECTORY_KEYS`) whose value differs from the checkpoint's config."""
    saved = checkpoint / CONFIG_FILE
    if not saved.exists():
        return []
    import yaml

    old = yaml.safe_load(saved.read_text(encoding="utf-8")) or {}
    return [k for k in TRAJECTORY_KEYS if k in old and old[k] != settings.get(k)]


def _saved(checkpoint: Path, key: str) -> Any:
    """A setting as the checkpoint's config recorded it (None when it did not)."""
    import yaml

    saved = checkpoint / CONFIG_FILE
    return (yaml.safe_load(saved.read_text(encoding="utf-8")) or {}).get(key) if saved.exists() else None


def save_checkpoint(
    accelerator: Any, output: Path, position: Position, config: Any, metrics: dict[str, Any], data: str
) -> None:
    """Save the state of every process, then (main process) the config, ``metrics``, the position and the
    digest of the training ``data``; prune.

    Every process must call it (accelerate gathers and writes shards; ZeRO-3 needs every rank). A save
    that fails for want of room removes the unfinished checkpoint and is one line.
    """
    checkpoint = output / CHECKPOINTS / f"step-{position.global_step:07d}"
    hint = "free some room and rerun with --resume (it continues from the last complete checkpoint)"
    try:
        with disk_errors(f"the checkpoint at step {position.global_step}", checkpoint, hint):
            accelerator.save_state(str(checkpoint))
            follow_umask(checkpoint.rglob("*.safetensors"))  # written 0600 by safetensors, like a saved model's
            if accelerator.is_main_process:
                config.save_yaml(checkpoint / CONFIG_FILE)
                write_json(output / METRICS_FILE, metrics)
                state = {"global_step": position.global_step, "epoch": position.epoch, "micro": position.micro}
                write_json(checkpoint / STATE_FILE, {**state, "data": data})  # written last: marks it complete
    except BaseException:
        shutil.rmtree(checkpoint, ignore_errors=True)  # never resumed from, and it holds the room a rerun needs
        raise
    if accelerator.is_main_process:
        prune_checkpoints(output, config.keep_checkpoints)
    accelerator.wait_for_everyone()


def resume(accelerator: Any, output: Path, config: Any, data: str, say: Callable[[str], None]) -> Position | None:
    """Load the newest checkpoint under ``output`` into the prepared objects and return its position.

    None when there is none (said: the run starts from scratch). Another ``--model`` or other training
    ``data`` (paths or content, by its digest) is refused unless ``config.force``; other changed
    trajectory settings are said. A checkpoint that cannot be loaded is one line naming it.
    """
    checkpoint = latest_checkpoint(output)
    if checkpoint is None:
        say(f"resume: no checkpoint in {output / CHECKPOINTS}; starting from scratch")
        return None
    changed = changed_settings(checkpoint, config.to_dict())
    saved = _state(checkpoint).get("data")
    if saved is not None and saved != data and "data" not in changed:
        changed.insert(0, "data")  # the same files, other content
    refused = [key for key in REFUSED_KEYS if key in changed]
    if refused and not config.force:
        raise InputError(
            f"was trained with other {' and '.join('--' + key for key in refused)}: resuming would mix two runs",
            path=str(checkpoint),
            hint="give the run's own --model and --data, or pass --force to continue anyway",
        )
    if "length_head" in changed:  # the saved state has (or lacks) the length head's weights: it cannot load
        raise InputError(
            f"was trained {'without' if config.length_head else 'with'} --length-head: its state does not fit",
            path=str(checkpoint),
            hint="resume with the run's own --length-head setting",
        )
    if "lm_weight" in changed and bool(_saved(checkpoint, "lm_weight")) != bool(config.lm_weight):
        raise InputError(  # the saved state has (or lacks) the LM head's weights and their optimizer state
            f"was trained {'without' if config.lm_weight else 'with'} --lm-weight: its state does not fit",
            path=str(checkpoint),
            hint="resume with the run's own --lm-weight setting",
        )
    try:
        accelerator.load_state(str(checkpoint))
    except Exception as e:  # torch, safetensors and accelerate each fail on a cut file in their own way
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise InputError(
            f"cannot be loaded, it is incomplete or damaged ({reason})",
            path=str(checkpoint),
            hint=f"delete it to resume from the checkpoint before it (or delete {output} to start again)",
        ) from None
    position = read_position(checkpoint)
    if changed:
        say(
            f"warning: resuming with changed settings ({', '.join(changed)}): "
            "the result will differ from an uninterrupted run"
        )
    say(f"resumed from {checkpoint} (step {position.global_step}, epoch {position.epoch + 1}, batch {position.micro})")
    return position
