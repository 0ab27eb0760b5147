"""Greedy prompt-grouped batching: packing invariants, pair coverage, sharding."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cheems.train import (
    PromptGroup,
    batch_pairs,
    greedy_batches,
    plan_epoch,
    prompt_groups,
    shard_batches,
)
from helpers import record


def chain(prompt: int, n: int) -> PromptGroup:
    """x0 > x1 > ... > x{n-1}: n responses, n - 1 pairs."""
    ids = [f"x{i}" for i in range(n)]
    return PromptGroup(prompt, tuple(ids), tuple(zip(ids, ids[1:])))


@st.composite
def group_lists(draw) -> list[PromptGroup]:
    """2–10 responses per group (a group needs a pair per response); ids repeat across prompts."""
    sizes = draw(st.lists(st.integers(2, 10), max_size=12))
    groups = []
    for p, n in enumerate(sizes):
        ids = [f"x{i}" for i in range(n)]
        pairs = dict.fromkeys(zip(ids, ids[1:]))  # a chain names every response
        extra = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=2 * n))
        pairs.update(dict.fromkeys((ids[a], ids[b]) for a, b in extra if a < b))
        groups.append(PromptGroup(3 * p + 1, tuple(ids), tuple(pairs)))  # prompts need not be positions
    return groups


batch_sizes = st.integers(1, 16)
seeds = st.integers(0, 2**32)


def runs(batches: list[list[tuple[int, str]]]) -> dict[int, list[int]]:
    """Flat positions of each prompt's items in the concatenated batches."""
    out: dict[int, list[int]] = {}
    for pos, (prompt, _) in enumerate(item for batch in batches for item in batch):
        out.setdefault(prompt, []).append(pos)
    return out


@given(group_lists(), batch_sizes, seeds, st.booleans())
def test_every_response_once_and_only_the_last_batch_partial(groups, bs, seed, shuffle):
    batches = greedy_batches(groups, bs, seed=seed, epoch=0, shuffle=shuffle)
    items = [item for batch in batches for item in batch]
    assert sorted(items) == sorted((g.prompt, rid) for g in groups for rid in g.responses)
    assert all(len(b) == bs for b in batches[:-1])
    assert all(0 < len(b) <= bs for b in batches)


@given(group_lists(), batch_sizes, seeds)
def test_groups_are_contiguous_and_split_only_when_nothing_later_fits(groups, bs, seed):
    batches = greedy_batches(groups, bs, seed=seed, epoch=1)
    size = {g.prompt: len(g.responses) for g in groups}
    where = runs(batches)
    for prompt, positions in where.items():
        start, end = positions[0], positions[-1]
        assert positions == list(range(start, end + 1))  # contiguous
        first_batch, last_batch = start // bs, end // bs  # valid: all batches but the last are full
        if start % bs == 0:  # starts a batch: split only if it cannot fit
            assert last_batch - first_batch == (size[prompt] - 1) // bs
        elif last_batch > first_batch:  # started mid-batch and was split
            free = bs - start % bs
            later = [size[p] for p, pos in where.items() if pos[0] > start]
            assert all(s > free for s in later), "first-fit should have placed a later group whole"
            assert last_batch - first_batch == 1 + (size[prompt] - free - 1) // bs


@given(group_lists(), batch_sizes, seeds)
def test_a_group_that_fits_spans_at_most_two_consecutive_batches(groups, bs, seed):
    batches = greedy_batches(groups, bs, seed=seed, epoch=0)
    batch_of = {item: i for i, batch in enumerate(batches) for item in batch}
    for g in groups:
        spanned = sorted({batch_of[g.prompt, rid] for rid in g.responses})
        if len(g.responses) <= bs:
            assert spanned in ([spanned[0]], [spanned[0], spanned[0] + 1])
        else:
            assert spanned == list(range(spanned[0], spanned[-1] + 1))


@given(group_lists(), batch_sizes, seeds, st.integers(0, 5))
def test_plan_counts_pairs_whose_responses_share_a_batch(groups, bs, seed, epoch):
    plan = plan_epoch(groups, bs, seed, epoch)
    batch_of = {item: i for i, batch in enumerate(plan.batches) for item in batch}
    shared = sum(batch_of[g.prompt, w] == batch_of[g.prompt, l] for g in groups for w, l in g.pairs)
    assert plan.pairs_covered == shared == sum(map(len, plan.pairs))
    assert plan.pairs_total == sum(len(g.pairs) for g in groups)
    assert plan.forward_passes == sum(len(g.responses) for g in groups)
    for batch, pairs in zip(plan.batches, plan.pairs):
        for c, r in pairs:
            assert batch[c][0] == batch[r][0]  # a pair never crosses prompts
            group = next(g for g in groups if g.prompt == batch[c][0])
            assert (batch[c][1], batch[r][1]) in group.pairs


@given(group_lists(), batch_sizes, seeds, st.integers(0, 5))
def test_same_seed_and_epoch_give_the_same_batches(groups, bs, seed, epoch):
    assert greedy_batches(groups, bs, seed=seed, epoch=epoch) == greedy_batches(groups, bs, seed=seed, epoch=epoch)


@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_epochs_shuffle_prompts_differently(seed):
    groups = [chain(p, 3) for p in range(30)]
    orders = [
        [p for p in dict.fromkeys(p for batch in greedy_batches(groups, 8, seed=seed, epoch=e) for p, _ in batch)]
        for e in range(3)
    ]
    assert orders[0] != orders[1] != orders[2] != orders[0]
    assert sorted(orders[0]) == list(range(30))


def test_plan_does_not_depend_on_the_hash_seed():
    # Every process of a data-parallel run must compute the same plan; this process's hash
    # seed is random, the child's is fixed.
    ids = [f"x{i}" for i in range(7)]
    groups = [
        PromptGroup(p, tuple(ids[: 2 + p % 6]), tuple(zip(ids[: 1 + p % 6], ids[1 : 2 + p % 6]))) for p in range(20)
    ]
    code = (
        "import json, sys; from cheems.train.batching import PromptGroup, greedy_batches\n"
        "groups = [PromptGroup(p, tuple(r), tuple(map(tuple, s))) for p, r, s in json.load(sys.stdin)]\n"
        "print(json.dumps(greedy_batches(groups, 5, seed=7, epoch=2)))"
    )
    child = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps([[g.prompt, g.responses, g.pairs] for g in groups]),
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        capture_output=True,
        text=True,
        check=True,
    )
    expected = greedy_batches(groups, 5, seed=7, epoch=2)
    assert json.loads(child.stdout) == [[list(item) for item in batch] for batch in expected]


def test_no_shuffle_keeps_order_and_packs_whole_groups():
    groups = [chain(0, 3), chain(1, 2), chain(2, 3), chain(3, 4)]
    batches = greedy_batches(groups, 5, seed=0, epoch=0, shuffle=False)
    assert [[p for p, _ in b] for b in batches] == [[0, 0, 0, 1, 1], [2, 2, 2, 3, 3], [3, 3]]


def test_first_fit_pulls_a_later_group_forward_instead_of_splitting():
    groups = [chain(0, 3), chain(1, 4), chain(2, 2), chain(3, 4)]
    batches = greedy_batches(groups, 5, seed=0, epoch=0, shuffle=False)
    assert [[p for p, _ in b] for b in batches] == [[0, 0, 0, 2, 2], [1, 1, 1, 1, 3], [3, 3, 3]]


def test_group_larger_than_batch_starts_a_batch_and_fills_whole_batches():
    batches = greedy_batches([chain(0, 10)], 4, seed=0, epoch=0)
    assert [len(b) for b in batches] == [4, 4, 2]
    assert [rid for b in batches for _, rid in b] == [f"x{i}" for i in range(10)]  # chain cut twice only


def test_split_keeps_pairs_together():
    # Chain a > m > b > c > d listed as (m, a, b, c, d): one free slot should take an end (a or d), not m.
    group = PromptGroup(1, ("m", "a", "b", "c", "d"), (("a", "m"), ("m", "b"), ("b", "c"), ("c", "d")))
    plan = plan_epoch([chain(0, 3), group], 4, 0, 0, shuffle=False)
    assert plan.batches[0] == [(0, "x0"), (0, "x1"), (0, "x2"), (1, "a")]
    assert (plan.pairs_covered, plan.pairs_total) == (5, 6)


def test_batch_pairs_indexes_into_the_batch():
    groups = [PromptGroup(4, ("a", "b", "c"), (("a", "b"), ("c", "a"))), chain(9, 2)]
    batch = [(9, "x1"), (4, "c"), (4, "a"), (9, "x0")]
    assert batch_pairs(batch, groups) == [(3, 0), (1, 2)]


def test_plan_with_everything_fitting_covers_every_pair():
    plan = plan_epoch([chain(p, 4) for p in range(5)], 4, seed=3, epoch=0)
    assert (plan.pairs_covered, plan.pairs_total, plan.forward_passes, plan.coverage) == (15, 15, 20, 1.0)
    assert len(plan.batches) == 5


def test_empty_input_and_bad_arguments():
    assert greedy_batches([], 4, seed=0, epoch=0) == []
    assert plan_epoch([], 4, 0, 0).coverage == 1.0
    with pytest.raises(ValueError, match="batch_size"):
        greedy_batches([chain(0, 2)], 0, seed=0, epoch=0)
    with pytest.raises(ValueError, match="unique"):
        greedy_batches([chain(0, 2), chain(0, 3)], 4, seed=0, epoch=0)


@pytest.mark.parametrize(
    "responses, pairs",
    [
        (("a", "a"), (("a", "a"),)),  # duplicate response
        (("a", "b", "c"), (("a", "b"),)),  # c in no pair
        (("a",), (("a", "z"),)),  # pair names an unknown response
        (("a", "b"), (("a", "a"), ("a", "b"))),  # self pair
    ],
)
def test_prompt_group_rejects_inconsistent_groups(responses, pairs):
    with pytest.raises(ValueError):
        PromptGroup(0, responses, pairs)


def test_prompt_groups_from_records():
    records = [
        record(4, [("r3", "r1", "a"), ("r1", "r2", "tie")], rank={"r1": 2, "r2": 2, "r3": 1}),
        record(2, rank={"r1": 1, "r2": 1}),  # no pair: no group
        record(3, [("r2", "r3", "b")]),
    ]
    groups = prompt_groups(records)
    assert groups == [
        PromptGroup(0, ("r1", "r3"), (("r3", "r1"),)),  # record order; r2, r4 are in no pair
        PromptGroup(2, ("r2", "r3"), (("r3", "r2"),)),
    ]


@given(st.integers(0, 40), st.integers(1, 8))
def test_shard_batches_partitions_whole_batches(n, world):
    batches = [[(i, "x")] for i in range(n)]
    shards = [shard_batches(batches, r, world) for r in range(world)]
    assert sorted(b for s in shards for b in s) == batches
    counts = [len(s) for s in shards]
    assert counts == sorted(counts, reverse=True) and counts[0] - counts[-1] <= 1
    assert all(shards[r][i] == batches[i * world + r] for r in range(world) for i in range(len(shards[r])))


def test_shard_batches_rejects_bad_rank():
    with pytest.raises(ValueError):
        shard_batches([], 2, 2)
