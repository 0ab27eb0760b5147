"""Greedy prompt-grouped batching (paper part 3.3).

All responses of a prompt go into one batch when they fit, so the Bradley–Terry loss sees
every pair of that prompt while each response is forwarded once per epoch (pairwise
training forwards a response once per pair it is in).

Invariants of :func:`greedy_batches` (tested in ``tests/test_train_batching.py``):

1. Every response of every group is in exactly one batch; no batch holds more than
   ``batch_size`` items; every batch but the last holds exactly ``batch_size``.
2. Each group's items are contiguous in the concatenation of the batches (a group is
   finished before the next one starts), so a group spans as few batches as its start allows.
3. A group that starts a batch is split only if it is larger than ``batch_size``. A group
   that starts mid-batch with ``k`` free slots (fewer than its size) is split only when
   first-fit finds no later group that fits whole: every group placed after it has more
   than ``k`` responses. Its first piece then fills those ``k`` slots and the rest starts
   the next batch. So a group of at most ``batch_size`` responses spans at most two batches.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cheems.data.schema import Record
from cheems.ranking.pairs import training_pairs

Item = tuple[int, str]
"""One forward pass: (prompt index, response id)."""


@dataclass(frozen=True)
class PromptGroup:
    """The responses of one prompt that training forwards, and the pairs among them.

    ``responses`` holds only responses that appear in at least one pair: a response in no
    pair contributes nothing to the Bradley–Terry loss, so it is not forwarded.
    """

    prompt: int
    responses: tuple[str, ...]
    pairs: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        if len(set(self.responses)) != len(self.responses):
            raise ValueError(f"prompt {self.prompt}: duplicate response ids in {self.responses}")
        if any(w == l for w, l in self.pairs):
            raise ValueError(f"prompt {self.prompt}: a pair compares a response with itself")
        in_pairs = {rid for pair in self.pairs for rid in pair}
        if in_pairs != set(self.responses):
            raise ValueError(
                f"prompt {self.prompt}: responses {sorted(self.responses)} must be exactly those "
                f"named by the pairs {sorted(in_pairs)}"
            )

    @classmethod
    def from_pairs(cls, prompt: int, pairs: Iterable[tuple[str, str]], order: Sequence[str] = ()) -> PromptGroup:
        """A group whose responses are those named by ``pairs``, listed in ``order`` where given."""
        pairs = tuple(pairs)
        position = {rid: i for i, rid in enumerate(order)}
        first_seen = dict.fromkeys(rid for pair in pairs for rid in pair)
        # stable sort: responses missing from ``order`` follow, in order of first appearance
        responses = sorted(first_seen, key=lambda rid: position.get(rid, len(position)))
        return cls(prompt=prompt, responses=tuple(responses), pairs=pairs)


def prompt_groups(records: Sequence[Record]) -> list[PromptGroup]:
    """One group per record that has training pairs; ``prompt`` is the record's index in ``records``.

    Responses keep the record's order. Records without a pair give no group.
    """
    groups = []
    for index, record in enumerate(records):
        pairs = training_pairs(record)
        if pairs:
            groups.append(PromptGroup.from_pairs(index, pairs, [r.id for r in record.responses]))
    return groups


def _check_groups(groups: Sequence[PromptGroup]) -> None:
    prompts = [g.prompt for g in groups]
    if len(set(prompts)) != len(prompts):
        raise ValueError("prompt indices of the groups must be unique")


def _epoch_rng(seed: int, epoch: int) -> random.Random:
    # A str seed is hashed with SHA-512, independent of PYTHONHASHSEED: every process of a
    # data-parallel run computes the same plan.
    return random.Random(f"cheems-batches:{seed}:{epoch}")


class _FirstFit:
    """Unplaced groups by size, to find the earliest one of size <= k in O(batch_size)."""

    def __init__(self, order: list[PromptGroup], batch_size: int) -> None:
        self.placed = [False] * len(order)
        self._by_size: dict[int, deque[int]] = {s: deque() for s in range(1, batch_size + 1)}
        for pos, group in enumerate(order):
            if len(group.responses) <= batch_size:  # larger groups never fit whole
                self._by_size[len(group.responses)].append(pos)

    def take(self, space: int) -> int | None:
        """Position of the earliest unplaced group of at most ``space`` responses, marked placed."""
        best: int | None = None
        for size in range(1, space + 1):
            queue = self._by_size[size]
            while queue and self.placed[queue[0]]:
                queue.popleft()
            if queue and (best is None or queue[0] < best):
                best = queue[0]
        if best is not None:
            self.placed[best] = True
        return best


def _split(ids: list[str], pairs: Sequence[tuple[str, str]], k: int) -> tuple[list[str], list[str]]:
    """Choose ``k`` of ``ids`` to cut as few pairs as possible (greedy); return (chosen, rest).

    Each step adds the response whose move lowers the cut most: its pairs to the chosen set
    stop being cut, its pairs to the others start being cut. Ties go to the earlier response.
    """
    live = set(ids)
    neighbours: dict[str, list[str]] = {rid: [] for rid in ids}
    for w, l in pairs:
        if w in live and l in live:
            neighbours[w].append(l)
            neighbours[l].append(w)
    chosen: set[str] = set()

    def cut_increase(rid: str) -> int:
        inside = sum(n in chosen for n in neighbours[rid])
        return len(neighbours[rid]) - 2 * inside

    for _ in range(k):
        chosen.add(min((rid for rid in ids if rid not in chosen), key=cut_increase))
    return [rid for rid in ids if rid in chosen], [rid for rid in ids if rid not in chosen]


def greedy_batches(
    groups: Sequence[PromptGroup], batch_size: int, *, seed: int, epoch: int, shuffle: bool = True
) -> list[list[Item]]:
    """Pack the groups' responses into batches of ``batch_size`` items for one epoch.

    Groups are shuffled by prompt (deterministic for ``(seed, epoch)``, different per epoch)
    and taken in turn. A group that fits in the free space goes in whole. Otherwise, if the
    batch is not empty, the first later group that fits whole fills the space instead
    (first-fit keeps groups intact and batches full). If none fits, or the batch is empty,
    the group is split: as many responses as fit, chosen to cut few of its pairs, fill the
    batch and the rest carries on in the next one. See the module docstring for the invariants.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    _check_groups(groups)
    order = [g for g in groups if g.responses]  # an empty group has nothing to forward
    if shuffle:
        _epoch_rng(seed, epoch).shuffle(order)
    fit = _FirstFit(order, batch_size)
    batches: list[list[Item]] = []
    current: list[Item] = []

    def place(prompt: int, ids: Iterable[str]) -> None:
        current.extend((prompt, rid) for rid in ids)
        if len(current) == batch_size:
            batches.append(current.copy())
            current.clear()

    for pos, group in enumerate(order):
        if fit.placed[pos]:
            continue
        fit.placed[pos] = True
        rest = list(group.responses)
        while rest:
            space = batch_size - len(current)
            if len(rest) <= space:
                place(group.prompt, rest)
                rest = []
            elif current and (other := fit.take(space)) is not None:
                place(order[other].prompt, order[other].responses)
            else:
                piece, rest = _split(rest, group.pairs, space)
                place(group.prompt, piece)
    if current:
        batches.append(current)
    return batches


def batch_pairs(batch: list[Item], groups: Sequence[PromptGroup]) -> list[tuple[int, int]]:
    """The pairs whose two responses are both in ``batch``, as (chosen index, rejected index) into it."""
    return _batch_pairs(batch, {g.prompt: g for g in groups})


def _batch_pairs(batch: list[Item], by_prompt: dict[int, PromptGroup]) -> list[tuple[int, int]]:
    index = {item: i for i, item in enumerate(batch)}
    out = []
    for prompt in dict.fromkeys(p for p, _ in batch):
        for w, l in by_prompt[prompt].pairs:
            if (prompt, w) in index and (prompt, l) in index:
                out.append((index[prompt, w], index[prompt, l]))
    return out


@dataclass
class EpochPlan:
    """One epoch's batches with the pairs each trains on and the numbers worth logging."""

    batches: list[list[Item]]
    pairs: list[list[tuple[int, int]]]
    """Per batch, the (chosen index, rejected index) pairs of :func:`batch_pairs`."""
    pairs_covered: int
    """Pairs whose two responses share a batch (the rest are lost to splits)."""
    pairs_total: int
    forward_passes: int
    """Responses forwarded: each once per epoch."""

    @property
    def coverage(self) -> float:
        """Share of pairs covered (1.0 when there are none)."""
        return self.pairs_covered / self.pairs_total if self.pairs_total else 1.0


def plan_epoch(
    groups: Sequence[PromptGroup], batch_size: int, seed: int, epoch: int, *, shuffle: bool = True
) -> EpochPlan:
    """Batches of one epoch (:func:`greedy_batches`) with their pairs and coverage counts."""
    batches = greedy_batches(groups, batch_size, seed=seed, epoch=epoch, shuffle=shuffle)
    by_prompt = {g.prompt: g for g in groups}  # built once: per batch it would cost O(groups)
    pairs = [_batch_pairs(batch, by_prompt) for batch in batches]
    return EpochPlan(
        batches=batches,
        pairs=pairs,
        pairs_covered=sum(map(len, pairs)),
        pairs_total=sum(len(g.pairs) for g in groups),
        forward_passes=sum(map(len, batches)),
    )


def shard_batches(batches: Sequence[list[Item]], rank: int, world_size: int) -> list[list[Item]]:
    """The batches process ``rank`` of ``world_size`` trains on: ``batches[rank::world_size]``.

    Whole batches go to one process, so a batch's pairs are never split between processes
    (pieces of a group already split over two batches may land on two processes; their
    cross pairs were lost anyway). Nothing is dropped or repeated: with ``n`` batches,
    processes ``rank < n % world_size`` get ``n // world_size + 1`` and the rest one fewer,
    so callers must handle uneven counts (e.g. accelerate's join). Step ``i`` of process
    ``rank`` is batch ``i * world_size + rank``.
    """
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
    return list(batches[rank::world_size])
