"""Scoring across the processes of a launcher (``torchrun``, ``accelerate launch``): who scores what,
and how the scores and any failure reach every process.

A model scorer (``shards = True``) plans its length-sorted batches exactly as one process would and
runs every ``world``-th of them (:func:`run_batch_share`); the scores are gathered to every process.
Each batch is the one a single process runs, padded to the same length, so the scores are the same
bits and the scores file the same bytes. Any other scorer (length, an RM server) runs on rank 0
alone (:func:`on_main`) and its scores are sent to the rest.

Every collective carries each process's outcome: a user error (``InputError``) on any process is
raised on all of them (rank 0 prints it, the others are quiet), a crash ends the others with exit 1,
and no process waits for one that has stopped. Alone (no launcher) these helpers only call through.
Under a launcher every process must make the same calls in the same order, except inside
:func:`scoring_alone` (a trainer's reward function: each process scores the items it was given).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar, cast

from cheems.errors import InputError
from cheems.models.base import scaled_progress
from cheems.runtime import join_process_group, process_rank

T = TypeVar("T")
Outcome = tuple[str, Any]  # ("ok", value) | ("input", InputError fields) | ("crash", "Type: text")
_alone: ContextVar[bool] = ContextVar("cheems_scoring_alone", default=False)


@contextmanager
def scoring_alone() -> Iterator[None]:
    """Inside this block a model scorer runs every batch of the items this process gave it, with no collective.

    For callers whose processes each hold items of their own: an RL trainer under a launcher calls its reward
    function with each process's completions, so splitting them across processes would score the wrong items
    and wait for calls the others never make.
    """
    token = _alone.set(True)
    try:
        yield
    finally:
        _alone.reset(token)


def shard(items: Sequence[T], rank: int, world: int) -> list[T]:
    """Process ``rank``'s share of ``items``: every ``world``-th one from position ``rank``.

    Dealt round-robin, so over longest-first batches each process gets long and short ones alike.
    """
    return list(items[rank::world])


def place_shares(batches: Sequence[Sequence[int]], world: int, shares: Sequence[Sequence[T]], n: int) -> list[T]:
    """The values of ``n`` items in item order, from each process's values of its share of ``batches``.

    ``shares[r]`` holds process r's values in the order of its batches (:func:`shard`) and of the
    indices inside each batch; every index in ``batches`` gets exactly one value.
    """
    out: list[Any] = [None] * n
    for rank, values in enumerate(shares):
        indices = [i for batch in shard(batches, rank, world) for i in batch]
        if len(indices) != len(values):
            raise RuntimeError(f"process {rank} returned {len(values)} values for {len(indices)} items")
        for i, value in zip(indices, values):
            out[i] = value
    return out


def run_batch_share(
    batches: Sequence[Sequence[int]], n: int, run: Callable[[Sequence[Sequence[int]]], Sequence[T]]
) -> list[T]:
    """Run this process's share of ``batches`` and gather everyone's: the values of all ``n`` items, in order.

    ``run(batches)`` scores the batches it is given and returns a value per item index (a list of
    length ``n``; entries outside the given batches are ignored). Progress is scaled so that rank
    0's bar, which sees only its own share, estimates the whole run.
    """
    rank, world = process_rank()
    if world == 1 or _alone.get():
        return list(run(batches))
    mine = shard(batches, rank, world)
    own = sum(len(b) for b in mine)

    def score_mine() -> list[T]:
        with scaled_progress(n / own if own else 1.0):
            values = run(mine)
        return [values[i] for batch in mine for i in batch]

    return place_shares(batches, world, on_every_rank(score_mine), n)


def on_every_rank(fn: Callable[[], T]) -> list[T]:
    """Run ``fn`` on every process; every process gets the list of all their results (by rank).

    A failure on any process is raised on every process (see the module docstring).
    """
    if process_rank()[1] == 1:
        return [fn()]
    outcome, error = _attempt(fn)
    join_process_group()
    import torch.distributed as dist

    outcomes: list[Any] = [None] * process_rank()[1]
    dist.all_gather_object(outcomes, outcome)
    _raise_failure(outcomes, error)
    return [value for _, value in outcomes]


def on_main(fn: Callable[[], T]) -> T:
    """Run ``fn`` on rank 0 only and hand its result (or its failure) to every process."""
    rank, world = process_rank()
    if world == 1:
        return fn()
    outcome, error = _attempt(fn) if rank == 0 else (None, None)
    join_process_group()
    import torch.distributed as dist

    box: list[Any] = [outcome]  # rank 0 sends its outcome, the others receive it here
    dist.broadcast_object_list(box, src=0)
    _raise_failure([box[0]], error)
    return cast("T", box[0][1])


def _attempt(fn: Callable[[], T]) -> tuple[Outcome, BaseException | None]:
    """``fn``'s outcome as something picklable, and the exception itself (to re-raise here with its traceback)."""
    try:
        return ("ok", fn()), None
    except InputError as e:
        return ("input", {k: getattr(e, k) for k in ("message", "path", "line", "field", "hint")}), e
    except Exception as e:  # a crash: the other processes must not wait for this one
        return ("crash", f"{type(e).__name__}: {e}"), e


def _raise_failure(outcomes: Sequence[Outcome], error: BaseException | None) -> None:
    """Raise the first failure among ``outcomes``: this process's own exception when it failed itself."""
    for rank, (kind, payload) in enumerate(outcomes):
        if kind == "ok":
            continue
        if error is not None:
            raise error
        if kind == "input":
            raise InputError(payload.pop("message"), **payload)
        if process_rank()[0] == 0:
            raise RuntimeError(f"process {rank} failed: {payload}")
        raise SystemExit(1)
