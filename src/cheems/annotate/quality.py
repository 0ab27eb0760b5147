"""The dashboard's numbers, computed from a :class:`~cheems.annotate.snapshot.Snapshot` (pure, no I/O).

:func:`status_report` gives one JSON-ready dict (``cheems annotate status --json``, ``GET /api/status``,
the admin page): progress, answers per day, agreement between overlapping annotators (pairwise and
Krippendorff's alpha), gold accuracy per person, the live conflict ratio of each prompt under
Algorithm 1 with its preference cycles named, and the open queues.

Words used throughout:

- a *done* annotate item is one in state ``submitted`` or ``approved``; a *returned* one is open
  again after a reviewer rejected it: an open annotate item that already has an answer (submitting
  is the only way an item leaves ``open``, a rejection the only way back);
- a *current* answer is an :class:`~cheems.annotate.snapshot.AnswerRow` with ``current`` set
  (the latest answer of an item that stands);
- gold items, tasks and answers never count in progress, agreement, conflicts or queues; as work
  done they count in ``per_day`` and a person's ``today`` (they look like any other task to the
  annotator, whose own page counts them too);
- a share (``share_done``, accuracies, ratios, alphas) is ``null`` when there is nothing to divide by,
  never NaN.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, tzinfo
from itertools import combinations, islice
from typing import Any

import krippendorff
import networkx as nx

from cheems.annotate.answer import pair_labels, rank_levels
from cheems.annotate.export import answer_comparisons, standing_answers
from cheems.annotate.snapshot import AnswerRow, Snapshot, TaskRow
from cheems.data.schema import Comparison, Record
from cheems.ranking.resolve import preference_graph, resolve_record

DONE = ("submitted", "approved")
CYCLES_SEARCHED = 100
"""Simple cycles looked at per strongly connected component when naming its longest cycle (their
number can grow exponentially with the component; the first ones found are enough to name one)."""
LABEL_VALUE = {"a": 1, "tie": 0, "b": -1}
"""A pair's label as an ordinal value for alpha: a better, tie, b better."""


def status_report(snapshot: Snapshot, now: datetime | None = None) -> dict[str, Any]:
    """Every number of the dashboard, JSON-ready (``json.dumps(..., allow_nan=False)`` passes).

    ``now`` (an aware datetime, by default the machine's local time) fixes the time zone of "today"
    and of the calendar days of ``per_day``.
    """
    now = now or datetime.now().astimezone()
    return {
        "progress": progress(snapshot, now),
        "per_day": per_day(snapshot, now.tzinfo),
        "agreement": agreement(snapshot),
        "gold": gold_accuracy(snapshot),
        "conflicts": conflicts(snapshot),
        "queues": queues(snapshot),
    }


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _gold_tasks(snapshot: Snapshot) -> set[str]:
    return {t.task_id for t in snapshot.tasks if t.gold}


def _returned(snapshot: Snapshot) -> set[str]:
    """Ids of the non-gold annotate items a reviewer returned (open, with an earlier answer)."""
    answered = {a.item_id for a in snapshot.answers}
    return {
        i.item_id
        for i in snapshot.items
        if i.kind == "annotate" and i.state == "open" and not i.gold and i.item_id in answered
    }


def _current(snapshot: Snapshot, kind: str) -> list[AnswerRow]:
    """Current answers of ``kind`` on non-gold tasks, oldest first."""
    gold = _gold_tasks(snapshot)
    rows = [a for a in snapshot.answers if a.current and a.kind == kind and a.task_id not in gold]
    return sorted(rows, key=lambda a: a.submitted_at)


def progress(snapshot: Snapshot, now: datetime) -> dict[str, Any]:
    """Progress of the non-gold work: totals over annotate items, then by category, person and prompt.

    Totals: ``tasks`` (planned), ``items`` (annotate items: a task has one per overlapping annotator),
    ``open`` (items waiting for their annotator, returned ones included), ``submitted``, ``approved``,
    ``returned``, ``share_done`` (done items / items) and ``tasks_done``. A *task* is done when every
    one of its annotate items is done; ``by_category`` (the prompt's main category, in file order) and
    ``by_prompt`` count tasks, ``share_done`` there is done tasks / tasks. ``by_person``: see
    :func:`person_progress`.
    """
    items = [i for i in snapshot.items if not i.gold]
    annotate = [i for i in items if i.kind == "annotate"]
    states: defaultdict[str, list[str]] = defaultdict(list)
    for item in annotate:
        states[item.task_id].append(item.state)
    done_tasks = {t for t, s in states.items() if all(state in DONE for state in s)}
    by_prompt = []
    by_category: dict[str, dict[str, Any]] = {}
    tasks_of = _tasks_by_prompt(snapshot)
    for pid, record in snapshot.prompts.items():
        tasks = [t.task_id for t in tasks_of[pid]]
        done = sum(t in done_tasks for t in tasks)
        by_prompt.append({"prompt_id": pid, "category": record.main_category, "tasks": len(tasks), "done": done})
        cat = by_category.setdefault(record.main_category, {"tasks": 0, "done": 0})
        cat["tasks"] += len(tasks)
        cat["done"] += done
    for cat in by_category.values():
        cat["share_done"] = _share(cat["done"], cat["tasks"])
    count = {state: sum(i.state == state for i in annotate) for state in ("open", "submitted", "approved")}
    return {
        "tasks": sum(not t.gold for t in snapshot.tasks),
        "tasks_done": len(done_tasks),
        "items": len(annotate),
        "open": count["open"],
        "submitted": count["submitted"],
        "approved": count["approved"],
        "returned": len(_returned(snapshot)),
        "share_done": _share(count["submitted"] + count["approved"], len(annotate)),
        "by_category": by_category,
        "by_person": person_progress(snapshot, now),
        "by_prompt": by_prompt,
    }


def _tasks_by_prompt(snapshot: Snapshot) -> defaultdict[str, list[TaskRow]]:
    tasks: defaultdict[str, list[TaskRow]] = defaultdict(list)
    for task in snapshot.tasks:
        if not task.gold:
            tasks[task.prompt_id].append(task)
    return tasks


def person_progress(snapshot: Snapshot, now: datetime) -> dict[str, dict[str, Any]]:
    """Per person (in PEOPLE.yaml order), over their non-gold items.

    ``assigned``/``done``/``open``/``returned``: annotate items (open counts returned ones too);
    ``reviews_done``/``reviews_open``, ``adjudications_open``: their review and adjudication items;
    ``today``: the answers (annotate and adjudicate, current or since replaced, gold included) and
    review verdicts they gave since local midnight of ``now``, as their own page counts them.
    """
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    today = Counter(a.person for a in snapshot.answers if a.submitted_at >= midnight)
    today.update(r.person for r in snapshot.reviews if r.at >= midnight)
    count = Counter((i.person, i.kind, i.state) for i in snapshot.items if not i.gold)
    back = _returned(snapshot)
    returned = Counter(i.person for i in snapshot.items if i.item_id in back)

    def n(name: str, kind: str, *states: str) -> int:
        return sum(count[(name, kind, state)] for state in states)

    return {
        p.name: {
            "role": p.role,
            "assigned": n(p.name, "annotate", "open", *DONE),
            "done": n(p.name, "annotate", *DONE),
            "open": n(p.name, "annotate", "open"),
            "returned": returned[p.name],
            "reviews_done": n(p.name, "review", "done"),
            "reviews_open": n(p.name, "review", "open"),
            "adjudications_open": n(p.name, "adjudicate", "open"),
            "today": today[p.name],
        }
        for p in snapshot.people
    }


def per_day(snapshot: Snapshot, zone: tzinfo | None) -> dict[str, int]:
    """Annotate answers per calendar day (the date of ``submitted_at`` in ``zone``), oldest day first.

    Every submission is a unit of work, so every annotate answer counts: current ones, those replaced
    since (an answer a reviewer rejected, then the resubmission) and answers to gold tasks.
    """
    days: defaultdict[str, int] = defaultdict(int)
    for a in snapshot.answers:
        if a.kind == "annotate":
            days[a.submitted_at.astimezone(zone).date().isoformat()] += 1
    return dict(sorted(days.items()))


def agreement(snapshot: Snapshot) -> dict[str, Any]:
    """Agreement between annotators on the overlapping tasks: non-gold tasks with current annotate
    answers from 2+ people (adjudication does not change them; it is measured here before consensus).

    - ``pairwise_agreement``: over every pair of answers of a task and every pair of the task's
      responses, the share with equal labels (a/b/tie, :func:`pair_labels`); ``pairs`` counts them.
    - ``alpha_scores``: Krippendorff's alpha (ordinal) with units (task, response), values the 0-5 scores.
    - ``alpha_ranking``: the same with units (task, response pair), values 1 / 0 / -1 (a better / tie / b better).
    - ``below_target``: tasks where some two answers agree on fewer than ``settings.agreement_target`` of
      the pairs (the adjudication rule: more than 10 % disagreement at the default 0.9).
    """
    target = snapshot.settings.agreement_target
    tasks = {t.task_id: t for t in snapshot.tasks}
    by_task: defaultdict[str, dict[str, AnswerRow]] = defaultdict(dict)
    for a in _current(snapshot, "annotate"):
        by_task[a.task_id][a.person] = a  # one answer per person and task (a later one would replace it)
    overlapping = {tid: list(answers.values()) for tid, answers in by_task.items() if len(answers) >= 2}
    equal = compared = below = 0
    scores: defaultdict[tuple[Any, ...], dict[str, int]] = defaultdict(dict)
    ranking: defaultdict[tuple[Any, ...], dict[str, int]] = defaultdict(dict)
    for tid, answers in overlapping.items():
        labels = {a.person: pair_labels(a.levels, tasks[tid].responses) for a in answers}
        for a in answers:
            for rid, score in a.scores.items():
                scores[(tid, rid)][a.person] = score
            for pair, label in labels[a.person].items():
                ranking[(tid, pair)][a.person] = LABEL_VALUE[label]
        task_below = False
        for one, two in combinations(labels.values(), 2):
            same = sum(one[pair] == two[pair] for pair in one)
            equal += same
            compared += len(one)
            # the adjudication rule, as in answer.agreement: agreed share < target
            task_below |= same / len(one) < target
        below += task_below
    return {
        "tasks": len(overlapping),
        "pairs": compared,
        "pairwise_agreement": _share(equal, compared),
        "alpha_scores": ordinal_alpha(scores.values()),
        "alpha_ranking": ordinal_alpha(ranking.values()),
        "below_target": below,
    }


def ordinal_alpha(units: Iterable[Mapping[Any, int]]) -> float | None:
    """Krippendorff's alpha for ordinal data (the ``krippendorff`` package) over units of coder -> value.

    None when it is undefined: no unit with values from 2+ coders, or one single value over all
    such units (the library raises on one value in the data, and divides 0 by 0 when the other
    values sit only in units nobody else coded).
    """
    pairable = [u for u in units if len(u) >= 2]
    if len({v for u in pairable for v in u.values()}) < 2:
        return None
    coders = sorted({c for u in pairable for c in u}, key=str)
    matrix = [[u.get(c, math.nan) for u in pairable] for c in coders]
    return float(krippendorff.alpha(reliability_data=matrix, level_of_measurement="ordinal"))


def gold_accuracy(snapshot: Snapshot) -> dict[str, dict[str, Any]]:
    """Gold accuracy of every annotator and reviewer (PEOPLE.yaml order).

    Annotators: over their current answers to gold tasks, the share of the task's response pairs
    (those the gold record ranks) whose label equals the one the gold ``rank`` implies; ``items``
    counts their gold annotate items, ``answered`` those with a current answer. Reviewers: the share
    of their verdicts on planted gold reviews that were correct; ``items`` counts their gold review
    items.
    """
    tasks = {t.task_id: t for t in snapshot.tasks if t.gold}
    all_items = [i for i in snapshot.items if i.gold]
    all_answers = [a for a in snapshot.answers if a.current and a.kind == "annotate" and a.task_id in tasks]
    out: dict[str, dict[str, Any]] = {}
    for person in snapshot.people:
        gold_items = [i for i in all_items if i.person == person.name]
        if person.role == "annotator":
            answers = [a for a in all_answers if a.person == person.name]
            right = pairs = 0
            for a in answers:
                task = tasks[a.task_id]
                rank = snapshot.gold[task.prompt_id].rank or {}
                truth = pair_labels(rank_levels(rank, task.responses), [r for r in task.responses if r in rank])
                mine = pair_labels(a.levels, task.responses)
                right += sum(mine[p] == label for p, label in truth.items())
                pairs += len(truth)
            out[person.name] = {
                "role": person.role,
                "items": sum(i.kind == "annotate" for i in gold_items),
                "answered": len(answers),
                "pairs": pairs,
                "accuracy": _share(right, pairs),
            }
        elif person.role == "reviewer":
            verdicts = [r for r in snapshot.reviews if r.gold and r.person == person.name and r.correct is not None]
            out[person.name] = {
                "role": person.role,
                "items": sum(i.kind == "review" for i in gold_items),
                "verdicts": len(verdicts),
                "accuracy": _share(sum(bool(r.correct) for r in verdicts), len(verdicts)),
            }
    return out


def prompt_comparisons(
    record: Record, tasks: Sequence[TaskRow], standing: dict[str, list[AnswerRow]]
) -> list[Comparison]:
    """The comparisons one prompt's standing answers imply (``standing``: from
    :func:`~cheems.annotate.export.standing_answers`, the consensus where a task was adjudicated),
    each pair (a, b) in the record's response order: the comparisons ``cheems annotate export`` writes."""
    order = [r.id for r in record.responses]
    return [
        c
        for task in tasks
        for a in standing.get(task.task_id, [])
        for c in answer_comparisons(a, [r for r in order if r in task.responses])
    ]


def preference_cycles(record: Record, comparisons: Sequence[Comparison]) -> list[list[str]]:
    """One cycle per strongly connected component (2+ responses) of the strict (non-tie) comparisons.

    A cycle ``[x, y, z]`` reads x > y > z > x (each was preferred over the next at least once). It is
    the longest among the first :data:`CYCLES_SEARCHED` simple cycles of the component (a component
    can have no cycle through all its members), started at its earliest response in record order;
    components come in the order of their earliest response.
    """
    strict = [c for c in comparisons if c.label != "tie"]
    graph = preference_graph(record.model_copy(update={"comparisons": strict}))
    position = {r.id: i for i, r in enumerate(record.responses)}
    cycles = []
    for members in nx.strongly_connected_components(graph):
        if len(members) < 2:
            continue
        found = [_rotated(c, position) for c in islice(nx.simple_cycles(graph.subgraph(members)), CYCLES_SEARCHED)]
        cycles.append(min(found, key=lambda c: (-len(c), [position[r] for r in c])))
    return sorted(cycles, key=lambda c: position[c[0]])


def _rotated(cycle: list[str], position: dict[str, int]) -> list[str]:
    """The same cycle, started at its earliest response in record order."""
    start = min(range(len(cycle)), key=lambda i: position[cycle[i]])
    return cycle[start:] + cycle[:start]


def conflicts(snapshot: Snapshot) -> dict[str, Any]:
    """The paper's conflict ratio (Table 5), live: each non-gold prompt's comparisons (from
    :func:`prompt_comparisons`) resolved by Algorithm 1 (:func:`resolve_record`); a conflict is a
    comparison the resolved ranks disagree with.

    ``by_prompt`` lists the prompts with comparisons (file order), with their named
    :func:`preference_cycles`; the pooled ``conflict_ratio`` is all conflicts / all comparisons.
    """
    standing = standing_answers(snapshot)
    tasks_of = _tasks_by_prompt(snapshot)
    by_prompt: list[dict[str, Any]] = []
    for pid, record in snapshot.prompts.items():
        comparisons = prompt_comparisons(record, tasks_of[pid], standing)
        if not comparisons:
            continue
        resolution = resolve_record(record.model_copy(update={"comparisons": comparisons}))
        by_prompt.append(
            {
                "prompt_id": pid,
                "comparisons": resolution.comparisons,
                "conflicts": resolution.conflicts,
                "conflict_ratio": resolution.conflicts / resolution.comparisons,
                "cycles": preference_cycles(record, comparisons),
            }
        )
    total = sum(p["comparisons"] for p in by_prompt)
    wrong = sum(p["conflicts"] for p in by_prompt)
    return {
        "prompts": len(by_prompt),
        "comparisons": total,
        "conflicts": wrong,
        "conflict_ratio": _share(wrong, total),
        "by_prompt": by_prompt,
    }


def queues(snapshot: Snapshot) -> dict[str, int]:
    """Open non-gold work waiting on someone: review items, adjudication items, returned annotate items."""
    items = [i for i in snapshot.items if not i.gold]
    return {
        "reviews_open": sum(i.kind == "review" and i.state == "open" for i in items),
        "adjudications_open": sum(i.kind == "adjudicate" and i.state == "open" for i in items),
        "returned_open": len(_returned(snapshot)),
    }
