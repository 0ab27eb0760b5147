"""The order of a training run: epoch plans -> micro-steps, each with its batch, loss weight and sync point.

Pure arithmetic (no torch, no accelerate), the same on every process, tested in
``tests/test_train_schedule.py``.

Every process computes the same :class:`~cheems.train.batching.EpochPlan` per epoch and takes
batches ``rank, rank + world, ...`` (whole batches, :func:`~cheems.train.batching.shard_batches`).
An epoch of ``n`` batches is ``ceil(n / world)`` micro-steps on every process; at the last one
the processes ``rank >= n % world`` (when that is not 0) have no batch left and run a
*placeholder*: the first item of a batch, with no pairs and weight 0, so every process makes the
same forward/backward calls and collectives never hang. Micro-steps are grouped into
accumulation windows of ``grad_accum`` within each epoch (the last window of an epoch may be
shorter); the last micro-step of a window is the *sync* step, where the optimizer steps.

The weights (what :func:`micro_steps` computes; the trainer backpropagates ``loss * weight``):
a real batch at micro-step ``m`` of a window of ``L`` micro-steps, where ``k`` processes have a
real batch at ``m``, weighs ``world / k / L``, times ``grad_accum`` under DeepSpeed. DDP averages
gradients over the ``world`` processes and DeepSpeed also divides every loss by
``grad_accum``, so the applied gradient is the mean over the window's micro-steps of the mean
over that micro-step's real batches. The invariant, per window::

    sum(weight of every real batch of every process in the window) == world * (grad_accum if deepspeed else 1)

and within one micro-step the real batches weigh ``world * (grad_accum if deepspeed else 1) / L``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from cheems.train.batching import EpochPlan, Item


@dataclass(frozen=True)
class MicroStep:
    """One forward/backward of one process."""

    epoch: int
    micro: int
    """This process's position in the epoch (its ``micro``-th batch, from 0)."""
    batch: int
    """Index into the epoch plan's batches; a placeholder borrows this batch's first item."""
    real: bool
    """False for a placeholder (no batch left for this process at the epoch's end)."""
    items: list[Item]
    pairs: list[tuple[int, int]]
    """(chosen, rejected) indices into ``items``; none for a placeholder."""
    weight: float
    """Factor on this batch's loss (0 for a placeholder); see the module docstring."""
    sync: bool
    """The last micro-step of its accumulation window: the optimizer steps after it."""
    first: bool
    """The first micro-step this run makes in its epoch (a resumed epoch starts mid-way)."""
    epoch_end: bool
    """The last micro-step of the epoch."""
    progress: float
    """Epochs done once this step is: ``epoch + (micro + 1) / micro-steps in the epoch``."""
    resume_at: tuple[int, int]
    """(epoch, micro) of the next micro-step: the position a checkpoint saved after this step holds."""


def micro_steps_per_epoch(plan: EpochPlan, world: int) -> int:
    """Micro-steps every process makes in an epoch: its batches shared round-robin, rounded up."""
    return math.ceil(len(plan.batches) / world)


def optimizer_steps(plans: Sequence[EpochPlan], world: int, grad_accum: int) -> int:
    """Optimizer (sync) steps of the whole run: each epoch's micro-steps in windows of ``grad_accum``."""
    return sum(math.ceil(micro_steps_per_epoch(plan, world) / grad_accum) for plan in plans)


def micro_steps(
    plans: Sequence[EpochPlan],
    *,
    world: int,
    rank: int,
    grad_accum: int,
    deepspeed: bool = False,
    start: tuple[int, int] = (0, 0),
) -> Iterator[MicroStep]:
    """The micro-steps of process ``rank`` of ``world``, from position ``start`` = (epoch, micro) on.

    A run resumed from a checkpoint (``start`` = the saved step's ``resume_at``) makes exactly
    the micro-steps the uninterrupted run made after that step.
    """
    if world < 1 or not 0 <= rank < world or grad_accum < 1:
        raise ValueError(f"need 0 <= rank < world and grad_accum >= 1, got {rank=}, {world=}, {grad_accum=}")
    first_epoch, first_micro = start
    for epoch in range(first_epoch, len(plans)):
        plan = plans[epoch]
        n_batches = len(plan.batches)
        n_micro = micro_steps_per_epoch(plan, world)
        begin = first_micro if epoch == first_epoch else 0
        for micro in range(begin, n_micro):
            index = micro * world + rank
            real = index < n_batches
            lo = (micro // grad_accum) * grad_accum
            window_len = min(grad_accum, n_micro - lo)
            n_real = min(world, max(0, n_batches - micro * world))
            # mean over the window's micro-steps and over the processes with a real batch
            weight = (world / n_real / window_len if n_real else 0.0) if real else 0.0
            if deepspeed:
                weight *= grad_accum  # DeepSpeed divides every loss by grad_accum itself
            batch = index if real else min(rank, n_batches - 1)
            epoch_end = micro == n_micro - 1
            yield MicroStep(
                epoch=epoch,
                micro=micro,
                batch=batch,
                real=real,
                items=plan.batches[batch] if real else plan.batches[batch][:1],
                pairs=plan.pairs[batch] if real else [],
                weight=weight,
                sync=micro == lo + window_len - 1,
                first=micro == begin,
                epoch_end=epoch_end,
                progress=epoch + (micro + 1) / n_micro,
                resume_at=(epoch + 1, 0) if epoch_end else (epoch, micro + 1),
            )
