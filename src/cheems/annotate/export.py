"""A project's answers as canonical records: each standing answer becomes the comparisons its ranking implies.

Every pair of a task's responses gives one comparison (``a``/``b``/``tie``) with ``annotator``,
``source: "human"``, ``task_id`` (the plan task, the same for every annotator of it), ``item_id``
(the one person's copy of it that was answered: the id the JSON API calls ``item_id`` and submits
to) and ``shown`` (``"ab"`` when ``a`` was displayed before ``b``, as for judge comparisons). An
answer stands when its task was submitted and not rejected; a task whose overlapping answers went
to adjudication contributes only the consensus (marked ``adjudicated``). The answers themselves
(scores, ranking, spans, flags, note, with the same two ids) are kept on the record under
``human_annotations``. Gold prompts are not exported. ``cheems resolve`` then turns the comparisons
into ranks and reports the conflict ratio.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cheems.annotate.answer import format_ranking, pair_labels
from cheems.annotate.snapshot import AnswerRow, Snapshot
from cheems.data.schema import Comparison, Record


@dataclass(frozen=True)
class ExportStats:
    """What an export wrote, and what it left for later."""

    prompts: int
    comparisons: int
    answers: int
    adjudicated: int
    waiting: int
    """Prompts with no standing answer yet (not written)."""


def standing_answers(snapshot: Snapshot) -> dict[str, list[AnswerRow]]:
    """Task id -> the answers that count for it: the consensus when there is one, else every standing answer."""
    gold = {t.task_id for t in snapshot.tasks if t.gold}
    answers: dict[str, list[AnswerRow]] = defaultdict(list)
    consensus: dict[str, AnswerRow] = {}
    for a in snapshot.answers:
        if not a.current or a.task_id in gold:
            continue
        if a.kind == "adjudicate":
            consensus[a.task_id] = a
        elif a.kind == "annotate":
            answers[a.task_id].append(a)
    for task_id, a in consensus.items():
        answers[task_id] = [a]
    return answers


def export_records(snapshot: Snapshot) -> tuple[list[Record], ExportStats]:
    """Records (file order) of every prompt with a standing answer, with those answers' comparisons added."""
    by_task = standing_answers(snapshot)
    shown = {i.item_id: i.shown for i in snapshot.items}
    tasks_of: dict[str, list[str]] = defaultdict(list)
    for t in snapshot.tasks:
        if not t.gold:
            tasks_of[t.prompt_id].append(t.task_id)
    out: list[Record] = []
    n_comparisons = n_answers = n_adjudicated = 0
    for prompt_id, record in snapshot.prompts.items():
        order = [r.id for r in record.responses]
        comparisons, notes = [], []
        for task_id in tasks_of[prompt_id]:
            for a in by_task.get(task_id, []):
                comparisons += answer_comparisons(a, [r for r in order if r in a.scores], shown[a.item_id])
                notes.append(_annotation(a))
                n_answers += 1
                n_adjudicated += a.kind == "adjudicate"
        if not notes:
            continue
        n_comparisons += len(comparisons)
        out.append(record.model_copy(update={"comparisons": comparisons, "human_annotations": notes}))
    stats = ExportStats(len(out), n_comparisons, n_answers, n_adjudicated, len(snapshot.prompts) - len(out))
    return out, stats


def answer_comparisons(answer: AnswerRow, order: Sequence[str], shown: Sequence[str] | None = None) -> list[Comparison]:
    """One comparison per pair of the task's responses (``a`` before ``b`` in ``order``, the record's order),
    with ``shown`` (``"ab"``/``"ba"``) when the order the annotator saw is given."""
    extra: dict[str, Any] = {"task_id": answer.task_id, "item_id": answer.item_id}
    if answer.kind == "adjudicate":
        extra["adjudicated"] = True
    comparisons = []
    for (a, b), label in pair_labels(answer.levels, order).items():
        if shown is not None:
            extra["shown"] = "ab" if shown.index(a) < shown.index(b) else "ba"
        comparisons.append(Comparison(a=a, b=b, label=label, annotator=answer.person, source="human", **extra))
    return comparisons


def _annotation(answer: AnswerRow) -> dict[str, Any]:
    """The answer as kept on the record: by response id, the ranking in the same grammar as the page's."""
    return {
        "task_id": answer.task_id,
        "item_id": answer.item_id,
        "annotator": answer.person,
        "adjudicated": answer.kind == "adjudicate",
        "scores": answer.scores,
        "ranking": format_ranking(answer.levels),
        "spans": answer.spans,
        "flags": answer.flags,
        "note": answer.note,
        "submitted_at": answer.submitted_at.isoformat(),
    }
