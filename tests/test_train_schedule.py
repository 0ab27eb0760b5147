"""The training schedule: micro-steps, loss weights, sync points, placeholders and resume positions."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cheems.train.batching import EpochPlan
from cheems.train.schedule import MicroStep, micro_steps, optimizer_steps


def plans_of(*sizes: int) -> list[EpochPlan]:
    """One plan per epoch with ``sizes[e]`` batches; batch ``i`` of epoch ``e`` holds prompt ``100 * e + i``."""
    plans = []
    for e, n in enumerate(sizes):
        batches = [[(100 * e + i, "a"), (100 * e + i, "b")] for i in range(n)]
        pairs = [[(0, 1)] for _ in range(n)]
        plans.append(EpochPlan(batches, pairs, pairs_covered=n, pairs_total=n, forward_passes=2 * n))
    return plans


def run(plans: list[EpochPlan], world: int, grad_accum: int, deepspeed: bool = False) -> list[list[MicroStep]]:
    """Every process's micro-steps."""
    return [
        list(micro_steps(plans, world=world, rank=rank, grad_accum=grad_accum, deepspeed=deepspeed))
        for rank in range(world)
    ]


def windows(steps: list[MicroStep]) -> list[list[int]]:
    """Positions of the micro-steps of each accumulation window (a window ends at a sync step)."""
    out, current = [], []
    for i, step in enumerate(steps):
        current.append(i)
        if step.sync:
            out.append(current)
            current = []
    assert not current, "the last micro-step of a run is a sync step"
    return out


# ---------------------------------------------------------------- properties


@given(
    sizes=st.lists(st.integers(1, 23), min_size=1, max_size=4),
    world=st.integers(1, 5),
    grad_accum=st.integers(1, 4),
    deepspeed=st.booleans(),
)
def test_schedule_invariants(sizes, world, grad_accum, deepspeed):
    plans = plans_of(*sizes)
    procs = run(plans, world, grad_accum, deepspeed)

    # every process makes the same micro-steps and syncs at the same ones: collectives never hang
    assert len({len(steps) for steps in procs}) == 1
    assert len({tuple(s.sync for s in steps) for steps in procs}) == 1
    assert all([(s.epoch, s.micro) for s in steps] == [(s.epoch, s.micro) for s in procs[0]] for steps in procs)
    assert sum(s.sync for s in procs[0]) == optimizer_steps(plans, world, grad_accum)

    # every batch of every epoch runs exactly once, as a real step of one process
    ran = sorted((s.epoch, s.batch) for steps in procs for s in steps if s.real)
    assert ran == [(e, b) for e, n in enumerate(sizes) for b in range(n)]
    for steps in procs:
        for s in steps:
            batch = plans[s.epoch].batches[s.batch]
            assert s.items == (batch if s.real else batch[:1])
            assert s.pairs == (plans[s.epoch].pairs[s.batch] if s.real else [])
            assert s.real or s.weight == 0.0

    # within each window the real batches of all processes weigh world (x grad_accum under DeepSpeed):
    # DDP's mean over processes and DeepSpeed's division by grad_accum turn that into a mean of 1
    scale = world * (grad_accum if deepspeed else 1)
    for window in windows(procs[0]):
        assert len(window) <= grad_accum
        assert len({procs[0][i].epoch for i in window}) == 1  # a window never crosses an epoch
        weights = [procs[r][i].weight for r in range(world) for i in window if procs[r][i].real]
        assert math.isclose(math.fsum(weights), scale, rel_tol=1e-12)
        for i in window:  # each micro-step counts the same, whatever its number of real batches
            here = [procs[r][i].weight for r in range(world) if procs[r][i].real]
            assert math.isclose(math.fsum(here), scale / len(window), rel_tol=1e-12)


@given(
    sizes=st.lists(st.integers(1, 17), min_size=1, max_size=3),
    world=st.integers(1, 4),
    grad_accum=st.integers(1, 3),
    deepspeed=st.booleans(),
    data=st.data(),
)
def test_resuming_after_any_step_gives_the_remaining_steps(sizes, world, grad_accum, deepspeed, data):
    plans = plans_of(*sizes)
    rank = data.draw(st.integers(0, world - 1))
    steps = list(micro_steps(plans, world=world, rank=rank, grad_accum=grad_accum, deepspeed=deepspeed))
    cut = data.draw(st.integers(0, len(steps) - 1))
    resumed = list(
        micro_steps(
            plans, world=world, rank=rank, grad_accum=grad_accum, deepspeed=deepspeed, start=steps[cut].resume_at
        )
    )
    # the same trajectory; only "first in this run's epoch" differs (it prints the epoch line)
    assert [dataclasses.replace(s, first=False) for s in resumed] == [
        dataclasses.replace(s, first=False) for s in steps[cut + 1 :]
    ]
    if resumed:
        assert resumed[0].first


# ---------------------------------------------------------------- examples


def test_one_process_no_accumulation_is_one_step_per_batch():
    (steps,) = run(plans_of(3, 2), world=1, grad_accum=1)
    assert [(s.epoch, s.batch, s.weight, s.sync) for s in steps] == [
        (0, 0, 1.0, True),
        (0, 1, 1.0, True),
        (0, 2, 1.0, True),
        (1, 0, 1.0, True),
        (1, 1, 1.0, True),
    ]
    assert [s.first for s in steps] == [True, False, False, True, False]
    assert [s.epoch_end for s in steps] == [False, False, True, False, True]
    assert [s.progress for s in steps] == [1 / 3, 2 / 3, 1.0, 1.5, 2.0]


def test_accumulation_windows_restart_each_epoch_and_resume_positions():
    """The resume test of test_trainer: 7 batches, grad_accum 2 -> windows of 2, 2, 2, 1 micro-steps."""
    (steps,) = run(plans_of(7, 7), world=1, grad_accum=2)
    first_epoch = steps[:7]
    assert [s.weight for s in first_epoch] == [0.5] * 6 + [1.0]
    assert [s.sync for s in first_epoch] == [False, True] * 3 + [True]
    syncs = [s for s in steps if s.sync]
    assert len(syncs) == optimizer_steps(plans_of(7, 7), 1, 2) == 8
    # checkpoints after optimizer steps 3 and 6 (save_every 3) hold these positions
    assert syncs[2].resume_at == (0, 6) and syncs[5].resume_at == (1, 4)
    assert syncs[3].resume_at == (1, 0)  # the end of an epoch: the next one from its start


def test_an_idle_process_runs_a_zero_weight_placeholder():
    """The two-process test of test_trainer: 7 batches over 2 processes, one batch per step."""
    rank0, rank1 = run(plans_of(7), world=2, grad_accum=1)
    assert [s.batch for s in rank0] == [0, 2, 4, 6] and [s.weight for s in rank0] == [1.0, 1.0, 1.0, 2.0]
    assert [s.batch for s in rank1[:3]] == [1, 3, 5] and [s.weight for s in rank1[:3]] == [1.0, 1.0, 1.0]
    idle = rank1[3]
    assert not idle.real and idle.weight == 0.0 and idle.pairs == [] and idle.items == [(1, "a")]
    assert idle.batch == 1 and idle.sync and idle.epoch_end


def test_deepspeed_weights_undo_its_division_by_grad_accum():
    plain = run(plans_of(5), world=2, grad_accum=2)
    ds = run(plans_of(5), world=2, grad_accum=2, deepspeed=True)
    for a, b in zip(plain, ds):
        assert [2 * s.weight for s in a] == [s.weight for s in b]
        assert [s.sync for s in a] == [s.sync for s in b]


def test_bad_process_numbers_are_refused():
    with pytest.raises(ValueError, match="rank"):
        list(micro_steps(plans_of(2), world=2, rank=2, grad_accum=1))
    with pytest.raises(ValueError, match="grad_accum"):
        list(micro_steps(plans_of(2), world=1, rank=0, grad_accum=0))
