"""What every cheems training loop sets up around its own forward pass, shared by ``cheems train``
(:mod:`cheems.train.trainer`) and ``cheems train-judge`` (:mod:`cheems.train.judge_trainer`).

- where the run is built (:func:`work_folder_for`: ``OUTPUT.partial``, after the output checks);
- the accelerator (precision from ``bf16`` and the device rule of :mod:`cheems.runtime`, DDP or a
  CPU group) and the DeepSpeed batch settings (:func:`make_accelerator`, :func:`configure_deepspeed`);
- AdamW with linear warm-up then cosine decay (:func:`make_optimizer`);
- stopping on SIGINT/SIGTERM after the current step with a resumable checkpoint
  (:func:`signals_noted`, :func:`stop_asked`, :func:`stop_run`).

``config`` is a :class:`~cheems.train.config.TrainConfig` or a
:class:`~cheems.train.judge_config.JudgeTrainConfig`: both have the fields these read.
"""

from __future__ import annotations

import math
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import torch

from cheems.errors import InputError
from cheems.outputs import SIGNALS, Interrupted
from cheems.runtime import bf16_wanted, pick_device
from cheems.train.checkpoint import CHECKPOINTS, Position, check_output

if TYPE_CHECKING:
    from cheems.train.config import TrainConfig
    from cheems.train.judge_config import JudgeTrainConfig
    from cheems.train.logs import TrainLogger

    AnyRun = TrainConfig | JudgeTrainConfig  # both have the fields these functions read


class RunState(Protocol):
    """What stopping a run needs of it: its accelerator, its work folder and its logger."""

    accelerator: Any
    work: Path
    logger: TrainLogger


# ---------------------------------------------------------------------- stopping on a signal
@contextmanager
def signals_noted() -> Iterator[list[int]]:
    """Within the block SIGINT and SIGTERM are noted in the list it yields, not acted on: the loop finishes its
    step, saves a checkpoint and stops (:func:`stop_run`). A second signal stops at once, as before the block.

    Only the main thread can set handlers; elsewhere (a notebook's worker thread) signals stay as they are.
    """
    caught: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return
    previous = {s: signal.getsignal(s) for s in SIGNALS}

    def note(signum: int, frame: Any) -> None:
        if caught:  # asked twice: stop now, with what the run had before (the CLI's clean interrupt)
            handler = previous[signal.Signals(signum)]
            if not callable(handler):
                raise Interrupted(signum)
            handler(signum, frame)
            return
        caught.append(signum)

    for s in SIGNALS:
        signal.signal(s, note)
    try:
        yield caught
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def stop_asked(run: RunState, caught: list[int]) -> bool:
    """Whether any process was sent SIGINT/SIGTERM (all then stop after the same step); notes it in ``caught``."""
    if run.accelerator.num_processes > 1:
        flag = torch.tensor([caught[0] if caught else 0], device=run.accelerator.device)
        signum = int(run.accelerator.reduce(flag, "max").item())
        if signum and not caught:
            caught.append(signum)
    return bool(caught)


def stop_run(run: RunState, signum: int, position: Position) -> None:
    """End a run that was asked to stop, once its checkpoint at ``position`` is saved: one line saying where it is and
    how to go on (the interrupt's line under the CLI), exit 128 + ``signum``."""
    checkpoint = run.work / CHECKPOINTS / f"step-{position.global_step:07d}"
    run.logger.close()
    run.accelerator.wait_for_everyone()
    raise Interrupted(
        signum,
        note=f"saved a resumable checkpoint at step {position.global_step} in {checkpoint} — "
        "run the same command with --resume to continue",
    )


# ---------------------------------------------------------------------- setup
def work_folder_for(config: AnyRun) -> Path:
    """Where to build the run, after checking there is data and that nothing in ``config.output`` or an
    unfinished run's checkpoints would be lost (:func:`~cheems.train.checkpoint.check_output`)."""
    if not config.data:
        raise InputError(
            "no training data", field="data", hint="give --data FILE (JSONL records with rank or comparisons)"
        )
    return check_output(config.output, overwrite=config.overwrite, resume=config.resume)


def make_accelerator(config: AnyRun) -> tuple[Any, Any]:
    """The accelerator (precision from ``config.bf16``) and its DDP settings, completed once the model is known."""
    from accelerate import Accelerator, DistributedDataParallelKwargs

    bf16 = bf16_wanted(config.bf16, pick_device(cpu=config.cpu))
    # several processes and no GPU: accelerate runs them as a CPU group (gloo) only when told cpu=True
    launched = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if not launched:
        # accelerate keeps one state per process and refuses another precision later: a notebook (or a test
        # session) that trains twice, in bf16 then in fp32, starts each run afresh
        from accelerate.state import AcceleratorState

        AcceleratorState._reset_state(reset_partial_state=True)
    ddp = DistributedDataParallelKwargs()  # find_unused_parameters is set once the pooling is known
    accelerator = Accelerator(
        cpu=config.cpu or (launched and not torch.cuda.is_available()),
        mixed_precision="bf16" if bf16 else "no",
        step_scheduler_with_optimizer=False,
        kwargs_handlers=[ddp],
    )
    return accelerator, ddp


def is_deepspeed(accelerator: Any) -> bool:
    """Whether the run is under DeepSpeed (ZeRO-3 through ``accelerate launch``)."""
    from accelerate.utils import DistributedType

    return cast("bool", accelerator.distributed_type == DistributedType.DEEPSPEED)


def configure_deepspeed(accelerator: Any, config: AnyRun) -> None:
    """Write the batch, accumulation and clipping settings into the DeepSpeed config (LoRA is refused)."""
    if config.lora.enabled:
        raise InputError(
            "LoRA with DeepSpeed ZeRO-3 is not supported",
            field="lora",
            hint="use the DDP config (configs/accelerate_ddp.yaml) for LoRA",
        )
    ds = accelerator.state.deepspeed_plugin.deepspeed_config
    ds["train_micro_batch_size_per_gpu"] = config.batch_size
    ds["gradient_accumulation_steps"] = config.grad_accum
    ds["train_batch_size"] = config.batch_size * config.grad_accum * accelerator.num_processes
    ds["gradient_clipping"] = config.max_grad_norm  # 0: no clipping
    accelerator.gradient_accumulation_steps = config.grad_accum


def make_optimizer(model: torch.nn.Module, config: AnyRun, total_steps: int, deepspeed: bool) -> tuple[Any, Any]:
    """AdamW (no weight decay on biases and norms) and linear warm-up then cosine decay over ``total_steps``."""
    decay: list[torch.nn.Parameter] = []
    no_decay: list[torch.nn.Parameter] = []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (no_decay if p.ndim < 2 or "norm" in name.lower() else decay).append(p)
    # fused AdamW: one kernel for all parameters (20x faster than the default on a CPU)
    fused: dict[str, Any] = {} if deepspeed else {"fused": True}
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.lr,
        **fused,
    )
    warmup = math.ceil(config.warmup_ratio * total_steps)
    return optimizer, cosine_schedule_with_warmup(optimizer, warmup, total_steps)


def optimizer_update(
    accelerator: Any, model: Any, optimizer: Any, scheduler: Any, max_grad_norm: float, deepspeed: bool
) -> tuple[float, Any]:
    """One optimizer step: clip (``max_grad_norm`` 0: not), step the optimizer and the schedule, clear the gradients;
    return the learning rate the step used and the gradient norm (None when not clipped)."""
    grad_norm = None
    if max_grad_norm or deepspeed:  # DeepSpeed clipped in backward; this reads the norm
        grad_norm = accelerator.clip_grad_norm_(model.parameters(), max_grad_norm)
    lr = scheduler.get_last_lr()[0]
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return lr, grad_norm


def cosine_schedule_with_warmup(
    optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up from 0, then cosine decay to 0: ``transformers.get_cosine_schedule_with_warmup``.

    The same formula, written here because importing it from transformers also imports
    ``transformers.trainer_utils`` and, where installed, peft (seconds per process).
    """

    def factor(step: int) -> float:
        if step < warmup_steps:
            return step / max(1, warmup_steps)
        progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
