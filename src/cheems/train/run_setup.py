"""What every cheems training loop sets up around its own forward pass, shared by ``cheems train``
(:mod:`cheems.train.trainer`) and ``cheems train-judge`` (:mod:`cheems.train.judge_trainer`).

- where the run is built (:func:`work_folder_for`: ``OUTPUT.partial``, after the output checks);
- the accelerator (precision from ``bf16`` and the device rule of :mod:`cheems.runtime`, DDP or a
  CPU group) and the DeepSpeed batch settings (:func:`make_accelerator`, :func:`configure_deepspeed`);
- AdamW with linear warm-up then cosine decay (:func:`make_optimizer`), each step (:func:`optimizer_step`);
- stopping on SIGINT/SIGTERM after the current step with a resumable checkpoint
  (:func:`signals_noted`, :func:`stop_asked`, :func:`stop_run`);
- the run the loop's helpers share (:class:`TrainingRun`): its work folder started (:func:`start_work_folder`),
  each optimizer step logged (:func:`log_step`) and checkpointed when due (:func:`checkpoint_when_due`), the
  model saved and the folder moved onto ``config.output`` (:func:`save_run`).

``config`` is a :class:`~cheems.train.config.TrainConfig` or a
:class:`~cheems.train.judge_config.JudgeTrainConfig`: both have the fields these read.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import torch

from cheems.data.io import write_json
from cheems.errors import InputError
from cheems.outputs import SIGNALS, Interrupted, disk_errors, replace_folder
from cheems.runtime import ProgressBar, bf16_wanted, pick_device
from cheems.train.checkpoint import (
    CHECKPOINTS,
    CONFIG_FILE,
    METRICS_FILE,
    MODEL_FILE,
    Position,
    check_output,
    save_checkpoint,
)
from cheems.train.model_card import check_card_free

if TYPE_CHECKING:
    from cheems.train.config import TrainConfig
    from cheems.train.judge_config import JudgeTrainConfig
    from cheems.train.logs import TrainLogger
    from cheems.train.schedule import MicroStep

    AnyRun = TrainConfig | JudgeTrainConfig  # both have the fields these functions read


@dataclass
class RunResult:
    """What a training run produced, as every trainer's result holds it (``cheems train``'s
    :class:`~cheems.train.trainer.TrainResult` adds its evaluations, ``cheems train-judge``'s nothing): the
    optimizer steps done, the epochs, the data's summary (its ``to_dict()`` goes into ``metrics.json``), the logged
    rows, and the model and tokenizer, set on the main process once saved."""

    output_dir: Path
    global_step: int
    epochs: int
    data: Any
    history: list[dict[str, Any]] = field(default_factory=list)
    model: Any = None
    tokenizer: Any = None

    @property
    def final_loss(self) -> float | None:
        return self.history[-1]["loss"] if self.history else None

    def metrics(self) -> dict[str, Any]:
        """What ``metrics.json`` holds."""
        return {
            "global_step": self.global_step,
            "epochs": self.epochs,
            "data": self.data.to_dict(),
            "final_loss": self.final_loss,
        }


C = TypeVar("C", bound="AnyRun")
R = TypeVar("R", bound=RunResult)


@dataclass
class TrainingRun(Generic[C, R]):
    """What a training loop's helpers share: the settings, the accelerator, where to write and what was done
    (``cheems train``'s run is ``TrainingRun[TrainConfig, TrainResult]``, ``cheems train-judge``'s the same with
    its own)."""

    config: C
    accelerator: Any
    work: Path
    """Where the run is built (``OUTPUT.partial``); moved onto ``config.output`` once the model is saved."""
    console: Any
    deepspeed: bool
    digest: str = ""
    """The training data's digest, saved with each checkpoint (a resume on other data is refused)."""
    result: R = field(init=False)
    logger: TrainLogger = field(init=False)

    @property
    def main(self) -> bool:
        return cast("bool", self.accelerator.is_main_process)

    def say(self, *args: Any) -> None:
        """Print on the main process only."""
        if self.main:
            self.console.print(*args, soft_wrap=True)


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


def stop_asked(run: TrainingRun[Any, Any], caught: list[int]) -> bool:
    """Whether any process was sent SIGINT/SIGTERM (all then stop after the same step); notes it in ``caught``."""
    if run.accelerator.num_processes > 1:
        flag = torch.tensor([caught[0] if caught else 0], device=run.accelerator.device)
        signum = int(run.accelerator.reduce(flag, "max").item())
        if signum and not caught:
            caught.append(signum)
    return bool(caught)


def stop_run(run: TrainingRun[Any, Any], signum: int, position: Position) -> None:
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


StepRow = Callable[[list[dict[str, float]], Any, int, float, float, Any, float], dict[str, Any]]
"""A trainer's log row of one optimizer step: ``(window, accelerator, step, epoch, lr, grad_norm, seconds)``, the
window being the step's micro-batch statistics (:func:`cheems.train.logs.step_row`)."""


def optimizer_step(
    run: TrainingRun[Any, Any],
    model: Any,
    optimizer: Any,
    scheduler: Any,
    window: list[dict[str, float]],
    epoch: float,
    started: float,
    row: StepRow,
) -> dict[str, Any]:
    """One optimizer step: clip (``max_grad_norm`` 0: not), step the optimizer and the schedule, clear the gradients,
    count the step; return its log ``row`` (all processes pooled; the grad norm None when not clipped)."""
    accelerator, deepspeed = run.accelerator, run.deepspeed
    grad_norm = None
    if run.config.max_grad_norm or deepspeed:  # DeepSpeed clipped in backward; this reads the norm
        grad_norm = accelerator.clip_grad_norm_(model.parameters(), run.config.max_grad_norm)
    lr = scheduler.get_last_lr()[0]
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    run.result.global_step += 1
    return row(window, accelerator, run.result.global_step, epoch, lr, grad_norm, time.time() - started)


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


# ---------------------------------------------------------------------- the run's folder
def start_work_folder(run: TrainingRun[Any, Any], fresh: bool) -> None:
    """The work folder with the resolved config (``train_config.yaml``), on every process before any writes in it.

    A ``fresh`` run starts from an empty work folder: what an earlier run left there without a checkpoint (logs,
    a half-saved model) goes; a resumed one rewrites its own model card only, never a README.md someone put there.
    """
    if not fresh:
        check_card_free(run.work)
    run.accelerator.wait_for_everyone()  # every process has looked for its checkpoint
    if run.main:
        if fresh:
            shutil.rmtree(run.work, ignore_errors=True)
        run.work.mkdir(parents=True, exist_ok=True)
        run.config.save_yaml(run.work / CONFIG_FILE)
    run.accelerator.wait_for_everyone()  # the folder is there before any process writes in it


def log_step(run: TrainingRun[Any, Any], row: dict[str, Any], step: MicroStep, bar: ProgressBar, stats: str) -> None:
    """After an optimizer step: log its ``row`` (every ``log_every`` steps and at each epoch's end) and advance the
    progress bar, showing ``stats``."""
    config, result = run.config, run.result
    if result.global_step % config.log_every == 0 or step.epoch_end:
        result.history.append(row)
        run.logger.step(row)
    bar.advance(1, stats=stats)


def checkpoint_when_due(run: TrainingRun[Any, Any], step: MicroStep, caught: list[int]) -> None:
    """Checkpoint after an optimizer step when due (``save_every``) or when a signal asked the run to stop (and
    stop, :func:`stop_run`); a signal after this step waits for the next one."""
    config, result = run.config, run.result
    stop = stop_asked(run, caught)
    if stop or (config.save_every and result.global_step % config.save_every == 0):
        position = Position(result.global_step, *step.resume_at)
        save_checkpoint(run.accelerator, run.work, position, config, result.metrics(), run.digest)
        if stop:
            stop_run(run, caught[0], position)


def save_run(run: TrainingRun[Any, Any], what: str, tokenizer: Any, write_model: Callable[[Path], Any]) -> None:
    """End a run: write the model (``write_model(work)`` returns it), ``train_config.yaml`` and ``metrics.json`` into
    the work folder on the main process, move that onto ``config.output`` (an old model there goes only now), and
    end the accelerator. Every process calls it, once the logs are whole and any ZeRO-3 gathering is done.

    A disk error names the folder (it keeps the unfinished run, for ``--resume``); a half-saved model (config,
    weights) is removed so that it never loads as one."""
    accelerator, work, output = run.accelerator, run.work, Path(run.config.output)
    run.logger.close()  # the logs are whole before the folder takes its name
    if run.main:
        hint = "free some room and rerun with --resume: this folder keeps the unfinished run"
        try:
            with disk_errors("the model", work, hint):
                model = write_model(work)
                run.config.save_yaml(work / CONFIG_FILE)
                write_json(work / METRICS_FILE, run.result.metrics())
        except BaseException:  # a half-saved model must not load as one: no config.json, no weights
            for file in (work / MODEL_FILE, *work.glob("*.safetensors")):
                file.unlink(missing_ok=True)
            raise
        replace_folder(work, output)
        run.say(f"saved {what} to {output} ({run.result.global_step} steps)")
        run.result.model, run.result.tokenizer = model.eval(), tokenizer
    accelerator.wait_for_everyone()
    accelerator.end_training()
