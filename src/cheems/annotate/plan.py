"""The triple-wise plan (paper section 3.2): a ring of adjacent responses per prompt, one annotator per task.

A prompt's N responses are put in a seeded random order and cut into N tasks of three adjacent
responses around a ring: for 5, (1,2,3) (2,3,4) (3,4,5) (4,5,1) (5,1,2). Three responses make one
task, two make one pairwise task, one makes none. Each task goes to ``overlap`` different
annotators (double-blind), and the tasks of one prompt to different annotators where the team is
large enough. Among the allowed annotators the choice prefers those whose declared categories hold
the prompt's main category, then the least loaded, then a draw seeded by the task.

Every random choice is a seeded hash of what it is about (never a generator's running state), so
the plan of a prompt does not depend on the other prompts in the file.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from cheems.annotate.people import Person
from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.runtime import content_hash


def seeded(seed: int, *about: object) -> random.Random:
    """A generator fixed by the seed and what it is about (same inputs, same draws, in any run)."""
    return random.Random(content_hash([seed, *[str(a) for a in about]]))


@dataclass(frozen=True)
class PlannedTask:
    """One triple-wise (or pairwise) comparison task: response ids in plan order."""

    task_id: str
    prompt_id: str
    slot: int
    responses: tuple[str, ...]
    gold: bool = False


@dataclass
class Plan:
    """The tasks, who annotates each one, and what could not be planned as asked."""

    tasks: list[PlannedTask] = field(default_factory=list)
    annotators: dict[str, list[str]] = field(default_factory=dict)
    """task id -> the annotators it goes to."""
    skipped: list[str] = field(default_factory=list)
    """Prompt ids with fewer than two responses (nothing to compare)."""
    shared: list[str] = field(default_factory=list)
    """Prompt ids where the team was too small for one annotator per task."""
    wanted: int = 0
    """Annotators that one task each would take: the most tasks of a prompt × overlap."""


def ring(ids: Sequence[str]) -> list[tuple[str, ...]]:
    """The tasks over responses in ``ids`` order: triples of neighbours around a ring (one for 2 or 3)."""
    n = len(ids)
    if n < 2:
        return []
    if n <= 3:
        return [tuple(ids)]
    return [tuple(ids[(i + j) % n] for j in range(3)) for i in range(n)]


def prompt_tasks(record: Record, seed: int, gold: bool = False) -> list[PlannedTask]:
    """The ring tasks of one prompt, over its responses in a seeded random order."""
    ids = [r.id for r in record.responses]
    seeded(seed, "order", record.id).shuffle(ids)
    return [
        PlannedTask(f"{record.id}#t{slot}", record.id, slot, triple, gold)
        for slot, triple in enumerate(ring(ids), start=1)
    ]


def shown_order(seed: int, item: str, responses: Sequence[str]) -> list[str]:
    """The order one person sees a task's responses in (A, B, C): shuffled per person against position bias."""
    order = list(responses)
    seeded(seed, "shown", item).shuffle(order)
    return order


def plan_tasks(records: Sequence[Record], annotators: Sequence[Person], overlap: int, seed: int) -> Plan:
    """Cut every prompt into ring tasks and give each task ``overlap`` different annotators."""
    if overlap > len(annotators):
        raise InputError(
            f"overlap {overlap} needs {overlap} annotators, the team has {len(annotators)}",
            path="--overlap",
            hint="lower --overlap or add annotators to PEOPLE.yaml",
        )
    plan = Plan()
    load: Counter[str] = Counter()
    for record in records:
        tasks = prompt_tasks(record, seed)
        if not tasks:
            plan.skipped.append(record.id)
            continue
        on_prompt: set[str] = set()
        for task in tasks:
            chosen = _choose(task, record.main_category, annotators, overlap, on_prompt, load, seed)
            plan.tasks.append(task)
            plan.annotators[task.task_id] = chosen
        if len(on_prompt) < len(tasks) * overlap:
            plan.shared.append(record.id)
        plan.wanted = max(plan.wanted, len(tasks) * overlap)
    return plan


def _choose(
    task: PlannedTask,
    category: str,
    annotators: Sequence[Person],
    overlap: int,
    on_prompt: set[str],
    load: Counter[str],
    seed: int,
) -> list[str]:
    """``overlap`` distinct annotators for one task: new to the prompt, then category match, then least load."""
    chosen: list[str] = []

    def rank(p: Person) -> tuple[bool, bool, int]:
        return p.name in on_prompt, category not in p.categories, load[p.name]

    draw = seeded(seed, "assign", task.task_id)  # one generator per task: a hash per annotator was most of init
    for _ in range(overlap):
        pool = [p for p in annotators if p.name not in chosen]
        first = min(map(rank, pool))
        tied = [p for p in pool if rank(p) == first]
        best = tied[draw.randrange(len(tied))]
        chosen.append(best.name)
        on_prompt.add(best.name)
        load[best.name] += 1
    return chosen
